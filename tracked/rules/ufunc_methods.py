"""ufunc methods on tracked values: ``reduce``, ``accumulate``, ``outer``, ``at`` and
``reduceat`` of every ufunc that has a rule (``np.logaddexp.reduce``,
``np.maximum.accumulate``, ``np.multiply.outer``, ``np.add.at``, ...).

``values.ufunc_call`` sends ``reduce``/``accumulate`` of add, multiply, maximum and
minimum to the functions in ``REDUCE``/``ACCUMULATE`` (np.sum, np.cumsum, ...) and
every other method call to ``UFUNC_METHODS[method](ufunc, *inputs, **kwargs)``,
registered here.  Each is a composite of the ufunc's own rule: ``outer`` broadcasts,
``reduce``/``accumulate`` fold along the axis (one entry per element: exact for any
binary ufunc; log-sum-exp and running maxima have vectorised forms), ``at`` is a
scatter-add for add/subtract and a read-modify-write elsewhere (once per occurrence of
a repeated index, as NumPy does), ``reduceat`` reduces
each segment.  Methods of non-differentiable ufuncs (``np.less.outer``,
``np.logical_or.reduce``) give plain results.
"""
import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..registry import ACCUMULATE, NONDIFF, REDUCE, RULES, UFUNC_METHODS, defcomposite, \
    nondifferentiable
from ..boxes import Tracked, write_into
from ..dispatch import call_nondiff, no_method_rule
from .indexing import scatter_add

_NoValue = np._NoValue


def _plain_method(ufunc, method, inputs, kwargs):
    """A method of a non-differentiable ufunc: a plain result (recorded on a tape)."""
    return call_nondiff(getattr(ufunc, method), inputs, kwargs)


def _binary(ufunc, method):
    if ufunc.nin != 2 or ufunc.nout != 1 or ufunc not in RULES:
        raise no_method_rule(ufunc, method)


def _refuse(ufunc, method, dtype=None, where=True):
    if dtype is not None:
        raise TypeError(f'np.{ufunc.__name__}.{method}: dtype= is not supported on tracked '
                        f'values; use .astype first')
    if where is not True:
        raise TypeError(f'np.{ufunc.__name__}.{method}(..., where=...) is not supported on '
                        f'tracked values; mask the input with np.where first')


def _lanes(a, axis):
    """``a`` with the reduced axes moved to the front and merged, the kept shape, and
    the normalised axes (``axis=None``: all of them)."""
    nd = np.ndim(a)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    shape = np.shape(a)
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    front = np.moveaxis(a, axes, tuple(range(len(axes)))) if axes else a
    return np.reshape(front, (math.prod(shape[i] for i in axes),) + kept), kept, axes


# --------------------------------------------------------------------------
# reduce
# --------------------------------------------------------------------------

def _logaddexp_reduce(a, axes, keepdims, exp, log):
    """log(sum(exp(a))) over ``axes``, shifted by the maximum for stability."""
    m = np.max(a, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)           # all -inf: no inf - inf
    out = log(np.sum(exp(a - m), axis=axes, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axes)


def _reduce(ufunc, a, axis=0, dtype=None, out=None, keepdims=False, initial=_NoValue,
            where=True):
    if ufunc in NONDIFF:
        kwargs = dict(axis=axis, dtype=dtype, keepdims=keepdims, where=where)
        if initial is not _NoValue:
            kwargs['initial'] = initial
        return _plain_method(ufunc, 'reduce', (a,), kwargs)
    _binary(ufunc, 'reduce')
    _refuse(ufunc, 'reduce', dtype, where)
    if np.ndim(a) == 0:
        raise ValueError(f'np.{ufunc.__name__}.reduce of a 0-d array')
    axes = tuple(range(np.ndim(a))) if axis is None else normalize_axis_tuple(axis, np.ndim(a))
    if initial is _NoValue and axes and ufunc in (np.logaddexp, np.logaddexp2):
        pair = (np.exp, np.log) if ufunc is np.logaddexp else (np.exp2, np.log2)
        return _logaddexp_reduce(a, axes, keepdims, *pair)
    lanes, kept, axes = _lanes(a, axes)
    n = np.shape(lanes)[0]
    if initial is _NoValue and n == 0:
        if ufunc.identity is None:
            raise ValueError(f'zero-size array to reduction operation {ufunc.__name__} '
                             f'which has no identity')
        initial = ufunc.identity
    if initial is _NoValue:
        acc = lanes[0]
    else:
        acc = ufunc(initial, lanes[0]) if n else np.full(kept, initial, np.result_type(a, 0.0))
    for i in range(1, n):                 # a fold: one entry per element, exact for any ufunc
        acc = ufunc(acc, lanes[i])
    if keepdims:
        acc = np.reshape(acc, tuple(1 if i in axes else s for i, s in enumerate(np.shape(a))))
    return acc


# --------------------------------------------------------------------------
# accumulate
# --------------------------------------------------------------------------

def _running_pick(x, r, axis):
    """Index of the element each running maximum/minimum ``r`` took (the latest on ties;
    a NaN that ``r`` propagates is taken too).  Plain: a NumPy function of values."""
    hit = (x == r) | (np.isnan(x) & np.isnan(r)) if x.dtype.kind in 'fc' else (x == r)
    n = x.shape[axis]
    pos = np.arange(n).reshape(tuple(n if i == axis else 1 for i in range(x.ndim)))
    return np.maximum.accumulate(np.where(hit, pos, 0), axis=axis)


nondifferentiable(_running_pick)


def _accumulate(ufunc, a, axis=0, dtype=None, out=None):
    if ufunc in NONDIFF:
        return _plain_method(ufunc, 'accumulate', (a,), dict(axis=axis))
    _binary(ufunc, 'accumulate')
    _refuse(ufunc, 'accumulate', dtype)
    if np.ndim(a) == 0:
        raise ValueError('cannot accumulate on a scalar')
    ax = normalize_axis_tuple(axis, np.ndim(a))[0]
    moved = np.moveaxis(a, ax, 0)
    outs = []
    acc = None
    for i in range(np.shape(moved)[0]):
        acc = moved[i] if acc is None else ufunc(acc, moved[i])
        outs.append(acc)
    return np.stack(outs, axis=ax)


def _running(ufunc):
    """maximum/minimum/fmax/fmin.accumulate: a gather of the elements each running
    extremum took, indices from NumPy's own accumulate (recomputed on a replay)."""
    def running(a, axis=0, dtype=None, out=None):
        _refuse(ufunc, 'accumulate', dtype)
        ax = normalize_axis_tuple(axis, np.ndim(a))[0]
        r = call_nondiff(ufunc.accumulate, (a,), {'axis': ax})
        return np.take_along_axis(a, call_nondiff(_running_pick, (a, r, ax), {}), axis=ax)
    running.__name__ = f'{ufunc.__name__}_accumulate'
    return running


for _uf in (np.maximum, np.minimum, np.fmax, np.fmin):
    _f = _running(_uf)
    ACCUMULATE[_uf] = defcomposite(_f, _f)     # registered: the core calls it through RULES
REDUCE[np.fmax] = np.nanmax         # NaN-ignoring extrema (NumPy warns on all-NaN lanes too)
REDUCE[np.fmin] = np.nanmin


# --------------------------------------------------------------------------
# outer, at, reduceat
# --------------------------------------------------------------------------

def _outer(ufunc, a, b, **kwargs):
    """``ufunc(a[..., None, ..., None], b)``: every pair, by broadcasting."""
    if ufunc.nin != 2:
        raise ValueError('outer product only supported for binary functions')
    return ufunc(np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b, **kwargs)


def _occurrences(shape, indices):
    """The flat positions ``indices`` select in an array of ``shape`` (the shape of
    ``a[indices]``), and each one's occurrence number: 0 where a position is met first,
    1 the second time, ...  Plain: a NumPy function of the index."""
    pos = np.arange(math.prod(shape)).reshape(shape)[indices]
    flat = np.ravel(pos)
    order = np.argsort(flat, kind='stable')
    ranked = flat[order]
    first = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1]
    starts = np.repeat(first, np.diff(np.r_[first, flat.size]))
    rank = np.empty(flat.size, np.intp)
    rank[order] = np.arange(flat.size) - starts
    return pos, rank.reshape(pos.shape)


nondifferentiable(_occurrences)


def _at(ufunc, a, indices, b=None):
    """``ufunc.at(a, indices, b)`` on a tracked ``a``, in place (a new tape entry that the
    box of ``a`` then points to, as ``a[i] += b`` does)."""
    if not isinstance(a, Tracked):
        raise TypeError(f'np.{ufunc.__name__}.at(a, indices, b) writes a tracked value into '
                        f'the plain array a, which cannot hold its gradient; compute a new '
                        f'array instead, e.g. a + np.bincount(indices, weights=b, '
                        f'minlength=len(a)) for np.add.at of a 1-d a')
    if ufunc in NONDIFF or ufunc not in RULES:
        raise no_method_rule(ufunc, 'at')
    if ufunc in (np.add, np.subtract):    # repeated indices accumulate, as in NumPy
        vals = b if ufunc is np.add else -b
        new = a + scatter_add(np.broadcast_to(vals, np.shape(a[indices])), indices, np.shape(a))
        write_into(a, new)
        return
    pos, rank = call_nondiff(_occurrences, (np.shape(a), indices), {})
    rounds = int(np.max(rank)) + 1 if np.size(rank) else 0
    if rounds <= 1:                       # no position twice: read, apply, write
        new = a + 0.0
        new[indices] = ufunc(a[indices]) if ufunc.nin == 1 else ufunc(a[indices], b)
        write_into(a, new)
        return
    # NumPy applies the ufunc once per occurrence, in order: round k applies the k-th
    # occurrence of every position (distinct positions within a round), exact for any ufunc.
    new = a + 0.0
    vals = None if ufunc.nin == 1 else np.ravel(np.broadcast_to(b, np.shape(pos)))
    pos, rank = np.ravel(pos), np.ravel(rank)
    for k in range(rounds):
        take = rank == k
        where = np.unravel_index(pos[take], np.shape(a))
        new[where] = ufunc(new[where]) if vals is None else ufunc(new[where], vals[take])
    write_into(a, new)


def _reduceat(ufunc, a, indices, axis=0, dtype=None, out=None):
    if ufunc in NONDIFF:
        return _plain_method(ufunc, 'reduceat', (a, indices), dict(axis=axis))
    _binary(ufunc, 'reduceat')
    _refuse(ufunc, 'reduceat', dtype)
    ax = normalize_axis_tuple(axis, np.ndim(a))[0]
    n = np.shape(a)[ax]
    starts = [operator.index(i) for i in indices]     # segment bounds set the shape
    parts = []
    for k, i in enumerate(starts):
        j = starts[k + 1] if k + 1 < len(starts) else n
        if not 0 <= i < n:
            raise IndexError(f'index {i} out-of-bounds in {ufunc.__name__}.reduceat [0, {n})')
        seg = (slice(None),) * ax + (slice(i, j) if i < j else slice(i, i + 1),)
        parts.append(ufunc.reduce(a[seg], axis=ax) if i < j else np.take(a, i, axis=ax))
    return np.stack(parts, axis=ax)


UFUNC_METHODS['reduce'] = _reduce
UFUNC_METHODS['accumulate'] = _accumulate
UFUNC_METHODS['outer'] = _outer
UFUNC_METHODS['at'] = _at
UFUNC_METHODS['reduceat'] = _reduceat
