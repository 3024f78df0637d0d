"""``tracked.scipy.linalg``: ``scipy.linalg`` for tracked values.

``expm``, ``sqrtm``, ``logm``, ``solve_triangular``, ``cho_factor``/``cho_solve`` and
``lu_factor``/``lu_solve`` with SciPy's signatures, differentiable in every array
argument to any order (rules in ``tracked/rules/scipy_linalg.py``).  ``overwrite_*``
and ``check_finite`` are accepted and ignored.  Every other name is
``scipy.linalg``'s own (plain values); NumPy's ``np.linalg`` functions
(``solve``, ``inv``, ``cholesky``, ``eigh``, ...) are differentiated unmodified.
"""
import scipy.linalg as _sla

from ..rules import scipy_linalg as _rules
from ..values import call

__all__ = ['expm', 'sqrtm', 'logm', 'solve_triangular', 'cho_factor', 'cho_solve',
           'lu_factor', 'lu_solve']


def __getattr__(name):
    """Every other name is ``scipy.linalg``'s (plain values)."""
    return getattr(_sla, name)


def expm(A):
    """``expm(A)``: the matrix exponential (of each matrix of a stack), differentiable
    through its Fréchet derivative.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import expm
    >>> round(float(tr.gradient(lambda t: np.trace(expm(t * np.eye(2))), 0.5)[0]), 6)
    3.297443
    """
    return call(_sla.expm, A)


def sqrtm(A):
    """``sqrtm(A)``: the principal matrix square root, differentiable.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import sqrtm
    >>> sqrtm(np.array([[4.0, 0.0], [0.0, 9.0]]))
    array([[2., 0.],
           [0., 3.]])
    """
    return call(_sla.sqrtm, A)


def logm(A):
    """``logm(A)``: the principal matrix logarithm, differentiable.

    >>> import numpy as np
    >>> from tracked.scipy.linalg import logm
    >>> np.round(logm(np.diag([1.0, np.e])), 12)
    array([[0., 0.],
           [0., 1.]])
    """
    return call(_sla.logm, A)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """``solve_triangular(a, b, trans=0, lower=False) -> x`` with ``op(a) x = b`` reading
    one triangle of ``a``; differentiable in ``a`` (that triangle) and ``b``.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.linalg import solve_triangular
    >>> L = np.array([[2.0, 0.0], [1.0, 1.0]])
    >>> tr.gradient(lambda b: np.sum(solve_triangular(L, b, lower=True)), np.ones(2))
    (array([0., 1.]),)
    """
    return _rules._solve_triangular(a, b, trans, lower, unit_diagonal)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``cho_factor(a, lower=False) -> (c, lower)`` for ``cho_solve``; ``c``'s other
    triangle holds zeros (SciPy leaves arbitrary values there).

    >>> import numpy as np
    >>> from tracked.scipy.linalg import cho_factor, cho_solve
    >>> A = np.array([[4.0, 2.0], [2.0, 3.0]])
    >>> cho_solve(cho_factor(A), np.array([6.0, 5.0]))
    array([1., 1.])
    """
    return _rules._cho_factor(a, lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``cho_solve((c, lower), b) -> x`` with ``A x = b`` for ``A`` factored by ``cho_factor``."""
    return _rules._cho_solve(c_and_lower, b)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``lu_factor(a) -> (lu, piv)``: the packed LU factors with partial pivoting of a
    square matrix (``piv`` is plain: integers carry no gradient).

    >>> import numpy as np
    >>> from tracked.scipy.linalg import lu_factor, lu_solve
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> lu_solve(lu_factor(A), np.array([5.0, 11.0]))
    array([1., 2.])
    """
    return _rules._lu_factor(a)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """``lu_solve((lu, piv), b, trans=0) -> x`` with ``op(A) x = b`` for ``A`` factored by
    ``lu_factor``."""
    return _rules._lu_solve(lu_and_piv, b, trans)
