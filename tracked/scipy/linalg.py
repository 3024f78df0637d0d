"""``tracked.scipy.linalg``: ``scipy.linalg`` for tracked values.

``expm``, ``sqrtm``, ``logm``, ``solve_triangular``, ``cho_factor``/``cho_solve``,
``lu_factor``/``lu_solve``, ``solve_sylvester`` and ``solve_banded`` with SciPy's
signatures, differentiable in every array argument to any order (rules in
``tracked/rules/scipy_linalg.py``); and SciPy's spellings of what NumPy has
(``solve``, ``inv``, ``det``, ``cholesky`` -- upper by default, as SciPy's --,
``eigh``, ``svd``, ``qr``, ``lstsq``, ``norm``, ``pinv``), which call ``np.linalg``'s
differentiated functions.  ``overwrite_*`` and ``check_finite`` are accepted and
ignored.  Every other name is ``scipy.linalg``'s own (plain values).
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
import scipy.linalg as _sla

from ..rules import scipy_linalg as _rules
from ..dispatch import call

__all__ = ['expm', 'sqrtm', 'logm', 'solve_triangular', 'cho_factor', 'cho_solve',
           'lu_factor', 'lu_solve', 'solve_sylvester', 'solve_banded', 'solve', 'inv', 'det',
           'cholesky', 'eigh', 'svd', 'qr', 'lstsq', 'norm', 'pinv']


def __getattr__(name: str) -> Any:
    """Every other name is ``scipy.linalg``'s (plain values)."""
    return getattr(_sla, name)


def expm(A: Any) -> Any:
    """``expm(A)``: the matrix exponential (of each matrix of a stack), differentiable
    through its Fréchet derivative.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import expm
    >>> round(float(tr.gradient(lambda t: np.trace(expm(t * np.eye(2))), 0.5)[0]), 6)
    3.297443
    """
    return call(_sla.expm, A)


def sqrtm(A: Any) -> Any:
    """``sqrtm(A)``: the principal matrix square root, differentiable.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import sqrtm
    >>> sqrtm(np.array([[4.0, 0.0], [0.0, 9.0]]))
    array([[2., 0.],
           [0., 3.]])
    """
    return call(_sla.sqrtm, A)


def logm(A: Any) -> Any:
    """``logm(A)``: the principal matrix logarithm, differentiable.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import logm
    >>> np.round(logm(np.diag([1.0, np.e])), 12)
    array([[0., 0.],
           [0., 1.]])
    """
    return call(_sla.logm, A)


def solve_triangular(a: Any, b: Any, trans: int = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Any:
    """``solve_triangular(a, b, trans=0, lower=False) -> x`` with ``op(a) x = b`` reading
    one triangle of ``a``; differentiable in ``a`` (that triangle) and ``b``.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import solve_triangular
    >>> L = np.array([[2.0, 0.0], [1.0, 1.0]])
    >>> tr.gradient(lambda b: np.sum(solve_triangular(L, b, lower=True)), np.ones(2))
    (array([0., 1.]),)
    """
    return _rules.solve_triangular(a, b, trans, lower, unit_diagonal)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> Any:
    """``cho_factor(a, lower=False) -> (c, lower)`` for ``cho_solve``; ``c``'s other
    triangle holds zeros (SciPy leaves arbitrary values there).

    >>> import numpy as np
    >>> from tracked.scipy.linalg import cho_factor, cho_solve
    >>> A = np.array([[4.0, 2.0], [2.0, 3.0]])
    >>> cho_solve(cho_factor(A), np.array([6.0, 5.0]))
    array([1., 1.])
    """
    return _rules.cho_factor(a, lower)


def cho_solve(c_and_lower: Any, b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
    """``cho_solve((c, lower), b) -> x`` with ``A x = b`` for ``A`` factored by ``cho_factor``."""
    return _rules.cho_solve(c_and_lower, b)


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``lu_factor(a) -> (lu, piv)``: the packed LU factors with partial pivoting of a
    square matrix (``piv`` is plain: integers carry no gradient).

    >>> import numpy as np
    >>> from tracked.scipy.linalg import lu_factor, lu_solve
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> lu_solve(lu_factor(A), np.array([5.0, 11.0]))
    array([1., 2.])
    """
    return _rules.lu_factor(a)


def lu_solve(lu_and_piv: Any, b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """``lu_solve((lu, piv), b, trans=0) -> x`` with ``op(A) x = b`` for ``A`` factored by
    ``lu_factor``."""
    return _rules.lu_solve(lu_and_piv, b, trans)


def solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    """``solve_sylvester(a, b, q) -> x`` with ``a x + x b = q`` (of each of a stack);
    differentiable in ``a``, ``b`` and ``q`` (the adjoint is the Sylvester equation of
    ``a^H`` and ``b^H``).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import solve_sylvester
    >>> a, b = np.diag([1.0, 2.0]), np.diag([3.0, 4.0])
    >>> solve_sylvester(a, b, np.ones((2, 2)))       # x[i, j] = 1 / (a_i + b_j)
    array([[0.25      , 0.2       ],
           [0.2       , 0.16666667]])
    >>> tr.gradient(lambda q: solve_sylvester(a, b, q)[0, 0], np.ones((2, 2)))[0]
    array([[0.25, 0.  ],
           [0.  , 0.  ]])
    """
    return _rules.solve_sylvester(a, b, q)


def solve_banded(l_and_u: Any, ab: Any, b: Any, overwrite_ab: bool = False,
                 overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """``solve_banded((l, u), ab, b) -> x`` with ``a x = b`` for the band matrix ``a``
    stored as ``ab[u + i - j, j] == a[i, j]``; differentiable in ``ab`` (the entries it
    stores: the unused corners get zeros) and ``b``.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import solve_banded
    >>> ab = np.array([[0.0, 1.0, 1.0], [4.0, 4.0, 4.0], [1.0, 1.0, 0.0]])   # tridiagonal
    >>> g, = tr.gradient(lambda ab: solve_banded((1, 1), ab, np.ones(3))[0], ab)
    >>> g[[0, 2], [0, 2]] == 0                                  # the corners ab never uses
    array([ True,  True])
    """
    return _rules.solve_banded(l_and_u, ab, b)


# --------------------------------------------------------------------------
# SciPy's spellings of NumPy's linear algebra
# --------------------------------------------------------------------------

def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: Any = None, transposed: bool = False) -> Any:
    """``solve(a, b) -> x`` with ``a x = b`` (``a^T x = b`` if ``transposed``); ``assume_a``
    may say what SciPy should exploit, the solution is the same.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import solve
    >>> solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]), assume_a='pos')
    array([1. , 0.5])
    """
    if np.ndim(b) == np.ndim(a) - 1:          # a vector right-hand side (of each matrix)
        return solve(a, np.expand_dims(b, -1), transposed=transposed)[..., 0]
    return np.linalg.solve(np.swapaxes(a, -1, -2) if transposed else a, b)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``inv(a)``: the matrix inverse (``np.linalg.inv``)."""
    return np.linalg.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """``det(a)``: the determinant (``np.linalg.det``)."""
    return np.linalg.det(a)


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:
    """``cholesky(a, lower=False)``: SciPy's default is the *upper* factor ``U`` with
    ``a = U^H U``.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import cholesky
    >>> cholesky(np.array([[4.0, 2.0], [2.0, 2.0]]))
    array([[2., 1.],
           [0., 1.]])
    """
    return np.linalg.cholesky(a, upper=not lower)


def eigh(a: Any, b: Any = None, *, lower: bool = True, eigvals_only: bool = False,
         **kwargs: Any) -> Any:
    """``eigh(a, lower=True, eigvals_only=False) -> (w, v)``: the standard Hermitian
    eigenproblem (the generalised one, ``b=``, is not supported on tracked values)."""
    if b is not None:
        raise NotImplementedError('tracked.scipy.linalg.eigh: the generalised problem (b=) '
                                  'is not supported; reduce it with a Cholesky factor of b')
    uplo: Literal['L', 'U'] = 'L' if lower else 'U'
    if eigvals_only:
        return np.linalg.eigvalsh(a, UPLO=uplo)
    return tuple(np.linalg.eigh(a, UPLO=uplo))


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = 'gesdd') -> Any:
    """``svd(a, full_matrices=True, compute_uv=True) -> (U, s, Vh)`` or ``s``."""
    # NumPy's stubs overload on a literal compute_uv; here it is a variable
    out = np.linalg.svd(a, full_matrices=full_matrices,
                        compute_uv=compute_uv)  # type: ignore[call-overload]
    return tuple(out) if compute_uv else out


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = 'full',
       pivoting: bool = False, check_finite: bool = True) -> Any:
    """``qr(a, mode='full') -> (Q, R)``; ``mode='economic'`` the reduced factors,
    ``mode='r'`` the tuple ``(R,)`` (as SciPy's).  ``pivoting`` is not supported."""
    if pivoting or mode not in ('full', 'economic', 'r'):
        raise NotImplementedError("tracked.scipy.linalg.qr: mode='full', 'economic' or 'r' "
                                  "without pivoting")
    if mode == 'r':
        return (np.linalg.qr(a, mode='r'),)
    return tuple(np.linalg.qr(a, mode='complete' if mode == 'full' else 'reduced'))


def lstsq(a: Any, b: Any, cond: Any = None, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, lapack_driver: Any = None) -> Any:
    """``lstsq(a, b, cond=None) -> (x, residues, rank, s)`` (``np.linalg.lstsq``)."""
    return tuple(np.linalg.lstsq(a, b, rcond=cond))


def norm(a: Any, ord: Any = None, axis: Any = None, keepdims: bool = False,
         check_finite: bool = True) -> Any:
    """``norm(a, ord=None, axis=None)``: a vector or matrix norm (``np.linalg.norm``)."""
    return np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)


def pinv(a: Any, *, atol: Any = None, rtol: Any = None, return_rank: bool = False,
         check_finite: bool = True) -> Any:
    """``pinv(a, rtol=None)``: the pseudo-inverse (``np.linalg.pinv``; ``atol`` and
    ``return_rank`` are not supported on tracked values)."""
    if atol is not None or return_rank:
        raise NotImplementedError('tracked.scipy.linalg.pinv: atol= and return_rank= are '
                                  'not supported; pass rtol=')
    return np.linalg.pinv(a) if rtol is None else np.linalg.pinv(a, rtol=rtol)
