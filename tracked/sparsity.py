"""Sparsity detection: which output elements of ``f`` depend on which input elements
(``jacobian_sparsity``), and which pairs of inputs meet in the second derivatives of
a scalar ``f`` (``hessian_sparsity``).

``f`` runs once on a forward-only recording (``compiled_tape.record``: every
operation an instruction that keeps all its arguments; value-dependent Python a
guard).  A pattern is a sparse boolean matrix with a row per element of a value and
a column per input element; an instruction's pattern is ``sum_p S_p @ P_p`` over
its operands ``p``, where ``S_p`` (output elements by operand elements) comes from
the primitive's ``structure`` (``registry.Primitive``): exact for elementwise
operations, copies (indexing, slicing, reshapes, joins), reductions, cumulative
sums and products, ``@`` and convolutions with a constant; for any other primitive
every output element depends on every operand element, so a pattern never misses a
non-zero.  The values of constants are read by ``@`` and convolutions only (their
zeros are structural there); ``c * x`` with a zero in ``c`` keeps the entry.

Second order follows SparseConnectivityTracer.jl's Hessian tracer, per element: an
operation whose derivative with respect to operand ``p`` varies with operand ``q``
(its pullback reads ``q``'s value: ``registry.reads_value``; none for linear rules)
makes the input sets reaching an output element through ``p`` and through ``q``
interact, for the output elements that reach ``f``'s value at all.

Control flow: ``f`` follows the branches its values take at the given point; the
pattern holds wherever ``f`` takes the same ones.  ``np.where`` on a condition
computed from the inputs keeps both branches, and an index computed from them
(``x[np.argsort(x)]``) counts as reading every element, so neither needs a guard;
Python's ``if``, ``float(x)``, ``int(x)`` on values do, and the pattern functions
warn naming them (a pattern found by ``sparsity='auto'`` is used at its own point,
and a ``JacobianTape`` checks its guards on every replay).
"""
from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

try:
    import scipy.sparse as sp
except ImportError as e:        # an optional dependency: say which extra installs it
    raise ImportError("tracked's sparse derivatives need SciPy, an optional dependency: "
                      "pip install 'tracked[scipy]'") from e

from .arguments import Args, check_output, leaf_value
from .compiled_tape.program import Program
from .compiled_tape.record import Instr, Recorder, Ref
from .registry import Primitive, reads_value
from .tape import new_level, pop_recorder, push_recorder
from .box import plain
from .dispatch import SELECT

__all__ = ['jacobian_sparsity', 'hessian_sparsity', 'Recording', 'record']

DENSE = 'dense'         # a local structure: every output element reads every operand element
# guards that do not make a pattern point-dependent: an integer argument is a constant of
# f, and a mask's count fixes a shape (another count gives another Jacobian's shape)
_STATIC_GUARDS = ('int-argument', 'mask-count')


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------

class Recording:
    """``f`` recorded once on ``args``: its live instructions, output, guards, and the
    differentiated leaves (``spec.flat``: the pattern's columns, in ``tr.jacobian``'s
    order)."""

    def __init__(self, program: Program, spec: Args, out: Any, out_size: int) -> None:
        self.program = program
        self.spec = spec
        self.out = out                      # a Ref, or f's constant output
        self.out_size = out_size
        self.sizes = [int(np.size(plain(a))) for a in spec.flat]
        self.n = sum(self.sizes)

    def point_guards(self) -> list[str]:
        """Where ``f`` decided something on a value of its inputs (descriptions of the
        guards); an integer argument read as an int (a size, an index) is static."""
        instrs = self.program.instrs
        return [g.describe() for g in self.program.guards
                if g.kind not in _STATIC_GUARDS and instrs[g.i].kind != 'input']


def record(f: Callable[..., Any], args: Sequence[Any], who: str) -> Recording:
    """``f(*args)`` recorded as plain forward instructions (no derivative taken)."""
    spec = Args(tuple(args))
    rec = Recorder(new_level())
    push_recorder(rec)
    try:
        leaves = [rec.input(plain(leaf_value(a)), k) for k, a in enumerate(spec.flat)]
        y = f(*spec.rebuild(leaves))
        out = rec.output(y)
    finally:
        pop_recorder(rec)
    check_output(y, who)
    program = Program(rec, [out])
    return Recording(program, spec, program.outputs[0], int(np.size(plain(y))))


def _warn_guards(recording: Recording, who: str) -> None:
    where = recording.point_guards()
    if where:
        warnings.warn(
            f'{who}: f branches on the values of its inputs ({"; ".join(where)}): the '
            f'pattern holds where f takes the same branches as at this point. Use '
            f"sparsity='auto' (detection at every point) or a JacobianTape(f, x, "
            f"sparsity=...), which checks the branches on every call.", stacklevel=3)


# --------------------------------------------------------------------------
# Patterns: sparse boolean matrices, a row per element, a column per input element
# --------------------------------------------------------------------------

def _csr(rows: Any, cols: Any, shape: tuple[int, int]) -> Any:
    return sp.csr_array((np.ones(len(rows), bool), (rows, cols)), shape=shape)


def _gather(source: Any, n_in: int) -> Any:
    """The local structure of ``out[k] = in[source[k]]``."""
    m = len(source)
    return sp.csr_array((np.ones(m, bool), source, np.arange(m + 1)), shape=(m, n_in))


def _columns(P: Any) -> Any:
    """The input elements any row of ``P`` depends on."""
    return np.unique(P.indices)


def _rows_of(cols: Any, m: int, n: int) -> Any:
    """``m`` rows, each depending on ``cols``."""
    k = len(cols)
    return sp.csr_array((np.ones(m * k, bool), np.tile(cols, m), np.arange(m + 1) * k),
                        shape=(m, n))


def _size(v: Any) -> int:
    """Elements of a value; 1 for a multi-output primitive's tuple (its outputs are
    read through ``values.SELECT``, each depending on all of it)."""
    return 1 if isinstance(v, tuple) else int(np.size(v))


def _value(a: Any, instrs: list[Instr]) -> Any:
    if type(a) is Ref:
        return instrs[a.i].value
    if type(a) in (tuple, list):
        return type(a)(_value(b, instrs) for b in a)
    return a


def _holds_ref(a: Any) -> bool:
    return bool(_refs(a))


def _refs(a: Any) -> list[int]:
    """The instructions ``a`` reads, a ``Ref`` or a (nested) sequence holding some."""
    if type(a) is Ref:
        return [a.i]
    if type(a) in (tuple, list):
        return [i for b in a for i in _refs(b)]
    return []


def _is_operand(prim: Primitive, p: int) -> bool:
    return p < len(prim.vjps) and prim.vjps[p] is not None


# --------------------------------------------------------------------------
# Local structures: per operand with a pattern, S (output x operand elements) or DENSE
# --------------------------------------------------------------------------

Local = list[tuple[int, int, Any]]      # (position, instruction read, S or DENSE)


def _local(ins: Instr, pats: list[Any], instrs: list[Instr]) -> tuple[Local, str | None]:
    """The local structure of op ``ins`` and the kind it used (None: unknown)."""
    prim = ins.prim
    tracked = [(p, a.i) for p, a in enumerate(ins.args)
               if type(a) is Ref and pats[a.i] is not None and _is_operand(prim, p)]
    # operands inside a sequence at one position: no structure says where they go
    nested = [(p, j) for p, a in enumerate(ins.args) if type(a) in (tuple, list)
              and _is_operand(prim, p) for j in _refs(a) if pats[j] is not None]
    if nested or isinstance(ins.value, tuple) or prim is SELECT:
        return [(p, j, DENSE) for p, j in tracked + nested], None
    if not tracked:
        return [], None
    kind = prim.structure
    args = [_value(a, instrs) for a in ins.args]
    varying = frozenset(p for p, a in enumerate(ins.args) if _holds_ref(a))
    if callable(kind):
        kind = kind(varying, ins.value, *args, **ins.kwargs)
    m = _size(ins.value)
    if isinstance(kind, dict):
        return [(p, j, _pairs(kind.get(p), m, _size(instrs[j].value))) for p, j in tracked], None
    try:
        if kind == 'elementwise':
            return _elementwise(prim, tracked, ins, instrs), kind
        if kind == 'select' and all(_is_operand(prim, p) for p in varying):
            return _select(prim, tracked, ins, args, instrs), kind
        if kind in ('reduce', 'cumulative'):
            return [(p, j, _along_axis(kind, prim, ins.value, args, ins.kwargs))
                    for p, j in tracked], kind
    except (TypeError, ValueError, IndexError):     # a form the structure does not cover
        pass
    return [(p, j, DENSE) for p, j in tracked], None


def _pairs(pairs: Any, m: int, n: int) -> Any:
    """The structure of ``(out_index, in_index)`` pairs (DENSE if not given)."""
    if pairs is None:
        return DENSE
    rows, cols = pairs
    return _csr(rows, cols, (m, n))


def _elementwise(prim: Primitive, tracked: list[tuple[int, int]], ins: Instr,
                 instrs: list[Instr]) -> Local:
    out_shape = np.shape(ins.value)
    local = []
    for p, j in tracked:
        d = prim.partials[p] if prim.partials is not None else 1
        if d is None or (not callable(d) and d == 0):      # a derivative that is zero
            continue
        shape = np.shape(instrs[j].value)
        source = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), out_shape)
        local.append((p, j, _gather(source.ravel(), int(np.prod(shape)))))
    return local


def _select(prim: Primitive, tracked: list[tuple[int, int]], ins: Instr, args: list[Any],
            instrs: list[Instr]) -> Local:
    """The forward on integer codes: each output element gets the code of the operand
    element it copies (1 + its index over the tracked operands), 0 for none."""
    offsets, total = {}, 0
    for p, j in tracked:
        offsets[p] = total
        total += _size(instrs[j].value)
    for p, a in enumerate(args):
        if _is_operand(prim, p):
            shape = np.shape(a)
            args[p] = (np.arange(1, int(np.prod(shape)) + 1).reshape(shape) + offsets[p]
                       if p in offsets else np.zeros(shape, np.int64))
    codes = np.asarray(prim.fn(*args, **ins.kwargs))
    if codes.dtype.kind not in 'iu' or codes.shape != np.shape(ins.value):
        raise TypeError('not a copy of integer codes')
    codes = codes.ravel()
    k = np.flatnonzero(codes)
    S = _csr(k, codes[k] - 1, (codes.size, total))
    if len(tracked) == 1:
        return [(tracked[0][0], tracked[0][1], S)]
    return [(p, j, S[:, offsets[p]:offsets[p] + _size(instrs[j].value)]) for p, j in tracked]


def _along_axis(kind: str, prim: Primitive, ans: Any, args: list[Any],
                kwargs: dict[str, Any]) -> Any:
    """A reduction's (or a cumulative operation's) structure, from the ``axis`` (and
    ``keepdims``) its pullback's parameters name."""
    bound = inspect.signature(prim.vjps[0]).bind(None, ans, *args, **kwargs).arguments
    a, axis = args[0], bound.get('axis')
    shape = np.shape(a)
    size = int(np.prod(shape))
    index = np.arange(size).reshape(shape)
    if kind == 'reduce':
        axes = tuple(range(len(shape))) if axis is None else normalize_axis_tuple(axis, len(shape))
        kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
        target = np.broadcast_to(np.arange(int(np.prod(kept))).reshape(kept), shape)
        return _csr(target.ravel(), index.ravel(), (_size(ans), size))
    if axis is None or not shape:
        lines = index.reshape(1, -1)
    else:
        ax = normalize_axis_tuple(axis, len(shape))[0]
        lines = np.moveaxis(index, ax, -1).reshape(-1, shape[ax])
    later, earlier = np.tril_indices(lines.shape[1])
    return _csr(lines[:, later].ravel(), lines[:, earlier].ravel(), (_size(ans), size))


# --------------------------------------------------------------------------
# Propagation
# --------------------------------------------------------------------------

def _propagate(rec: Recording) -> tuple[list[Any], list[Local], list[str | None]]:
    """Every instruction's pattern (None: no dependence), local structure and kind."""
    instrs = rec.program.instrs
    starts = np.concatenate([[0], np.cumsum(rec.sizes, dtype=np.int64)])
    pats: list[Any] = [None] * len(instrs)
    locals_: list[Local] = [[] for _ in instrs]
    kinds: list[str | None] = [None] * len(instrs)
    for ins in instrs:
        if ins.kind == 'input':
            k = rec.sizes[ins.pos]
            pats[ins.i] = _gather(starts[ins.pos] + np.arange(k), rec.n)
            continue
        if ins.kind != 'op':                        # non-differentiable: no dependence
            continue
        local, kinds[ins.i] = _local(ins, pats, instrs)
        if not local:
            continue
        locals_[ins.i] = local
        m = _size(ins.value)
        P = sp.csr_array((m, rec.n), dtype=bool)
        dense = [pats[j] for _, j, S in local if S is DENSE]
        for _, j, S in local:
            if S is not DENSE:
                P = P + S @ pats[j]
        if dense:
            P = P + _rows_of(_columns(sp.vstack(dense, format='csr')), m, rec.n)
        pats[ins.i] = P
    return pats, locals_, kinds


def _canonical(P: Any) -> Any:
    P = sp.csr_array(P, dtype=bool)
    P.eliminate_zeros()
    P.sum_duplicates()
    P.sort_indices()
    return P


def detect_jacobian(rec: Recording) -> Any:
    """The Jacobian pattern of a recording (no warning)."""
    out = rec.out
    if type(out) is not Ref:
        return sp.csr_array((rec.out_size, rec.n), dtype=bool)
    P = _propagate(rec)[0][out.i]
    return _canonical(P if P is not None else sp.csr_array((rec.out_size, rec.n), dtype=bool))


def jacobian_sparsity(f: Callable[..., Any], *args: Any) -> Any:
    """``jacobian_sparsity(f, *args)``: the pattern of ``f``'s Jacobian, a SciPy sparse
    boolean matrix (CSR) that never misses a non-zero.

    Rows are the elements of ``f``'s output (ravelled), columns the elements of the
    differentiated argument leaves, ravelled and in order (as ``tr.jacobian`` orders
    them).  ``f`` runs once, recorded; the pattern is exact for elementwise operations,
    copies, reductions, cumulative sums, ``@`` and convolutions (a constant's zeros
    count), and takes every operand element for other rules.  Python branches on
    values (``if``, ``float(x)``) hold the pattern to this point: a warning says where.

    >>> import numpy as np, tracked as tr
    >>> P = tr.jacobian_sparsity(lambda u: u[2:] - 2 * u[1:-1] + u[:-2], np.ones(5))
    >>> P.toarray().astype(int)
    array([[1, 1, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1]])
    """
    rec = record(f, args, 'jacobian_sparsity')
    _warn_guards(rec, 'jacobian_sparsity')
    return detect_jacobian(rec)


def detect_hessian(rec: Recording) -> Any:
    """The Hessian pattern of a recording of a scalar function (no warning)."""
    n, out = rec.n, rec.out
    if rec.out_size != 1:
        raise ValueError(f'hessian_sparsity needs f to return a scalar; it returned '
                         f'{rec.out_size} elements. Use jacobian_sparsity for vector outputs.')
    H = sp.csr_array((n, n), dtype=bool)
    if type(out) is Ref:
        pats, locals_, kinds = _propagate(rec)
        instrs = rec.program.instrs
        reach: list[Any] = [None] * len(instrs)
        reach[out.i] = np.ones(1, bool)
        for ins in reversed(instrs):
            r = reach[ins.i]
            if r is None or not r.any() or not locals_[ins.i]:
                continue
            local = locals_[ins.i]
            for _, j, S in local:
                back = np.ones(_size(instrs[j].value), bool) if S is DENSE else S.T @ r
                reach[j] = back if reach[j] is None else reach[j] | back
            for (p, j, S), (q, k, T) in _interacting(ins.prim, local, kinds[ins.i]):
                H = H + _meet(S, pats[j], T, pats[k], r, n)
    H = H + H.T
    return _canonical(H)


def _interacting(prim: Primitive, local: Local, kind: str | None) -> list[Any]:
    """Pairs of operands whose second derivative may be non-zero."""
    if kind == 'select' or prim.linear == 'joint' or prim is SELECT:
        return []
    out = []
    for a, (p, _, _) in enumerate(local):
        for b, (q, _, _) in enumerate(local[a:], a):
            if (p != q and prim.linear == 'each') or (
                    prim.linear is None and (reads_value(prim, p, q) or reads_value(prim, q, p))):
                out.append((local[a], local[b]))
    return out


def _meet(S: Any, P: Any, T: Any, Q: Any, reached: Any, n: int) -> Any:
    """Pairs of inputs that meet at a reached output element, one through the
    structure ``S`` of an operand with pattern ``P``, the other through ``T`` and ``Q``."""
    rows = np.flatnonzero(reached)
    if S is DENSE or T is DENSE:
        left = _columns(P) if S is DENSE else _columns((S[rows] @ P))
        right = _columns(Q) if T is DENSE else _columns((T[rows] @ Q))
        return _csr(np.repeat(left, len(right)), np.tile(right, len(left)), (n, n))
    return (S[rows] @ P).T @ (T[rows] @ Q)


def hessian_sparsity(f: Callable[..., Any], *args: Any) -> Any:
    """``hessian_sparsity(f, *args)``: the pattern of the Hessian of scalar ``f``, a
    symmetric SciPy sparse boolean matrix (CSR) that never misses a non-zero.

    Rows and columns are the elements of the differentiated argument leaves, ravelled
    and in order.  Linear operations add nothing; an elementwise nonlinear one makes
    the inputs its output element depends on interact, a product of two tracked
    operands their two sets (see the module's docstring).

    >>> import numpy as np, tracked as tr
    >>> f = lambda x: np.sum(x[1:] * x[:-1]) + np.exp(x[0])
    >>> P = tr.hessian_sparsity(f, np.ones(4))
    >>> P.toarray().astype(int)
    array([[1, 1, 0, 0],
           [1, 0, 1, 0],
           [0, 1, 0, 1],
           [0, 0, 1, 0]])

    The Hessian itself, from a star colouring (3 colours here), eager or on a tape:

    >>> tr.hessian(f, np.zeros(4), sparsity=P).toarray()
    array([[1., 1., 0., 0.],
           [1., 0., 1., 0.],
           [0., 1., 0., 1.],
           [0., 0., 1., 0.]])
    >>> tape = tr.HessianTape(f, np.zeros(4), sparsity='auto')
    >>> tape.coloring.ncolors, tape.hessian(np.ones(4)).nnz
    (3, 7)
    """
    rec = record(f, args, 'hessian_sparsity')
    _warn_guards(rec, 'hessian_sparsity')
    return detect_hessian(rec)
