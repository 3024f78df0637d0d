"""``tracked.scipy.sparse.linalg``: ``scipy.sparse.linalg``'s solvers for tracked values.

``spsolve``, ``splu`` (whose ``solve`` takes ``trans``), ``cg``, ``gmres`` and ``minres``
with SciPy's signatures, differentiable in the right-hand side and in the matrix's
stored values (a ``tracked.scipy.sparse`` matrix, or SciPy's with constant values),
in every mode and on recorded tapes (rules in ``tracked/rules/scipy_sparse.py``).

The direct solvers' adjoint is a solve with the transposed factorisation (SuperLU's
``trans``), from the same factors.  The iterative ones are differentiated *at their
converged solution*, as if it solved ``A x = b`` exactly: the cotangent of ``b`` is one
more solve with ``A^H`` by the same method and tolerances (``cg`` and ``minres`` take
``A`` Hermitian, as SciPy does), the one of the values ``-adj[row] * conj(x)[col]``.
A gradient is then as accurate as ``rtol``/``atol`` make the solutions; check ``info``.
Every other name is ``scipy.sparse.linalg``'s own (plain values).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as _sp
import scipy.sparse.linalg as _spla

from ...rules import scipy_sparse as _rules
from ...boxes import Tracked
from ...dispatch import holds_tracked
from .matrix import SparseMatrix, build

__all__ = ['spsolve', 'splu', 'SuperLU', 'cg', 'gmres', 'minres']


def __getattr__(name: str) -> Any:
    """Every other name is ``scipy.sparse.linalg``'s (plain values)."""
    return getattr(_spla, name)


def _square(A: Any, what: str) -> SparseMatrix:
    """``A`` as a square ``SparseMatrix`` (SciPy's sparse and plain dense matrices give
    constants)."""
    if not isinstance(A, SparseMatrix):
        if isinstance(A, _spla.LinearOperator) or holds_tracked(A):
            raise TypeError(f'{what}: with tracked values, A must be a sparse matrix '
                            f'(tracked.scipy.sparse or SciPy\'s), whose stored values are '
                            f'differentiated; got {type(A).__name__}')
        A = build(A, None, None, 'csc', False)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f'{what}: matrix must be square (has shape {A.shape})')
    return A


def _rhs(b: Any, n: int, what: str) -> Any:
    if _sp.issparse(b) or isinstance(b, SparseMatrix):
        raise TypeError(f'{what}: with tracked values, b must be dense (b.toarray())')
    b = b if isinstance(b, (np.ndarray, Tracked)) else np.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != n:
        raise ValueError(f'{what}: b of shape {b.shape} for a matrix of {n} rows')
    return b


def spsolve(A: Any, b: Any, permc_spec: Any = None, use_umfpack: bool = True) -> Any:
    """``spsolve(A, b) -> x`` with ``A x = b`` for a square sparse ``A``; differentiable in
    ``b`` and in ``A``'s stored values.  A ``b`` of shape ``(n, 1)`` gives ``x`` of shape
    ``(n,)``, as SciPy's.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> from tracked.scipy.sparse.linalg import spsolve
    >>> row = col = np.array([0, 1])
    >>> f = lambda d: np.sum(spsolve(sparse.csc_array((d, (row, col))), np.ones(2)))
    >>> tr.gradient(f, np.array([2.0, 4.0]))             # d/dd (1/d0 + 1/d1)
    (array([-0.25  , -0.0625]),)
    """
    if not (holds_tracked(b) or isinstance(A, SparseMatrix)):
        return _spla.spsolve(A, b, permc_spec, use_umfpack)
    A = _square(A, 'spsolve')
    b = _rhs(b, A.shape[0], 'spsolve')
    vector = b.ndim == 2 and b.shape[1] == 1
    x = _rules.solve(A.data, b[:, 0] if vector else b, A.row, A.col, A.shape[0])
    return x


class SuperLU:
    """``splu``'s factorisation of a sparse matrix whose values may be tracked: ``solve``
    is differentiable in the right-hand side and the values.  SciPy's SuperLU of the
    values (computed once per values, shared with ``spsolve``) answers for plain
    values its other attributes (``L``, ``U``, ``perm_r``, ``perm_c``)."""

    def __init__(self, A: SparseMatrix) -> None:
        self.A = A
        self.shape = A.shape

    @property
    def nnz(self) -> int:
        return self._factor().nnz

    def solve(self, rhs: Any, trans: str = 'N') -> Any:
        """``solve(rhs, trans='N') -> x`` with ``op(A) x = rhs``: ``'N'`` ``A``, ``'T'`` its
        transpose, ``'H'`` its conjugate transpose.

        >>> import numpy as np
        >>> from tracked.scipy.sparse.linalg import splu
        >>> from scipy.sparse import csc_array
        >>> splu(csc_array(np.array([[2.0, 1.0], [0.0, 4.0]]))).solve(np.array([3.0, 4.0]), 'T')
        array([1.5 , 0.625])
        """
        if trans not in ('N', 'T', 'H'):
            raise ValueError(f"trans={trans!r}: expected 'N', 'T' or 'H'")
        A = self.A
        return _rules.solve(A.data, _rhs(rhs, A.shape[0], 'SuperLU.solve'), A.row, A.col,
                            A.shape[0], trans)

    def _factor(self) -> Any:
        if isinstance(self.A.data, Tracked):
            raise AttributeError('the factors of a matrix with tracked values are not '
                                 'differentiated: use solve')
        A = self.A
        dtype = np.result_type(A.data, np.float32)
        return _rules.factor(np.asarray(A.data, dtype), A.row, A.col, A.shape[0])

    def __getattr__(self, name: str) -> Any:
        if name.startswith('_') or name == 'A':
            raise AttributeError(name)
        return getattr(self._factor(), name)


def splu(A: Any, permc_spec: Any = None, diag_pivot_thresh: Any = None, relax: Any = None,
         panel_size: Any = None, options: Any = None) -> SuperLU:
    """``splu(A)``: the LU factorisation of a square sparse ``A`` for repeated solves;
    ``splu(A).solve(b)`` is differentiable in ``b`` and ``A``'s stored values.  SciPy's
    options (``permc_spec``, ...) are accepted and ignored: the solution is the same.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> from tracked.scipy.sparse.linalg import splu
    >>> row = col = np.array([0, 1])
    >>> f = lambda d, b: np.sum(splu(sparse.csc_matrix((d, (row, col)))).solve(b))
    >>> tr.gradient(f, np.array([2.0, 4.0]), np.ones(2))
    (array([-0.25  , -0.0625]), array([0.5 , 0.25]))
    """
    return SuperLU(_square(A, 'splu'))


def _krylov(method: str, A: Any, b: Any, x0: Any, options: dict[str, Any]) -> Any:
    """``(x, info)`` of ``method``: SciPy's own on plain values, else the rule."""
    if isinstance(x0, Tracked):
        raise TypeError(f'{method}: x0 must be plain (tr.data(x0)): the solution does not '
                        f'depend on the initial guess')
    if not (holds_tracked(b) or isinstance(A, SparseMatrix)):
        return getattr(_spla, method)(A, b, x0, **options)
    A = _square(A, method)
    b = _rhs(b, A.shape[0], method)
    if b.ndim == 2:
        if b.shape[1] != 1:
            raise ValueError(f'{method}: b must be a vector, got shape {b.shape}')
        b = b[:, 0]
    if x0 is not None:
        options = dict(options, x0=x0)
    return _rules.krylov(A.data, b, A.row, A.col, A.shape[0], method, **options)


def cg(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-05, atol: float = 0.0,
       maxiter: Any = None, M: Any = None, callback: Any = None) -> Any:
    """``cg(A, b) -> (x, info)``: conjugate gradients for a Hermitian positive definite
    sparse ``A``; ``x`` differentiable in ``b`` and ``A``'s stored values at the converged
    solution (module docstring).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> from tracked.scipy.sparse.linalg import cg
    >>> row = col = np.array([0, 1])
    >>> f = lambda b: np.sum(cg(sparse.csr_array((np.array([2.0, 4.0]), (row, col))), b,
    ...                         rtol=1e-12)[0])
    >>> tr.gradient(f, np.ones(2))
    (array([0.5 , 0.25]),)
    """
    return _krylov('cg', A, b, x0, dict(rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                                        callback=callback))


def gmres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-05, atol: float = 0.0,
          restart: Any = None, maxiter: Any = None, M: Any = None, callback: Any = None,
          callback_type: Any = None) -> Any:
    """``gmres(A, b) -> (x, info)``: GMRES for a square sparse ``A``; ``x`` differentiable
    in ``b`` and ``A``'s stored values at the converged solution (the adjoint solve is
    GMRES on ``A^H``, preconditioned by ``M^H``).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> from tracked.scipy.sparse.linalg import gmres
    >>> rows, cols = np.array([0, 0, 1]), np.array([0, 1, 1])
    >>> A = sparse.csr_array((np.array([2.0, 1.0, 4.0]), (rows, cols)))
    >>> tr.gradient(lambda b: np.sum(gmres(A, b, rtol=1e-12)[0]), np.ones(2))[0].round(6)
    array([0.5  , 0.125])
    """
    return _krylov('gmres', A, b, x0, dict(rtol=rtol, atol=atol, restart=restart,
                                           maxiter=maxiter, M=M, callback=callback,
                                           callback_type=callback_type))


def minres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-05, shift: float = 0.0,
           maxiter: Any = None, M: Any = None, callback: Any = None, show: bool = False,
           check: bool = False) -> Any:
    """``minres(A, b) -> (x, info)``: MINRES for a symmetric (possibly indefinite) sparse
    ``A``, solving ``(A - shift I) x = b``; ``x`` differentiable in ``b`` and ``A``'s
    stored values at the converged solution.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> from tracked.scipy.sparse.linalg import minres
    >>> A = sparse.csr_array((np.array([2.0, -4.0]), (np.array([0, 1]), np.array([0, 1]))))
    >>> tr.gradient(lambda b: np.sum(minres(A, b, rtol=1e-12)[0]), np.ones(2))
    (array([ 0.5 , -0.25]),)
    """
    return _krylov('minres', A, b, x0, dict(rtol=rtol, shift=shift, maxiter=maxiter, M=M,
                                            callback=callback, show=show, check=check))
