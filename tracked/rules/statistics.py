"""Statistics: median, quantile/percentile (every ``method=``), their nan-skipping
forms, nanprod/nanvar/nanstd/nancumsum/nancumprod, ptp, cov, corrcoef,
cumulative_sum/cumulative_prod.

All are composites of other rules.  Order statistics are a gather from the sorted
array (``np.sort`` is ``argsort`` + ``take_along_axis``, so a recorded tape sorts
the new values on a replay) and a linear interpolation between neighbours, with
positions from NumPy's own table of methods: each method is NumPy's, and the
gradient in the data is exact for every method (a quantile is a weighted sum of at
most two order statistics).  A tracked ``q`` gets its derivative from the
continuous methods' positions (``(n - 1) * q`` for 'linear'); the discrete methods
are piecewise constant in ``q``.  NaN-skipping forms count the non-NaN entries of
each lane, which sort to the end.  ``weights=`` (NumPy's 'inverted_cdf' only) picks
one element by NumPy's cumulative weights: the gradient goes to that element; the
result is piecewise constant in the weights and ``q``.
"""
import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..registry import defcomposite, nondifferentiable
from ..boxes import Tracked
from ..dispatch import call_nondiff
from .matrices import is_complex

try:
    from numpy.lib._function_base_impl import _QuantileMethods  # type: ignore[attr-defined]  # private
except ImportError:                                   # NumPy < 2
    from numpy.lib.function_base import _QuantileMethods  # type: ignore[import-not-found]

_NoValue = np._NoValue
# Continuous methods: NumPy's position n*q + (alpha + q*(1 - alpha - beta)) - 1.
_CONTINUOUS = {'interpolated_inverted_cdf': (0.0, 1.0), 'hazen': (0.5, 0.5),
               'weibull': (0.0, 0.0), 'median_unbiased': (1 / 3.0, 1 / 3.0),
               'normal_unbiased': (3 / 8.0, 3 / 8.0)}


def _check_out(name, out):
    if out is not None:
        raise TypeError(f'np.{name}(..., out=...) cannot write a tracked result into an '
                        f'array; use y = np.{name}(...) instead')


def _to_last(a, axis):
    """``a`` with the reduced axes merged into one last axis; the kept shape; the
    keepdims shape."""
    shape = np.shape(a)
    nd = len(shape)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    kept = [i for i in range(nd) if i not in axes]
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    moved = np.transpose(a, kept + list(axes)) if nd else a
    lanes = np.reshape(moved, tuple(shape[i] for i in kept) + (n,))
    keepdims_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    return lanes, tuple(shape[i] for i in kept), keepdims_shape


# --------------------------------------------------------------------------
# Positions of quantiles in a sorted lane (plain: functions of q and counts)
# --------------------------------------------------------------------------

def _numpy_position(n, q, method):
    """NumPy's virtual index of quantile ``q`` among ``n`` sorted values."""
    return np.asanyarray(_QuantileMethods[method]['get_virtual_index'](n, np.asanyarray(q)))


def _numpy_gamma(vi, method):
    """NumPy's interpolation weight for a non-integer method (averaged_inverted_cdf and
    midpoint fix it to 0, 0.5 or 1)."""
    lo = np.floor(vi)
    gamma = np.asanyarray(vi - lo)
    return np.asanyarray(_QuantileMethods[method]['fix_gamma'](gamma, vi), dtype=vi.dtype)


nondifferentiable(_numpy_position, _numpy_gamma)


def _position(n, q, method):
    """The virtual index, differentiable in ``q`` for the continuous methods."""
    if not isinstance(q, Tracked) or method not in _CONTINUOUS and method != 'linear':
        return call_nondiff(_numpy_position, (n, q, method), {})
    if method == 'linear':
        return (n - 1) * q
    alpha, beta = _CONTINUOUS[method]
    return n * q + (alpha + q * (1 - alpha - beta)) - 1


def _lerp(a, b, t):
    """NumPy's ``_lerp``: exact at both ends."""
    d = b - a
    return np.where(t >= 0.5, b - d * (1 - t), a + d * t)


def _gather(s, idx):
    """``s[..., idx]`` along the last axis, ``idx`` shaped ``Q + kept``."""
    target = np.shape(idx) + (np.shape(s)[-1],)
    s = np.broadcast_to(s, target) if np.shape(s) != target else s
    return np.take_along_axis(s, np.expand_dims(idx, -1), axis=-1)[..., 0]


def _quantiles(a, q, axis, method, keepdims, skip_nan):
    """``np.quantile``/``np.nanquantile`` (``q`` in [0, 1]) on tracked values."""
    if method not in _QuantileMethods:
        raise ValueError(f'{method!r} is not a valid method. Use one of: '
                         f'{tuple(_QuantileMethods)}')
    if not isinstance(q, Tracked):
        q = np.asanyarray(q)
        if not (np.all(q >= 0) and np.all(q <= 1)):
            raise ValueError('Quantiles must be in the range [0, 1]')
    lanes, kept, keep_shape = _to_last(a, axis)
    s = np.sort(lanes, axis=-1)                       # NaNs last
    qshape = np.shape(q)
    extra = (1,) * len(kept)
    qb = np.reshape(q, qshape + extra) if extra and qshape else q
    if skip_nan:
        n = call_nondiff(np.sum, (~np.isnan(s),), {'axis': -1})     # per lane
    else:
        n = np.shape(s)[-1]
    vi = _position(n, qb, method)
    fix_gamma = _QuantileMethods[method]['fix_gamma']
    if fix_gamma is None:                             # methods that pick one element
        idx = np.astype(np.broadcast_to(vi, qshape + kept), np.intp)
        out = _gather(s, idx)
    else:
        last = n - 1
        floor = np.floor(vi)
        lo = np.where(vi >= last, last, np.where(vi < 0, 0, floor))
        hi = np.where(vi >= last, last, np.where(vi < 0, 0, floor + 1))
        lo = np.astype(np.broadcast_to(lo, qshape + kept), np.intp)
        hi = np.astype(np.broadcast_to(hi, qshape + kept), np.intp)
        t = vi - floor if method in _CONTINUOUS or method == 'linear' else \
            call_nondiff(_numpy_gamma, (vi, method), {})
        out = _lerp(_gather(s, lo), _gather(s, hi), t)
    if np.shape(s)[-1]:
        if skip_nan:
            out = np.where(n == 0, np.nan, out)       # all-NaN lane (NumPy warns, gives nan)
        else:
            out = np.where(np.isnan(s[..., -1]), np.nan, out)
    if keepdims:
        out = np.reshape(out, qshape + keep_shape)
    return out


def _weighted_pick(lanes, weights, q, skip_nan):
    """Index into each lane (last axis) of NumPy's weighted 'inverted_cdf' quantile ``q``
    (shape ``Q + kept``): the first sorted element whose cumulative weight reaches ``q``
    of the lane's total.  Plain: a NumPy function of the values, as NumPy computes it."""
    nan = np.isnan(lanes)
    if skip_nan:
        weights = np.where(nan, 0.0, weights)          # NaNs sort last with no weight
    order = np.argsort(lanes, axis=-1)
    cdf = np.cumsum(np.take_along_axis(weights, order, axis=-1), axis=-1, dtype=np.float64)
    total = cdf[..., -1:]
    empty = np.all(nan, axis=-1, keepdims=True) if skip_nan else np.zeros_like(total, bool)
    if np.any(~np.isfinite(total) | (total == 0) & ~empty):
        raise ValueError('Weights included NaN, inf or were all zero.')
    cdf = cdf / np.where(empty, 1.0, total)
    if q.dtype.kind == 'f':
        cdf = cdf.astype(q.dtype)
    if np.any(cdf[..., 0] == 0):                       # leading zero weights: NumPy's -1
        cdf[cdf == 0] = -1
    qb = np.reshape(q, q.shape + (1,) * lanes.ndim)
    pos = np.minimum(np.sum(cdf < qb, axis=-1), lanes.shape[-1] - 1)
    order = np.broadcast_to(order, q.shape + order.shape)
    return np.take_along_axis(order, pos[..., None], axis=-1)[..., 0]


nondifferentiable(_weighted_pick)


def _weighted_quantiles(name, a, q, axis, method, keepdims, weights, skip_nan):
    """``np.quantile(..., method='inverted_cdf', weights=w)``: an element of ``a`` (its
    gradient goes there), piecewise constant in ``q`` and the weights."""
    if method != 'inverted_cdf':
        raise ValueError(f"Only method 'inverted_cdf' supports weights. Got: {method}.")
    shape = np.shape(a)
    axes = None if axis is None else normalize_axis_tuple(axis, len(shape))
    if np.shape(weights) != shape:
        if axes is None:
            raise TypeError('Axis must be specified when shapes of a and weights differ.')
        if np.shape(weights) != tuple(shape[i] for i in axes):
            raise ValueError('Shape of weights must be consistent with shape of a along '
                             'specified axis.')
        weights = np.reshape(np.transpose(weights, np.argsort(axes)),
                             tuple(s if i in axes else 1 for i, s in enumerate(shape)))
        weights = np.broadcast_to(weights, shape)
    if np.any(weights < 0):
        raise ValueError('Weights must be non-negative.')
    lanes, kept, keep_shape = _to_last(a, axes)
    wlanes = _to_last(weights, axes)[0]
    qa = q if isinstance(q, Tracked) else np.asanyarray(q)
    idx = call_nondiff(_weighted_pick, (lanes, wlanes, qa, skip_nan), {})
    out = _gather(lanes, idx)
    nan = np.isnan(lanes)
    lane_nan = np.all(nan, axis=-1) if skip_nan else np.any(nan, axis=-1)
    out = np.where(lane_nan, np.nan, out)
    if keepdims:
        out = np.reshape(out, np.shape(q) + keep_shape)
    return out


def _quantile_impl(name, scale, skip_nan):
    def impl(a, q, axis=None, out=None, overwrite_input=False, method='linear',
             keepdims=False, *, weights=None, interpolation=None):
        _check_out(name, out)
        if interpolation is not None:
            method = interpolation
        if not isinstance(q, Tracked):
            q = np.asanyarray(q)
        q = q if scale == 1 else q / scale
        if weights is not None:
            return _weighted_quantiles(name, a, q, axis, method, keepdims, weights, skip_nan)
        return _quantiles(a, q, axis, method, keepdims, skip_nan)
    impl.__name__ = name
    return impl


for _fn, _scale, _skip in ((np.quantile, 1, False), (np.percentile, 100, False),
                           (np.nanquantile, 1, True), (np.nanpercentile, 100, True)):
    defcomposite(_fn, _quantile_impl(_fn.__name__, _scale, _skip),
                 arrays=('a', 'q', 'weights'))


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's median: the middle element, or the mean of the middle two."""
    _check_out('median', out)
    lanes, kept, keep_shape = _to_last(a, axis)
    n = np.shape(lanes)[-1]
    if n == 0:
        return np.mean(lanes, axis=-1)                # NumPy's nan and warning
    s = np.sort(lanes, axis=-1)
    mid = n // 2
    out = s[..., mid] if n % 2 else np.mean(s[..., mid - 1:mid + 1], axis=-1)
    out = np.where(np.isnan(s[..., -1]), np.nan, out)
    return np.reshape(out, keep_shape) if keepdims else out


def _nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _check_out('nanmedian', out)
    return _quantiles(a, 0.5, axis, 'linear', keepdims, True)


defcomposite(np.median, _median)
defcomposite(np.nanmedian, _nanmedian)


# --------------------------------------------------------------------------
# NaN-skipping reductions: the NaNs replaced by the operation's identity first, so
# that no NaN reaches a pullback (0 * nan would poison the gradient)
# --------------------------------------------------------------------------

def _nanprod(a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,
             where=_NoValue):
    kw = {k: v for k, v in (('keepdims', keepdims), ('initial', initial), ('where', where))
          if v is not _NoValue}
    return np.prod(np.where(np.isnan(a), 1.0, a), axis, dtype, out, **kw)


def _nanmoment(name, root):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_NoValue, *,
             where=_NoValue, mean=_NoValue, correction=_NoValue):
        _check_out(name, out)
        if where is not _NoValue or mean is not _NoValue:
            raise TypeError(f'np.{name}(..., where=/mean=) is not supported on tracked values')
        if correction is not _NoValue:
            ddof = correction
        keep = keepdims is not _NoValue and keepdims
        ok = ~np.isnan(a)
        x = np.where(ok, a, 0.0)
        n = call_nondiff(np.sum, (ok,), {'axis': axis, 'keepdims': True})
        centred = (x - np.sum(x, axis=axis, keepdims=True) / np.maximum(n, 1)) * ok
        dof = call_nondiff(np.sum, (ok,), {'axis': axis, 'keepdims': keep}) - ddof
        sq = np.real(centred * np.conj(centred)) if is_complex(centred) else centred * centred
        var = np.sum(sq, axis=axis, keepdims=keep)      # |x - mean|^2, as NumPy's
        var = np.where(dof > 0, var / np.where(dof > 0, dof, 1), np.nan)   # NumPy's nan
        if dtype is not None:
            var = np.astype(var, dtype)
        return np.sqrt(var) if root else var
    impl.__name__ = name
    return impl


defcomposite(np.nanprod, _nanprod)
defcomposite(np.nanvar, _nanmoment('nanvar', False))
defcomposite(np.nanstd, _nanmoment('nanstd', True))
defcomposite(np.nancumsum, lambda a, axis=None, dtype=None, out=None:
             np.cumsum(np.where(np.isnan(a), 0.0, a), axis, dtype, out))
defcomposite(np.nancumprod, lambda a, axis=None, dtype=None, out=None:
             np.cumprod(np.where(np.isnan(a), 1.0, a), axis, dtype, out))


# --------------------------------------------------------------------------
# ptp, cumulative_sum/prod
# --------------------------------------------------------------------------

def _ptp(a, axis=None, out=None, keepdims=_NoValue):
    _check_out('ptp', out)
    keep = keepdims is not _NoValue and keepdims
    return np.max(a, axis=axis, keepdims=keep) - np.min(a, axis=axis, keepdims=keep)


def _cumulative(name, fn, identity):
    def impl(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _check_out(name, out)
        if axis is None:
            if np.ndim(x) > 1:
                raise ValueError('For arrays which have more than one dimension '
                                 '``axis`` argument is required.')
            axis = 0
        y = fn(x, axis=axis, dtype=dtype)
        if include_initial:
            ax = normalize_axis_tuple(axis, np.ndim(y))[0]
            shape = tuple(1 if i == ax else s for i, s in enumerate(np.shape(y)))
            y = np.concatenate([np.full(shape, identity, np.result_type(y)), y], axis=ax)
        return y
    impl.__name__ = name
    return impl


defcomposite(np.ptp, _ptp)
if hasattr(np, 'cumulative_sum'):         # NumPy >= 2.1
    defcomposite(np.cumulative_sum, _cumulative('cumulative_sum', np.cumsum, 0))
    defcomposite(np.cumulative_prod, _cumulative('cumulative_prod', np.cumprod, 1))


# --------------------------------------------------------------------------
# cov and corrcoef: NumPy's formulas on tracked values (data and weights)
# --------------------------------------------------------------------------

def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
         dtype=None):
    if ddof is not None and ddof != int(ddof):
        raise ValueError('ddof must be integer')
    X = np.atleast_2d(m)
    if not rowvar and np.shape(X)[0] != 1:
        X = np.transpose(X)
    if np.shape(X)[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        yy = np.atleast_2d(y)
        if not rowvar and np.shape(yy)[0] != 1:
            yy = np.transpose(yy)
        X = np.concatenate((X, yy), axis=0)
    if dtype is not None:
        X = np.astype(X, dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = np.asarray(fweights, dtype=float) if not isinstance(fweights, Tracked) else fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    nobs = np.shape(X)[1]
    if w is None:
        avg = np.mean(X, axis=1)
        w_sum = float(nobs)
    else:
        w_sum = np.sum(w)
        avg = np.sum(X * w, axis=1) / w_sum
    if w is None:
        fact = nobs - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aweights) / w_sum
    Xc = X - avg[:, None]
    Xw = Xc if w is None else Xc * w
    c = np.matmul(Xw, np.conj(np.transpose(Xc))) / fact
    return np.squeeze(c)


def _corrcoef(x, y=None, rowvar=True, bias=_NoValue, ddof=_NoValue, *, dtype=None):
    c = _cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    d = np.diagonal(c)
    stddev = np.sqrt(np.real(d))
    c = c / stddev[:, None] / stddev[None, :]
    if np.iscomplexobj(c):
        return np.clip(np.real(c), -1, 1) + 1j * np.clip(np.imag(c), -1, 1)
    return np.clip(c, -1, 1)


defcomposite(np.cov, _cov, arrays=('m', 'y', 'fweights', 'aweights'))
defcomposite(np.corrcoef, _corrcoef)
