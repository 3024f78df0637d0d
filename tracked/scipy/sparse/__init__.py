"""``tracked.scipy.sparse``: sparse matrices whose stored values are differentiated.

SciPy's own sparse matrices need nothing from here when their values are constants:
``A @ x``, ``x @ A``, ``A.dot(x)``, ``A.T @ x``, ``A * x`` and ``A + x`` with a tracked
``x`` are differentiated unmodified (``tracked/rules/sparse_operands.py`` says how).
The constructors here build a ``SparseMatrix`` (``matrix.py``) from tracked values:
``csr_matrix((data, indices, indptr), shape=...)``, ``coo_array((data, (row, col)))``
and so on, with SciPy's signatures; gradients flow to ``data``.  It supports ``@`` with
dense operands on either side, ``.dot``, ``.T``, ``.multiply``, ``.sum``, ``.toarray``,
``+``/``-`` with sparse or dense matrices and ``*``/``/`` by scalars.  Solvers are in
``tracked.scipy.sparse.linalg``.  Every other name is ``scipy.sparse``'s own.
"""
from __future__ import annotations

import importlib
from typing import Any

import scipy.sparse as _sp

from .matrix import SparseMatrix, build

__all__ = ['SparseMatrix', 'csr_matrix', 'csr_array', 'csc_matrix', 'csc_array', 'coo_matrix',
           'coo_array', 'issparse']


def __getattr__(name: str) -> Any:
    """``linalg`` (tracked's solvers); every other name is ``scipy.sparse``'s."""
    if name == 'linalg':
        return importlib.import_module(f'{__name__}.linalg')
    return getattr(_sp, name)


def csr_matrix(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``csr_matrix((data, indices, indptr), shape=None)`` or ``csr_matrix((data, (row,
    col)), shape=None)``: a sparse matrix (``spmatrix`` semantics: ``*`` is the matrix
    product) whose values ``data`` may be tracked.  A SciPy matrix or a plain dense
    array gives its values as constants.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> indptr, indices = np.array([0, 1, 3]), np.array([1, 0, 1])
    >>> f = lambda d: np.sum(sparse.csr_matrix((d, indices, indptr), shape=(2, 2)) @ np.arange(2.0))
    >>> tr.gradient(f, np.array([1.0, 2.0, 3.0]))
    (array([1., 0., 1.]),)
    """
    return build(arg1, shape, dtype, 'csr', True)


def csr_array(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``csr_matrix`` with ``sparray`` semantics (``*`` is elementwise, sums along an axis
    are 1-d).

    >>> import numpy as np
    >>> from tracked.scipy import sparse
    >>> sparse.csr_array((np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2]))).toarray()
    array([[0., 1.],
           [2., 0.]])
    """
    return build(arg1, shape, dtype, 'csr', False)


def csc_matrix(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``csc_matrix((data, indices, indptr), shape=None)`` (``indices`` are rows, ``indptr``
    runs over columns) or ``(data, (row, col))``; as ``csr_matrix``.

    >>> import numpy as np
    >>> from tracked.scipy import sparse
    >>> sparse.csc_matrix((np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2]))).toarray()
    array([[0., 2.],
           [1., 0.]])
    """
    return build(arg1, shape, dtype, 'csc', True)


def csc_array(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``csc_matrix`` with ``sparray`` semantics."""
    return build(arg1, shape, dtype, 'csc', False)


def coo_matrix(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``coo_matrix((data, (row, col)), shape=None)``; as ``csr_matrix``.

    >>> import numpy as np
    >>> from tracked.scipy import sparse
    >>> sparse.coo_matrix((np.array([1.0, 2.0]), (np.array([0, 0]), np.array([1, 1])))).toarray()
    array([[0., 3.]])
    """
    return build(arg1, shape, dtype, 'coo', True)


def coo_array(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> SparseMatrix:
    """``coo_matrix`` with ``sparray`` semantics."""
    return build(arg1, shape, dtype, 'coo', False)


def issparse(x: Any) -> bool:
    """Whether ``x`` is a sparse matrix: tracked's or SciPy's.

    >>> import numpy as np
    >>> from tracked.scipy import sparse
    >>> sparse.issparse(sparse.coo_array((np.ones(1), (np.zeros(1, int), np.zeros(1, int)))))
    True
    """
    return isinstance(x, SparseMatrix) or _sp.issparse(x)


def conversion_hint(func: str) -> str | None:
    """What ``ConversionError`` suggests when ``scipy.sparse``'s ``func`` (``'csr_array.
    multiply'``: a method) meets a tracked value; None: the general hint.

    >>> print(conversion_hint('csr_array.multiply'))   # doctest: +ELLIPSIS
     A SciPy sparse matrix's methods do not take tracked values (its products do: ...
    """
    if '.' not in func:
        return None
    method = func.split('.')[-1]
    return (f" A SciPy sparse matrix's methods do not take tracked values (its products "
            f"do: A @ x, x @ A, A.dot(x), A * x). Make it tracked's, whose values may be "
            f"constants: tracked.scipy.sparse.csr_array(A).{method}(...).")
