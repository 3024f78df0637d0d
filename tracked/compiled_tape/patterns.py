"""Patterns: instructions that become one kernel step of a fixed form, or no step.

Each ``try_*(planner, ins)`` returns the instruction's steps (a list, empty when
it needs none) or, when the pattern does not apply, a string saying why: the
reason ``tape.fallbacks`` gives when nothing else takes the instruction.  A
pattern may close the planner's open fusion group first, so that its operands are
in memory, whether or not it then applies.

- ``try_view``: views (and copies a view could replace) get a storage, no step.
- ``try_reduce``: sum/mean/max/min over axes; a full sum or mean of a value the
  open group computes joins the group's loop instead.
- ``try_matmul``: products of 1-d and 2-d float operands, by loops or BLAS.
- ``try_coo_matmul``, ``try_coo_sample``: a sparse matrix's values at COO coordinates
  times a dense operand, and its adjoint in the values (``tracked.rules.scipy_sparse``).
- ``try_scatter``: scatter-adds are planned as scatter chains (chains.py); one
  that is not a chain member only gets its reason here.

``PATTERNS`` maps the ``kernel`` tags of the registry to them.
"""
import functools

import numpy as np

from .buffers import c_strides, dtype_code, probe_view
from .chains import basic_index, scatter_parts
from .codegen import (BLAS_MIN_FLOPS, BLAS_MIN_MV, MAX_NDIM, Step, coo_matmul_kernel,
                      coo_sample_kernel, matmul_kernel, reduce_kernel)
from .record import Ref

__all__ = ['is_viewish', 'try_view', 'try_reduce', 'try_matmul', 'try_coo_matmul',
           'try_coo_sample', 'try_scatter', 'PATTERNS']


# --------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------

def _has_ref(a):
    return type(a) is Ref or (type(a) in (tuple, list) and any(type(b) is Ref for b in a))


def is_viewish(ins, instrs):
    """Whether ``ins`` may be a view of its first argument: a view primitive, an index,
    a copy, or a cast to the dtype it has."""
    prim = ins.prim
    return (prim.view or prim.kernel in ('getitem', 'copy') or (
        prim.kernel == 'astype' and ins.args and ins.dtype == _dtype(ins.args[0], instrs)))


def _dtype(a, instrs):
    return instrs[a.i].dtype if type(a) is Ref else np.asarray(a).dtype


def try_view(P, ins):
    """A view of the first argument's storage, found by probing (buffers.probe_view)."""
    if not ins.args or type(ins.args[0]) is not Ref:
        return 'a view of a constant'
    if any(_has_ref(a) for a in ins.args[1:]):
        return 'its index or shape is a recorded value'
    p = ins.args[0].i
    P.close_if_computing(p)
    parent = P.mem.storages[p]
    if parent is None:
        return f'operand %{p} is not in memory'
    if parent.dtype != ins.dtype:            # np.real of complex: strides of another dtype
        return f'a {ins.dtype} view of {parent.dtype} memory'
    kernel = ins.prim.kernel
    if kernel == 'copy':
        return 'a copy'       # a loop computes it (fusion.py), after the group just closed
    if kernel == 'astype':
        P.mem.storages[ins.i] = parent       # a cast to its own dtype
        return []
    s = probe_view(ins.fn, ins.args, ins.kwargs, parent, ins.shape)
    if s is None:
        if kernel == 'getitem' and not basic_index(ins.args[1]):
            return 'an index with arrays: a gather, not a view'
        return 'not a strided view of its operand (a copy that no view can replace)'
    P.mem.storages[ins.i] = s
    return []


# --------------------------------------------------------------------------
# Reductions and products
# --------------------------------------------------------------------------

def reduce_axes(ins):
    """``(axis, keepdims)`` of a reduction instruction; None when it has other options.

    ``axis`` is as given: None, an int or a tuple.
    """
    args, kw = ins.args, ins.kwargs
    if len(args) > 2 or set(kw) - {'axis', 'keepdims'}:
        return None
    axis = args[1] if len(args) == 2 else kw.get('axis')
    if type(axis) is Ref:
        return None
    return axis, bool(kw.get('keepdims', False))


def try_reduce(P, ins):
    """``sum``/``mean``/``max``/``min`` (the ``kernel`` tag) over some axes."""
    op = ins.prim.kernel
    parsed = reduce_axes(ins)
    x = ins.args[0]
    if parsed is None:
        return 'options other than axis and keepdims'
    if type(x) is not Ref:
        return 'a reduction of a constant'
    xi = P.instrs[x.i]
    for dtype in (xi.dtype, ins.dtype):
        if dtype_code(dtype) is None:
            return f'{dtype}: no kernel dtype'
    if len(xi.shape) > MAX_NDIM:
        return f'{len(xi.shape)}-d: kernels take at most {MAX_NDIM} dimensions'
    if op in ('max', 'min') and xi.dtype.kind != 'f':
        return f'{op} of {xi.dtype}: only float extrema have a kernel'
    axis = parsed[0]
    g = P.group
    full = ins.shape == () and (axis is None or len(xi.shape) <= 1)
    if full and op in ('sum', 'mean') and g is not None and x.i in g.members and \
            x.i not in g.pending and xi.shape == g.shape:
        g.reductions.append((ins, x.i, op))  # accumulated in the loop computing x
        g.members.add(ins.i)
        g.pending.add(ins.i)
        return []
    P.close_if_computing(x.i)
    xs = P.mem.storages[x.i]
    if xs is None:
        return f'operand %{x.i} is not in memory'
    P.close()
    nd = len(xs.shape)
    axes = tuple(range(nd)) if axis is None else tuple(
        a % nd for a in (axis if isinstance(axis, tuple) else (axis,)))
    out = P.mem.alloc(ins.i)
    # output strides per input axis (0 on reduced axes), output contiguous
    kept = [d for d in range(nd) if d not in axes]
    ostr = [0] * nd
    for d, s in zip(kept, c_strides(tuple(xs.shape[d] for d in kept))):
        ostr[d] = s if xs.shape[d] != 1 else 0
    cnt = int(np.prod([xs.shape[d] for d in axes], dtype=np.int64)) if axes else 1
    params = list(xs.shape) + [xs.off] + list(xs.strides) + [out.off] + ostr + \
        [out.size, max(cnt, 1)]
    return [Step('reduce', reduce_kernel(op, nd, xs.dtype, ins.dtype), [xs.slot, out.slot],
                 params, [ins.i])]


@functools.cache
def have_blas():
    """Whether numba's BLAS helpers can run: they call SciPy's Fortran BLAS
    (``scipy.linalg.cython_blas``), an optional dependency of tracked."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401
    except ImportError:
        return False
    return True



def _matrix_storages(P, ins, operands):
    """The storages of a product's 1-d or 2-d operands of ``ins``'s dtype (recorded values
    in memory, constants placed), or why there are none."""
    sts = []
    for a in operands:
        if type(a) is Ref:
            ai = P.instrs[a.i]
            if ai.dtype != ins.dtype or len(ai.shape) not in (1, 2):
                return f'operand %{a.i} is {len(ai.shape)}-d {ai.dtype}: needs 1-d or 2-d ' \
                       f'{ins.dtype}'
            P.close_if_computing(a.i)
            s = P.mem.storages[a.i]
            if s is None:
                return f'operand %{a.i} is not in memory'
        else:
            a = np.asarray(a)
            if a.dtype != ins.dtype or a.ndim not in (1, 2):
                return f'a {a.ndim}-d {a.dtype} constant: needs 1-d or 2-d {ins.dtype}'
            s = P.mem.const(a, scalar_ok=False)
        sts.append(s)
    return sts

def try_matmul(P, ins):
    """``A @ B`` of 1-d or 2-d float64 or float32 operands: a loop form chosen from the
    operands' strides, and BLAS (gemm or gemv through numba's helpers) for large products
    of (transposed) C matrices and contiguous vectors.  Without SciPy a large product is
    left to NumPy."""
    if ins.kwargs:
        return 'keyword arguments: ' + ', '.join(ins.kwargs)
    if len(ins.args) != 2 or ins.dtype not in _MATMUL_DTYPES:
        return f'{ins.dtype} product: only float64 and float32 products have a kernel'
    sts = _matrix_storages(P, ins, ins.args)
    if isinstance(sts, str):
        return sts
    P.close()
    A, B = sts
    if len(A.shape) == 2:
        (m, k), (sa0, sa1) = A.shape, A.strides
    else:
        m, k, sa0, sa1 = 1, A.shape[0], 0, A.strides[0]
    if len(B.shape) == 2:
        n, (sb0, sb1) = B.shape[1], B.strides
    else:
        n, sb0, sb1 = 1, B.strides[0], 0
    variant = _matmul_variant(m, k, n, sa1, sb0, sb1)
    blas = _blas_flag(A) + _blas_flag(B)
    if len(blas) != 2 or blas == 'VV':
        blas = ''
    large = bool(blas) and m * n * k >= (BLAS_MIN_FLOPS if 'V' not in blas else BLAS_MIN_MV)
    if large and not have_blas():
        # numba's BLAS helpers call SciPy's; NumPy's own BLAS beats our loops on this size
        return 'a large product without SciPy (numba reaches BLAS through it): ' \
               'pip install scipy to run it in the compiled tape'
    if not have_blas():
        blas = ''
    out = P.mem.alloc(ins.i)
    params = [m, k, n, A.off, sa0, sa1, B.off, sb0, sb1, out.off, int(large)]
    return [Step('matmul', matmul_kernel(variant, blas, dtype_code(ins.dtype)),
                 [A.slot, B.slot, out.slot], params, [ins.i])]


_MATMUL_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _matmul_variant(m, k, n, sa1, sb0, sb1):
    """The loop form of the matmul kernel (codegen.matmul_kernel) for these strides."""
    rows_a = sa1 == 1 or k == 1              # rows of A contiguous
    cols_b = sb0 == 1 or k == 1              # columns of B contiguous
    if n == 1:
        return 'mvc' if rows_a and cols_b else 'mv'
    if rows_a and cols_b:
        return 'dotc'
    if sb1 == 1:
        return 'loopc'
    return 'loop'


def _blas_flag(s):
    """'N' for a C-contiguous matrix, 'T' for the transpose of one, 'V' for a contiguous
    vector, else ''."""
    if len(s.shape) == 1:
        return 'V' if s.strides[0] == 1 or s.shape[0] == 1 else ''
    r, c = s.shape
    if s.strides == (c, 1) or (r == 1 and s.strides[1] == 1) or (c == 1 and s.strides[0] == 1):
        return 'N'
    if s.strides == (1, r):
        return 'T'
    return ''


def _coo_operands(P, ins, dense, coords):
    """Storages of a COO product's dense operands (Refs or constants of the result's
    float dtype) and int64 constant coordinates; a string saying why not."""
    if ins.kwargs:
        return 'keyword arguments: ' + ', '.join(ins.kwargs)
    if ins.dtype not in _MATMUL_DTYPES:
        return f'a {ins.dtype} product: only float64 and float32 products have a kernel'
    idx = []
    for a in coords:
        if type(a) is Ref or np.asarray(a).dtype != np.int64 or np.ndim(a) != 1:
            return 'coordinates that are not 1-d int64 constants'
    sts = _matrix_storages(P, ins, dense)
    if isinstance(sts, str):
        return sts
    idx = [P.mem.const(a, scalar_ok=False) for a in coords]
    P.close()
    return sts, idx


def _rows(s):
    """(columns, row stride, column stride) of a 1-d or 2-d operand's storage."""
    return (1, s.strides[0], 0) if len(s.shape) == 1 else (s.shape[1], *s.strides)


def try_coo_matmul(P, ins):
    """``coo_matmul(data, x, row, col, nrows)``: ``A @ x`` with ``A``'s float values at
    constant int64 coordinates, ``x`` 1-d or 2-d."""
    if len(ins.args) != 5:
        return 'arguments other than (data, x, row, col, nrows)'
    data, x, row, col, nrows = ins.args
    found = _coo_operands(P, ins, (data, x), (row, col))
    if type(found) is str:
        return found
    (d, xs), (r, c) = found
    if len(d.shape) != 1:
        return 'values that are not 1-d'
    k, sx0, sx1 = _rows(xs)
    out = P.mem.alloc(ins.i)
    params = [d.shape[0], k, int(nrows), d.off, d.strides[0], xs.off, sx0, sx1, r.off, c.off,
              out.off]
    return [Step('coo_matmul', coo_matmul_kernel(dtype_code(ins.dtype)),
                 [d.slot, xs.slot, r.slot, c.slot, out.slot], params, [ins.i])]


def try_coo_sample(P, ins):
    """``coo_sample(u, v, row, col)``: ``sum_j u[row, j] * v[col, j]`` per coordinate."""
    if len(ins.args) != 4:
        return 'arguments other than (u, v, row, col)'
    u, v, row, col = ins.args
    found = _coo_operands(P, ins, (u, v), (row, col))
    if type(found) is str:
        return found
    (us, vs), (r, c) = found
    if len(us.shape) != len(vs.shape):
        return 'operands of different dimensions'
    k, su0, su1 = _rows(us)
    _, sv0, sv1 = _rows(vs)
    out = P.mem.alloc(ins.i)
    params = [r.shape[0], k, us.off, su0, su1, vs.off, sv0, sv1, r.off, c.off, out.off]
    return [Step('coo_sample', coo_sample_kernel(dtype_code(ins.dtype)),
                 [us.slot, vs.slot, r.slot, c.slot, out.slot], params, [ins.i])]


def try_scatter(P, ins):
    """A scatter-add the chains did not take: always declines, saying why."""
    return scatter_parts(ins, P.instrs)


PATTERNS = {'sum': try_reduce, 'mean': try_reduce, 'max': try_reduce, 'min': try_reduce,
            'matmul': try_matmul, 'coo_matmul': try_coo_matmul, 'coo_sample': try_coo_sample,
            'scatter_add': try_scatter}
