"""Helpers of the matrix rules (products, linalg, decompositions, fft).

They work on plain arrays and on values tracked at an outer level alike (every
operation is a NumPy call), so pullbacks written with them nest.  ``Meta`` stand-ins
(an entry's record of an argument's shape and dtype) answer ``shape``/``dtype`` too.
"""
import numpy as np

from ..boxes import Tracked


def arr(x):
    """``x`` as an array-like with ``.shape``/``.ndim``; tracked values untouched."""
    return x if isinstance(x, (np.ndarray, Tracked)) else np.asarray(x)


def shape_of(x):
    s = getattr(x, 'shape', None)
    return np.shape(x) if s is None else tuple(s)


def dtype_of(x):
    d = getattr(x, 'dtype', None)
    return np.result_type(x) if d is None else d


def is_complex(x):
    return dtype_of(x).kind == 'c'


def real_dtype(x):
    """The real dtype of ``x``'s precision (float32 for complex64)."""
    return np.empty(0, dtype_of(x)).real.dtype


def conj(x):
    """The complex conjugate; ``x`` itself when it is real (no recorded operation)."""
    return np.conj(x) if is_complex(x) else x


def mT(x):
    """Swap the last two axes (a transpose per matrix of a stack)."""
    nd = len(shape_of(x))
    if nd == 2:
        return x.T                 # a view for arrays, np.transpose for tracked values
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    return np.transpose(x, perm)


def mH(x):
    """The conjugate transpose of each matrix (the transpose for real ones)."""
    return conj(mT(x))


def col(x):
    """Append an axis: ``x[..., None]``."""
    return np.reshape(x, shape_of(x) + (1,))


def row(x):
    """Insert an axis before the last: ``x[..., None, :]``."""
    s = shape_of(x)
    return np.reshape(x, s[:-1] + (1,) + s[-1:])


def moveaxis(x, src, dst):
    nd = len(shape_of(x))
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return np.transpose(x, tuple(perm))


def pad_batch(t, extra):
    """Tangents stacked along a leading (batch) axis, with ``extra`` size-1 axes after
    it: aligned with an output that has ``extra`` more axes than their argument."""
    if extra <= 0:
        return t
    s = shape_of(t)
    return np.reshape(t, s[:1] + (1,) * extra + s[1:])


def eye(n, like):
    """The identity of size ``n`` in ``like``'s dtype (float32 stays float32)."""
    return np.eye(n, dtype=dtype_of(like))


def diag_embed(v):
    """A stack of diagonal matrices from a stack of vectors: ``v[..., :, None] * I``."""
    return row(v) * np.eye(shape_of(v)[-1], dtype=dtype_of(v))


def diag_part(x):
    """The diagonal of each matrix of a stack, as a vector."""
    return np.diagonal(x, 0, -2, -1)


def trace(x):
    return np.trace(x, 0, -2, -1)


def solve(a, b):
    """``a^-1 b`` for stacks of matrices ``b`` (NumPy 2 reads a 1-d b as one vector)."""
    return np.linalg.solve(a, b)


def right_solve(x, a):
    """``x a^-1``: ``(a^-H x^H)^H``."""
    return mH(solve(mH(a), mH(x)))


def hermitian_part(t, lower=True):
    """The Hermitian matrix that one triangle of ``t`` stands for (LAPACK reads the
    lower one, or the upper, and only the real part of the diagonal):
    ``Re diag(t) + tril(t, -1) + tril(t, -1)^H``."""
    n = shape_of(t)[-1]
    strict = np.tri(n, k=-1, dtype=real_dtype(t))
    if not lower:
        strict = strict.T
    low = t * strict
    d = diag_embed(np.real(diag_part(t)) if is_complex(t) else diag_part(t))
    return d + low + mH(low)


def fold_triangle(s, lower=True):
    """The adjoint of ``hermitian_part``: the gradient of a function of the Hermitian
    matrix that one triangle of the input stands for, from its "standard" gradient
    ``s``: ``Re diag(s) + tril(s + s^H, -1)`` (``triu`` when not ``lower``)."""
    n = shape_of(s)[-1]
    strict = np.tri(n, k=-1, dtype=real_dtype(s))
    if not lower:
        strict = strict.T
    d = diag_embed(np.real(diag_part(s)) if is_complex(s) else diag_part(s))
    return d + (s + mH(s)) * strict


def inverse_gaps(w):
    """``F[..., i, j] = 1 / (w_j - w_i)``, 0 on the diagonal and where eigenvalues
    repeat exactly (there the derivative of the eigenvectors is undefined; a zero
    keeps losses of the eigenvalues alone finite instead of 0 * inf = nan)."""
    diff = row(w) - col(w)
    same = diff == 0
    return ~same / (diff + same)


def reject_out(name, out):
    if out is not None:
        raise TypeError(f'{name}(..., out=...) cannot write a tracked result into an '
                        f'array; use y = {name}(...) instead')
