"""GradientTape, JacobianTape, HessianTape: record once, replay on new inputs.

Recording runs ``f`` once on leaves at stacked trace levels (see record.py) and
then the backward pass(es) at the higher levels, so that the program holds the
forward and the backward pass as plain forward operations.  Replaying checks the
arguments' structure, shapes and dtypes, runs the program (NumPy here, numba
after ``compile``) and checks every guard on the way.
"""
from collections import namedtuple

import numpy as np

from ..tape import backward, new_level, push_recorder, pop_recorder
from ..tree_util import flatten, tuple_def
from ..values import Tracked, call, leaf
from .guards import TapeGuardError
from .program import Program
from .record import Recorder
from .trees import flatten_args, unflatten_args, arg_leaves, describe, leaf_path

__all__ = ["GradientTape", "JacobianTape", "HessianTape", "ValGrad", "compile"]

ValGrad = namedtuple('ValGrad', ['val', 'grad'])


# --------------------------------------------------------------------------
# Signatures: what a replay must match
# --------------------------------------------------------------------------

def _leaf_spec(x):
    if type(x) is float:
        return ((), np.dtype(np.float64))
    if type(x) is int:
        return ((), np.dtype(np.int64))
    return (x.shape, x.dtype)


def _as_input(x, diff):
    """The value an input leaf holds on the tape."""
    t = type(x)
    if t is float:
        return np.float64(x)
    if t is int:
        return np.int64(x)                  # stays usable as an index or size
    if diff and x.dtype.kind in 'iu' and x.ndim:
        x = x.astype(np.float64)
    return x


# --------------------------------------------------------------------------
# The tapes
# --------------------------------------------------------------------------

class _Tape:
    """Shared machinery: recording, argument checks, NumPy replay, printing."""

    _what = 'tape'

    def __init__(self, f, *args, wrt=None, on_guard='error'):
        if on_guard not in ('error', 'retrace'):
            raise ValueError(f'on_guard must be "error" or "retrace", got {on_guard!r}')
        self.f = f
        self.on_guard = on_guard
        self.nargs = len(args)
        if wrt is None:
            wrt = tuple(range(len(args)))
        elif isinstance(wrt, int):
            wrt = (wrt,)
        wrt = tuple(w % len(args) if len(args) else w for w in wrt)
        for w in wrt:
            if not 0 <= w < len(args):
                raise ValueError(f'wrt={wrt}: f was given {len(args)} arguments')
        self.wrt = wrt
        self.compiled = None
        self._record(args)

    # -- recording ------------------------------------------------------------
    def _record(self, args):
        leaves, arg_defs = flatten_args(args)
        self.arg_defs = arg_defs                   # one TreeDef per argument
        self.treedef = tuple_def(arg_defs)         # the argument tuple as one tree
        self.specs = [_leaf_spec(x) for x in leaves]
        self.pyfloat = [type(x) in (float, int) or isinstance(x, np.generic) for x in leaves]
        per_arg = arg_leaves(arg_defs)
        diff = set()
        for a in self.wrt:
            diff.update(p for p in per_arg[a] if self.specs[p][1].kind in 'fiuc')
        self.diff = sorted(diff)
        self.has_int_diff = any(self.specs[p][1].kind in 'iu' and self.specs[p][0] != ()
                                for p in diff)
        # a Python int outside ``wrt`` is a constant of the tape (a size, a count)
        self.static = {p: x for p, x in enumerate(leaves) if type(x) is int and p not in diff}
        self.per_arg = per_arg
        checks = []
        for p, x in enumerate(leaves):
            t = type(x)
            if t is np.ndarray:
                checks.append((t, {'shape': x.shape, 'dtype': x.dtype}))
            elif t is int and p in self.static:
                checks.append((t, {None: x}))
            else:
                checks.append((t, {}))
        self._checker = self.treedef.matcher(checks)   # generated for this structure
        rec = Recorder(new_level())
        push_recorder(rec)
        try:
            inputs = [x if p in self.static else rec.input(_as_input(x, p in diff), p)
                      for p, x in enumerate(leaves)]
            outputs = self._trace(rec, inputs)
        finally:
            pop_recorder(rec)
        self.program = Program(rec, outputs)
        self.n_outputs = len(outputs)
        self.out_specs, self.placements = self._layout()
        if self.compiled is not None:                     # retraced: compile the new program
            self._compile()

    def _compile(self):
        from .compiled import CompiledProgram
        self.compiled = CompiledProgram(self.program, self.specs, self.out_specs,
                                        self.placements).load()
        # run once on the recorded values: numba compiles (or loads from disk) now
        full = [None] * len(self.specs)
        for ins in self.program.instrs:
            if ins.kind == 'input':
                full[ins.pos] = ins.value
        for p, x in enumerate(full):
            if x is None:
                full[p] = np.zeros(*self.specs[p])
        self.compiled.run(full, self._new_outs())

    @property
    def fallbacks(self):
        """What a compiled tape runs in NumPy: one entry per instruction, printing as
        the instruction and the reason (``.instr``, ``.reason``); None if not compiled."""
        return list(self.compiled.fallbacks) if self.compiled is not None else None

    def _new_outs(self):
        return [np.zeros(shape, dtype) for shape, dtype in self.out_specs]

    def _exec(self, leaves, outs):
        """Run on checked ``leaves``: placed outputs go into ``outs``; returns a function
        giving the other outputs by index."""
        c = self.compiled
        if c is not None:
            c.run(leaves, outs)
            return c.getter(leaves, outs)
        vals = self.program.run(self._inputs(leaves))
        for oi, (k, off) in self.placements.items():
            v = vals[oi]
            flat = outs[k].reshape(-1)
            n = int(np.size(v))
            flat[off:off + n] = np.ravel(v)
        return vals.__getitem__

    # -- argument checks --------------------------------------------------------
    def _leaves(self, args):
        leaves = self._checker(args)          # generated for the recorded structure
        if leaves is not None:
            return leaves
        if len(args) != self.nargs:
            raise ValueError(f'this {self._what} was recorded for {self.nargs} arguments, '
                             f'got {len(args)}')
        leaves, arg_defs = flatten_args(args)
        if arg_defs != self.arg_defs:
            raise ValueError(f'the arguments have another structure than the recorded '
                             f'ones: expected {describe(self.arg_defs)}, given '
                             f'{describe(arg_defs)}. Record a new tape for them.')
        specs = self.specs
        for p, x in enumerate(leaves):
            s = specs[p]
            t = type(x)
            if t is float or t is int:
                if s[0] != () or s[1] != _leaf_spec(x)[1]:
                    break
                if t is int and p in self.static and x != self.static[p]:
                    raise ValueError(
                        f'{leaf_path(self.arg_defs, p)} is {x}; the {self._what} was '
                        f'recorded with {self.static[p]} (an integer outside wrt is a constant '
                        f'of the tape). Record a new tape for it.')
                continue
            if x.shape != s[0] or x.dtype != s[1]:
                break
        else:
            return leaves
        x = leaves[p]
        given = _leaf_spec(x)
        raise ValueError(f'{leaf_path(self.arg_defs, p)} has shape {given[0]} and dtype '
                         f'{given[1]}; the {self._what} was recorded for shape {s[0]} and dtype '
                         f'{s[1]}. Record a new tape for these shapes (tr.AutoCompiled() '
                         f'keeps one per signature).')

    def _inputs(self, leaves):
        diff = self._diffset
        return [_as_input(x, p in diff) if type(x) is not np.ndarray else x
                for p, x in enumerate(leaves)] if self.has_int_diff or not all(
                    type(x) is np.ndarray for x in leaves) else leaves

    @property
    def _diffset(self):
        d = self.__dict__.get('_diffset_cache')
        if d is None or d[0] is not self.diff:
            d = self.__dict__['_diffset_cache'] = (self.diff, frozenset(self.diff))
        return d[1]

    def _run(self, args, outs=None):
        """Check ``args`` and replay into ``outs`` (fresh arrays if None); retrace on a
        failed guard if asked to.  Returns (getter of unplaced outputs, outs)."""
        leaves = self._leaves(args)
        given = outs is not None
        if not given:
            outs = self._new_outs()
        try:
            return self._exec(leaves, outs), outs
        except TapeGuardError:
            if self.on_guard != 'retrace':
                raise
            self._record(args)
            # the new path may produce other outputs (a gradient that is now None):
            # fresh buffers, or a clear error if the caller's out= no longer fits
            outs = self._check_out(outs) if given else self._new_outs()
            return self._exec(self._leaves(args), outs), outs

    # -- printing ----------------------------------------------------------------
    @property
    def instructions(self):
        """The recorded instructions (forward and backward), in execution order."""
        return self.program.instrs

    @property
    def guards(self):
        return self.program.guards

    def __str__(self):
        head = (f'{type(self).__name__} of {getattr(self.f, "__name__", repr(self.f))}: '
                f'{len(self.program.instrs)} instructions, {len(self.program.guards)} guards')
        return '\n'.join([head] + ['  ' + line for line in self.program.lines()])

    def __repr__(self):
        return (f'<{type(self).__name__} of {getattr(self.f, "__name__", repr(self.f))}: '
                f'{len(self.program.instrs)} instructions, {len(self.program.guards)} guards>')


def _split_output(out):
    """(the differentiated output, the whole value): first element of tuples and dicts."""
    if isinstance(out, (tuple, list)) and not isinstance(out, Tracked):
        if not out:
            raise ValueError('f returned an empty tuple; it must return a real scalar')
        return out[0]
    if isinstance(out, dict):
        if not out:
            raise ValueError('f returned an empty dict; it must return a real scalar')
        return next(iter(out.values()))
    return out


def _single(vals):
    return vals[0]


def _value_tree(rec, out):
    """Output specs for every array in ``out`` and a function rebuilding it from them."""
    if isinstance(out, Tracked) or not isinstance(out, (tuple, list, dict)):
        return [rec.output(out)], _single
    if isinstance(out, dict):
        keys = list(out)
        specs = [rec.output(out[k]) for k in keys]
        return specs, lambda vals: dict(zip(keys, vals))
    t = type(out)
    specs = [rec.output(v) for v in out]
    if t is list:
        return specs, list
    if t is tuple:
        return specs, tuple
    return specs, lambda vals: t(*vals)


def _plain_scalar(v):
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


class GradientTape(_Tape):
    """``GradientTape(f, *example_args, wrt=None)``: ``f`` recorded once, replayed on new
    arguments of the same structure, shapes and dtypes.

    ``wrt`` (argument positions, default all) selects the arguments that get a
    gradient; the others are inputs whose values may change between calls (data).
    ``tape(*args)`` is the value, ``tape.gradient(*args)`` one gradient per argument
    (``None`` outside ``wrt``), ``tape.withgradient(*args)`` both; none of them runs
    ``f`` again.  ``tr.compile(tape)`` makes a numba version of it.

    >>> import numpy as np, tracked as tr
    >>> tape = tr.GradientTape(lambda x: np.sum(np.sin(x) * x), np.zeros(3))
    >>> tape.gradient(np.array([0.0, 1.0, 2.0]))[0]
    array([0.        , 1.38177329, 0.07700375])
    """

    _what = 'GradientTape'

    def _trace(self, rec, inputs):
        li = new_level()
        diff = set(self.diff)
        boxed = [leaf(t, li) if p in diff else t for p, t in enumerate(inputs)]
        out = self.f(*unflatten_args(self.arg_defs, boxed))
        y = _split_output(out)
        if np.ndim(y) != 0 if not isinstance(y, Tracked) else y.ndim != 0:
            raise ValueError(f'f returned an array of shape {np.shape(y)}; GradientTape needs a '
                             f'real scalar. Use JacobianTape for array outputs.')
        val_specs, self._rebuild = _value_tree(rec, out)
        self.n_val = len(val_specs)
        cts = {}
        if isinstance(y, Tracked) and y._node.level == li:
            seed = np.ones((), dtype=y.dtype)[()]
            cts = backward(y._node, seed, retain=True)
        grads = []
        self.grad_leaves = [p for p in self.diff if boxed[p]._node in cts]
        for p in self.grad_leaves:
            g = cts.get(boxed[p]._node)
            dtype = self.specs[p][1] if self.specs[p][1].kind in 'fc' else np.dtype(np.float64)
            if g.dtype != dtype:
                g = call(np.ndarray.astype, g, dtype) if isinstance(g, Tracked) \
                    else np.asarray(g).astype(dtype)
            if not isinstance(g, Tracked):
                g = np.array(g, dtype=dtype)
            grads.append(rec.output(g))
        return val_specs + grads

    def _layout(self):
        specs = []
        placements = {}
        for k, p in enumerate(self.grad_leaves):
            shape, dtype = self.specs[p]
            specs.append((shape, dtype if dtype.kind in 'fc' else np.dtype(np.float64)))
            placements[self.n_val + k] = (k, 0)
        return specs, placements

    # -- public calls -------------------------------------------------------------
    def __call__(self, *args):
        """``tape(*args)``: the value of ``f`` (replays the whole tape)."""
        get, _ = self._run(args)
        return self._value(get)

    def _value(self, get):
        return self._rebuild([_plain_scalar(get(k)) for k in range(self.n_val)])

    def gradient(self, *args, out=None):
        """``tape.gradient(*args, out=None)``: one gradient per argument (None outside wrt).

        With ``out`` (a gradient tuple returned by an earlier call), the gradients are
        written into its arrays and ``out`` is returned; with a compiled tape such a
        call allocates no array.
        """
        return self.withgradient(*args, out=out).grad

    def withgradient(self, *args, out=None):
        """``tape.withgradient(*args, out=None) -> (val, grad)``."""
        targets = self._out_leaves(out) if out is not None else None
        get, outs = self._run(args, targets)
        val = get(0) if self._rebuild is _single else self._value(get)
        if out is not None:
            return ValGrad(val, out)
        flat = [None] * len(self.specs)
        for k, p in enumerate(self.grad_leaves):
            g = outs[k]
            flat[p] = g[()] if self.pyfloat[p] else g
        grads = unflatten_args(self.arg_defs, flat, statics=False, only=self.wrt)
        return ValGrad(val, grads)

    def _out_leaves(self, out):
        last = self.__dict__.get('_out_checked')
        if last is not None and out is last[2]:
            return last[1]                            # the same tuple of arrays as last time
        checker = self.__dict__.get('_out_checker')
        if checker is None:
            checker = self._out_checker = self._out_matcher()
        leaves = checker(out)
        if leaves is not None and last is not None and [id(g) for g in leaves] == last[0]:
            return leaves
        if leaves is None:
            if type(out) is tuple and all(type(g) is np.ndarray or g is None for g in out):
                leaves = [g for g in out if g is not None]
            else:
                leaves = flatten(out, lambda g: isinstance(g, np.ndarray))[0]
        ids = [id(g) for g in leaves]
        last = self.__dict__.get('_out_checked')
        if last is not None and last[0] == ids and all(
                g.shape == s[0] for g, s in zip(leaves, self.out_specs)):
            return leaves                             # the arrays checked last time
        self._check_out(leaves)
        simple = type(out) is tuple and all(type(g) is np.ndarray or g is None for g in out)
        self._out_checked = (ids, leaves, out if simple else None)   # a tuple cannot change
        return leaves

    def _out_matcher(self):
        """A matcher of gradient tuples shaped like this tape's (``out=``)."""
        flat = [None] * len(self.specs)
        for (shape, dtype), p in zip(self.out_specs, self.grad_leaves):
            flat[p] = np.empty(shape, dtype)
        template = unflatten_args(self.arg_defs, flat, statics=False, only=self.wrt)
        leaves, treedef = flatten(template, lambda g: type(g) is np.ndarray)
        assert [id(g) for g in leaves] == [id(flat[p]) for p in self.grad_leaves]
        return treedef.matcher([(np.ndarray, {'shape': g.shape, 'dtype': g.dtype})
                                for g in leaves])

    def _check_out(self, leaves):
        if len(leaves) != len(self.grad_leaves):
            raise ValueError(f'out= holds {len(leaves)} arrays; this tape has '
                             f'{len(self.grad_leaves)} '
                             f'gradients (pass the tuple returned by tape.gradient)')
        for g, (shape, dtype), p in zip(leaves, self.out_specs, self.grad_leaves):
            if not isinstance(g, np.ndarray) or g.shape != shape or g.dtype != dtype \
                    or not g.flags.c_contiguous or not g.flags.writeable:
                raise ValueError(f'out= for {leaf_path(self.arg_defs, p)} must be a '
                                 f'writeable C-contiguous array of shape {shape} and dtype '
                                 f'{dtype}, got {type(g).__name__} {getattr(g, "shape", "")} '
                                 f'{getattr(g, "dtype", "")}')
        return leaves


class JacobianTape(_Tape):
    """``JacobianTape(f, *example_args, wrt=None)``: ``tape.jacobian(*args)`` gives, per
    argument, ``J[k, i] = d f(...).ravel()[k] / d arg.ravel()[i]`` without re-running f.

    >>> import numpy as np, tracked as tr
    >>> tape = tr.JacobianTape(lambda x: x * x, np.zeros(2))
    >>> tape.jacobian(np.array([1.0, 2.0]))[0]
    array([[2., 0.],
           [0., 4.]])
    """

    _what = 'JacobianTape'

    def _trace(self, rec, inputs):
        li = new_level()
        diff = set(self.diff)
        boxed = [leaf(t, li) if p in diff else t for p, t in enumerate(inputs)]
        y = self.f(*unflatten_args(self.arg_defs, boxed))
        if isinstance(y, (tuple, list, dict)):
            raise ValueError('JacobianTape needs f to return one array')
        self.out_shape = np.shape(y)
        self.out_dtype = y.dtype if hasattr(y, 'dtype') else np.dtype(np.float64)
        m = int(np.prod(self.out_shape, dtype=np.int64))
        specs = [rec.output(y)]
        rows = []
        for k in range(m):
            cts = {}
            if isinstance(y, Tracked) and y._node.level == li:
                seed = np.zeros(self.out_shape, dtype=y.dtype)
                seed.flat[k] = 1
                cts = backward(y._node, seed if seed.ndim else seed[()], retain=True)
            row = []
            for p in self.diff:
                g = cts.get(boxed[p]._node)
                row.append(rec.output(g) if g is not None else None)
            rows.append(row)
        self.m = m
        flat = [o for row in rows for o in row if o is not None]
        self._layout_rows = []
        n = 1
        for row in rows:
            lay = []
            for o in row:
                if o is None:
                    lay.append(None)
                else:
                    lay.append(n)
                    n += 1
            self._layout_rows.append(lay)
        return specs + flat

    def _layout(self):
        specs, placements = [], {}
        for j, p in enumerate(self.diff):
            shape, dtype = self.specs[p]
            n = int(np.prod(shape, dtype=np.int64))
            specs.append(((self.m, n), dtype if dtype.kind in 'fc' else np.dtype(np.float64)))
            for k in range(self.m):
                slot = self._layout_rows[k][j]
                if slot is not None:
                    placements[slot] = (j, k * n)
        return specs, placements

    def __call__(self, *args):
        """``tape(*args)``: the value of ``f``."""
        return _plain_scalar(self._run(args)[0](0))

    def jacobian(self, *args):
        """``tape.jacobian(*args)``: per argument its Jacobian matrix (None outside wrt)."""
        return self.withjacobian(*args).grad

    def withjacobian(self, *args):
        """``tape.withjacobian(*args) -> (val, jacobians)``."""
        get, outs = self._run(args)
        flat = [None] * len(self.specs)
        for j, p in enumerate(self.diff):
            J = outs[j]
            if self.specs[p][0] == () and self.out_shape == ():
                J = J[0, 0]
            elif self.specs[p][0] == ():
                J = J[:, 0]
            elif self.out_shape == ():
                J = J[0]
            flat[p] = J
        grads = unflatten_args(self.arg_defs, flat, statics=False, only=self.wrt)
        return ValGrad(_plain_scalar(get(0)), grads)


class HessianTape(_Tape):
    """``HessianTape(f, x)``: ``tape.hessian(x)`` is ``H[i, j]`` over ``x.ravel()``, replayed
    without re-running f (reverse over reverse, recorded once).

    >>> import numpy as np, tracked as tr
    >>> tape = tr.HessianTape(lambda x: np.sum(x ** 3), np.ones(2))
    >>> tape.hessian(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """

    _what = 'HessianTape'

    def __init__(self, f, x, on_guard='error'):
        super().__init__(f, x, wrt=None, on_guard=on_guard)

    def _trace(self, rec, inputs):
        if len(self.diff) != 1 or len(inputs) != 1:
            raise ValueError('HessianTape(f, x) needs one real array or scalar x')
        l1, l2 = new_level(), new_level()
        x1 = leaf(inputs[0], l1)
        x2 = leaf(x1, l2)
        y = self.f(unflatten_args(self.arg_defs, [x2])[0])
        if (y.ndim if isinstance(y, Tracked) else np.ndim(y)) != 0:
            raise ValueError(f'f returned an array of shape {np.shape(y)}; HessianTape needs '
                             f'a real scalar')
        shape = self.specs[0][0]
        dtype = self.specs[0][1] if self.specs[0][1].kind in 'fc' else np.dtype(np.float64)
        n = int(np.prod(shape, dtype=np.int64))
        self.n = n
        g = None
        if isinstance(y, Tracked) and y._node.level == l2:
            g = backward(y._node, np.ones((), dtype=y.dtype)[()], retain=True).get(x2._node)
        specs = [rec.output(y), rec.output(g if g is not None else np.zeros(shape, dtype))]
        rows = []
        for k in range(n):
            h = None
            if isinstance(g, Tracked) and g._node.level == l1:
                seed = np.zeros(shape, dtype=g.dtype)
                seed.flat[k] = 1
                h = backward(g._node, seed if seed.ndim else seed[()], retain=True).get(x1._node)
            rows.append(rec.output(h) if h is not None else np.zeros(shape, dtype))
        self.dtype = dtype
        return specs + rows

    def _layout(self):
        return [((self.n, self.n), self.dtype)], {2 + k: (0, k * self.n) for k in range(self.n)}

    def __call__(self, x):
        """``tape(x)``: the value of ``f``."""
        return _plain_scalar(self._run((x,))[0](0))

    def hessian(self, x, out=None):
        """``tape.hessian(x, out=None)``: the Hessian matrix (a scalar for scalar x); with
        ``out`` (an (n, n) array) it is written there."""
        if out is not None and (not isinstance(out, np.ndarray) or out.shape != (self.n, self.n)
                                or out.dtype != self.dtype or not out.flags.c_contiguous):
            raise ValueError(f'out= must be a C-contiguous array of shape {(self.n, self.n)} and '
                             f'dtype {self.dtype}')
        _, outs = self._run((x,), [out] if out is not None else None)
        H = outs[0]
        if self.specs[0][0] == () and out is None:
            return H[0, 0]
        return H

    def gradient(self, x):
        """``tape.gradient(x)``: the gradient, from the same tape."""
        return _plain_scalar(self._run((x,))[0](1))


def compile(tape):
    """``compile(tape)``: a copy of ``tape`` whose replays run numba code generated for it.

    Every intermediate, cotangent and gradient buffer is allocated once; runs of
    elementwise operations are fused; ``gradient(..., out=g)`` writes into ``g`` and
    allocates no array.  Instructions the generator cannot compile run in NumPy,
    one by one; ``tape.fallbacks`` lists them and why.  The generated code is cached on
    disk, so another process compiling the same tape loads it instead.

    >>> import numpy as np, tracked as tr
    >>> tape = tr.compile(tr.GradientTape(lambda x: np.sum(x * x), np.zeros(3)))
    >>> tape.gradient(np.array([1.0, 2.0, 3.0]))[0]
    array([2., 4., 6.])
    """
    if not isinstance(tape, _Tape):
        raise TypeError(f'compile expects a GradientTape, JacobianTape or HessianTape, got '
                        f'{type(tape).__name__}')
    import copy
    new = copy.copy(tape)
    new._compile()
    return new
