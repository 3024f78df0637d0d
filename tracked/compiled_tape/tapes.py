"""GradientTape, JacobianTape, HessianTape: record once, replay on new inputs; compile.

The recording, the argument checks, the replay and the compile state are shared
(base.py); each tape here says what it records (``_trace``: ``f`` and the backward
passes it needs), where its outputs go (``_layout``) and what its calls return.
A compiled ``GradientTape``'s ``gradient`` and ``withgradient`` are generated per
tape (calls.py).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import numpy as np

from ..arguments import check_output, loss_output
from ..tape import backward, new_level
from .. import box
from ..boxes import Tracked
from ..dispatch import call
from ..values import leaf
from .base import Tape
from .calls import ValGrad, install
from .signature import check_out, out_leaves
from .trees import unflatten_args

__all__ = ["GradientTape", "JacobianTape", "HessianTape", "ValGrad", "compile"]


T = TypeVar('T', bound=Tape)


def _single(vals):
    return vals[0]


def _value_tree(rec, out):
    """Output specs for every array in ``out`` and a function rebuilding it from them."""
    if isinstance(out, Tracked) or not isinstance(out, (tuple, list, dict)):
        return [rec.output(out)], _single
    if isinstance(out, dict):
        keys = list(out)
        specs = [rec.output(out[k]) for k in keys]
        return specs, functools.partial(_rebuild_dict, keys)
    t = type(out)
    specs = [rec.output(v) for v in out]
    if t is list:
        return specs, list
    if t is tuple:
        return specs, tuple
    return specs, functools.partial(_rebuild_fields, t)


def _rebuild_dict(keys, vals):      # partials of these, not lambdas: a tape pickles
    return dict(zip(keys, vals))


def _rebuild_fields(t, vals):
    return t(*vals)


def _plain_scalar(v):
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


class GradientTape(Tape):
    """``GradientTape(f, *example_args, wrt=None)``: ``f`` recorded once, replayed on new
    arguments of the same structure, shapes and dtypes.

    ``wrt`` (argument positions, default all) selects the arguments that get a
    gradient; the others are inputs whose values may change between calls (data).
    Integer arrays are differentiated as float64, as ``tr.gradient`` does; one that
    gets no gradient (labels, indices) is then recorded as given, an integer input
    like data (``f`` runs once more for that).
    ``tape(*args)`` is the value, ``tape.gradient(*args)`` one gradient per argument
    (``None`` outside ``wrt``), ``tape.withgradient(*args)`` both; none of them runs
    ``f`` again.  ``tr.compile(tape)`` makes a numba version of it.

    >>> import numpy as np, tracked as tr
    >>> tape = tr.GradientTape(lambda x: np.sum(np.sin(x) * x), np.zeros(3))
    >>> tape.gradient(np.array([0.0, 1.0, 2.0]))[0]
    array([0.        , 1.38177329, 0.07700375])
    """

    kind_name = 'GradientTape'

    def _trace(self, rec, inputs):
        """Run ``f`` on leaves and the backward pass from its scalar; the outputs are
        the value(s) and one gradient per differentiated leaf."""
        li = new_level()
        diff = set(self.diff)
        boxed = [leaf(t, li) if p in diff else t for p, t in enumerate(inputs)]
        out = self.f(*unflatten_args(self.arg_defs, boxed))
        # the loss as on every path (tracked/arguments.py), errors included
        y = loss_output(out, 'GradientTape', 'JacobianTape(f, ...)')[0]
        val_specs, self._rebuild = _value_tree(rec, out)
        self.single_value = self._rebuild is _single      # f returned one scalar
        self.n_val = len(val_specs)
        cts = {}
        if isinstance(y, Tracked) and box.level(y) == li:
            seed = np.ones((), dtype=y.dtype)[()]
            cts = backward(box.node(y), seed, retain=True)
        grads = []
        self.grad_leaves = [p for p in self.diff if box.node(boxed[p]) in cts]
        for p in self.grad_leaves:
            g = cts[box.node(boxed[p])]
            dtype = self.specs[p][1] if self.specs[p][1].kind in 'fc' else np.dtype(np.float64)
            if g.dtype != dtype:
                g = call(np.ndarray.astype, g, dtype) if isinstance(g, Tracked) \
                    else np.asarray(g).astype(dtype)
            if not isinstance(g, Tracked):
                g = np.array(g, dtype=dtype)
            grads.append(rec.output(g))
        return val_specs + grads

    def _derived(self, p):
        return p in self.grad_leaves

    def _layout(self):
        """One output array per gradient, each gradient placed whole in its own."""
        specs = []
        placements = {}
        for k, p in enumerate(self.grad_leaves):
            shape, dtype = self.specs[p]
            specs.append((shape, dtype if dtype.kind in 'fc' else np.dtype(np.float64)))
            placements[self.n_val + k] = (k, 0)
        return specs, placements

    # -- public calls -------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        """``tape(*args)``: the value of ``f`` (replays the whole tape)."""
        t, get, _ = self.current().replay(args)
        return t._value_of(get)

    def _value_of(self, get):
        return self._rebuild([_plain_scalar(get(k)) for k in range(self.n_val)])

    def gradient(self, *args: Any, out: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
        """``tape.gradient(*args, out=None)``: one gradient per argument (None outside wrt).

        With ``out`` (a gradient tuple returned by an earlier call), the gradients are
        written into its arrays and ``out`` is returned; with a compiled tape such a
        call allocates no array.
        """
        return self.withgradient(*args, out=out).grad

    def withgradient(self, *args: Any, out: tuple[Any, ...] | None = None) -> ValGrad:
        """``tape.withgradient(*args, out=None) -> (val, grad)``."""
        t = self.current()
        targets = out_leaves(t, out) if out is not None else None
        t, get, outs = t.replay(args, targets)
        val = get(0) if t._rebuild is _single else t._value_of(get)
        if out is not None:
            return ValGrad(val, out)
        flat = [None] * len(t.specs)
        for k, p in enumerate(t.grad_leaves):
            g = outs[k]
            flat[p] = g[()] if t.pyfloat[p] else g
        grads = unflatten_args(t.arg_defs, flat, statics=False, only=t.wrt)
        return ValGrad(val, grads)

    def _check_out(self, leaves):
        return check_out(self, leaves)

    def _public_calls(self, args):
        """``withgradient`` by default and with ``out=`` (unless its gradients cannot be
        ``out=``: a Python float's is a NumPy scalar)."""
        g = self.withgradient(*args).grad
        calls = [lambda: self.withgradient(*args)]
        try:
            self.withgradient(*args, out=g)
        except (TypeError, ValueError):
            return calls
        return calls + [lambda: self.withgradient(*args, out=g)]

    def _install_calls(self):
        """A compiled tape answers ``gradient``/``withgradient`` through code generated
        for its signature and plan (calls.py); otherwise the methods below serve."""
        self.__dict__.pop('gradient', None)
        self.__dict__.pop('withgradient', None)
        if self.compiled is not None:
            install(self)


def _refuse_complex(tape, positions, who):
    """Jacobians and Hessians with respect to complex arguments are ambiguous (as for
    ``tr.jacobian``/``tr.hessian``)."""
    for p in positions:
        if tape.specs[p][1].kind == 'c':
            raise ValueError(
                f'{who} with respect to a complex argument is ambiguous (a complex derivative '
                f'exists only for holomorphic functions); pass the real and imaginary parts '
                f'as two real arrays, e.g. {who}(lambda x, y: f(x + 1j * y), z.real, z.imag)')


class JacobianTape(Tape):
    """``JacobianTape(f, *example_args, wrt=None, sparsity=None)``: ``tape.jacobian(*args)``
    gives, per argument, ``J[k, i] = d f(...).ravel()[k] / d arg.ravel()[i]`` without
    re-running f.

    With ``sparsity`` ('auto': detected on the example arguments, again on a retrace;
    a pattern; or a ``tr.coloring``) each block is a SciPy CSR array, and the tape
    holds one forward pass carrying a tangent per colour (a column colouring) or one
    backward pass per colour (a row colouring): a Newton loop pays for detection and
    colouring once, and a branch that changes is a ``TapeGuardError`` (an example:
    ``tr.coloring``).

    >>> import numpy as np, tracked as tr
    >>> tape = tr.JacobianTape(lambda x: x * x, np.zeros(2))
    >>> tape.jacobian(np.array([1.0, 2.0]))[0]
    array([[2., 0.],
           [0., 4.]])
    """

    kind_name = 'JacobianTape'

    def __init__(self, f: Callable[..., Any], *args: Any, wrt: int | Sequence[int] | None = None,
                 on_guard: Literal['error', 'retrace'] = 'error', sparsity: Any = None) -> None:
        self.sparsity = sparsity
        self.coloring: Any = None
        self.jac_dtype = np.dtype(np.float64)     # a column colouring's: its trace sets it
        super().__init__(f, *args, wrt=wrt, on_guard=on_guard)

    def _record(self, args, given=frozenset()):
        if self.sparsity is not None:
            from ..sparse_jacobians import tape_coloring          # needs SciPy
            self.coloring = tape_coloring(self, args)
        super()._record(args, given)

    def _trace(self, rec, inputs):
        """Run ``f`` on leaves and one backward pass per output element (the rows), or
        per colour of a row colouring; a column colouring's one forward pass."""
        _refuse_complex(self, self.diff, 'JacobianTape')
        if self.coloring is not None and self.coloring.kind == 'column':
            from ..sparse_jacobians import forward_trace
            return forward_trace(self, rec, inputs)
        li = new_level()
        diff = set(self.diff)
        boxed = [leaf(t, li) if p in diff else t for p, t in enumerate(inputs)]
        y = self.f(*unflatten_args(self.arg_defs, boxed))
        check_output(y, 'JacobianTape')        # as tr.jacobian (tracked/arguments.py)
        self.out_shape = np.shape(y)
        self.out_dtype = y.dtype if hasattr(y, 'dtype') else np.dtype(np.float64)
        m = int(np.prod(self.out_shape, dtype=np.int64))
        specs = [rec.output(y)]
        rows = []
        complex_out = self.out_dtype.kind == 'c'

        def sweep(s, unit):
            if not (isinstance(y, Tracked) and box.level(y) == li):
                return {}
            seed = (s * unit).astype(y.dtype).reshape(self.out_shape)
            return backward(box.node(y), seed if seed.ndim else seed[()], retain=True)
        seeds = (np.eye(1, m, k)[0] for k in range(m)) if self.coloring is None else \
            self.coloring.seeds()
        for s in seeds:
            cts = sweep(s, 1)
            # a complex output: J[k] = d Re(y_k) + i d Im(y_k), a second sweep (as tr.jacobian)
            cts_im = sweep(s, 1j) if complex_out else {}
            row = []
            for p in self.diff:
                g = cts.get(box.node(boxed[p]))
                if complex_out:
                    gi = cts_im.get(box.node(boxed[p]))
                    if gi is not None:
                        g = 1j * gi if g is None else g + 1j * gi
                row.append(rec.output(g) if g is not None else None)
            rows.append(row)
        self.m = len(rows)
        flat = [o for row in rows for o in row if o is not None]
        self._layout_rows = []
        n = 1
        for row in rows:
            lay: list[int | None] = []
            for o in row:
                if o is None:
                    lay.append(None)
                else:
                    lay.append(n)
                    n += 1
            self._layout_rows.append(lay)
        return specs + flat

    def _layout(self):
        """One matrix per differentiated leaf; each recorded row placed in it."""
        if self.coloring is not None and self.coloring.kind == 'column':
            return [((self.coloring.ncolors, self.m), self.jac_dtype)], {1: (0, 0)}
        specs, placements = [], {}
        for j, p in enumerate(self.diff):
            shape, dtype = self.specs[p]
            n = int(np.prod(shape, dtype=np.int64))
            # the argument's float dtype, as tr.jacobian's (complex for a complex output)
            dtype = dtype if dtype.kind in 'fc' else np.dtype(np.float64)
            specs.append(((self.m, n), np.result_type(
                dtype, np.complex64 if self.out_dtype.kind == 'c' else dtype)))
            for k in range(self.m):
                slot = self._layout_rows[k][j]
                if slot is not None:
                    placements[slot] = (j, k * n)
        return specs, placements

    def __call__(self, *args: Any) -> Any:
        """``tape(*args)``: the value of ``f``."""
        return _plain_scalar(self.current().replay(args)[1](0))

    def _public_calls(self, args):
        return [lambda: self.withjacobian(*args)]

    def jacobian(self, *args: Any) -> tuple[Any, ...]:
        """``tape.jacobian(*args)``: per argument its Jacobian matrix (None outside wrt)."""
        return self.withjacobian(*args).grad

    def withjacobian(self, *args: Any) -> ValGrad:
        """``tape.withjacobian(*args) -> (val, jacobians)``."""
        t, get, outs = self.current().replay(args)
        if t.coloring is not None:
            from ..sparse_jacobians import tape_blocks
            grads = unflatten_args(t.arg_defs, tape_blocks(t, outs), statics=False, only=t.wrt)
            return ValGrad(_plain_scalar(get(0)), grads)
        flat = [None] * len(t.specs)
        for j, p in enumerate(t.diff):
            J = outs[j]
            if t.specs[p][0] == ():     # as tr.jacobian: a vector for a scalar argument,
                J = J[:, 0]             # one row for a scalar output
            flat[p] = J
        grads = unflatten_args(t.arg_defs, flat, statics=False, only=t.wrt)
        return ValGrad(_plain_scalar(get(0)), grads)


class HessianTape(Tape):
    """``HessianTape(f, x, sparsity=None)``: ``tape.hessian(x)`` is ``H[i, j]`` over
    ``x.ravel()``, replayed without re-running f (reverse over reverse, recorded once).

    With ``sparsity`` ('auto', a pattern from ``tr.hessian_sparsity``, or a symmetric
    ``tr.coloring``) the tape sweeps the gradient back once per colour instead of once
    per element, and ``hessian`` returns a SciPy CSR array (an example:
    ``tr.hessian_sparsity``).

    >>> import numpy as np, tracked as tr
    >>> tape = tr.HessianTape(lambda x: np.sum(x ** 3), np.ones(2))
    >>> tape.hessian(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """

    kind_name = 'HessianTape'

    def __init__(self, f: Callable[[Any], Any], x: Any,
                 on_guard: Literal['error', 'retrace'] = 'error', sparsity: Any = None) -> None:
        self.sparsity = sparsity
        self.coloring: Any = None
        super().__init__(f, x, wrt=None, on_guard=on_guard)

    def _record(self, args, given=frozenset()):
        if self.sparsity is not None:
            from ..sparse_jacobians import tape_coloring          # needs SciPy
            self.coloring = tape_coloring(self, args, hessian=True)
        super()._record(args, given)

    def _trace(self, rec, inputs):
        """Run ``f`` at two levels: the gradient by one backward pass, then one
        backward pass of the gradient per element (the Hessian's rows), or per colour."""
        if len(self.diff) != 1 or len(inputs) != 1:
            raise ValueError('HessianTape(f, x) needs one real array or scalar x')
        _refuse_complex(self, self.diff, 'HessianTape')
        l1, l2 = new_level(), new_level()
        x1 = leaf(inputs[0], l1)
        x2 = leaf(x1, l2)
        # the loss as tr.hessian takes it (tracked/arguments.py): a real scalar, or the
        # first element of a tuple or dict
        y = loss_output(self.f(unflatten_args(self.arg_defs, [x2])[0]), 'HessianTape',
                        'JacobianTape(f, ...)')[0]
        shape = self.specs[0][0]
        dtype = self.specs[0][1] if self.specs[0][1].kind in 'fc' else np.dtype(np.float64)
        n = int(np.prod(shape, dtype=np.int64))
        self.n = n
        g = None
        if isinstance(y, Tracked) and box.level(y) == l2:
            g = backward(box.node(y), np.ones((), dtype=y.dtype)[()], retain=True).get(box.node(x2))
        specs = [rec.output(y), rec.output(g if g is not None else np.zeros(shape, dtype))]
        rows = []
        seeds = (np.eye(1, n, k)[0] for k in range(n)) if self.coloring is None else \
            self.coloring.seeds()
        for s in seeds:
            h = None
            if isinstance(g, Tracked) and box.level(g) == l1:
                seed = s.astype(g.dtype).reshape(shape)
                h = backward(box.node(g), seed if seed.ndim else seed[()],
                             retain=True).get(box.node(x1))
            rows.append(rec.output(h) if h is not None else np.zeros(shape, dtype))
        self.rows = len(rows)
        self.dtype = dtype
        return specs + rows

    def _layout(self):
        return [((self.rows, self.n), self.dtype)], {2 + k: (0, k * self.n)
                                                      for k in range(self.rows)}

    def __call__(self, x: Any) -> Any:
        """``tape(x)``: the value of ``f``."""
        return _plain_scalar(self.current().replay((x,))[1](0))

    def _public_calls(self, args):
        """``hessian`` by default and, when dense, with ``out=``."""
        x, = args
        if self.coloring is not None:
            return [lambda: self.hessian(x)]
        H = np.empty((self.n, self.n), self.dtype)
        return [lambda: self.hessian(x), lambda: self.hessian(x, out=H)]

    def hessian(self, x: Any, out: np.ndarray | None = None) -> Any:
        """``tape.hessian(x, out=None)``: the Hessian matrix (a scalar for scalar x); with
        ``out`` (an (n, n) array) it is written there.  A tape with ``sparsity`` returns a
        SciPy CSR array (no ``out``)."""
        t = self.current()
        if t.coloring is not None:
            if out is not None:
                raise ValueError('out= takes a dense Hessian; a HessianTape with sparsity= '
                                 'returns a new sparse array')
            t, _, outs = t.replay((x,))
            return t.coloring.decompress(outs[0].T)
        if out is not None and (not isinstance(out, np.ndarray) or out.shape != (t.n, t.n)
                                or out.dtype != t.dtype or not out.flags.c_contiguous
                                or not out.flags.writeable):
            raise ValueError(f'out= must be a writeable C-contiguous array of shape '
                             f'{(t.n, t.n)} and dtype {t.dtype}')
        t, _, outs = t.replay((x,), [out] if out is not None else None)
        H = outs[0]
        if t.specs[0][0] == () and out is None:
            return H[0, 0]
        return H

    def gradient(self, x: Any) -> Any:
        """``tape.gradient(x)``: the gradient, from the same tape."""
        return _plain_scalar(self.current().replay((x,))[1](1))


def compile(tape: T, background: bool = True) -> T:
    """``compile(tape, background=True)``: a copy of ``tape`` whose replays run numba code
    generated for it.

    With ``background=True`` it returns at once: calls replay the tape in NumPy while
    a background process compiles the kernels into the disk cache, and switch to them
    when they are loaded (tiers.py; ``tape.wait()`` waits for that, ``compile_error``
    says why it failed).  ``background=False`` compiles before returning.

    Every intermediate, cotangent and gradient buffer is allocated once; runs of
    elementwise operations are fused; ``gradient(..., out=g)`` writes into ``g`` and
    allocates no array.  Instructions the generator cannot compile run in NumPy,
    one by one; ``tape.fallbacks`` lists them and why.  The generated code is cached on
    disk, so another process compiling the same tape loads it instead.

    >>> import numpy as np, tracked as tr
    >>> tape = tr.compile(tr.GradientTape(lambda x: np.sum(x * x), np.zeros(3)))
    >>> tape.gradient(np.array([1.0, 2.0, 3.0]))[0]   # at once: NumPy, or the kernels
    array([2., 4., 6.])
    >>> tape.wait(), tape.gradient(np.array([1.0, 2.0, 3.0]))[0]
    (True, array([2., 4., 6.]))
    """
    if not isinstance(tape, Tape):
        raise TypeError(f'compile expects a GradientTape, JacobianTape or HessianTape, got '
                        f'{type(tape).__name__}')
    import copy
    new = copy.copy(tape.current())
    new.start_compile(background)
    new._install_calls()
    return new
