"""Jacobians, Hessians and directional derivatives, in forward or reverse mode.

Reverse mode (``reverse.vjp``) costs one sweep per output element; forward mode
(``forward.Dual``) one pass carrying one tangent per input element, all at once
along a leading axis.  ``jacobian(..., mode='auto')`` picks forward when the
differentiated input has no more elements than the output (Zygote's advice,
``jax.jacfwd`` vs ``jacrev``); a square Jacobian goes forward too: one pass and no
tape against one reverse sweep per row (Lux's Jacobian of a model's batch inside a
loss, 20 by 20: 9x faster forward).  ``hessian``, ``diaghessian`` and ``hvp`` are
forward over reverse (Zygote's and JAX's choice: one forward pass over the
reverse-mode gradient); ``hessian_reverse`` is reverse over reverse, the
independent check.

Complex numbers: a Jacobian with respect to complex arguments is ambiguous (the
complex derivative exists only for holomorphic maps; the real-linear one is a
2n-by-2n real matrix), so it is refused with a message saying what to pass
instead.  Complex outputs of real arguments are fine: ``J`` is complex,
``J[k, i] = d Re(y_k)/dx_i + i d Im(y_k)/dx_i``.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from .api import gradient
from .reverse import vjp
from .arguments import (Args, check_function, check_output, float_dtype, keep_value, leaf_value,
                        no_complex_inputs)
from .tree_util import follow
from .forward import DualLevel, make_dual, output_tangent, primal, run_forward
from .box import plain
from .boxes import Tracked

__all__ = ['jacobian', 'withjacobian', 'hessian', 'hessian_reverse', 'diaghessian', 'jvp',
           'hvp']

WithJacobian = namedtuple('WithJacobian', ['val', 'grad'])
_MODES = ('auto', 'forward', 'reverse')


def _size(x: Any) -> int:
    return int(np.size(plain(x)))


# --------------------------------------------------------------------------
# Jacobians
# --------------------------------------------------------------------------

def withjacobian(f: Callable[..., Any], *args: Any,
                 mode: Literal['auto', 'forward', 'reverse'] = 'auto',
                 sparsity: Any = None) -> WithJacobian:
    """``withjacobian(f, *args, mode='auto') -> (val, grad)``: the value of ``f`` and, per
    argument, ``J[k, i] = d y.ravel()[k] / d a.ravel()[i]``.

    ``mode='forward'`` carries one tangent per input element through one pass;
    ``'reverse'`` sweeps back once per output element; ``'auto'`` takes forward when
    the inputs have no more elements than the output (it records ``f`` for reverse
    mode first, to learn the output's size: ``f`` then runs twice; with at most two
    input elements it goes forward at once).  A scalar argument gives a
    vector, a scalar ``y`` one row; non-numeric arguments give None.

    ``sparsity`` ('auto', a pattern from ``tr.jacobian_sparsity``, or a colouring from
    ``tr.coloring``) gives each block as a SciPy CSR array, computed with one forward
    pass, or one reverse sweep, per colour (``tracked.sparse_jacobians``).

    >>> import numpy as np, tracked as tr
    >>> val, (J,) = tr.withjacobian(np.cumsum, np.array([1, 2, 3]))
    >>> val, J
    (array([1., 3., 6.]), array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]]))
    """
    check_function(f, 'withjacobian', args)
    if mode not in _MODES:
        raise ValueError(f'mode={mode!r}: expected one of {_MODES}')
    if sparsity is not None:
        from .sparse_jacobians import sparse_withjacobian     # needs SciPy
        return WithJacobian(*sparse_withjacobian(f, args, mode, sparsity))
    spec = Args(tuple(args))
    no_complex_inputs(spec, 'jacobian')
    n = sum(_size(a) for a in spec.flat)
    # 'auto' with at most two input elements goes forward without asking: two tangents
    # cost about what a reverse recording does, and f runs once (Lux's 2-element input)
    if mode == 'forward' or (mode == 'auto' and n <= 2):
        y, jacs = _forward_jacobian(f, spec, n)
    else:
        # 'auto' records f for reverse mode first: that gives the output's size, and f
        # runs a second time only when forward mode then turns out cheaper.
        y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)
        check_output(y)
        if mode == 'auto' and n <= _size(y):
            y, jacs = _forward_jacobian(f, spec, n)
        else:
            jacs = _reverse_jacobian(y, back, spec)
    return WithJacobian(y, spec.gradients(jacs, keep_value))


def jacobian(f: Callable[..., Any], *args: Any,
             mode: Literal['auto', 'forward', 'reverse'] = 'auto',
             sparsity: Any = None) -> tuple[Any, ...]:
    """``jacobian(f, *args, mode='auto', sparsity=None)``: per argument the matrix
    ``J[k, i] = d y.ravel()[k] / d a.ravel()[i]`` (see ``withjacobian`` for ``mode``;
    with ``sparsity``, a SciPy CSR array from one pass per colour: ``tr.coloring``).

    >>> import numpy as np, tracked as tr
    >>> J, = tr.jacobian(lambda a: 100 * a[:3] ** 2, np.arange(1, 8))
    >>> J.shape, np.diag(J)
    ((3, 7), array([200., 400., 600.]))
    >>> tr.jacobian(lambda t: np.stack([t ** 2, 3 * t]) * 2, 1.0, mode='forward')[0]
    array([4., 6.])
    """
    return withjacobian(f, *args, mode=mode, sparsity=sparsity).grad


def _reverse_jacobian(y: Any, back: Callable[..., tuple[Any, ...]], spec: Args) -> list[Any]:
    """Per leaf ``J[k, i]`` from one reverse sweep per output element of ``y``."""
    shape = np.shape(plain(y))
    m = int(np.prod(shape))
    basis = np.eye(m, dtype=float_dtype(y)).reshape((m,) + shape)
    rows = [back(basis[k]) for k in range(m)]
    if float_dtype(y).kind == 'c':           # d Re(y_k) + i d Im(y_k): a second sweep
        rows = [tuple(None if a is None else a + 1j * b for a, b in zip(r, back(1j * basis[k])))
                for k, r in enumerate(rows)]
    return [_rows_to_matrix([r[j] for r in rows], a, m) for j, a in enumerate(spec.flat)]


def _rows_to_matrix(rows: Sequence[Any], a: Any, m: int) -> Any:
    """``J[k, i]`` from the row cotangents of one argument leaf ``a``."""
    n = _size(a)
    scalar = np.ndim(plain(a)) == 0
    dtype = np.result_type(float_dtype(a), *[float_dtype(r) for r in rows if r is not None])
    if any(isinstance(r, Tracked) for r in rows):
        zero = np.zeros(() if scalar else (n,), dtype)
        return np.stack([zero if r is None else (r if scalar else np.reshape(r, (n,)))
                         for r in rows])
    J = np.zeros((m,) if scalar else (m, n), dtype)
    for k, r in enumerate(rows):
        if r is not None:
            J[k] = r if scalar else np.ravel(r)
    return J


def _basis_tangents(spec: Args, n: int) -> list[Any]:
    """Per leaf, its block of the identity: ``n`` tangents along a leading axis."""
    out, off = [], 0
    for a in spec.flat:
        shape = np.shape(plain(a))
        k = _size(a)
        t = np.zeros((n, k), float_dtype(a))
        t[off:off + k] = np.eye(k)
        out.append(t.reshape((n,) + shape))
        off += k
    return out


def _forward_jacobian(f: Callable[..., Any], spec: Args, n: int) -> tuple[Any, list[Any]]:
    lvl, out = run_forward(f, spec, _basis_tangents(spec, n), n)
    check_output(primal(out))
    y, T = output_tangent(out, lvl, n)
    m = _size(y)
    T = np.reshape(T, (n, m))                 # T[i, k] = d y_k / d x_i
    jacs, off = [], 0
    for a in spec.flat:
        k = _size(a)
        block = np.transpose(T[off:off + k])  # (m, k)
        if np.ndim(plain(a)) == 0:
            block = np.reshape(block, (m,))
        if type(block) is np.ndarray:         # the argument's float dtype, as in reverse mode
            dtype = np.result_type(float_dtype(a), np.complex64 if block.dtype.kind == 'c'
                                   else float_dtype(a))
            if block.dtype != dtype:
                block = block.astype(dtype)
        jacs.append(block)
        off += k
    return y, jacs


# --------------------------------------------------------------------------
# Hessians
# --------------------------------------------------------------------------

def _zeros_if_none(g: Any, x: Any) -> Any:
    if g is not None:
        return g
    return np.zeros(np.shape(plain(x)), float_dtype(x))


def _flat_gradient(f: Callable[..., Any], spec: Args) -> Callable[..., Any]:
    """``(*leaves) -> v``: the gradient of ``f`` with respect to every differentiated
    leaf of ``spec``, ravelled and joined into one vector (zeros where ``f`` does not
    depend on a leaf), the function whose Jacobian is the Hessian."""
    def grad_vector(*leaves: Any) -> Any:
        grads = gradient(lambda *ls: f(*spec.rebuild(ls)), *leaves)
        parts = [np.ravel(_zeros_if_none(g, x)) for g, x in zip(grads, leaves)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return grad_vector


def _split_rows(v: Any, spec: Args) -> list[Any]:
    """Vector (or leading axis) ``v`` over all leaves, cut into one piece per leaf: its
    shape for a vector, ``(size,) + rest`` rows otherwise (a scalar leaf drops the axis)."""
    out, off = [], 0
    for a in spec.flat:
        k = _size(a)
        piece = v[off:off + k]
        if np.ndim(plain(a)) == 0:
            piece = piece[0]
        elif np.ndim(v) == 1:
            piece = np.reshape(piece, np.shape(plain(a)))
        out.append(piece)
        off += k
    return out


def _hessian(f: Callable[..., Any], args: Sequence[Any], mode: Literal['forward', 'reverse'],
             who: str) -> Any:
    check_function(f, who, args)
    if not args:
        raise TypeError(f'{who}(f, *args) needs at least one argument to differentiate')
    spec = Args(tuple(args))
    no_complex_inputs(spec, 'hessian')
    if not spec.flat:
        raise ValueError(f'{who}: no argument has a differentiable leaf (arrays or numbers)')
    cols = jacobian(_flat_gradient(f, spec), *spec.flat, mode=mode)
    # block (i, j) = d^2 f / d leaf_i d leaf_j, over each leaf's ravelled elements
    rows = [_split_rows(J, spec) for J in cols]                    # rows[j][i]
    single = len(args) == 1
    per_row = []
    for i in range(len(cols)):
        inner = spec.gradients([rows[j][i] for j in range(len(cols))], keep_value)
        per_row.append(inner[0] if single else inner)
    blocks = spec.gradients(per_row, keep_value)
    return blocks[0] if single else blocks


def hessian(f: Callable[..., Any], *args: Any, sparsity: Any = None) -> Any:
    """``hessian(f, x, sparsity=None)``: ``H[i, j] = d^2 f / d x.ravel()[i] d x.ravel()[j]``;
    a scalar for scalar ``x``.

    Forward over reverse: one forward pass, carrying one tangent per element of ``x``,
    over the reverse-mode gradient.  Several arguments, or a tree (a dict, tuple or
    list of arrays and numbers, a model), give the blocks ``d^2 f / d a d b`` for each
    pair of leaves, nested as JAX nests them: the tree of ``a`` holding, at each leaf,
    the tree of ``b`` holding the blocks; for several arguments a tuple of tuples.  A
    block has shape ``(a.size, b.size)``, without the axis of a scalar leaf.

    >>> import numpy as np, tracked as tr
    >>> tr.hessian(np.sin, np.pi / 2)
    np.float64(-1.0)
    >>> tr.hessian(lambda x: x[0] ** 2 * x[1], np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    >>> tr.hessian(lambda a, b: a * b * b, 1.0, 2.0)
    ((np.float64(0.0), np.float64(4.0)), (np.float64(4.0), np.float64(2.0)))
    >>> tr.hessian(lambda p: p['w'] ** 3, {'w': 1.0})
    {'w': {'w': np.float64(6.0)}}

    ``sparsity`` ('auto', a pattern from ``tr.hessian_sparsity``, or a colouring from
    ``tr.coloring``) gives a SciPy CSR array from one forward pass carrying one
    tangent per colour of a symmetric (star) colouring; ``x`` is then one array
    (examples: ``tr.hessian_sparsity``).
    """
    if sparsity is not None:
        from .sparse_jacobians import sparse_hessian          # needs SciPy
        return sparse_hessian(f, args, sparsity)
    return _hessian(f, args, 'forward', 'hessian')


def hessian_reverse(f: Callable[..., Any], *args: Any) -> Any:
    """``hessian_reverse(f, x)``: the Hessian by reverse over reverse: the gradient's
    computation recorded once, then swept back once per row.

    Same result as ``hessian`` (trees and several arguments included), by another
    method (no forward mode): slower, and an independent check.

    >>> import numpy as np, tracked as tr
    >>> tr.hessian_reverse(lambda x: x[0] ** 2 * x[1], np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    """
    return _hessian(f, args, 'reverse', 'hessian_reverse')


def diaghessian(f: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """``diaghessian(f, *args)``: per argument an array shaped like it, the Hessian's diagonal.

    One forward pass over the reverse-mode gradient, one tangent per input element.

    >>> import numpy as np, tracked as tr
    >>> np.round(tr.diaghessian(np.arctan2, 1, 2), 2)
    array([-0.16,  0.16])
    """
    check_function(f, 'diaghessian', args)
    spec = Args(tuple(args))
    no_complex_inputs(spec, 'diaghessian')
    n = sum(_size(a) for a in spec.flat)

    def grads(*ls: Any) -> tuple[Any, ...]:
        return tuple(_zeros_if_none(g, x) for g, x in zip(
            gradient(lambda *l2: f(*spec.rebuild(l2)), *ls), ls))
    lvl = DualLevel(n)
    leaves = [make_dual(leaf_value(a), t, lvl) for a, t in zip(spec.flat, _basis_tangents(spec, n))]
    outs = grads(*leaves)
    diags, off = [], 0
    for a, out in zip(spec.flat, outs):
        k = _size(a)
        _, T = output_tangent(out, lvl, n)
        block = np.reshape(T, (n, k))[off:off + k]
        d = np.reshape(np.diagonal(block), np.shape(plain(a)))
        diags.append(d if isinstance(plain(a), np.ndarray) or isinstance(d, Tracked) else d[()])
        off += k
    return spec.gradients(diags, keep_value)


# --------------------------------------------------------------------------
# Products without matrices
# --------------------------------------------------------------------------

def _tangent_leaves(args: Sequence[Any], tangents: Sequence[Any]) -> list[Any]:
    """The tangent of each differentiated leaf of ``args`` (None where the tangent tree
    has None: that argument is a constant)."""
    if len(tangents) != len(args):
        raise ValueError(f'jvp: {len(args)} arguments but {len(tangents)} tangents; give one '
                         f'tangent per argument (None for a constant)')
    out: list[Any] = []
    for a, t in zip(args, tangents):
        spec = Args((a,))
        leaves = spec.flat
        if t is None:
            out.extend([None] * len(leaves))
            continue
        tleaves = [t] if spec.defs[0] == 'leaf' else _mirrored(spec.defs[0], t, len(leaves))
        for x, v in zip(leaves, tleaves):
            if v is None:                   # no tangent there: a constant
                out.append(None)
                continue
            if float_dtype(v).kind == 'c' and float_dtype(x).kind != 'c':
                raise ValueError('jvp: a complex tangent for a real argument (its imaginary '
                                 'part would be dropped); pass the argument as complex '
                                 '(x.astype(complex)) or a real tangent')
            dtype = np.result_type(float_dtype(x), float_dtype(v))
            v = v if isinstance(v, Tracked) else np.asarray(v, dtype)
            if np.shape(plain(v)) != np.shape(plain(x)):
                raise ValueError(f'jvp: a tangent has shape {np.shape(plain(v))}, its '
                                 f'argument {np.shape(plain(x))}')
            out.append(v)
    return out


def _mirrored(treedef: Any, t: Any, n: int) -> list[Any]:
    """The tangents at the places of an argument's ``n`` leaves, read from tangent tree
    ``t`` by path: the same array may be the tangent of several leaves (``(v, v)`` for
    two different arrays), while a tied leaf takes the tangent at its first place."""
    try:
        found = [follow(t, p) for p in treedef.paths()]
    except (KeyError, IndexError, AttributeError, TypeError):
        found = []
    if len(found) != n:
        raise ValueError(f'jvp: a tangent must mirror its argument: {n} differentiated '
                         f'leaves, a tangent of another structure')
    return found


def jvp(f: Callable[..., Any], args: Sequence[Any],
        tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``jvp(f, args, tangents) -> (y, J @ v)``: the value of ``f(*args)`` and its
    directional derivative along ``tangents`` (one per argument, mirroring it).

    One forward pass: every value carries its tangent (``forward.Dual``); no tape.

    >>> import numpy as np, tracked as tr
    >>> tr.jvp(lambda x, y: x * y, (np.array([1., 2.]), 3.0), (np.array([1., 0.]), 1.0))
    (array([3., 6.]), array([4., 2.]))
    """
    check_function(f, 'jvp')
    if not isinstance(args, tuple):
        args, tangents = (args,), (tangents,)
    spec = Args(args)
    lvl, out = run_forward(f, spec, _tangent_leaves(args, tangents), None)
    check_output(primal(out), 'jvp')
    return output_tangent(out, lvl)


def hvp(f: Callable[..., Any], *args_and_v: Any) -> Any:
    """``hvp(f, x, v)``: the Hessian of scalar ``f`` at ``x`` times ``v``, without forming it.

    One forward pass along ``v`` over the reverse-mode gradient.  ``x`` may be a tree
    (``v`` then mirrors it, and so does the result); with several arguments,
    ``hvp(f, a, b, (va, vb))`` takes the tangents as a tuple and returns one.

    >>> import numpy as np, tracked as tr
    >>> tr.hvp(lambda x: np.sum(x ** 3), np.array([1., 2.]), np.array([1., 1.]))
    array([ 6., 12.])
    >>> tr.hvp(lambda a, b: a * b * b, 1.0, 2.0, (1.0, 0.0))
    (np.float64(0.0), np.float64(4.0))
    """
    check_function(f, 'hvp', args_and_v)
    if len(args_and_v) < 2:
        raise TypeError('hvp(f, x, v) needs the point x and the direction v (several '
                        'arguments: hvp(f, a, b, (va, vb)))')
    args, v = args_and_v[:-1], args_and_v[-1]
    tangents = (v,) if len(args) == 1 else v
    if type(tangents) is not tuple or len(tangents) != len(args):
        raise ValueError(f'hvp: {len(args)} arguments need a tuple of {len(args)} tangents '
                         f'as v, one mirroring each argument')
    spec = Args(tuple(args))
    hv = jvp(_flat_gradient(f, spec), tuple(spec.flat), tuple(_tangent_leaves(args, tangents)))[1]
    out = spec.gradients(_split_rows(hv, spec), keep_value)
    return out[0] if len(args) == 1 else out
