"""Reductions: sum, mean, prod, max/min, var/std, cumulative sums and products,
trace, average, and the nan-skipping variants (np.linalg.norm is in linalg.py).

Every pullback accepts the NumPy signature as the user wrote it (``axis`` positional
or keyword, ``None``, negative, or a tuple; ``keepdims``) and is written with NumPy
operations, so it is differentiable itself (second order, compiled tapes).

Three internal primitives make products exact when elements are zero: ``_shift``
(move along an axis, zero fill), ``_reverse`` and ``_linrec`` (the first-order
linear recurrence ``s[i] = b[i] + a[i] * s[i-1]``).  The adjoint of a linear
recurrence is the same recurrence run backwards, so their pullbacks close over
each other to any order.
"""
import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..forward import batch_axes
from ..registry import Primitive, defvjp, defcomposite, REDUCE, ACCUMULATE
from ..tape import shape_of
from ..dispatch import apply
from .matrices import conj, is_complex

_NoValue = np._NoValue


# --------------------------------------------------------------------------
# Helpers: axes, reduced shapes, argument checks
# --------------------------------------------------------------------------

def _axes(axis, ndim):
    """The reduced axes as a sorted tuple of non-negative ints (none for a 0-d array,
    which NumPy reduces with ``axis=0`` or ``-1`` as with ``None``)."""
    if axis is None or not ndim:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(normalize_axis_tuple(tuple(axis), ndim)))
    return normalize_axis_tuple(operator.index(axis), ndim)


def _keep(g, shape, axis, keepdims):
    """Reshape a reduced value so that it broadcasts against the input (keepdims form)."""
    if axis is None or (keepdims is not _NoValue and keepdims):
        return g        # a 0-d value that broadcasts anywhere, or already kept
    axes = _axes(axis, len(shape))
    return np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _count(shape, axes):
    return math.prod(shape[i] for i in axes)


def _check(name, dtype=None, out=None, where=True, allow_where=True):
    """Refuse arguments a tracked reduction cannot honour, with the fix in the message."""
    if out is not None:
        raise TypeError(f'np.{name}(..., out=...) cannot write a tracked result into an '
                        f'array; use y = np.{name}(...) instead')
    if dtype is not None and np.dtype(dtype).kind != 'f':
        raise TypeError(f'np.{name}(..., dtype={np.dtype(dtype)}) on a tracked value: a '
                        f'non-float result carries no gradient. Pass a float dtype or none, '
                        f'or call np.{name} on tr.data(x)')
    if not allow_where and where is not True and where is not _NoValue:
        raise TypeError(f'np.{name}(..., where=...) is not supported on tracked values; '
                        f'mask the input instead (e.g. with np.where)')


def _masked(where):
    return where is not True and where is not _NoValue


def _safe(r):
    """``r`` with exact zeros replaced by one: divides without 0/0 (the result is
    multiplied by something that is zero there)."""
    return r + (r == 0)


def _tangent_sum(t, w, axis, nd, keepdims):
    """The tangent ``sum(w * t)`` over the reduced axes of a reduction whose derivative is
    the weight ``w`` (shaped like its input of ``nd`` axes).  Axes count from the end,
    so a leading axis of batched tangents stays: one function serves both forms."""
    axes = tuple(i - nd for i in _axes(axis, nd))
    # NumPy 2.5's stubs overload np.sum on a literal keepdims (2.4's take a bool)
    return np.sum(t * w, axis=axes,  # type: ignore[call-overload, unused-ignore]
                  keepdims=keepdims is not _NoValue and bool(keepdims))


def _onehot(shape, axis, index, dtype):
    """Zeros broadcastable to ``shape`` with a one at ``index`` along ``axis``."""
    e = np.zeros(tuple(n if i == axis else 1 for i, n in enumerate(shape)), dtype=dtype)
    if shape[axis]:
        e[(0,) * axis + (index,)] = 1
    return e


# --------------------------------------------------------------------------
# Internal linear primitives: shift, reverse, linear recurrence
# --------------------------------------------------------------------------

def _shift_fwd(x, k, axis):
    out = np.zeros_like(x)
    n = x.shape[axis]
    if abs(k) < n:
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[axis], src[axis] = (slice(k, None), slice(None, n - k)) if k > 0 else \
                               (slice(None, n + k), slice(-k, None))
        out[tuple(dst)] = x[tuple(src)]
    return out


_shift_prim = Primitive(_shift_fwd, (lambda g, ans, x, k, axis: _shift(g, -k, axis),),
                        name='shift', linear='joint')


def _shift(x, k, axis):
    """``out[i] = x[i - k]`` along ``axis``, zeros shifted in (adjoint: shift by ``-k``)."""
    return apply(_shift_prim, (x, k, axis), {})


_reverse_prim = Primitive(lambda x, axis: np.flip(x, axis),
                          (lambda g, ans, x, axis: _reverse(g, axis),), name='reverse',
                          view=True, linear='joint')


def _reverse(x, axis):
    """``x`` reversed along ``axis`` (its own adjoint)."""
    return apply(_reverse_prim, (x, axis), {})


def _linrec_fwd(a, b, axis, reverse):
    # Hillis-Steele scan over pairs (A, B) meaning s -> B + A*s: log2(n) vectorised
    # steps, no division (a sequential loop would cost n Python iterations).
    a, b = np.broadcast_arrays(a, b)
    dtype = np.result_type(a, b)
    A = np.moveaxis(a, axis, -1)
    B = np.moveaxis(b, axis, -1)
    if reverse:
        A, B = A[..., ::-1], B[..., ::-1]
    A = np.array(A, dtype=dtype)
    B = np.array(B, dtype=dtype)
    n = A.shape[-1]
    if n:
        A[..., 0] = 0       # the first coefficient multiplies s[-1] = 0
    d = 1
    with np.errstate(invalid='ignore', over='ignore'):
        while d < n:
            Bl = B[..., :-d]
            # where B is exactly 0 its contribution is 0, even if the product of
            # coefficients A overflowed to inf (inf * 0 would give nan)
            B[..., d:] += np.where(Bl == 0, 0, A[..., d:] * Bl)
            A[..., d:] = A[..., d:] * A[..., :-d]
            d *= 2
    if reverse:
        B = B[..., ::-1]
    return np.ascontiguousarray(np.moveaxis(B, -1, axis))


def _linrec_vjp_b(g, ans, a, b, axis, reverse):
    # forward s[i] = b[i] + a[i] s[i-1]: gb[k] = g[k] + conj(a[k+1]) gb[k+1] (run
    # backwards; holomorphic, so complex coefficients enter conjugated)
    return _linrec(_shift(conj(a), 1 if reverse else -1, axis), g, axis, not reverse)


def _linrec_vjp_a(g, ans, a, b, axis, reverse):
    # d s[i] / d a[m] = s[m-1] * (d s[i] / d b[m])
    return (conj(_shift(ans, -1 if reverse else 1, axis))
            * _linrec_vjp_b(g, ans, a, b, axis, reverse))


_linrec_prim = Primitive(_linrec_fwd, (_linrec_vjp_a, _linrec_vjp_b), name='linrec')


def _linrec(a, b, axis, reverse=False):
    """``s[i] = b[i] + a[i] * s[i-1]`` along ``axis`` (``s[i+1]`` if ``reverse``)."""
    return apply(_linrec_prim, (a, b, axis, reverse), {})


def _prod_others_lane(x, axis):
    """``prod_{j != i} x[j]`` along ``axis``: exclusive cumprods from both ends.

    Why not ``prod / x``: it divides by zero; and a ``np.where`` patch for zeros
    gives the right gradient but a wrong second derivative.  This is a polynomial
    in ``x`` built from exactly differentiable pieces.
    """
    shape = np.shape(x)
    n = shape[axis]
    dt = x.dtype
    left = _linrec(_shift(x, 1, axis), _onehot(shape, axis, 0, dt), axis)
    right = _linrec(_shift(x, -1, axis), _onehot(shape, axis, n - 1, dt), axis, reverse=True)
    return left * right


def _prod_others(x, axes):
    """``prod`` over ``axes`` of every element but the one at each position."""
    shape = np.shape(x)
    nd = len(shape)
    if not axes:
        return np.ones(shape, dtype=x.dtype)
    if len(axes) == 1:
        return _prod_others_lane(x, axes[0])
    kept = [i for i in range(nd) if i not in axes]
    perm = kept + list(axes)
    xt = np.transpose(x, perm)
    lanes = np.reshape(xt, tuple(shape[i] for i in kept) + (_count(shape, axes),))
    o = _prod_others_lane(lanes, len(kept))
    o = np.reshape(o, tuple(shape[i] for i in perm))
    return np.transpose(o, tuple(np.argsort(perm)))


# --------------------------------------------------------------------------
# sum, mean, prod (and their nan variants)
# --------------------------------------------------------------------------

_add_reduce = np.add.reduce
_maximum = np.maximum
_F64 = np.dtype(np.float64)

def _sum(a, axis=None, dtype=None, out=None, *rest, **kw):
    if dtype is None and out is None and not rest and type(a) is np.ndarray and (
            not kw or (len(kw) == 1 and type(kw.get('keepdims')) is bool)):
        # what np.sum calls, without its ~4x costlier wrapper (NumPy 2.5's stubs type
        # ufunc.reduce's axis narrowly; 2.4's do not)
        return _add_reduce(a, axis, None, None, kw.get('keepdims', False))  # type: ignore[call-overload, unused-ignore]
    _check('sum', dtype, out)
    return np.sum(a, axis, dtype, None, *rest, **kw)


def _sum_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None,
             where=True):
    shape = shape_of(a)     # a parent is an array (or its Meta): np.shape's dispatch costs more
    if _masked(where):
        return _keep(g, shape, axis, keepdims) * np.broadcast_to(where, shape)
    return _keep(g, shape, axis, keepdims)     # broadcasts to ``shape``: a lazy cotangent


def _sum_jvp(tangents, ans, a, *rest, initial=None, **kw):
    return _sum(tangents[0], *rest, **kw)        # linear, but for the constant initial=


def _reduce_batched(fn):
    """The batched tangent of linear reduction ``fn`` (sum, mean): its axes shifted."""
    def batched(tangents, ans, a, axis=None, dtype=None, out=None, *rest, initial=None, **kw):
        nd = len(np.shape(a))
        if rest or _masked(kw.get('where', True)):
            return NotImplemented
        kw.pop('where', None)
        return fn(tangents[0], batch_axes(axis, nd), dtype, **kw)
    return batched


defvjp(np.sum, _sum_vjp, fn=_sum, kernel='sum', jvp=_sum_jvp, batched=_reduce_batched(_sum),
       structure='reduce')


def _nansum(a, axis=None, dtype=None, out=None, *rest, **kw):
    _check('nansum', dtype, out)
    return np.nansum(a, axis, dtype, None, *rest, **kw)


def _nansum_weight(a, where):
    mask = a == a                               # False at NaN; a plain array
    return mask & where if _masked(where) else mask


def _nansum_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None,
                where=True):
    return _keep(g, np.shape(a), axis, keepdims) * _nansum_weight(a, where)


def _nansum_jvp(t, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=None,
                where=True):
    return _tangent_sum(t[0], _nansum_weight(a, where), axis, np.ndim(a), keepdims)


defvjp(np.nansum, _nansum_vjp, fn=_nansum, jvp=_nansum_jvp, batched=_nansum_jvp,
       structure='reduce')


def _mean(a, axis=None, dtype=None, out=None, *rest, **kw):
    _check('mean', dtype, out)
    return np.mean(a, axis, dtype, None, *rest, **kw)


def _mean_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    shape = shape_of(a)
    axes = _axes(axis, len(shape))
    if _masked(where):
        mask = np.broadcast_to(where, shape)
        n = np.sum(mask, axis=axes, keepdims=True)
        w = (mask / np.maximum(n, 1)).astype(a.dtype)
        return _keep(g, shape, axis, keepdims) * w
    return _keep(g, shape, axis, keepdims) / max(_count(shape, axes), 1)   # lazy, as sum's


defvjp(np.mean, _mean_vjp, fn=_mean, kernel='mean', linear='joint',
       batched=_reduce_batched(_mean), structure='reduce')


def _nanmean(a, axis=None, dtype=None, out=None, *rest, **kw):
    _check('nanmean', dtype, out)
    return np.nanmean(a, axis, dtype, None, *rest, **kw)


def _nanmean_weight(a, axis, where):
    shape = np.shape(a)
    mask = np.broadcast_to(a == a, shape)
    if _masked(where):
        mask = mask & where
    n = np.sum(mask, axis=_axes(axis, len(shape)), keepdims=True)
    return (mask / np.maximum(n, 1)).astype(a.dtype)


def _nanmean_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    return _keep(g, np.shape(a), axis, keepdims) * _nanmean_weight(a, axis, where)


def _nanmean_jvp(t, ans, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    return _tangent_sum(t[0], _nanmean_weight(a, axis, where), axis, np.ndim(a), keepdims)


defvjp(np.nanmean, _nanmean_vjp, fn=_nanmean, jvp=_nanmean_jvp, batched=_nanmean_jvp,
       structure='reduce')


def _prod(a, axis=None, dtype=None, out=None, *rest, **kw):
    _check('prod', dtype, out)
    return np.prod(a, axis, dtype, None, *rest, **kw)


def _prod_weight(a, axis, initial, where):
    """The partial derivatives of the product: of every element but one (exact at 0)."""
    shape = np.shape(a)
    x = a
    if _masked(where):
        mask = np.broadcast_to(where, shape)
        x = a * mask + ~mask          # masked-out elements count as 1
    w = _prod_others(x, _axes(axis, len(shape)))
    if initial is not _NoValue and initial is not None:
        w = w * initial
    return w * mask if _masked(where) else w


def _prod_vjp(g, ans, a, axis=None, dtype=None, out=None, keepdims=False,
              initial=_NoValue, where=True):
    # holomorphic: the cotangent times the conjugate of each partial derivative
    return _keep(g, np.shape(a), axis, keepdims) * conj(_prod_weight(a, axis, initial, where))


def _prod_jvp(t, ans, a, axis=None, dtype=None, out=None, keepdims=False,
              initial=_NoValue, where=True):
    return _tangent_sum(t[0], _prod_weight(a, axis, initial, where), axis, np.ndim(a),
                        keepdims)


defvjp(np.prod, _prod_vjp, fn=_prod, jvp=_prod_jvp, batched=_prod_jvp, structure='reduce')


# --------------------------------------------------------------------------
# max / min (np.max and np.amax are distinct objects in NumPy 2: both registered)
# --------------------------------------------------------------------------

def _chooser(np_fn, name):
    # np.max/np.min are maximum/minimum.reduce behind a costlier wrapper
    reduce = {np.max: np.maximum.reduce, np.amax: np.maximum.reduce,
              np.min: np.minimum.reduce, np.amin: np.minimum.reduce}.get(np_fn)

    def forward(a, axis=None, out=None, *rest, **kw):
        _check(name, out=out)
        if reduce is not None and not rest and type(a) is np.ndarray and (
                not kw or (len(kw) == 1 and type(kw.get('keepdims')) is bool)):
            return reduce(a, axis, None, None,  # type: ignore[call-overload, unused-ignore]
                          kw.get('keepdims', False))
        return np_fn(a, axis, None, *rest, **kw)
    forward.__name__ = name
    return forward


def _chooser_weight(ans, a, axis, keepdims, where):
    # Ties: the cotangent is split equally among all elements equal to the extremum
    # (as torch.amax and jax.numpy.max do), so the gradient of max(x, x) is 1/2 each
    # and sums to 1; the alternative (all to the first, like torch.max(dim)) depends
    # on memory order.  Elements excluded by where=, and all of them when initial=
    # wins, get zero.  NaN never equals the result, so NaNs get zero.
    shape = shape_of(a)     # np.shape's dispatch costs more
    mask = a == _keep(ans, shape, axis, keepdims)
    if _masked(where):
        mask = mask & where
    axes = _axes(axis, len(shape))
    if type(mask) is np.ndarray:    # plain values: no np.sum wrapper, no float64 copy
        n = _add_reduce(mask, axes, None, None, True)  # type: ignore[call-overload, unused-ignore]
        return (mask / np.maximum(n, 1)).astype(a.dtype, copy=False)
    n = np.sum(mask, axis=axes, keepdims=True)
    return (mask / np.maximum(n, 1)).astype(a.dtype)


def _chooser_vjp(g, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):
    if keepdims is True and where is True and type(a) is np.ndarray and \
            type(g) is np.ndarray and a.dtype is _F64 and g.dtype is _F64 and \
            (axis is None or type(axis) is int or type(axis) is tuple):
        # _chooser_weight's split with the division done on the reduced g, in a float
        # mask (a bool one is cast in each call that reads it): on softmax-sized inputs
        # (z - amax(z, axis=1, keepdims=True)) the calls cost more than the arithmetic
        # (measured 11 -> 6.5 µs at 128 x 10).  Equal up to rounding where more than
        # two elements tie; exactly equal otherwise.
        w = (a == ans).astype(_F64)
        n = _add_reduce(w, axis, None, None, True)  # type: ignore[call-overload, unused-ignore]
        w *= g / _maximum(n, 1.0)
        return w
    return _keep(g, shape_of(a), axis, keepdims) * _chooser_weight(ans, a, axis, keepdims, where)


def _chooser_jvp(t, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):
    w = _chooser_weight(ans, a, axis, keepdims, where)
    return _tangent_sum(t[0], w, axis, np.ndim(a), keepdims)


for _fn, _name, _kernel in ((np.max, 'max', 'max'), (np.amax, 'amax', 'max'),
                            (np.min, 'min', 'min'), (np.amin, 'amin', 'min'),
                            (np.nanmax, 'nanmax', None), (np.nanmin, 'nanmin', None)):
    defvjp(_fn, _chooser_vjp, fn=_chooser(_fn, _name), kernel=_kernel, jvp=_chooser_jvp,
           batched=_chooser_jvp, structure='reduce')


# --------------------------------------------------------------------------
# var / std
# --------------------------------------------------------------------------

def _moment(np_fn, name):
    def forward(a, axis=None, dtype=None, out=None, *rest, **kw):
        _check(name, dtype, out, kw.get('where', True), allow_where=False)
        return np_fn(a, axis, dtype, None, *rest, **kw)
    forward.__name__ = name
    return forward


def _centred_scaled(a, axis, ddof, correction, c):
    """``c * (a - mean(a)) / (n - ddof)`` over the reduced axes."""
    shape = np.shape(a)
    axes = _axes(axis, len(shape))
    if correction is not None and correction is not _NoValue:
        ddof = correction
    dof = _count(shape, axes) - ddof
    scale = c / dof if dof != 0 else math.nan    # NumPy's own value is nan/inf here
    return (a - np.mean(a, axis=axes, keepdims=True)) * scale


def _var_vjp(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             where=True, mean=None, correction=None):
    return _keep(g, np.shape(a), axis, keepdims) * _centred_scaled(a, axis, ddof, correction, 2.0)


def _std_vjp(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             where=True, mean=None, correction=None):
    # d std = d var / (2 std).  At a constant input std = 0 and (a - mean) = 0: we
    # return the subgradient 0 (finite) instead of 0/0 = nan.
    gk = _keep(g / _safe(ans), np.shape(a), axis, keepdims)
    return gk * _centred_scaled(a, axis, ddof, correction, 1.0)


def _moment_tangent(t, a, axis, ddof, correction, c, keepdims):
    """``sum(Re(conj(w) t))`` with ``w = c (a - mean) / dof``: the tangent of var (c=2)."""
    w = _centred_scaled(a, axis, ddof, correction, c)
    out = _tangent_sum(t, conj(w), axis, np.ndim(a), keepdims)
    return np.real(out) if is_complex(out) else out


def _var_jvp(t, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             where=True, mean=None, correction=None):
    return _moment_tangent(t[0], a, axis, ddof, correction, 2.0, keepdims)


def _std_jvp(t, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
             where=True, mean=None, correction=None):
    return _moment_tangent(t[0], a, axis, ddof, correction, 1.0, keepdims) / _safe(ans)


defvjp(np.var, _var_vjp, fn=_moment(np.var, 'var'), jvp=_var_jvp, batched=_var_jvp,
       structure='reduce')
defvjp(np.std, _std_vjp, fn=_moment(np.std, 'std'), jvp=_std_jvp, batched=_std_jvp,
       structure='reduce')


# --------------------------------------------------------------------------
# cumsum / cumprod
# --------------------------------------------------------------------------

def _cumulative(np_fn, name):
    def forward(a, axis=None, dtype=None, out=None):
        _check(name, dtype, out)
        return np_fn(a, axis, dtype)
    forward.__name__ = name
    return forward


def _lane(a, axis):
    """(array, axis) along which a cumulative op ran: ``axis=None`` means flattened
    (and so does any axis of a 0-d array: NumPy gives a 1-element result)."""
    if axis is None or not np.ndim(a):
        return np.reshape(a, (-1,)), 0
    return a, normalize_axis_tuple(axis, np.ndim(a))[0]


def _cumsum_vjp(g, ans, a, axis=None, dtype=None, out=None):
    flat = axis is None or not np.ndim(a)
    ax = 0 if flat else normalize_axis_tuple(axis, np.ndim(a))[0]
    gx = _reverse(np.cumsum(_reverse(g, ax), axis=ax), ax)
    return np.reshape(gx, np.shape(a)) if flat else gx


def _cumprod_vjp(g, ans, a, axis=None, dtype=None, out=None):
    # d/dx[i] sum_k g[k] y[k] = (prod_{j<i} x[j]) * r[i],  r[i] = g[i] + x[i+1] r[i+1]:
    # exact when x has zeros (no division by x).  Complex: the conjugates of the
    # partial derivatives, r[i] = g[i] + conj(x[i+1]) r[i+1].
    x, ax = _lane(a, axis)
    shape = np.shape(x)
    before = _shift(ans, 1, ax) + _onehot(shape, ax, 0, x.dtype)
    gx = conj(before) * _linrec(_shift(conj(x), -1, ax), g, ax, reverse=True)
    return np.reshape(gx, np.shape(a)) if axis is None or not np.ndim(a) else gx


defvjp(np.cumsum, _cumsum_vjp, fn=_cumulative(np.cumsum, 'cumsum'), linear='joint',
       structure='cumulative')
defvjp(np.cumprod, _cumprod_vjp, fn=_cumulative(np.cumprod, 'cumprod'), structure='cumulative')


# --------------------------------------------------------------------------
# trace
# --------------------------------------------------------------------------

def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _check('trace', dtype, out)
    return np.trace(a, offset, axis1, axis2, dtype)


def _trace_vjp(g, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    shape = np.shape(a)
    nd = len(shape)
    a1, a2 = axis1 % nd, axis2 % nd
    others = [i for i in range(nd) if i not in (a1, a2)]
    diag = np.eye(shape[a1], shape[a2], k=offset, dtype=a.dtype)
    gt = np.reshape(g, np.shape(g) + (1, 1)) * diag
    perm = others + [a1, a2]
    if perm == list(range(nd)):
        return gt
    return np.transpose(gt, tuple(np.argsort(perm)))


def _trace_structure(varying, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    source = np.diagonal(np.arange(np.size(a)).reshape(np.shape(a)), offset, axis1, axis2)
    target = np.arange(np.size(ans)).reshape(np.shape(ans) + (1,))
    return {0: (np.broadcast_to(target, source.shape).ravel(), source.ravel())}


defvjp(np.trace, _trace_vjp, fn=_trace, linear='joint', structure=_trace_structure)


# --------------------------------------------------------------------------
# average: a composite of sum, multiply and divide
# --------------------------------------------------------------------------

def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    keepdims = False if keepdims is _NoValue else keepdims
    shape = np.shape(a)
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        scl = np.full(np.shape(avg), _count(shape, _axes(axis, len(shape))), dtype=avg.dtype)
    else:
        wshape = np.shape(weights)
        w = weights
        if wshape != shape:
            if axis is None:
                raise TypeError('np.average: axis must be specified when shapes of a and '
                                'weights differ')
            axes = normalize_axis_tuple(axis, len(shape))
            if wshape != tuple(shape[i] for i in axes):
                raise ValueError('np.average: shape of weights must be consistent with '
                                 'shape of a along specified axis')
            # weights' axes in the order they are given, then broadcast along the rest
            order = np.argsort(axes)
            w = np.transpose(w, tuple(order)) if len(axes) > 1 else w
            w = np.reshape(w, tuple(n if i in axes else 1 for i, n in enumerate(shape)))
        scl = np.sum(np.broadcast_to(w, shape) if np.shape(w) != shape else w,
                     axis=axis, keepdims=keepdims)
        if np.any(scl == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if returned:
        if np.shape(scl) != np.shape(avg):
            scl = np.broadcast_to(scl, np.shape(avg))
        return avg, scl
    return avg


defcomposite(np.average, _average)


# --------------------------------------------------------------------------
# ufunc.reduce / ufunc.accumulate on tracked values
# --------------------------------------------------------------------------

REDUCE[np.add] = np.sum
REDUCE[np.multiply] = np.prod
REDUCE[np.maximum] = np.max
REDUCE[np.minimum] = np.min
ACCUMULATE[np.add] = np.cumsum
ACCUMULATE[np.multiply] = np.cumprod
