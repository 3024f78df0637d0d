"""SciPy's sparse matrices: the sparse-dense product and the sparse solvers, as
primitives on a matrix's stored values.

A sparse matrix reaches these rules as COO coordinates: ``data`` (the stored values,
tracked or plain), ``row`` and ``col`` (integer arrays: constants of the tape) and its
number of rows.  Repeated coordinates add up, as SciPy sums duplicates.  COO rather
than CSR: the transpose is the same arrays with ``row`` and ``col`` swapped, and every
format keeps its ``data`` in its own order (CSR's and CSC's ``indptr`` expand to rows
or columns), so the gradient of the stored values comes back in the user's order.

- ``coo_matmul(data, x, row, col, nrows)``: ``A @ x`` for a dense ``x`` of one or two
  dimensions.  Linear in ``data`` and in ``x`` each; the pullback for ``x`` is the
  product with ``A^H`` (this primitive, ``row`` and ``col`` swapped), the one for
  ``data`` the sampled product ``sum_j g[row, j] conj(x[col, j])``:
- ``coo_sample(u, v, row, col)``: that sampled product, ``u v^T`` at the coordinates,
  whose pullbacks are products again.  The two are closed under pullbacks, so
  derivatives nest to any order.
- ``coo_solve(data, b, row, col, n, trans)``: ``op(A)^{-1} b`` by SciPy's SuperLU.
  The cotangent of ``b`` is the adjoint solve ``op(A)^{-H} g``, the one of ``data`` is
  ``-(adjoint)[row] * conj(x)[col]`` over the stored pattern.  The factorisation is
  cached by content (``factor``), so the adjoint solve, ``splu(...).solve`` and a
  replay at the same values reuse it; a replay at new values factors them (a factor
  held as a constant would freeze the recording's matrix).
- ``coo_krylov(data, b, row, col, n, method)``: ``cg``, ``gmres`` or ``minres``,
  differentiated implicitly at the solution they return, as if it were exact: the
  adjoint is the same method on ``A^H`` (``cg`` and ``minres`` assume ``A`` Hermitian,
  as SciPy does), so gradients are as accurate as the solver's tolerances.

Compiled tapes compute both products with numba kernels (``kernel='coo_matmul'``,
``'coo_sample'``: float64 and float32) and run the solvers in SciPy, a step of their
own (SuperLU and the Krylov solvers are compiled code already).  Imported by
``tracked.scipy.sparse`` only: ``import tracked`` does not import ``scipy.sparse``.
"""
import hashlib
import threading
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..registry import defvjp
from ..dispatch import call
from .matrices import conj, is_complex

__all__ = ['coo_matmul', 'coo_sample', 'coo_solve', 'coo_krylov', 'matmul', 'sample', 'solve',
           'krylov', 'factor']


# --------------------------------------------------------------------------
# A @ x
# --------------------------------------------------------------------------

def coo_matmul(data, x, row, col, nrows):
    """The forward of ``matmul``, on plain arrays."""
    return sp.coo_array((data, (row, col)), shape=(nrows, np.shape(x)[0])) @ x


def matmul(data, x, row, col, nrows):
    """``A @ x`` for the ``nrows``-row matrix with ``data`` at ``(row, col)``; ``x`` dense,
    of one or two dimensions; differentiable in ``data`` and ``x``.

    >>> import numpy as np
    >>> matmul(np.array([2.0, 3.0]), np.array([1.0, 10.0]), np.array([0, 1]), np.array([1, 0]), 2)
    array([20.,  3.])
    """
    return call(coo_matmul, data, x, row, col, nrows)


def coo_sample(u, v, row, col):
    """The forward of ``sample``, on plain arrays."""
    u, v = np.asarray(u), np.asarray(v)
    if u.ndim == 1:
        return u[row] * v[col]
    return np.einsum('ij,ij->i', u[row], v[col])


def sample(u, v, row, col):
    """``sum_j u[row, j] * v[col, j]`` (``u[row] * v[col]`` for vectors): the product
    ``u v^T`` read at the coordinates only, as a vector over them; differentiable in
    ``u`` and ``v``.

    >>> import numpy as np
    >>> sample(np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0, 1]), np.array([1, 1]))
    array([4., 8.])
    """
    return call(coo_sample, u, v, row, col)


def _sample_vjp_u(g, ans, u, v, row, col):
    return matmul(g, conj(v), row, col, np.shape(u)[0])


def _sample_vjp_v(g, ans, u, v, row, col):
    return matmul(g, conj(u), col, row, np.shape(v)[0])


defvjp(coo_sample, _sample_vjp_u, _sample_vjp_v, None, None,
       name='scipy.sparse sampled product', linear='each', kernel='coo_sample')


def _matmul_vjp_data(g, ans, data, x, row, col, nrows):
    return sample(g, conj(x), row, col)


def _matmul_vjp_x(g, ans, data, x, row, col, nrows):
    return matmul(conj(data), g, col, row, np.shape(x)[0])


defvjp(coo_matmul, _matmul_vjp_data, _matmul_vjp_x, None, None, None,
       name='scipy.sparse product (A @ x)', linear='each', kernel='coo_matmul')


# --------------------------------------------------------------------------
# Direct solves: SuperLU, factorisations cached by content
# --------------------------------------------------------------------------

_FACTORS: OrderedDict = OrderedDict()
_FACTORS_LOCK = threading.Lock()
_MAX_FACTORS = 4          # a solve and its adjoint, repeated solves: the latest few matrices


def factor(data, row, col, n):
    """SciPy's ``splu`` of the square matrix with plain ``data`` at ``(row, col)``, from a
    small cache keyed by the arrays' contents: a pullback's adjoint solve and repeated
    solves at the same values factor once.

    >>> import numpy as np
    >>> factor(np.array([2.0, 4.0]), np.array([0, 1]), np.array([0, 1]), 2).solve(np.ones(2))
    array([0.5 , 0.25])
    """
    digest = hashlib.blake2b(digest_size=20)
    for a in (data, row, col):
        digest.update(a.dtype.str.encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    key = (n, digest.digest())
    with _FACTORS_LOCK:
        lu = _FACTORS.get(key)
        if lu is not None:
            _FACTORS.move_to_end(key)
            return lu
    lu = spla.splu(sp.csc_array((data, (row, col)), shape=(n, n)))
    with _FACTORS_LOCK:
        _FACTORS[key] = lu
        while len(_FACTORS) > _MAX_FACTORS:
            _FACTORS.popitem(last=False)
    return lu


def coo_solve(data, b, row, col, n, trans='N'):
    """The forward of ``solve``, on plain arrays."""
    b = np.asarray(b)
    dtype = np.result_type(data, b, np.float32)
    x = factor(np.asarray(data, dtype), np.asarray(row), np.asarray(col), n).solve(
        b.astype(dtype, copy=False), trans=trans)
    return x


def solve(data, b, row, col, n, trans='N'):
    """``op(A)^{-1} b`` (``trans``: ``'N'`` ``A``, ``'T'`` its transpose, ``'H'`` its
    conjugate transpose) for the square ``n``-row matrix ``A`` with ``data`` at
    ``(row, col)``; ``b`` of one or two dimensions; differentiable in ``data`` and ``b``.

    >>> import numpy as np
    >>> solve(np.array([2.0, 4.0]), np.array([2.0, 2.0]), np.array([0, 1]), np.array([0, 1]), 2)
    array([1. , 0.5])
    """
    return call(coo_solve, data, b, row, col, n, trans)


def _solve_adjoint(g, data, row, col, n, trans):
    """``op(A)^{-H} g``: the cotangent of ``b``."""
    if trans == 'N':
        return solve(data, g, row, col, n, 'H')
    if trans == 'H':
        return solve(data, g, row, col, n, 'N')
    if is_complex(data):                      # (A^T)^{-H} = conj(A)^{-1}
        return conj(solve(data, conj(g), row, col, n, 'N'))
    return solve(data, g, row, col, n, 'N')


def _solve_vjp_b(g, ans, data, b, row, col, n, trans='N'):
    return _solve_adjoint(g, data, row, col, n, trans)


def _solve_vjp_data(g, ans, data, b, row, col, n, trans='N'):
    adj = _solve_adjoint(g, data, row, col, n, trans)
    if trans == 'N':                            # d(A x) = dA x: dA's cotangent is -adj x^H
        return -sample(adj, conj(ans), row, col)
    if trans == 'T':
        return -sample(adj, conj(ans), col, row)
    return -sample(conj(adj), ans, col, row)


def _solve_jvp(tangents, ans, data, b, row, col, n, trans='N'):
    td, tb = tangents[0], tangents[1]
    rhs = tb
    if td is not None:
        if trans == 'N':
            dm = matmul(td, ans, row, col, n)
        else:
            dm = matmul(td if trans == 'T' else conj(td), ans, col, row, n)
        rhs = -dm if rhs is None else rhs - dm
    return solve(data, rhs, row, col, n, trans)


defvjp(coo_solve, _solve_vjp_data, _solve_vjp_b, None, None, None, None,
       name='scipy.sparse.linalg.spsolve', jvp=_solve_jvp)


# --------------------------------------------------------------------------
# Krylov solvers, differentiated at their solution
# --------------------------------------------------------------------------

_KRYLOV = {'cg': spla.cg, 'gmres': spla.gmres, 'minres': spla.minres}
_FORWARD_ONLY = ('x0', 'callback', 'callback_type', 'show', 'check')


def coo_krylov(data, b, row, col, n, method, **options):
    """The forward of ``krylov``, on plain arrays: ``(x, info)``."""
    a = sp.csr_array((data, (row, col)), shape=(n, n))
    x, info = _KRYLOV[method](a, b, **options)
    return x, int(info)


def krylov(data, b, row, col, n, method, **options):
    """``(x, info)`` of SciPy's ``method`` (``'cg'``, ``'gmres'`` or ``'minres'``) for
    ``A x = b``, with ``A`` the ``n``-row matrix with ``data`` at ``(row, col)``; ``x``
    differentiable in ``data`` and ``b`` (at the solution, see the module docstring).

    >>> import numpy as np
    >>> x, info = krylov(np.array([2.0, 4.0]), np.array([2.0, 2.0]), np.array([0, 1]),
    ...                  np.array([0, 1]), 2, 'cg', rtol=1e-12)
    >>> x.round(12), info
    (array([1. , 0.5]), 0)
    """
    return call(coo_krylov, data, b, row, col, n, method, **options)


def _adjoint_options(method, options):
    """The options of the adjoint solve: no start, callback or printing; ``gmres``'s
    preconditioner by its adjoint; ``minres``'s shift conjugated."""
    adj = {k: v for k, v in options.items() if k not in _FORWARD_ONLY}
    m = adj.get('M')
    if m is not None and method == 'gmres':
        adj['M'] = m.H if isinstance(m, spla.LinearOperator) else m.conj().T
    if 'shift' in adj:
        adj['shift'] = np.conj(adj['shift'])
    return adj


def _krylov_adjoint(g, data, row, col, n, method, options):
    """``A^{-H} g`` by the same method, on the conjugate transpose."""
    return krylov(conj(data), g, col, row, n, method, **_adjoint_options(method, options))[0]


def _krylov_vjp_b(g, ans, data, b, row, col, n, method, **options):
    return _krylov_adjoint(g[0], data, row, col, n, method, options)


def _krylov_vjp_data(g, ans, data, b, row, col, n, method, **options):
    adj = _krylov_adjoint(g[0], data, row, col, n, method, options)
    return -sample(adj, conj(ans[0]), row, col)


def _krylov_jvp(tangents, ans, data, b, row, col, n, method, **options):
    td, tb = tangents[0], tangents[1]
    rhs = tb
    if td is not None:
        dm = matmul(td, ans[0], row, col, n)
        rhs = -dm if rhs is None else rhs - dm
    adj = {k: v for k, v in options.items() if k not in _FORWARD_ONLY}
    return krylov(data, rhs, row, col, n, method, **adj)[0], None


defvjp(coo_krylov, _krylov_vjp_data, _krylov_vjp_b, None, None, None, None,
       name='scipy.sparse.linalg (cg, gmres, minres)', multi=True, jvp=_krylov_jvp)
