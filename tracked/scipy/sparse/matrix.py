"""``SparseMatrix``: a sparse matrix whose stored values may be tracked.

It holds ``data`` (the stored values, tracked or plain, in the order they were given),
the COO coordinates ``row`` and ``col`` (plain integer arrays: the pattern is a constant)
and the shape; the format (``'csr'``, ``'csc'``, ``'coo'``) is the one it was built in
and changes nothing else.  Products with dense operands are the rule
``tracked.rules.scipy_sparse.matmul``; everything else is NumPy on ``data``
(``toarray`` and sums are scatter-adds), so each operation is differentiable in the
values and in the dense operand, in every mode and on recorded tapes.

A matrix built from a ``*_matrix`` constructor has ``spmatrix``'s semantics (``*`` is
the matrix product, ``sum(axis=...)`` keeps two dimensions), from a ``*_array`` one
``sparray``'s (``*`` is elementwise).  Dense results are arrays, never ``np.matrix``
(tracked differentiates plain arrays).  SciPy's constant matrices in tracked code
become one of these (``tracked.rules.sparse_operands``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as _sp

from ...conversions import conversion_error
from ...rules.indexing import scatter_add
from ...rules.scipy_sparse import matmul
from ...boxes import Tracked
from ...dispatch import holds_tracked

__all__ = ['SparseMatrix', 'build']

_FORMATS = ('csr', 'csc', 'coo')


class SparseMatrix:
    """A 2-d sparse matrix with ``data`` stored at ``(row, col)`` (repeated coordinates
    add up); built by ``tracked.scipy.sparse``'s constructors.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy import sparse
    >>> row, col = np.array([0, 1, 1]), np.array([0, 0, 2])
    >>> f = lambda d: np.sum(sparse.csr_array((d, (row, col)), shape=(2, 3)) @ np.ones(3))
    >>> tr.gradient(f, np.array([1.0, 2.0, 3.0]))
    (array([1., 1., 1.]),)
    """

    # NumPy's sign that this type's operators decide: ndarray @ S and tracked @ S
    # return NotImplemented, so Python calls S.__rmatmul__.
    __array_ufunc__ = None

    def __init__(self, data: Any, row: Any, col: Any, shape: tuple[int, int],
                 format: str = 'coo', matrix: bool = False) -> None:
        self.data = data
        self.row = row
        self.col = col
        self.shape = (int(shape[0]), int(shape[1]))
        self.format = format
        self._matrix = matrix

    @staticmethod
    def from_scipy(a: Any) -> SparseMatrix:
        """SciPy's sparse matrix or array ``a`` with its values as constants."""
        if a.ndim != 2:
            raise TypeError(f'a {a.ndim}-d scipy.sparse array with tracked values: only '
                            f'2-d sparse matrices are supported')
        coo = a.tocoo()
        fmt = a.format if a.format in _FORMATS else 'coo'
        return SparseMatrix(coo.data, coo.row.astype(np.intp), coo.col.astype(np.intp),
                            a.shape, fmt, isinstance(a, _sp.spmatrix))

    def _like(self, data: Any, row: Any = None, col: Any = None, shape: Any = None,
              format: str | None = None) -> SparseMatrix:
        """Another matrix of this kind: new values, by default on this pattern."""
        return SparseMatrix(data, self.row if row is None else row,
                            self.col if col is None else col,
                            self.shape if shape is None else shape,
                            format or self.format, self._matrix)

    # -- attributes ------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return 2

    @property
    def nnz(self) -> int:
        """The number of stored values (duplicates and explicit zeros included)."""
        return int(np.shape(self.data)[0])

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.result_type(self.data) if not isinstance(self.data, Tracked) \
            else self.data.dtype

    @property
    def T(self) -> SparseMatrix:
        return self.transpose()

    def __repr__(self) -> str:
        kind = 'matrix' if self._matrix else 'array'
        values = 'tracked' if isinstance(self.data, Tracked) else 'constant'
        return (f'<{self.format} sparse {kind} of shape {self.shape} with {self.nnz} stored '
                f'{values} values (tracked.scipy.sparse)>')

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise conversion_error()

    # -- conversions -----------------------------------------------------------------
    def transpose(self, axes: Any = None, copy: bool = False) -> SparseMatrix:
        """The transpose: the same values, ``row`` and ``col`` swapped."""
        fmt = {'csr': 'csc', 'csc': 'csr'}.get(self.format, self.format)
        return self._like(self.data, self.col, self.row, self.shape[::-1], fmt)

    def conj(self, copy: bool = True) -> SparseMatrix:
        return self._like(np.conj(self.data))

    conjugate = conj

    def copy(self) -> SparseMatrix:
        return self._like(self.data)

    def astype(self, dtype: Any, copy: bool = True) -> SparseMatrix:
        return self._like(self.data.astype(dtype))

    def asformat(self, format: str | None, copy: bool = False) -> SparseMatrix:
        """The same matrix, labelled ``format`` (its values keep their order)."""
        if format is not None and format not in _FORMATS:
            raise ValueError(f'format {format!r}: tracked sparse matrices are csr, csc or coo')
        return self._like(self.data, format=format or self.format)

    def tocsr(self, copy: bool = False) -> SparseMatrix:
        return self.asformat('csr')

    def tocsc(self, copy: bool = False) -> SparseMatrix:
        return self.asformat('csc')

    def tocoo(self, copy: bool = False) -> SparseMatrix:
        return self.asformat('coo')

    def toarray(self, order: Any = None, out: Any = None) -> Any:
        """The dense array (repeated coordinates summed), differentiable."""
        if out is not None:
            raise TypeError('toarray(out=...) of a tracked sparse matrix: use y = A.toarray()')
        return scatter_add(self.data, (self.row, self.col), self.shape, unique=False)

    def todense(self, order: Any = None, out: Any = None) -> Any:
        """The dense array (an ndarray, not SciPy's ``np.matrix``)."""
        return self.toarray(order, out)

    # -- reductions ------------------------------------------------------------------
    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        """The sum of all values, or along ``axis`` (a 2-d row or column for a matrix,
        as SciPy's ``spmatrix`` gives, but an ndarray)."""
        if out is not None:
            raise TypeError('sum(out=...) of a tracked sparse matrix: use y = A.sum(...)')
        data = self.data if dtype is None else self.data.astype(dtype)
        if axis is None:
            return np.sum(data)
        ax = _axis(axis)
        index, n = (self.col, self.shape[1]) if ax == 0 else (self.row, self.shape[0])
        sums = scatter_add(data, index, (n,), unique=False)
        if self._matrix:
            return np.reshape(sums, (1, n) if ax == 0 else (n, 1))
        return sums

    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        count = self.shape[0] * self.shape[1] if axis is None else self.shape[_axis(axis)]
        return self.sum(axis, dtype, out) / count

    # -- products ----------------------------------------------------------------
    def __matmul__(self, other: Any) -> Any:
        x = _dense_operand(other, '@')
        if x is NotImplemented:
            return NotImplemented
        if x.shape[0] != self.shape[1]:
            raise ValueError(f'matmul: dimension mismatch: {self.shape} @ {x.shape}')
        return matmul(self.data, x, self.row, self.col, self.shape[0])

    def __rmatmul__(self, other: Any) -> Any:
        x = _dense_operand(other, '@')
        if x is NotImplemented:
            return NotImplemented
        if x.shape[-1] != self.shape[0]:
            raise ValueError(f'matmul: dimension mismatch: {x.shape} @ {self.shape}')
        if x.ndim == 1:                   # x @ A = A^T x
            return matmul(self.data, x, self.col, self.row, self.shape[1])
        return matmul(self.data, x.T, self.col, self.row, self.shape[1]).T

    def dot(self, other: Any) -> Any:
        """``A @ other`` (``A * other`` for a scalar), as SciPy's ``dot``."""
        return self * other if np.ndim(other) == 0 else self @ other

    def multiply(self, other: Any) -> Any:
        """The elementwise product with a scalar or a dense array that broadcasts to the
        shape: a sparse matrix on this pattern, as SciPy's."""
        if isinstance(other, SparseMatrix) or _sp.issparse(other):
            raise TypeError('the elementwise product of two sparse matrices is not '
                            'supported on tracked values; multiply by B.toarray()')
        if np.ndim(other) == 0:
            return self._like(self.data * other)
        x = other if isinstance(other, (np.ndarray, Tracked)) else np.asarray(other)
        if x.ndim > 2:
            raise ValueError(f'multiply: a {x.ndim}-d operand for a 2-d sparse matrix')
        x = np.reshape(x, (1,) * (2 - x.ndim) + x.shape)
        if any(k not in (1, n) for k, n in zip(x.shape, self.shape)):
            raise ValueError(f'multiply: shapes {self.shape} and {np.shape(other)} do not '
                             f'broadcast to the sparse shape')
        zero = np.zeros_like(self.row)
        picked = x[self.row if x.shape[0] != 1 else zero, self.col if x.shape[1] != 1 else zero]
        return self._like(self.data * picked)

    def __mul__(self, other: Any) -> Any:
        if self._matrix and np.ndim(other) != 0:
            return self @ other
        return self.multiply(other)

    def __rmul__(self, other: Any) -> Any:
        if self._matrix and np.ndim(other) != 0:
            return other @ self
        return self.multiply(other)

    def __truediv__(self, other: Any) -> Any:
        if np.ndim(other) != 0:
            raise TypeError('a tracked sparse matrix divides by scalars only')
        return self._like(self.data / other)

    def __neg__(self) -> SparseMatrix:
        return self._like(-self.data)

    def __pos__(self) -> SparseMatrix:
        return self

    # -- sums with other matrices --------------------------------------------------
    def __add__(self, other: Any) -> Any:
        if np.ndim(other) == 0:
            if isinstance(other, Tracked) or other != 0:
                raise NotImplementedError('adding a nonzero scalar to a sparse matrix is '
                                          'not supported')
            return self.copy()
        b = _sparse_operand(other)
        if b is None:                     # dense: SciPy's result is dense too
            return self.toarray() + other
        if b.shape != self.shape:
            raise ValueError(f'inconsistent shapes {self.shape} and {b.shape}')
        return self._like(np.concatenate([self.data, b.data]),
                          np.concatenate([self.row, b.row]),
                          np.concatenate([self.col, b.col]))

    def __radd__(self, other: Any) -> Any:
        return self + other

    def __sub__(self, other: Any) -> Any:
        b = _sparse_operand(other)
        return self + (-b if b is not None else -other)

    def __rsub__(self, other: Any) -> Any:
        return -self + other


def _axis(axis: Any) -> int:
    if axis not in (0, 1, -1, -2):
        raise ValueError(f'axis {axis!r} of a 2-d sparse matrix')
    return axis % 2


def _dense_operand(other: Any, op: str) -> Any:
    """``other`` as a dense operand of a product with a sparse matrix (1-d or 2-d), or
    NotImplemented for one that decides itself."""
    if isinstance(other, SparseMatrix) or _sp.issparse(other):
        raise TypeError('products of two sparse matrices are not supported on tracked '
                        'values; convert one with .toarray()')
    if not isinstance(other, (np.ndarray, Tracked)):
        if getattr(type(other), '__array_ufunc__', 0) is None:
            return NotImplemented
        other = np.asarray(other)
    if other.ndim == 0:
        raise ValueError("Scalar operands are not allowed, use '*' instead")
    if other.ndim > 2:
        raise ValueError(f'matmul: a {other.ndim}-d operand of a sparse matrix (1-d or 2-d, '
                         f'as SciPy)')
    return other


def _sparse_operand(other: Any) -> SparseMatrix | None:
    if isinstance(other, SparseMatrix):
        return other
    if _sp.issparse(other):
        return SparseMatrix.from_scipy(other)
    return None


def build(arg1: Any, shape: Any, dtype: Any, fmt: str, matrix: bool) -> SparseMatrix:
    """A ``SparseMatrix`` in format ``fmt`` (``matrix``: ``spmatrix`` semantics) from any of
    SciPy's constructor arguments: ``(data, (row, col))``, ``(data, indices, indptr)``,
    ``(M, N)``, a sparse matrix or a plain dense array."""
    if isinstance(arg1, SparseMatrix):
        out = SparseMatrix(arg1.data, arg1.row, arg1.col, arg1.shape, fmt, matrix)
    elif _sp.issparse(arg1):
        base = SparseMatrix.from_scipy(arg1)
        out = SparseMatrix(base.data, base.row, base.col, base.shape, fmt, matrix)
    elif isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple):
        data, (row, col) = arg1
        row, col = _indices(row, 'row'), _indices(col, 'col')
        if shape is None:
            shape = (int(row.max()) + 1 if row.size else 0, int(col.max()) + 1 if col.size else 0)
        out = SparseMatrix(_values(data, row.size), row, col, shape, fmt, matrix)
    elif isinstance(arg1, tuple) and len(arg1) == 3 and fmt != 'coo':
        data, indices, indptr = arg1
        indices, indptr = _indices(indices, 'indices'), _indices(indptr, 'indptr')
        if indptr.ndim != 1 or indptr.size == 0 or indptr[-1] != indices.size:
            raise ValueError(f'indptr must be 1-d and end at len(indices) ({indices.size})')
        outer = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
        if shape is None:
            inner = int(indices.max()) + 1 if indices.size else 0
            shape = (indptr.size - 1, inner) if fmt == 'csr' else (inner, indptr.size - 1)
        row, col = (outer, indices) if fmt == 'csr' else (indices, outer)
        out = SparseMatrix(_values(data, indices.size), row, col, shape, fmt, matrix)
    elif isinstance(arg1, tuple) and len(arg1) == 2 and all(
            isinstance(n, (int, np.integer)) for n in arg1):
        empty = np.zeros(0, np.intp)
        out = SparseMatrix(np.zeros(0, dtype or np.float64), empty, empty, arg1, fmt, matrix)
    elif holds_tracked(arg1):
        raise TypeError('a sparse matrix from a tracked dense array would read its pattern '
                        'of non-zeros from tracked values; give (data, (row, col)) or '
                        '(data, indices, indptr), with data = dense[row, col]')
    else:
        base = SparseMatrix.from_scipy(_sp.coo_array(np.asarray(arg1)))
        out = SparseMatrix(base.data, base.row, base.col, base.shape, fmt, matrix)
    if shape is not None and tuple(shape) != out.shape:
        if out.nnz and (out.row.max() >= shape[0] or out.col.max() >= shape[1]):
            raise ValueError(f'shape {tuple(shape)} is too small for the coordinates')
        out = SparseMatrix(out.data, out.row, out.col, shape, fmt, matrix)
    return out if dtype is None else out.astype(dtype)


def _indices(a: Any, what: str) -> np.ndarray:
    if isinstance(a, Tracked):
        raise TypeError(f'{what}: the pattern of a sparse matrix is a constant; pass '
                        f'plain integer arrays (tr.data(...))')
    out = np.asarray(a)
    if out.dtype.kind not in 'iu' or out.ndim != 1:
        raise ValueError(f'{what} must be a 1-d integer array, got {out.dtype} of shape '
                         f'{out.shape}')
    if out.size and out.min() < 0:
        raise ValueError(f'{what} must not be negative')
    return out.astype(np.intp, copy=False)


def _values(data: Any, n: int) -> Any:
    values = data if isinstance(data, Tracked) else np.asarray(data)
    if values.ndim != 1 or values.shape[0] != n:
        raise ValueError(f'data must be 1-d with one value per stored coordinate ({n}), '
                         f'got shape {values.shape}')
    return values
