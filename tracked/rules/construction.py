"""Building and selecting arrays: linspace/logspace/geomspace with tracked end points,
meshgrid, select, piecewise, choose, partition, nan_to_num, rollaxis, dsplit, block,
diagflat, resize, insert, delete, compress, extract, apply_along_axis, apply_over_axes,
the weighted counts bincount/histogram/histogram2d/histogramdd (w.r.t. the weights),
and NumPy's in-place writers (put, place, putmask, copyto, fill_diagonal,
put_along_axis) on tracked arrays.

All are composites.  Value-dependent choices (partition's order, piecewise's and
select's masks, histogram's bins) are NumPy functions of the values, recorded on a
tape, so a replay recomputes them.  The in-place writers record a new value and
point the tracked array at it, as ``x[i] = v`` does; a plain destination cannot
hold a tracked value and is refused.
"""
import builtins
import math
import operator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..registry import Primitive, defcomposite, nondifferentiable
from ..boxes import Tracked
from ..dispatch import apply, call_nondiff
from .indexing import scatter_add


# --------------------------------------------------------------------------
# Ranges with tracked end points
# --------------------------------------------------------------------------

def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
              device=None):
    num = operator.index(num)
    if num < 0:
        raise ValueError(f'Number of samples, {num}, must be non-negative.')
    div = (num - 1) if endpoint else num
    delta = stop - start
    t = np.reshape(np.arange(num, dtype=float), (-1,) + (1,) * np.ndim(delta))
    step = delta / div if div > 0 else np.nan
    y = (t * step if div > 0 else t * delta) + start
    if endpoint and num > 1:
        y = np.concatenate((y[:-1], np.broadcast_to(stop, np.shape(y)[1:])[None]), axis=0)
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if dtype is not None:
        if np.dtype(dtype).kind in 'iu':
            y = np.floor(y)
        y = np.astype(y, dtype)
    return (y, step) if retstep else y


def _logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if np.ndim(base) > 0:
        nd = max(np.ndim(start), np.ndim(stop), np.ndim(base))
        start, stop, base = (np.reshape(v, (1,) * (nd - np.ndim(v)) + np.shape(v))
                             for v in (start, stop, base))
        base = np.expand_dims(base, axis)
    y = np.power(base, _linspace(start, stop, num, endpoint, axis=axis))
    return y if dtype is None else np.astype(y, dtype)


def _geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    if np.iscomplexobj(start) or np.iscomplexobj(stop):
        raise TypeError('np.geomspace of complex tracked end points is not supported')
    if np.any(start == 0) or np.any(stop == 0):
        raise ValueError('Geometric sequence cannot include zero')
    sign = np.sign(start)
    lo, hi = start * sign, stop * sign
    y = _logspace(np.log10(lo), np.log10(hi), num, endpoint, 10.0)
    if num > 0:     # NumPy puts the end points themselves in (10**log10(x) is not x)
        parts = [np.broadcast_to(lo, np.shape(y)[1:])[None], y[1:]]
        if num > 1 and endpoint:
            parts = [parts[0], y[1:-1], np.broadcast_to(hi, np.shape(y)[1:])[None]]
        y = np.concatenate(parts, axis=0)
    y = y * sign
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    return y if dtype is None else np.astype(y, dtype)


defcomposite(np.linspace, _linspace)
defcomposite(np.logspace, _logspace)
defcomposite(np.geomspace, _geomspace)


def _meshgrid(*xi, copy=True, sparse=False, indexing='xy'):
    if indexing not in ('xy', 'ij'):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    s0 = (1,) * nd
    out: Any = [np.reshape(x, s0[:i] + (-1,) + s0[i + 1:]) for i, x in enumerate(xi)]
    if indexing == 'xy' and nd > 1:
        out[0] = np.reshape(out[0], (1, -1) + s0[2:])
        out[1] = np.reshape(out[1], (-1, 1) + s0[2:])
    if not sparse:
        out = np.broadcast_arrays(*out)
    return tuple(np.copy(x) for x in out) if copy else tuple(out)


defcomposite(np.meshgrid, _meshgrid)


# --------------------------------------------------------------------------
# Selecting
# --------------------------------------------------------------------------

def _select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError('list of cases must be same length as list of conditions')
    if len(condlist) == 0:
        raise ValueError('select with an empty condition list is not possible')
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):  # the first match wins
        out = np.where(cond, choice, out)
    shape = np.broadcast_shapes(*(np.shape(c) for c in list(condlist) + list(choicelist)))
    return out if np.shape(out) == shape else np.broadcast_to(out, shape)


def _piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's piecewise: each function sees only its own elements (as in NumPy, so a
    function undefined elsewhere gives no NaN gradient); later conditions win."""
    n2 = len(funclist)
    if not isinstance(condlist, (list, tuple)) and np.ndim(condlist) == 0 or (
            not isinstance(condlist[0], (list, np.ndarray, Tracked)) and np.ndim(x) != 0):
        condlist = [condlist]
    conds = [c if isinstance(c, Tracked) else np.asarray(c, dtype=bool) for c in condlist]
    if len(conds) == n2 - 1:
        rest = ~conds[0]
        for c in conds[1:]:
            rest = rest & ~c
        conds.append(rest)
    elif len(conds) != n2:
        raise ValueError(f'with {len(conds)} condition(s), either {len(conds)} or '
                         f'{len(conds) + 1} functions are expected')
    shape = np.shape(x)
    out = np.zeros(shape, np.result_type(x, 0.0))
    for cond, func in zip(conds, funclist):
        cond = np.broadcast_to(cond, shape)
        if callable(func):
            vals = x[cond]
            piece = scatter_add(func(vals, *args, **kw), (cond,), shape)
        else:
            piece = func
        out = np.where(cond, piece, out)
    return out


def _choose(a, choices, out=None, mode='raise'):
    if out is not None:
        raise TypeError('np.choose(..., out=...) cannot write a tracked result into an array')
    n = len(choices)
    if mode == 'wrap':
        a = np.remainder(a, n)
    elif mode == 'clip':
        a = np.clip(a, 0, n - 1)
    elif np.any((a < 0) | (a >= n)):
        raise ValueError('invalid entry in choice array')
    parts = np.broadcast_arrays(a, *choices)
    stacked = np.stack(parts[1:])
    return np.take_along_axis(stacked, np.expand_dims(parts[0], 0), axis=0)[0]


def _partition(a, kth, axis=-1, kind='introselect', order=None):
    if order is not None:
        raise TypeError('np.partition(..., order=...) applies to structured arrays')
    if axis is None:
        a, axis = np.ravel(a), -1
    return np.take_along_axis(a, np.argpartition(a, kth, axis=axis, kind=kind), axis=axis)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if np.iscomplexobj(x):
        return (_nan_to_num(np.real(x), copy, nan, posinf, neginf)
                + 1j * _nan_to_num(np.imag(x), copy, nan, posinf, neginf))
    if np.result_type(x).kind not in 'fc':
        return x
    big = np.finfo(np.result_type(x)).max
    out = np.where(np.isnan(x), nan, x)
    out = np.where(np.isposinf(x), big if posinf is None else posinf, out)
    return np.where(np.isneginf(x), -big if neginf is None else neginf, out)


defcomposite(np.select, _select)
defcomposite(np.piecewise, _piecewise)
defcomposite(np.choose, _choose)
defcomposite(np.partition, _partition)
defcomposite(np.nan_to_num, _nan_to_num)


# --------------------------------------------------------------------------
# Rearranging
# --------------------------------------------------------------------------

def _rollaxis(a, axis, start=0):
    n = np.ndim(a)
    axis = normalize_axis_tuple(axis, n)[0]
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"'start' arg requires {-n} <= start < {n + 1}, "
                                      f"but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return a[...]
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return np.transpose(a, axes)


def _dsplit(ary, indices_or_sections):
    if np.ndim(ary) < 3:
        raise ValueError('dsplit only works on arrays of 3 or more dimensions')
    return np.split(ary, indices_or_sections, 2)


def _block(arrays):
    def depth(x):
        return 1 + depth(x[0]) if type(x) is list and x else 0

    def maxnd(x):
        return max(maxnd(e) for e in x) if type(x) is list else np.ndim(x)
    list_ndim = depth(arrays)
    nd = max(maxnd(arrays), list_ndim)

    def build(x, d):
        if type(x) is tuple:
            raise TypeError('arrays is a tuple. Only lists can be used to arrange blocks, '
                            'and np.block does not allow implicit conversion from tuple to '
                            'ndarray.')
        if type(x) is list:
            return np.concatenate([build(e, d + 1) for e in x], axis=-(list_ndim - d))
        return np.reshape(x, (1,) * (nd - np.ndim(x)) + np.shape(x))
    return build(arrays, 0)


def _resize(a, new_shape):
    shape = (new_shape,) if np.ndim(new_shape) == 0 else tuple(new_shape)
    flat = np.ravel(a)
    size = int(np.prod(shape, dtype=np.int64))
    if np.shape(flat)[0] == 0 or size == 0:
        return np.zeros(shape, np.result_type(a))
    reps = -(-size // np.shape(flat)[0])
    return np.reshape(np.concatenate((flat,) * reps)[:size], shape)


def _keep_along(a, keep, axis):
    """``a`` restricted to the positions where ``keep`` is true along ``axis``."""
    if axis is None:
        a, axis = np.ravel(a), 0
    return np.take(a, np.flatnonzero(keep), axis=axis)


def _delete(arr, obj, axis=None):
    n = np.size(arr) if axis is None else np.shape(arr)[normalize_axis_tuple(axis, np.ndim(arr))[0]]
    keep = np.ones(n, dtype=bool)
    keep[obj] = False
    return _keep_along(arr, keep, axis)


def _insert_labels(shape, obj, values_shape, axis):
    """Where each element of ``np.insert``'s result comes from: ``k >= 0`` is element
    ``k`` of ``arr`` (flat), ``-1 - k`` element ``k`` of ``values`` (flat).  NumPy's own
    insert on these labels, so every rule of NumPy's (broadcast values, several
    positions, a flattened ``axis=None``) is NumPy's.  Plain: a function of shapes."""
    size = math.prod(shape)
    labels = np.arange(size).reshape(shape)
    return np.insert(labels, obj, -1 - np.arange(math.prod(values_shape)).reshape(values_shape),
                     axis)


nondifferentiable(_insert_labels)


def _insert(arr, obj, values, axis=None):
    if not isinstance(values, Tracked):
        values = np.asarray(values)
    obj = obj if isinstance(obj, (slice, int, np.integer)) else np.asarray(obj)
    labels = call_nondiff(_insert_labels, (np.shape(arr), obj, np.shape(values), axis), {})
    pool = np.concatenate([np.ravel(arr), np.ravel(values).astype(np.result_type(arr))])
    return np.take(pool, np.where(labels >= 0, labels, np.size(arr) - 1 - labels))


def _compress(condition, a, axis=None, out=None):
    if out is not None:
        raise TypeError('np.compress(..., out=...) cannot write a tracked result into an array')
    return _keep_along(a, np.ravel(condition), axis)


defcomposite(np.rollaxis, _rollaxis)
defcomposite(np.dsplit, _dsplit)
defcomposite(np.block, _block)
defcomposite(np.diagflat, lambda v, k=0: np.diag(np.ravel(v), k))
defcomposite(np.resize, _resize)
defcomposite(np.delete, _delete)
defcomposite(np.compress, _compress)
defcomposite(np.extract, lambda condition, arr: np.take(np.ravel(arr),
                                                         np.flatnonzero(np.ravel(condition))))


def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    nd = np.ndim(arr)
    ax = normalize_axis_tuple(axis, nd)[0]
    moved = np.moveaxis(arr, ax, -1)
    outer = np.shape(moved)[:-1]
    if 0 in outer:
        raise ValueError('Cannot apply_along_axis when any iteration dimensions are 0')
    results = [func1d(moved[idx], *args, **kwargs) for idx in np.ndindex(*outer)]
    res = np.reshape(np.stack(results), outer + np.shape(results[0]))
    rnd = np.ndim(results[0])
    # NumPy puts the function's output axes where ``axis`` was
    return np.moveaxis(res, tuple(range(len(outer), len(outer) + rnd)),
                       tuple(range(ax, ax + rnd))) if rnd else res


def _apply_over_axes(func, a, axes):
    val = a
    n = np.ndim(a)
    for axis in ((axes,) if np.ndim(axes) == 0 else axes):
        axis = axis + n if axis < 0 else axis
        res = func(val, axis)
        if np.ndim(res) != np.ndim(val):
            res = np.expand_dims(res, axis)
            if np.ndim(res) != np.ndim(val):
                raise ValueError('function is not returning an array of the correct shape')
        val = res
    return val


defcomposite(np.apply_along_axis, _apply_along_axis)
defcomposite(np.apply_over_axes, _apply_over_axes)


# --------------------------------------------------------------------------
# Weighted counts: linear in the weights
# --------------------------------------------------------------------------

def _pick(g, x):
    return np.take_along_axis(g, x, axis=0)      # (dispatches on a recorded x too)


_bincount_w = Primitive(lambda x, w, minlength: np.bincount(x, w, minlength),
                        (None, lambda g, ans, x, w, minlength: _pick(g, x), None),
                        name='np.bincount', linear='joint')


def _bincount(x, /, weights=None, minlength=0):
    if isinstance(weights, Tracked):
        return apply(_bincount_w, (x, weights, minlength), {})
    return call_nondiff(np.bincount, (x, weights, minlength), {})


def _bin_index(a, edges):
    """The bin of each element as np.histogram counts it; ``len(edges) - 1`` for an
    element outside the range."""
    nb = len(edges) - 1
    idx = np.searchsorted(edges, a, side='right') - 1
    idx = np.where(a == edges[-1], nb - 1, idx)
    return np.where((a < edges[0]) | (a > edges[-1]) | np.isnan(a), nb, idx).ravel()


def _histogram(a, bins=10, range=None, density=None, weights=None):
    if not isinstance(weights, Tracked):
        return call_nondiff(np.histogram, (a, bins, range, density, weights), {})
    edges = call_nondiff(np.histogram_bin_edges, (a, bins, range), {})
    nb = np.shape(edges)[0] - 1
    idx = call_nondiff(_bin_index, (a, edges), {})
    counts = _bincount(idx, np.ravel(weights), nb + 1)[:nb]
    if density:
        counts = counts / np.diff(edges) / np.sum(counts)
    return counts, edges


defcomposite(np.insert, _insert, arrays=('arr', 'values'))


def _dd_edges(sample, bins, bounds, i):
    """NumPy's bin edges of ``np.histogramdd`` along axis ``i``."""
    return np.histogramdd(sample, bins, bounds)[1][i]


def _dd_flat(sample, *edges):
    """The flat bin of each sample in the histogram with an outlier bin at both ends of
    every axis, as NumPy counts (the right edge in the last bin, NaN and outliers at the
    ends)."""
    try:
        n, d = sample.shape
    except (AttributeError, ValueError):
        sample = np.atleast_2d(sample).T
        n, d = sample.shape
    counts = [np.searchsorted(edges[i], sample[:, i], side='right') for i in range(d)]
    for i in range(d):
        counts[i][sample[:, i] == edges[i][-1]] -= 1
    return np.ravel_multi_index(counts, tuple(len(e) + 1 for e in edges))


nondifferentiable(_dd_edges, _dd_flat)


def _histogramdd(sample, bins=10, range=None, density=None, weights=None):
    if not isinstance(weights, Tracked):
        return call_nondiff(np.histogramdd, (sample, bins, range, density, weights), {})
    d = len(sample) if type(sample) in (list, tuple) else \
        np.shape(sample)[1] if np.ndim(sample) == 2 else 1
    edges = [call_nondiff(_dd_edges, (sample, bins, range, i), {}) for i in builtins.range(d)]
    flat = call_nondiff(_dd_flat, (sample, *edges), {})
    full = tuple(np.shape(e)[0] + 1 for e in edges)
    hist = _bincount(flat, weights, math.prod(full))
    hist = np.reshape(hist, full)[(slice(1, -1),) * d]
    if density:
        total = np.sum(hist)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = np.shape(e)[0] - 1
            hist = hist / np.reshape(np.diff(e), shape)
        hist = hist / total
    return hist, edges


def _histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):
        bins = [np.asarray(bins), np.asarray(bins)]
    hist, edges = _histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


defcomposite(np.bincount, _bincount, arrays=('x', 'weights'))
defcomposite(np.histogram, _histogram)
defcomposite(np.histogramdd, _histogramdd)
defcomposite(np.histogram2d, _histogram2d)


# --------------------------------------------------------------------------
# NumPy's in-place writers on a tracked destination
# --------------------------------------------------------------------------

def _destination(name, a):
    if not isinstance(a, Tracked):
        raise TypeError(f'np.{name} writes a tracked value into a plain array, which cannot '
                        f'hold its gradient; compute a new array (e.g. with np.where) instead')


def _put(a, ind, v, mode='raise'):
    _destination('put', a)
    ind = np.ravel(ind)
    n = np.size(a)
    ind = np.remainder(ind, n) if mode == 'wrap' else np.clip(ind, 0, n - 1) if mode == 'clip' \
        else ind
    a[np.unravel_index(ind, np.shape(a))] = _resize(v, np.shape(ind))


def _place(arr, mask, vals):
    _destination('place', arr)
    mask = np.broadcast_to(mask, np.shape(arr))
    arr[mask] = _resize(vals, (int(np.count_nonzero(mask)),))


def _putmask(a, mask, values):
    _destination('putmask', a)
    a[...] = np.where(mask, _resize(values, np.shape(a)), a)


def _copyto(dst, src, casting='same_kind', where=True):
    if not isinstance(dst, Tracked):      # np.full/np.full_like end here with a tracked fill
        raise TypeError('np.copyto writes a tracked value into a plain array, which cannot '
                        'hold its gradient. If this comes from np.full or np.full_like with '
                        'a tracked fill value, write np.zeros(shape) + value, or use '
                        'tracked.numpy.full (import tracked.numpy as np); otherwise compute '
                        'a new array (e.g. with np.where)')
    dst[...] = np.where(where, src, dst)


def _fill_diagonal(a, val, wrap=False):
    _destination('fill_diagonal', a)
    shape = np.shape(a)
    if len(shape) < 2:
        raise ValueError('array must be at least 2-d')
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        if not all(s == shape[0] for s in shape):
            raise ValueError('All dimensions of input must be of equal length')
        step = 1 + int(np.sum(np.cumprod(shape[:-1])))
        end = None
    flat = np.arange(np.size(a))[:end:step]
    a[np.unravel_index(flat, shape)] = _resize(val, np.shape(flat))


def _put_along_axis(arr, indices, values, axis):
    _destination('put_along_axis', arr)
    shape = np.shape(arr)
    if axis is None:
        arr[np.unravel_index(np.ravel(indices), shape)] = np.ravel(values)
        return
    ax = normalize_axis_tuple(axis, len(shape))[0]
    fancy = tuple(indices if d == ax else
                  np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
                  for d, n in enumerate(shape))
    arr[fancy] = values


defcomposite(np.put, _put)
defcomposite(np.place, _place)
defcomposite(np.putmask, _putmask)
defcomposite(np.copyto, _copyto)
defcomposite(np.fill_diagonal, _fill_diagonal)
defcomposite(np.put_along_axis, _put_along_axis)
