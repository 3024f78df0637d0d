"""Signals and sampled functions: convolve, correlate, interp, diff, ediff1d, gradient,
trapezoid, unwrap, sliding_window_view.

``convolve`` is one primitive (the full 1-d convolution, linear in each argument);
its pullbacks are correlations, i.e. convolutions with a flipped conjugate, so they
are the same primitive again (every order).  The other modes and ``correlate`` are
slices of it.  The rest are composites of slicing, arithmetic and gathers; the
segment search of ``interp`` is ``np.searchsorted``, recorded on a tape so that a
replay looks the new points up.
"""
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..registry import Primitive, defcomposite
from ..dispatch import apply


def _flipconj(v):
    return np.conj(np.flip(v, 0)) if np.iscomplexobj(v) else np.flip(v, 0)


def _conv_vjp_a(g, ans, a, v):
    # y[k] = sum_i a[i] v[k - i]: dL/da[i] = sum_k g[k] conj(v[k - i]), a valid correlation
    return _slice(_conv(g, _flipconj(v)), len(v) - 1, len(a))


def _conv_vjp_v(g, ans, a, v):
    return _slice(_conv(g, _flipconj(a)), len(a) - 1, len(v))


def _slice(y, start, n):
    return y[start:start + n]


def _conv_structure(varying, ans, a, v):
    """y[i + j] reads a[i] and v[j], but no term with a constant factor that is zero."""
    nz = [np.ones(np.shape(x), bool) if p in varying else np.asarray(x) != 0
          for p, x in enumerate((a, v))]
    out = {}
    for p in varying:
        i, j = np.nonzero(np.logical_and.outer(*nz))     # pairs (a[i], v[j]) of a term
        out[p] = (i + j, (i, j)[p])
    return out


_conv_full = Primitive(lambda a, v: np.convolve(a, v, 'full'), (_conv_vjp_a, _conv_vjp_v),
                       name='np.convolve', linear='each', structure=_conv_structure)


def _conv(a, v):
    return apply(_conv_full, (a, v), {})


def _convolve(a, v, mode='full'):
    if np.ndim(a) != 1 or np.ndim(v) != 1:
        raise ValueError('object too deep for desired array')
    n, m = len(a), len(v)
    if n == 0 or m == 0:
        raise ValueError('a cannot be empty' if n == 0 else 'v cannot be empty')
    full = _conv(a, v)
    if mode == 'full':
        return full
    big, small = max(n, m), min(n, m)
    if mode == 'same':
        return _slice(full, (small - 1) // 2, big)
    if mode == 'valid':
        return _slice(full, small - 1, big - small + 1)
    raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")


def _correlate(a, v, mode='valid'):
    if np.ndim(v) != 1:
        raise ValueError('object too deep for desired array')
    return _convolve(a, _flipconj(v), mode)


defcomposite(np.convolve, _convolve)
defcomposite(np.correlate, _correlate)


# --------------------------------------------------------------------------
# interp
# --------------------------------------------------------------------------

def _pick(v, idx):
    """``v[idx]`` for a 1-d ``v``; take_along_axis, whose dispatch sees ``idx`` too (a
    recorded index into a plain ``v`` on a tape)."""
    return np.reshape(np.take_along_axis(v, np.ravel(idx), axis=0), np.shape(idx))


def _interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation, differentiable in ``x``, ``xp`` and ``fp``; at a
    sample point the slope is the segment's on its right (NumPy's search order)."""
    if np.ndim(xp) != 1 or np.ndim(fp) != 1:
        raise ValueError('data points must be 1-D sequences')
    if np.shape(xp)[0] != np.shape(fp)[0]:
        raise ValueError('fp and xp are not of the same length')
    if np.shape(xp)[0] == 0:
        raise ValueError('array of sample points is empty')
    if period is not None:
        if period == 0:
            raise ValueError('period must be a non-zero value')
        period = abs(period)
        left = right = None
        x = np.remainder(x, period)
        xp = np.remainder(xp, period)
        order = np.argsort(xp)
        xp, fp = _pick(xp, order), _pick(fp, order)
        xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
        fp = np.concatenate((fp[-1:], fp, fp[0:1]))
    n = np.shape(xp)[0]
    if n == 1:
        inside = fp[0] + np.zeros(np.shape(x))
    else:
        j = np.clip(np.searchsorted(xp, x, side='right') - 1, 0, n - 2)
        x0, x1 = _pick(xp, j), _pick(xp, j + 1)
        f0, f1 = _pick(fp, j), _pick(fp, j + 1)
        inside = (f1 - f0) / (x1 - x0) * (x - x0) + f0     # NumPy's slope * dx + f0
    last = fp[-1] + np.zeros(np.shape(x))
    out = np.where(x == xp[-1], last, inside)
    out = np.where(x > xp[-1], last if right is None else right, out)
    out = np.where(x < xp[0], fp[0] if left is None else left, out)
    return out


defcomposite(np.interp, _interp, arrays=('x', 'xp', 'fp'))


# --------------------------------------------------------------------------
# Differences, gradients, integrals
# --------------------------------------------------------------------------

def _along(ax, sl, nd):
    return (slice(None),) * ax + (sl,) + (slice(None),) * (nd - ax - 1)


def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f'order must be non-negative but got {n!r}')
    nd = np.ndim(a)
    if nd == 0:
        raise ValueError('diff requires input that is at least one dimensional')
    ax = normalize_axis_tuple(axis, nd)[0]
    parts: list[Any] = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        if np.ndim(extra) == 0:
            shape = list(np.shape(a))
            shape[ax] = 1
            extra = np.broadcast_to(extra, tuple(shape))
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        a = np.concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis=ax)
    hi, lo = _along(ax, slice(1, None), nd), _along(ax, slice(None, -1), nd)
    for _ in range(n):
        a = a[hi] - a[lo]
    return a


def _ediff1d(ary, to_end=None, to_begin=None):
    flat = np.ravel(ary)
    d = flat[1:] - flat[:-1]
    pieces = [p for p in (np.ravel(to_begin) if to_begin is not None else None, d,
                          np.ravel(to_end) if to_end is not None else None) if p is not None]
    return d if len(pieces) == 1 else np.concatenate(pieces)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    nd = np.ndim(y)
    ax = normalize_axis_tuple(axis, nd)[0]
    if x is None:
        d = dx
    else:
        d = _diff(x, axis=-1 if np.ndim(x) == 1 else ax)
        if np.ndim(x) == 1:
            shape = [1] * nd
            shape[ax] = np.shape(d)[0]
            d = np.reshape(d, tuple(shape))
    hi, lo = _along(ax, slice(1, None), nd), _along(ax, slice(None, -1), nd)
    return np.sum(d * (y[hi] + y[lo]) / 2.0, axis=ax)


def _gradient_axis(f, ax, h, edge_order):
    """np.gradient along one axis: ``h`` a scalar spacing or 1-d coordinates."""
    nd = np.ndim(f)
    n = np.shape(f)[ax]
    if n < edge_order + 1:
        raise ValueError('Shape of array too small to calculate a numerical gradient, '
                         'at least (edge_order + 1) elements are required.')

    def at(sl):
        return f[_along(ax, sl, nd)]

    def col(v):                       # a 1-d array along ``ax``
        shape = [1] * nd
        shape[ax] = -1
        return np.reshape(v, tuple(shape))
    uniform = np.ndim(h) == 0
    if uniform:
        inner = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
    else:
        dx = h[1:] - h[:-1]
        dx1, dx2 = dx[:-1], dx[1:]
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        inner = (col(a) * at(slice(None, -2)) + col(b) * at(slice(1, -1))
                 + col(c) * at(slice(2, None)))
    if edge_order == 1:
        d0 = h if uniform else h[1] - h[0]
        dn = h if uniform else h[-1] - h[-2]
        first = (at(slice(1, 2)) - at(slice(0, 1))) / d0
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / dn
    else:
        if uniform:
            a0, b0, c0 = -1.5 / h, 2.0 / h, -0.5 / h
            an, bn, cn = 0.5 / h, -2.0 / h, 1.5 / h
        else:
            dx1, dx2 = h[1] - h[0], h[2] - h[1]
            a0 = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b0 = (dx1 + dx2) / (dx1 * dx2)
            c0 = -dx1 / (dx2 * (dx1 + dx2))
            dx1, dx2 = h[-2] - h[-3], h[-1] - h[-2]
            an = dx2 / (dx1 * (dx1 + dx2))
            bn = -(dx2 + dx1) / (dx1 * dx2)
            cn = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
        first = a0 * at(slice(0, 1)) + b0 * at(slice(1, 2)) + c0 * at(slice(2, 3))
        last = an * at(slice(-3, -2)) + bn * at(slice(-2, -1)) + cn * at(slice(-1, None))
    return np.concatenate([first, inner, last], axis=ax)


def _gradient(f, *varargs, axis=None, edge_order=1):
    nd = np.ndim(f)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    spacing: list[Any]
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError('invalid number of arguments')
    for k, (ax, h) in enumerate(zip(axes, spacing)):
        if np.ndim(h) == 1:
            if np.shape(h)[0] != np.shape(f)[ax]:
                raise ValueError('when 1d, distances must match the length of the '
                                 'corresponding dimension')
            if np.ndim(h) and isinstance(h, (list, tuple)):
                spacing[k] = np.asarray(h, dtype=float)
    if np.asarray(np.ndim(f)) == 0:
        raise ValueError('Shape of array too small to calculate a numerical gradient')
    outs = tuple(_gradient_axis(f, ax, h, edge_order) for ax, h in zip(axes, spacing))
    return outs[0] if len(axes) == 1 else outs


def _unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """NumPy's unwrap: the corrections are piecewise constant, so the derivative is
    the identity, as the composite gives."""
    nd = np.ndim(p)
    ax = normalize_axis_tuple(axis, nd)[0]
    dd = _diff(p, axis=ax)
    if discont is None:
        discont = period / 2
    hi = _along(ax, slice(1, None), nd)
    interval_high = period / 2
    interval_low = -interval_high
    ddmod = np.remainder(dd - interval_low, period) + interval_low
    ddmod = np.where((ddmod == interval_low) & (dd > 0), interval_high, ddmod)
    correct = np.where(np.abs(dd) < discont, 0.0, ddmod - dd)
    return np.concatenate([p[_along(ax, slice(0, 1), nd)],
                           p[hi] + np.cumsum(correct, axis=ax)], axis=ax) if nd else p


defcomposite(np.diff, _diff)
defcomposite(np.ediff1d, _ediff1d)
defcomposite(np.trapezoid, _trapezoid, arrays=('y', 'x'))
if hasattr(np, 'trapz'):                 # its old name, removed in NumPy 2.4
    defcomposite(np.trapz, _trapezoid, arrays=('y', 'x'))
defcomposite(np.gradient, _gradient, arrays=('f', '*varargs'))
defcomposite(np.unwrap, _unwrap)


# --------------------------------------------------------------------------
# sliding_window_view: a gather of windows (a read-only view in NumPy)
# --------------------------------------------------------------------------

def _windows_vjp(g, ans, x, window_shape, axis=None, **kwargs):
    return _window_sum(g, np.shape(x), window_shape, axis)


def _window_sum_fwd(g, shape, window_shape, axis):
    """The adjoint of sliding_window_view: every window's cotangent added back."""
    out = np.zeros(shape, dtype=g.dtype)
    view = np.lib.stride_tricks.sliding_window_view(out, window_shape, axis, writeable=True)
    for pos in np.ndindex(*np.shape(view)[len(shape):]):
        # one offset inside the window: distinct windows write distinct elements
        sl = (Ellipsis,) + pos
        view[sl] += g[sl]
    return out


_window_sum_prim = Primitive(_window_sum_fwd, (lambda gg, ans, g, shape, window_shape, axis:
                                               _windows(gg, window_shape, axis),),
                             name='window_sum', linear='joint')


def _window_sum(g, shape, window_shape, axis):
    return apply(_window_sum_prim, (g, tuple(shape), window_shape, axis), {})


def _windows_fwd(x, window_shape, axis=None, **kwargs):
    return np.lib.stride_tricks.sliding_window_view(x, window_shape, axis)


_windows_prim = Primitive(_windows_fwd, (_windows_vjp,), name='sliding_window_view',
                          linear='joint', view=True, structure='select')


def _windows(x, window_shape, axis=None):
    return apply(_windows_prim, (x, window_shape, axis), {})


def _sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    if writeable:
        raise TypeError('sliding_window_view(..., writeable=True) of a tracked value: '
                        'tracked values are written by computing new arrays')
    return _windows(x, window_shape, axis)


defcomposite(np.lib.stride_tricks.sliding_window_view, _sliding_window_view)
