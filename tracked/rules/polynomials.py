"""Polynomials (``np.poly*``, ``np.vander``): NumPy's algorithms as composites.

``polyval`` is Horner's rule exactly as NumPy runs it (so ``np.poly1d(c)(x)``, which
calls it, is differentiated in ``c`` and ``x``); ``polyfit`` is linear in ``y``: the
pseudo-inverse of the scaled Vandermonde matrix applied to ``y`` (a plain matrix
when ``x`` is plain; with a tracked ``x`` it goes through ``np.linalg.pinv``'s rule).
"""
from typing import Any

import numpy as np

from ..registry import defcomposite
from ..boxes import Tracked


def _polyval(p, x):
    if isinstance(p, np.poly1d):
        p = p.coeffs
    y = np.zeros(np.shape(x), np.result_type(p, x, 0.0)) if not np.ndim(x) == 0 else 0.0
    for k in range(np.shape(p)[0]):            # Horner, NumPy's order of operations
        y = y * x + p[k]
    return y


def _vander(x, N=None, increasing=False):
    if np.ndim(x) != 1:
        raise ValueError('x must be a one-dimensional array or sequence.')
    n = np.shape(x)[0]
    N = n if N is None else N
    cols = [np.ones((n, 1), np.result_type(x, 0.0))] if N > 0 else []
    if N > 1:
        # NumPy's cumulative products (exact derivatives at x == 0, unlike x ** k)
        cols.append(np.cumprod(np.broadcast_to(np.reshape(x, (n, 1)), (n, N - 1)), axis=1))
    v = np.concatenate(cols, axis=1) if cols else np.zeros((n, 0))
    return v if increasing else np.flip(v, axis=1)


def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    order = int(deg) + 1
    if deg < 0:
        raise ValueError('expected deg >= 0')
    if np.ndim(x) != 1:
        raise TypeError('expected 1D vector for x')
    if np.shape(x)[0] == 0:
        raise TypeError('expected non-empty vector for x')
    if np.ndim(y) < 1 or np.ndim(y) > 2:
        raise TypeError('expected 1D or 2D array for y')
    if np.shape(x)[0] != np.shape(y)[0]:
        raise TypeError('expected x and y to have same length')
    m = np.shape(x)[0]
    if rcond is None:
        rcond = m * np.finfo(np.result_type(x, 0.0)).eps
    lhs = _vander(x, order)
    rhs = y
    if w is not None:
        lhs = lhs * np.reshape(w, (-1, 1))
        rhs = rhs * (np.reshape(w, (-1, 1)) if np.ndim(y) == 2 else w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    plain_lhs = not isinstance(lhs, Tracked)
    c = np.linalg.pinv(lhs, rcond=rcond) @ rhs
    c = c / (np.reshape(scale, (-1, 1)) if np.ndim(y) == 2 else scale)
    if not (full or cov):
        return c
    if not plain_lhs:
        raise TypeError('np.polyfit(..., full=True or cov=True) with a tracked x is not '
                        'supported; pass x as a plain array')
    _, _, rank, sv = np.linalg.lstsq(lhs, np.zeros(m), rcond=rcond)
    r = rhs - lhs @ (c * (np.reshape(scale, (-1, 1)) if np.ndim(y) == 2 else scale))
    resids = np.sum(r * r, axis=0)
    if not (rank == order and m > order):
        resids = np.zeros((0,))
    elif np.ndim(resids) == 0:
        resids = np.reshape(resids, (1,))
    if full:
        return c, resids, rank, sv, rcond
    base = np.linalg.inv(lhs.T @ lhs) / np.outer(scale, scale)
    if cov == 'unscaled':
        fac = 1.0
    else:
        if m <= order:
            raise ValueError('the number of data points must exceed order to scale the '
                             'covariance matrix')
        fac = resids / (m - order)
    if np.ndim(y) == 1:
        return c, base * fac
    return c, base[:, :, None] * fac


def _lengths(a1, a2):
    a1, a2 = np.atleast_1d(a1), np.atleast_1d(a2)
    return a1, a2, np.shape(a2)[0] - np.shape(a1)[0]


def _pad_front(a, n):
    return np.concatenate((np.zeros((n,), np.result_type(a, 0.0)), a)) if n else a


def _polyadd(a1, a2):
    a1, a2, d = _lengths(a1, a2)
    return _pad_front(a1, max(d, 0)) + _pad_front(a2, max(-d, 0))


def _polysub(a1, a2):
    a1, a2, d = _lengths(a1, a2)
    return _pad_front(a1, max(d, 0)) - _pad_front(a2, max(-d, 0))


def _polymul(a1, a2):
    return np.convolve(np.atleast_1d(a1), np.atleast_1d(a2))


def _polyder(p, m=1):
    m = int(m)
    if m < 0:
        raise ValueError('Order of derivative must be positive (see polyint)')
    for _ in range(m):
        n = np.shape(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


def _polyint(p, m=1, k=None):
    m = int(m)
    if m < 0:
        raise ValueError('Order of integral must be positive (see polyder)')
    if k is None:
        k = np.zeros(m)
    k = np.atleast_1d(k)
    if np.shape(k)[0] == 1 and m > 1:
        k = k[0] * np.ones(m)
    for i in range(m):
        p = np.concatenate((p / np.arange(np.shape(p)[0], 0, -1), k[i:i + 1]))
    return p


def _polydiv(u, v):
    """Long division, NumPy's loop with functional updates."""
    u = np.atleast_1d(u) + 0.0
    v = np.atleast_1d(v) + 0.0
    m, n = np.shape(u)[0] - 1, np.shape(v)[0] - 1
    scale = 1.0 / v[0]
    q: Any = []                        # the quotient's terms, then their array
    r = u
    for k in range(max(m - n + 1, 0)):
        d = scale * r[k]
        q.append(d)
        r = np.concatenate((r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]))
    q = np.stack(q) if q else np.zeros((1,), np.result_type(u, v))
    while np.allclose(r[0], 0, rtol=1e-14) and np.shape(r)[-1] > 1:
        r = r[1:]
    return q, r


def _poly(seq_of_zeros):
    if np.ndim(seq_of_zeros) == 2 and np.shape(seq_of_zeros)[0] == np.shape(seq_of_zeros)[1]:
        seq_of_zeros = np.linalg.eigvals(seq_of_zeros)
    elif np.ndim(seq_of_zeros) != 1:
        raise ValueError('input must be 1d or non-empty square 2d array.')
    a = np.ones((1,))
    for k in range(np.shape(seq_of_zeros)[0]):
        a = np.convolve(a, np.stack([np.ones(()), -seq_of_zeros[k]]))
    if np.iscomplexobj(a):
        roots = np.sort(seq_of_zeros)
        if np.all(roots == np.sort(np.conj(seq_of_zeros))):
            a = np.real(a)
    return a


def _trim_zeros(filt, trim='fb', axis=None):
    """Leading/trailing zeros cut off: the cut is read from the values (a guard on a
    recorded tape), the result a slice."""
    if np.ndim(filt) != 1 or axis not in (None, 0, -1):
        raise TypeError('np.trim_zeros of a tracked value: only 1-d arrays are supported')
    nz = np.flatnonzero(filt)
    n = np.shape(filt)[0]
    if np.shape(nz)[0] == 0:
        return filt[:0]
    start = int(nz[0]) if 'f' in trim.lower() else 0
    stop = int(nz[-1]) + 1 if 'b' in trim.lower() else n
    return filt[start:stop]


def _roots(p):
    """NumPy's algorithm: the eigenvalues of the companion matrix of the coefficients
    between the leading and trailing zeros (their count read from the values, a guard
    on a recorded tape), then a zero root per trailing zero."""
    p = np.atleast_1d(p)
    if np.ndim(p) != 1:
        raise ValueError('Input must be a rank-1 array.')
    nz = np.flatnonzero(p)
    if np.shape(nz)[0] == 0:
        return np.array([])
    trailing = np.shape(p)[0] - int(nz[-1]) - 1
    p = p[int(nz[0]):int(nz[-1]) + 1]
    n = np.shape(p)[0]
    if n < 2:
        roots = np.zeros(0, np.result_type(p, 0.0))
    else:
        below = np.eye(n - 2, n - 1)             # the companion's ones under the diagonal
        roots = np.linalg.eigvals(np.concatenate([(-p[1:] / p[0])[None], below]))
    return np.concatenate([roots, np.zeros(trailing, roots.dtype)])


defcomposite(np.polyval, _polyval, arrays=('p', 'x'))
defcomposite(np.roots, _roots)
defcomposite(np.vander, _vander)
defcomposite(np.polyfit, _polyfit, arrays=('x', 'y', 'w'))
defcomposite(np.polyadd, _polyadd)
defcomposite(np.polysub, _polysub)
defcomposite(np.polymul, _polymul)
defcomposite(np.polyder, _polyder)
defcomposite(np.polyint, _polyint)
defcomposite(np.polydiv, _polydiv)
defcomposite(np.poly, _poly)
defcomposite(np.trim_zeros, _trim_zeros)
