"""Colourings of sparsity patterns, and the recovery of a sparse derivative from the
products of its matrix with one seed vector per colour (Curtis, Powell and Reid;
Gebremedhin, Manne and Pothen, "What color is your Jacobian?", SIAM Review 2005).

- column colouring: columns of one colour share no row, so ``J @ seed_c`` holds each
  of their entries alone (forward mode: one tangent per colour);
- row colouring: the same for rows (reverse mode: one sweep per colour);
- symmetric colouring of a Hessian: a distance-1 colouring in which every entry
  ``(i, j)`` is alone in row ``i`` among the columns of ``j``'s colour, or in row
  ``j`` among those of ``i``'s (star colouring: no path on four vertices takes two
  colours), read from ``H @ seed_c`` on one side or the other.

The colourings are greedy in largest-first order, in numba (a 2-D five-point pattern
of 10^5 unknowns colours in milliseconds); the recovery is one gather per call.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np

try:
    import scipy.sparse as sp
except ImportError as e:        # an optional dependency: say which extra installs it
    raise ImportError("tracked's sparse derivatives need SciPy, an optional dependency: "
                      "pip install 'tracked[scipy]'") from e

__all__ = ['Coloring', 'coloring', 'as_pattern']

Kind = Literal['column', 'row', 'symmetric']
_KINDS = ('auto', 'column', 'row', 'symmetric')


def _largest_first(deg: Any) -> Any:
    return np.argsort(-deg, kind='stable')


def _column_colors(P: Any) -> Any:
    from .coloring_kernels import distance2_colors, distance2_degrees   # numba: when used
    T = P.tocsc()
    args = (P.indptr, P.indices, T.indptr, T.indices)
    return distance2_colors(*args, _largest_first(distance2_degrees(*args)))


def _symmetric_colors(P: Any) -> Any:
    C = P.tocoo()
    off = C.row != C.col                        # the graph: entries off the diagonal
    A = sp.csr_array((C.data[off], (C.row[off], C.col[off])), shape=P.shape)
    A.sort_indices()
    from .coloring_kernels import star_colors                           # numba: when used
    return star_colors(A.indptr, A.indices, _largest_first(np.diff(A.indptr)))


# --------------------------------------------------------------------------
# The colouring object: colours and the recovery plan
# --------------------------------------------------------------------------

def as_pattern(pattern: Any) -> Any:
    """``pattern`` (a SciPy sparse matrix or array, or a dense array) as a canonical
    CSR boolean array: sorted indices, no stored zeros."""
    P = sp.csr_array(pattern if sp.issparse(pattern) else np.asarray(pattern) != 0)
    P = sp.csr_array(P != 0, dtype=bool)
    P.sum_duplicates()
    P.sort_indices()
    return P


class Coloring:
    """A colouring of a sparsity pattern and the plan that recovers a sparse derivative
    from its compressed products; made by ``tr.coloring``, reusable as ``sparsity=``.

    ``kind`` is 'column' (forward mode: ``J @ seeds.T``), 'row' (reverse mode:
    ``seeds @ J``) or 'symmetric' (a Hessian: ``H @ seeds.T``); ``colors`` gives each
    column (row, variable) its colour, ``ncolors`` their number, ``pattern`` the CSR
    boolean pattern (a symmetric one made symmetric).

    >>> import numpy as np, scipy.sparse as sp, tracked as tr
    >>> c = tr.coloring(sp.eye_array(4, k=1) + sp.eye_array(4), kind='column')
    >>> c.ncolors, c.colors
    (2, array([1, 0, 1, 0]))
    >>> J = np.array([[1., 2, 0, 0], [0, 3, 4, 0], [0, 0, 5, 6], [0, 0, 0, 7]])
    >>> c.decompress(J @ c.seeds().T).toarray()
    array([[1., 2., 0., 0.],
           [0., 3., 4., 0.],
           [0., 0., 5., 6.],
           [0., 0., 0., 7.]])
    """

    def __init__(self, pattern: Any, kind: Kind, colors: Any) -> None:
        if kind not in _KINDS[1:]:
            raise ValueError(f'kind={kind!r}: expected one of {_KINDS[1:]}')
        self.pattern = as_pattern(pattern)
        self.kind = kind
        self.colors = np.asarray(colors, np.int64)
        if self.colors.shape != (self.pattern.shape[0 if kind == 'row' else 1],):
            raise ValueError(f'{len(self.colors)} colours for a {kind} colouring of a '
                             f'{self.pattern.shape[0]}x{self.pattern.shape[1]} pattern')
        # an empty pattern needs no pass at all (greedy gave its columns colour 0)
        self.ncolors = int(self.colors.max()) + 1 if pattern.nnz else 0
        self._src = self._plan()
        self._seeds: dict[Any, Any] = {}

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of the derivative, ``(outputs, inputs)``."""
        m, n = self.pattern.shape
        return int(m), int(n)

    def _plan(self) -> Any:
        """Per stored entry of the pattern, its position in the flattened compressed
        matrix; a ``ValueError`` if some entry cannot be read alone."""
        P, c, nc = self.pattern, self.colors, max(self.ncolors, 1)
        m, n = self.shape
        rows = np.repeat(np.arange(m), np.diff(P.indptr))
        cols = P.indices
        if self.kind == 'row':
            alone = _alone(cols * nc + c[rows], n * nc)
            src = c[rows] * n + cols
        else:
            alone = _alone(rows * nc + c[cols], m * nc)
            src = c[cols] * m + rows
            if self.kind == 'symmetric':
                other = _alone(cols * nc + c[rows], n * nc)
                src = np.where(alone, src, c[rows] * n + cols)
                alone = alone | other
        if not alone.all():
            k = int(np.flatnonzero(~alone)[0])
            raise ValueError(f'this {self.kind} colouring cannot read entry '
                             f'({rows[k]}, {cols[k]}) alone')
        return src

    def seeds(self, dtype: Any = np.float64) -> Any:
        """``(ncolors, size)``: row ``c`` is 1 at the columns (rows, variables) of colour
        ``c`` (read-only: made once, shared by every call)."""
        S = self._seeds.get(np.dtype(dtype))
        if S is None:
            S = np.zeros((self.ncolors, len(self.colors)), dtype)
            if self.ncolors:
                S[self.colors, np.arange(len(self.colors))] = 1
            S.flags.writeable = False
            self._seeds[np.dtype(dtype)] = S
        return S

    def decompress(self, B: Any) -> Any:
        """The sparse derivative (CSR) from ``B``, the compressed products: ``(m,
        ncolors)`` for 'column' and 'symmetric' (``J @ seeds.T``), ``(ncolors, n)`` for
        'row' (``seeds @ J``)."""
        B = np.asarray(B)
        flat = np.ravel(B.T) if self.kind != 'row' else np.ravel(B)
        P = self.pattern
        return sp.csr_array((flat[self._src], P.indices, P.indptr), shape=self.shape)

    def __repr__(self) -> str:
        m, n = self.shape
        return (f'<Coloring {self.kind}: {self.ncolors} colours for a {m}x{n} pattern with '
                f'{self.pattern.nnz} non-zeros>')


def _alone(keys: Any, size: int) -> Any:
    """Whether each key (row * ncolors + colour) occurs once."""
    return np.bincount(keys, minlength=size)[keys] == 1


def coloring(pattern: Any, kind: Literal['auto', 'column', 'row', 'symmetric'] = 'auto'
             ) -> Coloring:
    """``coloring(pattern, kind='auto')``: a reusable colouring of a sparsity pattern,
    holding the colours and the recovery plan; pass it as ``sparsity=`` to
    ``tr.jacobian``, ``tr.hessian`` or a tape to skip detection and colouring.

    ``kind``: 'column' (one forward-mode tangent per colour), 'row' (one reverse sweep
    per colour), 'auto' (the one with fewer colours; columns on a tie), 'symmetric'
    (a Hessian: star colouring, recovered from both sides).  Greedy, largest-first.

    >>> import numpy as np, tracked as tr
    >>> f = lambda u: u[2:] - 2 * u[1:-1] + u[:-2]          # a stencil: 3 colours
    >>> c = tr.coloring(tr.jacobian_sparsity(f, np.ones(100)))
    >>> c
    <Coloring column: 3 colours for a 98x100 pattern with 294 non-zeros>
    >>> J, = tr.jacobian(f, np.linspace(0, 1, 100), sparsity=c)
    >>> J.format, J[:2, :4].toarray()
    ('csr', array([[ 1., -2.,  1.,  0.],
           [ 0.,  1., -2.,  1.]]))

    A recorded tape holds the colouring (a Newton loop pays for it once):

    >>> tape = tr.JacobianTape(lambda u: u[1:] * u[:-1], np.zeros(4), sparsity='auto')
    >>> tape.coloring, tape.jacobian(np.array([1.0, 2.0, 3.0, 4.0]))[0].toarray()
    (<Coloring column: 2 colours for a 3x4 pattern with 6 non-zeros>, array([[2., 1., 0., 0.],
           [0., 3., 2., 0.],
           [0., 0., 4., 3.]]))
    """
    if kind not in _KINDS:
        raise ValueError(f'kind={kind!r}: expected one of {_KINDS}')
    P = as_pattern(pattern)
    if kind == 'symmetric':
        if P.shape[0] != P.shape[1]:
            raise ValueError(f'a symmetric colouring needs a square pattern, got {P.shape}')
        P = as_pattern(P + P.T)
        return Coloring(P, 'symmetric', _symmetric_colors(P))
    col = Coloring(P, 'column', _column_colors(P)) if kind != 'row' else None
    if kind == 'column':
        assert col is not None
        return col
    row = Coloring(P, 'row', _column_colors(sp.csr_array(P.T)))
    return row if col is None or row.ncolors < col.ncolors else col
