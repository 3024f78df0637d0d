"""Sparse Jacobians and Hessians by colouring: ``tr.jacobian(f, x, sparsity=...)`` and
``tr.hessian(f, x, sparsity=...)``, eager and on recorded tapes.

A column colouring sends one forward pass carrying one tangent per colour (the
seeds: the sum of the unit vectors of a colour's columns); a row colouring sweeps
back once per colour; a Hessian's symmetric colouring sends one forward pass of
tangents over the reverse-mode gradient (a batched Hessian-vector product).  The
compressed products are decompressed by one gather into a SciPy CSR array
(``colorings.Coloring``).  ``sparsity='auto'`` detects the pattern at the point of
the call (``tracked.sparsity``), so it holds there whatever branches ``f`` takes;
a pattern or a ``Coloring`` passed in is the caller's promise for every point.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .arguments import (Args, check_function, check_output, differentiable, float_dtype,
                        keep_value, no_complex_inputs)
from .colorings import Coloring, coloring
from .forward import DualLevel, make_dual, output_tangent, primal, run_forward
from .reverse import eager_withgradient, vjp
from .sparsity import detect_hessian, detect_jacobian, record
from .box import plain
from .boxes import Tracked

__all__ = ['sparse_withjacobian', 'sparse_hessian', 'jacobian_coloring', 'hessian_coloring',
           'leaf_seeds', 'leaf_blocks']

_KIND_OF_MODE = {'auto': 'auto', 'forward': 'column', 'reverse': 'row'}


# --------------------------------------------------------------------------
# From sparsity= to a colouring
# --------------------------------------------------------------------------

def jacobian_coloring(sparsity: Any, f: Callable[..., Any], args: Sequence[Any],
                      mode: str) -> Coloring:
    """The column or row colouring ``sparsity`` asks for ('auto': detected for
    ``f(*args)`` here; a pattern; a ``Coloring``), in ``mode``'s direction."""
    kind = _KIND_OF_MODE[mode]
    if isinstance(sparsity, Coloring):
        if sparsity.kind == 'symmetric' or kind not in ('auto', sparsity.kind):
            raise ValueError(f'a {sparsity.kind} colouring cannot give a Jacobian in '
                             f'mode={mode!r}: colour the pattern with tr.coloring(pattern, '
                             f"kind='column') for forward mode, kind='row' for reverse mode")
        return sparsity
    if isinstance(sparsity, str):
        _check_auto(sparsity)
        return coloring(detect_jacobian(record(f, args, 'jacobian')), kind)   # type: ignore[arg-type]
    return coloring(sparsity, kind)      # type: ignore[arg-type]


def hessian_coloring(sparsity: Any, f: Callable[..., Any], args: Sequence[Any]) -> Coloring:
    """The symmetric (or column) colouring for a Hessian that ``sparsity`` asks for."""
    if isinstance(sparsity, Coloring):
        if sparsity.kind == 'row':
            raise ValueError("a row colouring cannot give a Hessian: use tr.coloring(pattern, "
                             "kind='symmetric')")
        return sparsity
    if isinstance(sparsity, str):
        _check_auto(sparsity)
        sparsity = detect_hessian(record(f, args, 'hessian'))
    return coloring(sparsity, 'symmetric')


def _check_auto(sparsity: str) -> None:
    if sparsity != 'auto':
        raise ValueError(f"sparsity={sparsity!r}: expected 'auto', a sparsity pattern "
                         f'(tr.jacobian_sparsity) or a colouring (tr.coloring)')


def _check_shape(col: Coloring, shape: tuple[int, int], what: str) -> None:
    if col.shape != shape:
        raise ValueError(f'the sparsity pattern is {col.shape[0]}x{col.shape[1]} but the '
                         f'{what} here is {shape[0]}x{shape[1]}: detect the pattern for '
                         f'these arguments (tr.jacobian_sparsity or sparsity="auto")')


# --------------------------------------------------------------------------
# Seeds and blocks per argument leaf
# --------------------------------------------------------------------------

def leaf_seeds(col: Coloring, leaves: Sequence[Any]) -> list[Any]:
    """The colouring's seeds cut into one batch of tangents per leaf: ``(ncolors,) +
    leaf.shape`` in the leaf's float dtype."""
    out, off = [], 0
    for a in leaves:
        shape = np.shape(plain(a))
        k = int(np.prod(shape))
        out.append(col.seeds(float_dtype(a))[:, off:off + k].reshape((col.ncolors,) + shape))
        off += k
    return out


def leaf_blocks(J: Any, sizes: Sequence[int]) -> list[Any]:
    """The column blocks of ``J``, one per argument leaf of ``sizes`` elements."""
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    if len(sizes) == 1:
        return [J]
    return [J[:, starts[k]:starts[k + 1]] for k in range(len(sizes))]


# --------------------------------------------------------------------------
# Eager calls
# --------------------------------------------------------------------------

def sparse_withjacobian(f: Callable[..., Any], args: Sequence[Any], mode: str,
                        sparsity: Any) -> tuple[Any, tuple[Any, ...]]:
    """``tr.withjacobian(f, *args, mode=mode, sparsity=sparsity)``: the value and, per
    argument, its CSR column block of the Jacobian, one pass (or sweep) per colour."""
    spec = Args(tuple(args))
    no_complex_inputs(spec, 'jacobian')
    col = jacobian_coloring(sparsity, f, args, mode)
    sizes = [int(np.size(plain(a))) for a in spec.flat]
    if col.shape[1] != sum(sizes):
        raise ValueError(f'the sparsity pattern has {col.shape[1]} columns but the arguments '
                         f'have {sum(sizes)} elements: detect the pattern for these arguments '
                         f'(tr.jacobian_sparsity or sparsity="auto")')
    if col.kind == 'column':
        y, B = _forward_products(f, spec, col)
    else:
        y, B = _reverse_products(f, spec, col, sizes)
    _check_shape(col, (int(np.size(plain(y))), sum(sizes)), 'Jacobian')
    J = col.decompress(_untracked(B))
    return _untracked(y), spec.gradients(leaf_blocks(J, sizes), keep_value)


def _untracked(v: Any) -> Any:
    """``v``, refused if an outer differentiation tracks it: a SciPy sparse array holds
    plain numbers, so its derivative would be lost without a word."""
    if isinstance(v, Tracked):
        raise TypeError('a sparse Jacobian or Hessian (sparsity=) holds plain numbers and '
                        'cannot be differentiated at an outer level; use the dense '
                        'tr.jacobian or tr.hessian inside a differentiated function')
    return v


def _forward_products(f: Callable[..., Any], spec: Args, col: Coloring) -> tuple[Any, Any]:
    """``(y, J @ seeds.T)``: one forward pass carrying a tangent per colour."""
    c = col.ncolors
    tangents = leaf_seeds(col, spec.flat) if c else [None] * len(spec.flat)
    lvl, out = run_forward(f, spec, tangents, c or None)
    check_output(primal(out))
    y, T = output_tangent(out, lvl, c)
    return y, np.reshape(T, (c, int(np.size(plain(y))))).T


def _reverse_products(f: Callable[..., Any], spec: Args, col: Coloring,
                      sizes: Sequence[int]) -> tuple[Any, Any]:
    """``(y, seeds @ J)``: one reverse sweep per colour (two for a complex ``y``: its
    real and imaginary parts, as ``tr.jacobian`` does)."""
    y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)
    check_output(y)
    _check_shape(col, (int(np.size(plain(y))), sum(sizes)), 'Jacobian')
    shape = np.shape(plain(y))
    complex_y = float_dtype(y).kind == 'c'

    def row(seed: Any) -> Any:
        grads = back(seed)
        return np.concatenate([np.zeros(k) if g is None else np.ravel(_untracked(g))
                               for g, k in zip(grads, sizes)])
    rows = []
    for s in col.seeds(float_dtype(y)):
        s = np.reshape(s, shape)
        rows.append(row(s) + 1j * row(1j * s) if complex_y else row(s))
    return y, np.reshape(rows, (col.ncolors, sum(sizes)))


def sparse_hessian(f: Callable[..., Any], args: Sequence[Any], sparsity: Any) -> Any:
    """``tr.hessian(f, x, sparsity=sparsity)``: the Hessian as a CSR array, from one
    forward pass of one tangent per colour over the reverse-mode gradient."""
    check_function(f, 'hessian', args)
    if len(args) != 1 or not differentiable(args[0]):
        raise ValueError('hessian(f, x, sparsity=...) takes one array (or number) x; join '
                         'several into one vector (tr.destructure does it for a tree)')
    spec = Args(tuple(args))
    no_complex_inputs(spec, 'hessian')
    col = hessian_coloring(sparsity, f, args)
    n = int(np.size(plain(args[0])))
    _check_shape(col, (n, n), 'Hessian')
    c = col.ncolors
    zero = col.decompress(np.zeros((n, c), float_dtype(args[0])))
    if not c:                               # no second derivative anywhere
        return zero
    lvl, g = run_forward(lambda x: eager_withgradient(f, (x,)).grad[0], spec,
                         leaf_seeds(col, spec.flat), c)
    if g is None:
        return zero
    _, T = output_tangent(g, lvl, c)
    return col.decompress(np.reshape(_untracked(T), (c, n)).T)


# --------------------------------------------------------------------------
# Recorded tapes (JacobianTape and HessianTape with sparsity=)
# --------------------------------------------------------------------------

def tape_coloring(tape: Any, args: Sequence[Any], hessian: bool = False) -> Coloring:
    """The colouring a tape with ``sparsity=`` records with: 'auto' detects it on the
    arguments being recorded (over the leaves of the ``wrt`` arguments, the tape's
    order), so a retrace detects again."""
    sparsity = tape.sparsity
    if isinstance(sparsity, str):
        _check_auto(sparsity)
        wrt = sorted(tape.wrt)

        def f(*wrt_args: Any) -> Any:
            full = list(args)
            for p, a in zip(wrt, wrt_args):
                full[p] = a
            return tape.f(*full)
        rec = record(f, [args[p] for p in wrt], type(tape).__name__)
        sparsity = detect_hessian(rec) if hessian else detect_jacobian(rec)
    if hessian:
        return hessian_coloring(sparsity, tape.f, args)
    return jacobian_coloring(sparsity, tape.f, args, 'auto')


def forward_trace(tape: Any, rec: Any, inputs: list[Any]) -> list[Any]:
    """A column-coloured ``JacobianTape``'s program: ``f`` on duals carrying one tangent
    per colour; its outputs are the value and the ``(ncolors, m)`` tangents."""
    from .compiled_tape.trees import unflatten_args
    col = tape.coloring
    c = col.ncolors
    lvl = DualLevel(c)
    boxed = list(inputs)
    if c:
        for p, s in zip(tape.diff, leaf_seeds(col, [inputs[p] for p in tape.diff])):
            boxed[p] = make_dual(inputs[p], s, lvl)
    y = tape.f(*unflatten_args(tape.arg_defs, boxed))
    if isinstance(y, (tuple, list, dict)):
        raise ValueError('JacobianTape needs f to return one array')
    _, T = output_tangent(y, lvl, c)
    value = primal(y)
    tape.out_shape = np.shape(value)
    tape.m = int(np.size(plain(value)))
    _check_shape(col, (tape.m, sum(int(np.prod(tape.specs[p][0])) for p in tape.diff)),
                 'Jacobian')
    tape.jac_dtype = np.result_type(T.dtype, np.float64)
    return [rec.output(value), rec.output(np.reshape(T, (c, tape.m)))]


def tape_blocks(tape: Any, outs: Sequence[Any]) -> list[Any]:
    """Per leaf of a coloured ``JacobianTape``'s arguments, its CSR block (None outside
    ``wrt``), from the replay's compressed products ``outs``."""
    col = tape.coloring
    sizes = [int(np.prod(tape.specs[p][0])) for p in tape.diff]
    if col.kind == 'column':
        J = col.decompress(outs[0].T)
    else:
        J = col.decompress(np.hstack([np.reshape(o, (col.ncolors, -1)) for o in outs]))
    flat: list[Any] = [None] * len(tape.specs)
    for p, block in zip(tape.diff, leaf_blocks(J, sizes)):
        flat[p] = block
    return flat
