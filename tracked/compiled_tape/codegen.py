"""Kernels: a program runs as steps of small kernels, dispatched by a tiny VM.

Why not one function per tape: numba's compile time grows much faster than the
size of one function (a 200-statement loop compiles in ~1 s, 200 loops in one
function in ~14 s), and a driver with one call site per step was measured at
~0.1 s per call site.  Instead every step is a call of a *kernel* generated from
an operation signature (the fused operation sequence, operand layout kinds and
dtypes, never sizes, offsets or float constants: those are read at run time from
an integer table ``T`` and a constant table ``C``), and a generated entry (vm.py)
loops over the steps, calling each kernel through its address: kernels are
functions of one C signature, written here in numba's Python subset and built by
LLVM directly (native.py) or, for what that translation does not take, by numba as
``cfunc``s.  A W1-like tape of 1 600 operations needs a handful
of distinct kernels; compile time grows with the number of distinct kernels, i.e.
at most linearly with the tape, and kernels are shared by every tape that uses the
same operations.

Kernel kinds (``Step.kind``):
- ``ew``: a fused elementwise loop (loops.py): a run of elementwise instructions
  of one shape with scalar temporaries; only values needed elsewhere are stored;
  a full ``np.sum``/``np.mean`` of a fused value is accumulated in the same loop,
  and so is the adjoint of a stencil (scatter-adds of ``x[1:]``, ``x[:-1]``).
- ``reduce``: sum/mean/max/min over axes of any strided value.
- ``matmul``: loops for tiny products, BLAS (``np.dot`` into the output) from
  ``BLAS_MIN_FLOPS``: both in one kernel, chosen at run time from the sizes.
- ``coo_matmul``, ``coo_sample``: a sparse matrix (values at COO coordinates) times a
  dense one, and the product of two dense ones read at the coordinates.
- ``fill``, ``guard``; and ``fallback`` (no kernel): an instruction the generator
  cannot compile runs in NumPy between VM segments (the entry returns, Python runs
  it and writes its value into its buffer, the entry resumes) -- per instruction, never
  for the whole tape.

This module holds ``Kernel`` and ``Step``, the constant table, and the kernels of
a fixed form.  A kernel's body sees its arrays ``a0, a1, ...`` (flat, one per
operand), ``T``, ``p`` (where its integer parameters start in ``T``) and ``C``.
"""
import hashlib

import numpy as np

from .buffers import DTYPE_NAMES, dtype_code

__all__ = ['Kernel', 'Step', 'Constants', 'reduce_kernel', 'matmul_kernel', 'coo_matmul_kernel',
           'coo_sample_kernel', 'fill_kernel', 'guard_kernel', 'MAX_NDIM', 'BLAS_MIN_FLOPS',
           'BLAS_MIN_MV', 'T_GEMM', 'T_GEMV']

MAX_NDIM = 4             # loop nests are generated per number of dimensions
BLAS_MIN_FLOPS = 256       # m * k * n from which a product calls BLAS (loops: W4a 1.3x slower)
BLAS_MIN_MV = 256          # m * k from which a matrix-vector product calls BLAS
T_GEMM, T_GEMV = 5, 6      # where T holds the addresses of numba's BLAS helpers (vm.py)


class Kernel:
    """A generated kernel: ``source`` (Python, numba's subset) defines ``name`` (from the
    hash of the source, so equal kernels are shared and cached once); native.py
    translates it to LLVM IR, numba compiles what it does not take; ``arrays`` are its array
    parameters' dtype codes; ``returns``: it returns whether a guard holds;
    ``reassoc``: float accumulations may be reordered (compiled with fastmath).

    Every kernel has one C signature, ``int64 k(void **P, int64 *T, int64 p, double *C)``
    (cache.KERNEL_SIG), so that one VM, compiled once per machine, calls any kernel
    through its address (vm.py).  ``P`` holds the addresses of the arrays; the kernel
    reads the index in ``P`` of its array ``k`` at ``T[p + k]`` and its integer
    parameters after them.  It returns 0 when a guard fails, else 1.
    """

    __slots__ = ('name', 'source', 'arrays', 'returns', 'reassoc')

    def __init__(self, body_lines, arrays, returns=False, reassoc=False, helpers=''):
        head = ['T = carray(T_, (BIG,))', 'C = carray(C_, (BIG,))']
        head += [f'a{k} = carray(P[T[p + {k}]], (BIG,), {DTYPE_NAMES[c]})'
                 for k, c in enumerate(arrays)]
        if arrays:
            head.append(f'p = p + {len(arrays)}')
        body = list(body_lines) if returns else list(body_lines) + ['return 1']
        text = '\n'.join(['def KNAME(P, T_, p, C_):'] + ['    ' + ln for ln in head + body])
        # functions the kernel calls, defined before it: a cfunc compiles when defined
        text = helpers.strip('\n') + '\n\n\n' + text if helpers else text
        self.reassoc = reassoc     # accumulations may be reordered (vectorised sums)
        digest = hashlib.sha1((text + repr(arrays) + repr(reassoc)).encode()).hexdigest()[:16]
        self.name = f'k_{digest}'
        self.source = text.replace('KNAME', self.name)
        self.arrays = tuple(arrays)
        self.returns = returns


class Step:
    """One VM step: ``kernel`` (None: run in Python) called on the arrays at ``slots``
    (one per array parameter, in its dtype's tuple) with ``params`` after them in
    ``T``.  ``kind`` is 'ew', 'reduce', 'matmul', 'fill', 'guard', 'fallback',
    'convert' (an integer input to float64 in NumPy) or 'pyguard'; ``instrs`` the
    instructions it computes; ``guard`` the index of the program guard it checks
    (-1: none)."""

    __slots__ = ('kind', 'kernel', 'slots', 'params', 'instrs', 'guard')

    def __init__(self, kind, kernel=None, slots=(), params=(), instrs=(), guard=-1):
        self.kind = kind
        self.kernel = kernel
        self.slots = list(slots)          # per array parameter: slot in its dtype's tuple
        self.params = list(params)        # ints after the slots in T
        self.instrs = list(instrs)
        self.guard = guard


class Constants:
    """The float table ``C`` that kernels read constants from, filled while planning.

    >>> c = Constants()
    >>> c.add(1.5), c.add(0), c.values
    (0, 1, [1.5, 0.0])
    """

    def __init__(self):
        self.values = []

    def add(self, v):
        """Append ``v``; its index in ``C``."""
        self.values.append(float(v))
        return len(self.values) - 1


# --------------------------------------------------------------------------
# Kernels of a fixed form
# --------------------------------------------------------------------------

def reduce_kernel(op, ndim, dtype_in, dtype_out):
    """``op`` ('sum', 'mean', 'max', 'min') of an ``ndim``-d strided array into a
    contiguous one.  ``T``: the input's sizes, offset and strides, the output's offset
    and strides per input axis (0 on reduced axes), the output size, the count.
    Max and min propagate NaN, as NumPy does."""
    arrays = [dtype_code(dtype_in), dtype_code(dtype_out)]
    L = []
    for d in range(ndim):
        L.append(f'n{d} = T[p + {d}]')
    q = ndim
    L.append(f'fa = T[p + {q}]')
    for d in range(ndim):
        L.append(f'sa{d} = T[p + {q + 1 + d}]')
    q += 1 + ndim
    L.append(f'fo = T[p + {q}]')
    for d in range(ndim):
        L.append(f'so{d} = T[p + {q + 1 + d}]')
    q += 1 + ndim
    L.append(f'm = T[p + {q}]')
    L.append(f'cnt = T[p + {q + 1}]')
    init = {'sum': '0', 'mean': '0', 'max': '-np.inf', 'min': 'np.inf'}[op]
    if np.dtype(dtype_out).kind == 'f' and op in ('sum', 'mean'):
        init = '0.0'
    L.append('for j in range(m):')
    L.append(f'    a1[U(fo + j)] = {init}')
    ia = 'U(fa' + ''.join(f' + i{d} * sa{d}' for d in range(ndim)) + ')'
    io = 'U(fo' + ''.join(f' + i{d} * so{d}' for d in range(ndim)) + ')'
    for d in range(ndim):
        L.append('    ' * d + f'for i{d} in range(n{d}):')
    ind = '    ' * ndim
    if op in ('sum', 'mean'):
        L.append(ind + f'a1[{io}] += a0[{ia}]')
    else:
        cmp = '>' if op == 'max' else '<'
        L.append(ind + f'v = a0[{ia}]')
        L.append(ind + f'if v {cmp} a1[{io}] or v != v:')
        L.append(ind + f'    a1[{io}] = v')
    if op == 'mean':
        L.append('for j in range(m):')
        L.append('    a1[U(fo + j)] /= cnt')
    return Kernel(L, arrays, reassoc=op in ('sum', 'mean'))


def matmul_kernel(variant, blas='', code='F'):
    """``A @ B`` into a contiguous ``m x n`` output, of dtype ``code`` ('F' or 'f').  ``T``:
    m, k, n, then offset and two strides of A, of B, the output's offset, and whether
    to call BLAS.  ``variant`` (see patterns.try_matmul) is the loop form: 'mvc', 'mv'
    (n == 1), 'dotc', 'loopc' or 'loop'.  ``blas`` ('NN', 'TN', 'NV', 'VT', ...: each
    operand a C matrix, the transpose of one, or a contiguous vector) adds a call of
    BLAS's gemm or gemv taken when ``T`` says so: the choice between loops and BLAS is
    made from the sizes at run time, so one kernel serves every size."""
    arrays = [code, code, code]
    L = ['m = T[p]', 'k = T[p + 1]', 'n = T[p + 2]',
         'fa = T[p + 3]', 'sa0 = T[p + 4]', 'sa1 = T[p + 5]',
         'fb = T[p + 6]', 'sb0 = T[p + 7]', 'sb1 = T[p + 8]', 'fo = T[p + 9]']
    helpers = ''
    if blas:
        helpers = _BLAS
        kind = ord('d' if code == 'F' else 's')
        ta, tb = blas
        L.append('if T[p + 10]:')             # 78, 84: 'N', 'T'
        if 'V' not in blas:            # row-major C = A B is column-major C' = B' A'
            opb, ldb = ('78', 'n') if tb == 'N' else ('84', 'k')
            opa, lda = ('78', 'k') if ta == 'N' else ('84', 'm')
            L.append(f'    blas_gemm(T[{T_GEMM}], {kind}, {opb}, {opa}, n, m, k, a1, fb, {ldb}, '
                     f'a0, fa, {lda}, a2, fo, n)')
        elif tb == 'V':                # y = A x: A's memory is A' (N) or A (T) column-major
            L.append(f"    blas_gemv(T[{T_GEMV}], {kind}, 84, k, m, a0, fa, k, a1, fb, a2, fo)"
                     if ta == 'N' else
                     f"    blas_gemv(T[{T_GEMV}], {kind}, 78, m, k, a0, fa, m, a1, fb, a2, fo)")
        else:                          # y = x B = B' x
            L.append(f"    blas_gemv(T[{T_GEMV}], {kind}, 78, n, k, a1, fb, n, a0, fa, a2, fo)"
                     if tb == 'N' else
                     f"    blas_gemv(T[{T_GEMV}], {kind}, 84, k, n, a1, fb, k, a0, fa, a2, fo)")
        L.append('    return 1')
    if variant == 'mvc':           # rows of A and b contiguous: slices, vectorisable
        L += ['vb = a1[fb:fb + k]',
              'for i in range(m):',
              '    ra = a0[fa + i * sa0:fa + i * sa0 + k]',
              '    acc = 0.0',
              '    for l in range(k):',
              '        acc += ra[l] * vb[l]',
              '    a2[U(fo + i)] = acc']
    elif variant == 'dotc':        # rows of A and columns of B contiguous
        L += ['for i in range(m):',
              '    ra = a0[fa + i * sa0:fa + i * sa0 + k]',
              '    for j in range(n):',
              '        cb = a1[fb + j * sb1:fb + j * sb1 + k]',
              '        acc = 0.0',
              '        for l in range(k):',
              '            acc += ra[l] * cb[l]',
              '        a2[U(fo + i * n + j)] = acc']
    elif variant == 'loopc':       # rows of B contiguous: axpy on rows
        L += ['for i in range(m):',
              '    ro = a2[fo + i * n:fo + i * n + n]',
              '    for j in range(n):',
              '        ro[j] = 0.0',
              '    for l in range(k):',
              '        av = a0[U(fa + i * sa0 + l * sa1)]',
              '        rb = a1[fb + l * sb0:fb + l * sb0 + n]',
              '        for j in range(n):',
              '            ro[j] += av * rb[j]']
    elif variant == 'mv':
        L += ['for i in range(m):',
              '    acc = 0.0',
              '    for l in range(k):',
              '        acc += a0[U(fa + i * sa0 + l * sa1)] * a1[U(fb + l * sb0)]',
              '    a2[U(fo + i)] = acc']
    else:
        L += ['for i in range(m):',
              '    for j in range(n):',
              '        a2[U(fo + i * n + j)] = 0.0',
              '    for l in range(k):',
              '        av = a0[U(fa + i * sa0 + l * sa1)]',
              '        for j in range(n):',
              '            a2[U(fo + i * n + j)] += av * a1[U(fb + l * sb0 + j * sb1)]']
    return Kernel(L, arrays, reassoc=True, helpers=helpers)


# BLAS through numba's helpers (numba_xxgemm, numba_xxgemv: Fortran BLAS from SciPy),
# called at the addresses in T[T_GEMM] and T[T_GEMV].  A kernel calling np.dot took
# ~0.3 s of CPU more to compile (numba's np.dot checks and wraps); this takes nothing.
_BLAS = '''
from llvmlite import ir as _ir
from numba.core import cgutils as _cg
from numba.extending import intrinsic


def _at(context, builder, aty, arr, off):
    a = context.make_array(aty)(context, builder, arr)
    return builder.bitcast(builder.gep(a.data, [off]), _ir.IntType(8).as_pointer())


def _scalars(context, builder, aty):
    lt = context.get_value_type(aty.dtype)
    return (_cg.alloca_once_value(builder, lt(1.0)), _cg.alloca_once_value(builder, lt(0.0)))


@intrinsic
def blas_gemm(typingctx, fn, kind, ta, tb, m, n, k, A, ao, lda, B, bo, ldb, C, co, ldc):
    \"\"\"numba_xxgemm(kind, ta, tb, m, n, k, 1, A + ao, lda, B + bo, ldb, 0, C + co, ldc).\"\"\"
    def codegen(context, builder, sig, args):
        i8, i64, ptr = _ir.IntType(8), _ir.IntType(64), _ir.IntType(8).as_pointer()
        fnty = _ir.FunctionType(_ir.IntType(32), [i8, i8, i8, i64, i64, i64, ptr, ptr, i64,
                                                  ptr, i64, ptr, ptr, i64])
        one, zero = _scalars(context, builder, sig.args[7])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        c8 = [builder.trunc(v, i8) for v in args[1:4]]
        builder.call(f, c8 + list(args[4:7]) + [
            builder.bitcast(one, ptr), _at(context, builder, sig.args[7], args[7], args[8]),
            args[9], _at(context, builder, sig.args[10], args[10], args[11]), args[12],
            builder.bitcast(zero, ptr), _at(context, builder, sig.args[13], args[13], args[14]),
            args[15]])
        return context.get_dummy_value()
    return types.void(fn, kind, ta, tb, m, n, k, A, ao, lda, B, bo, ldb, C, co, ldc), codegen


@intrinsic
def blas_gemv(typingctx, fn, kind, trans, m, n, A, ao, lda, X, xo, Y, yo):
    \"\"\"numba_xxgemv(kind, trans, m, n, 1, A + ao, lda, X + xo, 0, Y + yo).\"\"\"
    def codegen(context, builder, sig, args):
        i8, i64, ptr = _ir.IntType(8), _ir.IntType(64), _ir.IntType(8).as_pointer()
        fnty = _ir.FunctionType(_ir.IntType(32), [i8, i8, i64, i64, ptr, ptr, i64, ptr, ptr,
                                                  ptr])
        one, zero = _scalars(context, builder, sig.args[5])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        c8 = [builder.trunc(v, i8) for v in args[1:3]]
        builder.call(f, c8 + list(args[3:5]) + [
            builder.bitcast(one, ptr), _at(context, builder, sig.args[5], args[5], args[6]),
            args[7], _at(context, builder, sig.args[8], args[8], args[9]),
            builder.bitcast(zero, ptr), _at(context, builder, sig.args[10], args[10], args[11])])
        return context.get_dummy_value()
    return types.void(fn, kind, trans, m, n, A, ao, lda, X, xo, Y, yo), codegen
'''


def coo_matmul_kernel(code):
    """``A @ x`` for a sparse ``A`` given as values at COO coordinates, into a contiguous
    ``m x k`` output of dtype ``code``: zeroed, then each stored value times its row of
    ``x`` added to its row (repeated coordinates add up, in SciPy's order).  ``T``: nnz,
    k, m, the values' offset and stride, ``x``'s offset and two strides, the offsets of
    the int64 rows and columns, the output's offset."""
    L = ['nnz = T[p]', 'k = T[p + 1]', 'm = T[p + 2]', 'fd = T[p + 3]', 'sd = T[p + 4]',
         'fx = T[p + 5]', 'sx0 = T[p + 6]', 'sx1 = T[p + 7]', 'fr = T[p + 8]',
         'fc = T[p + 9]', 'fo = T[p + 10]',
         'for j in range(m * k):',
         '    a4[U(fo + j)] = 0.0',
         'for q in range(nnz):',
         '    r = a2[U(fr + q)]',
         '    c = a3[U(fc + q)]',
         '    v = a0[U(fd + q * sd)]',
         '    for j in range(k):',
         '        a4[U(fo + r * k + j)] += v * a1[U(fx + c * sx0 + j * sx1)]']
    return Kernel(L, [code, code, 'I', 'I', code])


def coo_sample_kernel(code):
    """``sum_j u[row, j] * v[col, j]`` for each of ``nnz`` coordinates into a contiguous
    vector of dtype ``code``.  ``T``: nnz, k, the offset and two strides of ``u``, of
    ``v``, the offsets of the int64 rows and columns, the output's offset."""
    L = ['nnz = T[p]', 'k = T[p + 1]', 'fu = T[p + 2]', 'su0 = T[p + 3]', 'su1 = T[p + 4]',
         'fv = T[p + 5]', 'sv0 = T[p + 6]', 'sv1 = T[p + 7]', 'fr = T[p + 8]',
         'fc = T[p + 9]', 'fo = T[p + 10]',
         'for q in range(nnz):',
         '    r = a2[U(fr + q)]',
         '    c = a3[U(fc + q)]',
         '    acc = 0.0',
         '    for j in range(k):',
         '        acc += a0[U(fu + r * su0 + j * su1)] * a1[U(fv + c * sv0 + j * sv1)]',
         '    a4[U(fo + q)] = acc']
    return Kernel(L, [code, code, 'I', 'I', code])


def fill_kernel(code):
    """Fill a contiguous region with a constant.  ``T``: its index in C, offset, size."""
    return Kernel(['v = C[T[p]]', 'fo = T[p + 1]', 'm = T[p + 2]',
                   'for j in range(m):', '    a0[U(fo + j)] = v'], [code])


def guard_kernel(kind, code):
    """A guard check returning whether it holds: 'mask-count' (number of True entries
    of a contiguous bool region), 'bool' (truth of a scalar), 'eq' (a scalar equals its
    recorded value, NaN equal to NaN).  ``T``: size or 0, offset, count or index in C."""
    if kind == 'mask-count':
        L = ['n = T[p]', 'fo = T[p + 1]', 'c = 0',
             'for j in range(n):', '    if a0[U(fo + j)]:', '        c += 1',
             'return 1 if c == T[p + 2] else 0']
    elif kind == 'bool':
        L = ['v = a0[U(T[p + 1])]', 'return 1 if (v != 0) == (C[T[p + 2]] != 0) else 0']
    else:
        L = ['v = a0[U(T[p + 1])]', 'r = C[T[p + 2]]',
             'return 1 if v == r or (v != v and r != r) else 0']
    return Kernel(L, [code], returns=True)
