"""Shape rules: reshaping, transposing, joining, splitting, tiling, padding, gathering.

Every pullback is a NumPy operation on ``g`` (usually the inverse rearrangement),
so it is differentiable itself.  Gathers (``take``, ``take_along_axis``,
``diagonal``, array ``repeat``) have ``indexing.scatter_add`` as their adjoint.
Functions of several arrays (``concatenate``, ``stack``) are variadic primitives
behind a composite that unpacks the list; functions with several outputs
(``split``, ``atleast_1d(a, b)``) are composites over single-output primitives.
"""
import numpy as np

from ..forward import batch_axes
from ..registry import Primitive, defvjp, defcomposite, identity
from ..tape import shape_of
from ..boxes import Tracked
from ..dispatch import apply, call_nondiff
from .indexing import scatter_add, contains_tracked


def _shape(x):
    """Shape of an argument: tracked, ndarray, NumPy scalar or nested list."""
    return x.shape if hasattr(x, 'shape') else np.shape(x)


def _size(x):
    return int(np.prod(_shape(x), dtype=np.int64))


def _axis_slice(ax, sl):
    """An index taking ``sl`` along axis ``ax`` and everything along the others."""
    return (slice(None),) * ax + (sl,)


def _check_order(name, order):
    if order not in ('C', 'F'):
        raise TypeError(f'np.{name}(..., order={order!r}) on a tracked value: only '
                        f"order='C' and order='F' are supported")


def _index_array(idx):
    """An index argument as an array, read by no one: a value recorded on a tape
    (``np.argsort(x)``'s result) stays recorded, so a replay uses the new index."""
    return idx if isinstance(idx, Tracked) else np.asarray(idx)


def _check_out(name, out):
    if out is not None:
        raise TypeError(f'np.{name}(..., out=...) cannot write a tracked result into an '
                        f'array; use y = np.{name}(...) instead')


# ==========================================================================
# Rearranging one array
# ==========================================================================

def _reshape(a, shape=None, order='C', **kw):
    _check_order('reshape', order)
    return np.reshape(a, shape, order=order, **kw)


def _batched_like_output(ts, ans, x, *args, order='C', **kw):
    """Batched tangent of a reshape-like operation: the output's shape, per batch."""
    if order != 'C':
        return NotImplemented
    t = ts[0]
    return np.reshape(t, _shape(t)[:1] + tuple(_shape(ans)))


defvjp(np.reshape, lambda g, ans, x, shape=None, order='C', **kw:
       np.reshape(g, _shape(x), order=order), fn=_reshape, view=True, linear='joint',
       batched=_batched_like_output, structure='select')


def _ravel(a, order='C'):
    _check_order('ravel', order)
    return np.ravel(a, order=order)


defvjp(np.ravel, lambda g, ans, x, order='C': np.reshape(g, _shape(x), order=order),
       fn=_ravel, view=True, linear='joint', batched=_batched_like_output, structure='select')


def _transpose_vjp(g, ans, x, axes=None):
    if axes is None:
        return np.transpose(g)
    nd = len(_shape(x))
    return np.transpose(g, tuple(np.argsort([a % nd for a in axes])))


def _transpose_batched(ts, ans, x, axes=None):
    nd = len(_shape(x))
    perm = tuple(range(nd - 1, -1, -1)) if axes is None else axes
    return np.transpose(ts[0], (0,) + batch_axes(tuple(perm), nd))


def _broadcast_to_batched(ts, ans, x, shape, **kw):
    t, out = ts[0], tuple(_shape(ans))
    k = _shape(t)[0]
    t = np.reshape(t, (k,) + (1,) * (len(out) - len(_shape(x))) + tuple(_shape(x)))
    return np.broadcast_to(t, (k,) + out)


# also .T and np.permute_dims
defvjp(np.transpose, _transpose_vjp, view=True, linear='joint', batched=_transpose_batched,
       structure='select')
defvjp(np.swapaxes, lambda g, ans, x, axis1, axis2: np.swapaxes(g, axis1, axis2), view=True,
       linear='joint', batched=lambda ts, ans, x, axis1, axis2: np.swapaxes(
           ts[0], *batch_axes((axis1, axis2), len(_shape(x)))), structure='select')
defvjp(np.moveaxis, lambda g, ans, x, source, destination: np.moveaxis(g, destination, source),
       view=True, linear='joint', structure='select')
defvjp(np.matrix_transpose, lambda g, ans, x: np.matrix_transpose(g), view=True, linear='joint',
       batched=True, structure='select')
defvjp(np.expand_dims, lambda g, ans, x, axis: np.reshape(g, _shape(x)), view=True,
       linear='joint', batched=_batched_like_output, structure='select')
defvjp(np.squeeze, lambda g, ans, x, axis=None: np.reshape(g, _shape(x)), view=True,
       linear='joint', batched=_batched_like_output, structure='select')
defvjp(np.broadcast_to, identity, view=True, linear='joint',   # unbroadcast: central
       batched=_broadcast_to_batched, structure='select')
defvjp(np.flip, lambda g, ans, x, axis=None: np.flip(g, axis), view=True, linear='joint',
       batched=lambda ts, ans, x, axis=None: np.flip(ts[0], batch_axes(axis, len(_shape(x)))),
       structure='select')
defcomposite(np.fliplr, lambda m: np.flip(m, 1))
defcomposite(np.flipud, lambda m: np.flip(m, 0))


def _negate_shift(shift):
    return -shift if np.ndim(shift) == 0 else tuple(-s for s in np.ravel(shift))


defvjp(np.roll, lambda g, ans, x, shift, axis=None: np.roll(g, _negate_shift(shift), axis),
       linear='joint', structure='select')
defvjp(np.rot90, lambda g, ans, x, k=1, axes=(0, 1): np.rot90(g, -k, axes), view=True,
       linear='joint', structure='select')
def _triangle_batched(tri):
    # triu/tril act on the last two axes, so a batch rides along, except that a 1-d x
    # is first made the matrix it is a row of
    return lambda ts, ans, x, k=0: tri(ts[0], k) if len(_shape(x)) > 1 else NotImplemented


defvjp(np.triu, lambda g, ans, x, k=0: np.triu(g, k), linear='joint',
       batched=_triangle_batched(np.triu), structure='select')
defvjp(np.tril, lambda g, ans, x, k=0: np.tril(g, k), linear='joint',
       batched=_triangle_batched(np.tril), structure='select')
defvjp(np.copy, identity, kernel='copy', linear='joint', batched=True,      # also .copy()
       structure='select')


def _broadcast_arrays(*args, **kwargs):
    shape = np.broadcast_shapes(*(_shape(a) for a in args))
    return tuple(np.broadcast_to(a, shape) for a in args)


defcomposite(np.broadcast_arrays, _broadcast_arrays)


# -- atleast_nd: several arguments give a tuple, as in NumPy -----------------

def _atleast(target):
    def impl(*arys):
        out = tuple(a if isinstance(a, Tracked) and _shape(a) == target(_shape(a))
                    else np.reshape(a, target(_shape(a))) for a in arys)
        return out[0] if len(out) == 1 else out
    return impl


defcomposite(np.atleast_1d, _atleast(lambda s: s if len(s) >= 1 else (1,)))
defcomposite(np.atleast_2d, _atleast(lambda s: s if len(s) >= 2 else (1,) * (2 - len(s)) + s))
defcomposite(np.atleast_3d, _atleast(lambda s: s if len(s) >= 3 else
                                     {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]))


# -- astype: floats are differentiable, integer and bool results are plain ----

def _astype_fwd(x, dtype):
    return x.astype(dtype) if hasattr(x, 'astype') else np.asarray(x).astype(dtype)


def _cast_like(g, x):
    """Cotangent ``g`` in ``x``'s dtype: a real ``x`` takes the real part of a complex one."""
    dtype = x.dtype
    if not (isinstance(g, Tracked) or hasattr(g, 'astype')):
        g = np.asarray(g)
    if g.dtype.kind == 'c' and dtype.kind != 'c':
        g = np.real(g)
    return g if g.dtype == dtype else g.astype(dtype)


_astype = Primitive(_astype_fwd, (lambda g, ans, x, dtype: _cast_like(g, x),), name='astype',
                    kernel='astype', linear='joint', batched=True, structure='elementwise')


def _astype_0d(x, dtype):          # np.astype refuses a NumPy scalar before NumPy 2.1
    return np.asarray(x).astype(dtype)[()]


def _astype_composite(x, dtype, **kwargs):
    # Why plain for integers: an integer (or bool) cast is piecewise constant, its
    # derivative is zero, and the result is typically used as an index; raising
    # would break that idiom.  It goes through call_nondiff so a GradientTape
    # records it as a guard.
    dt = np.dtype(dtype)
    if dt.kind in 'fc':
        if dt.kind == 'f' and getattr(x, 'dtype', dt).kind == 'c':
            raise TypeError(f'astype({dt}) of a complex value would discard its imaginary '
                            f'part; take np.real(x) (or np.abs(x)) first')
        return apply(_astype, (x, dt), {})
    return call_nondiff(np.astype if np.ndim(x) else _astype_0d, (x, dt), {})


defcomposite(np.ndarray.astype, _astype_composite)     # x.astype(dtype)
defcomposite(np.astype, _astype_composite)             # np.astype(x, dtype), NumPy 2


# ==========================================================================
# Joining arrays: variadic primitives
# ==========================================================================

class _Variadic:
    """Pullbacks for a primitive of any number of arrays: ``vjps[i]`` is ``make(i)``."""

    def __init__(self, make):
        self.make = make
        self.cache = []

    def __len__(self):
        return 1 << 62

    def __getitem__(self, i):
        while len(self.cache) <= i:
            self.cache.append(self.make(len(self.cache)))
        return self.cache[i]


def _variadic(fn, make_vjp, name, batched=None):
    # Jointly linear in its arrays: the tangent is the primitive of the tangents.
    prim = Primitive(fn, (), name=name, linear='joint', batched=batched, structure='select')
    prim.vjps = _Variadic(make_vjp)      # Primitive() would turn a sequence into a tuple
    return prim


def _batch_tangents(ts, arrays):
    """Tangents with a leading batch axis, zeros for the arrays without one."""
    t0 = next(t for t in ts if t is not None)
    return [np.zeros(np.shape(t0)[:1] + _shape(a), t0.dtype) if t is None else t
            for t, a in zip(ts, arrays)]


# -- concatenate ---------------------------------------------------------------

def _concatenate_fwd(*arrays, axis=0, offsets=None, **kwargs):
    return np.concatenate(arrays, axis=axis, **kwargs)


def _concatenate_vjp(i):
    def vjp(g, ans, *arrays, axis=0, offsets=None, **kwargs):
        x = arrays[i]
        if axis is None:
            return np.reshape(g[offsets[i]:offsets[i + 1]], _shape(x))
        ax = axis % len(_shape(x))
        return g[_axis_slice(ax, slice(offsets[i], offsets[i + 1]))]
    return vjp


def _concatenate_batched(ts, ans, *arrays, axis=0, offsets=None, **kwargs):
    ts = _batch_tangents(ts, arrays)
    if axis is None:
        return np.concatenate([np.reshape(t, (np.shape(t)[0], -1)) for t in ts], axis=1)
    return np.concatenate(ts, axis=axis % len(_shape(arrays[0])) + 1, **kwargs)


_concatenate = _variadic(_concatenate_fwd, _concatenate_vjp, 'np.concatenate',
                         _concatenate_batched)


def _concatenate_composite(arrays, axis=0, out=None, **kwargs):
    _check_out('concatenate', out)
    arrays = tuple(arrays)
    if not arrays:
        raise ValueError('need at least one array to concatenate')      # NumPy's errors
    if len(_shape(arrays[0])) == 0 and axis is not None:
        raise ValueError('zero-dimensional arrays cannot be concatenated')
    if axis is None:
        sizes = [_size(a) for a in arrays]
    else:
        ax = axis % len(_shape(arrays[0]))
        sizes = [_shape(a)[ax] if len(_shape(a)) > ax else 0 for a in arrays]
    offsets = tuple(np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).tolist())
    return apply(_concatenate, arrays, dict(kwargs, axis=axis, offsets=offsets))


defcomposite(np.concatenate, _concatenate_composite)    # also np.concat (same object)


# -- stack -----------------------------------------------------------------------

def _stack_fwd(*arrays, axis=0, **kwargs):
    return np.stack(arrays, axis=axis, **kwargs)


def _stack_vjp(i):
    def vjp(g, ans, *arrays, axis=0, **kwargs):
        return g[_axis_slice(axis % len(shape_of(ans)), i)]
    return vjp


def _stack_batched(ts, ans, *arrays, axis=0, **kwargs):
    return np.stack(_batch_tangents(ts, arrays), axis=axis % len(shape_of(ans)) + 1, **kwargs)


_stack = _variadic(_stack_fwd, _stack_vjp, 'np.stack', _stack_batched)


def _stack_composite(arrays, axis=0, out=None, **kwargs):
    _check_out('stack', out)
    return apply(_stack, tuple(arrays), dict(kwargs, axis=axis))


defcomposite(np.stack, _stack_composite)


def _hstack(tup, **kwargs):
    arrs = [np.atleast_1d(a) for a in tup]
    return np.concatenate(arrs, axis=0 if arrs and len(_shape(arrs[0])) == 1 else 1, **kwargs)


def _vstack(tup, **kwargs):
    return np.concatenate([np.atleast_2d(a) for a in tup], axis=0, **kwargs)


def _dstack(tup, **kwargs):
    return np.concatenate([np.atleast_3d(a) for a in tup], axis=2, **kwargs)


def _column_stack(tup):
    return np.concatenate([np.reshape(a, (-1, 1)) if len(_shape(a)) < 2 else a for a in tup],
                          axis=1)


def _append(arr, values, axis=None):
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(values)), axis=0)
    return np.concatenate((arr, values), axis=axis)


defcomposite(np.hstack, _hstack)
defcomposite(np.vstack, _vstack)
defcomposite(np.dstack, _dstack)
defcomposite(np.column_stack, _column_stack)
defcomposite(np.append, _append)


# ==========================================================================
# Splitting: composites over basic slices (views, as in NumPy)
# ==========================================================================

def _array_split(ary, indices_or_sections, axis=0):
    shape = _shape(ary)
    ax = axis % len(shape)
    total = shape[ax]
    if np.ndim(indices_or_sections) == 0:
        n = int(indices_or_sections)
        if n <= 0:
            raise ValueError('number sections must be larger than 0.')
        each, extras = divmod(total, n)
        sizes = [0] + extras * [each + 1] + (n - extras) * [each]
        points = np.cumsum(sizes).tolist()
    else:
        points = [0] + [int(i) for i in indices_or_sections] + [total]
    return [ary[_axis_slice(ax, slice(points[k], points[k + 1]))]
            for k in range(len(points) - 1)]


def _split(ary, indices_or_sections, axis=0):
    if np.ndim(indices_or_sections) == 0:
        n = int(indices_or_sections)
        if n == 0 or _shape(ary)[axis % len(_shape(ary))] % n:
            raise ValueError('array split does not result in an equal division')
    return _array_split(ary, indices_or_sections, axis)


def _unstack(x, /, *, axis=0):
    ax = axis % len(_shape(x))
    return tuple(x[_axis_slice(ax, i)] for i in range(_shape(x)[ax]))


defcomposite(np.array_split, _array_split)
defcomposite(np.split, _split)
def _hsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 1 if len(_shape(ary)) > 1 else 0)


def _vsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 0)


defcomposite(np.hsplit, _hsplit)
defcomposite(np.vsplit, _vsplit)
if hasattr(np, 'unstack'):                # NumPy >= 2.1
    defcomposite(np.unstack, _unstack)


# ==========================================================================
# Tiling, repeating, padding
# ==========================================================================

def _tile_vjp(g, ans, x, reps):
    xs = _shape(x)
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(int(r) for r in reps)
    d = max(len(xs), len(reps))
    s = (1,) * (d - len(xs)) + tuple(xs)
    r = (1,) * (d - len(reps)) + reps
    g = np.reshape(g, tuple(v for pair in zip(r, s) for v in pair))
    return np.reshape(np.sum(g, axis=tuple(range(0, 2 * d, 2))), xs)


defvjp(np.tile, _tile_vjp, linear='joint', structure='select')


def _along(x, axis):
    """(shape, axis) that ``axis=None`` functions (repeat, take) act on: the flattened
    array along 0, or ``x`` itself along the normalised ``axis``."""
    xs = tuple(_shape(x))
    if axis is None or not xs:          # (NumPy takes a 0-d array as one element)
        return (_size(x),), 0
    return xs, axis % len(xs)


def _repeated_positions(repeats, n):
    """The source position of each element of ``np.repeat`` of ``n`` elements."""
    return np.repeat(np.arange(n), repeats)


def _repeat_vjp(g, ans, x, repeats, axis=None):
    xs = _shape(x)
    base, ax = _along(x, axis)
    r = _index_array(repeats)
    if r.size == 1:        # every element repeated k times: a reshape and a sum
        k = int(np.reshape(r, ()))      # (a guard on a recorded tape: it sets a shape)
        gx = np.sum(np.reshape(g, base[:ax] + (base[ax], k) + base[ax + 1:]), axis=ax + 1)
    else:
        src = call_nondiff(_repeated_positions, (r, base[ax]), {})   # recorded on a tape
        gx = scatter_add(g, _axis_slice(ax, src), base)
    return np.reshape(gx, xs) if axis is None or not xs else gx


defvjp(np.repeat, _repeat_vjp, linear='joint', structure='select')


def _pad_pairs(pad_width, ndim):
    if isinstance(pad_width, dict):
        pairs = [(0, 0)] * ndim
        for ax, w in pad_width.items():
            pairs[ax % ndim] = tuple(np.broadcast_to(np.asarray(w, dtype=np.int64), (2,)).tolist())
        return pairs
    pw = np.asarray(pad_width, dtype=np.int64)
    return [tuple(p) for p in np.broadcast_to(pw, (ndim, 2)).tolist()]


def _pad_constant_vjp(g, ans, x, pad_width, **kwargs):
    xs = shape_of(x)                # a shape read only: the entry keeps no copy of x
    pairs = _pad_pairs(pad_width, len(xs))
    return g[tuple(slice(b, b + n) for (b, _), n in zip(pairs, xs))]


def _pad_constant_structure(varying, ans, x, pad_width, **kwargs):
    # 'select' would run np.pad on the codes with constant_values, a code of its own
    codes = np.pad(np.arange(1, _size(x) + 1).reshape(_shape(x)), pad_width).ravel()
    k = np.flatnonzero(codes)
    return {0: (k, codes[k] - 1)}


def _pad_constant_jvp(ts, ans, x, pad_width, **kwargs):
    # the border is a constant (constant_values): its tangent is zero
    return np.pad(ts[0], pad_width)


def _pad_constant_batched(ts, ans, x, pad_width, **kwargs):
    return np.pad(ts[0], [(0, 0)] + _pad_pairs(pad_width, len(_shape(x))))


_pad_constant = Primitive(lambda x, pad_width, **kw: np.pad(x, pad_width, mode='constant', **kw),
                          (_pad_constant_vjp,), name='np.pad', jvp=_pad_constant_jvp,
                          batched=_pad_constant_batched, structure=_pad_constant_structure)

_GATHER_MODES = ('edge', 'reflect', 'symmetric', 'wrap')


def _pad(array, pad_width, mode='constant', **kwargs):
    if mode == 'constant':
        if set(kwargs) - {'constant_values'}:
            raise TypeError(f'np.pad(mode="constant") got unexpected arguments {sorted(kwargs)}')
        if contains_tracked(kwargs.get('constant_values')):
            raise TypeError('np.pad: a tracked constant_values is not supported; pad with a '
                            'constant and add the tracked value on the border instead')
        return apply(_pad_constant, (array, pad_width), kwargs)
    if mode in _GATHER_MODES and kwargs.get('reflect_type', 'even') == 'even':
        # These modes copy input elements: pad the positions, then gather.
        shape = _shape(array)
        src = np.pad(np.arange(_size(array)).reshape(shape), pad_width, mode=mode, **kwargs)
        return np.take(array, src)
    raise TypeError(f'np.pad(mode={mode!r}{", " + repr(kwargs) if kwargs else ""}) has no '
                    f'derivative rule in tracked: supported are mode="constant" (with '
                    f'constant_values) and the copying modes {", ".join(_GATHER_MODES)}. '
                    f'Define others with @tr.rule.')


defcomposite(np.pad, _pad)


# ==========================================================================
# Gathers: take, take_along_axis, diagonal, diag; and sort through them
# ==========================================================================

def _take(a, indices, axis=None, out=None, mode='raise'):
    _check_out('take', out)
    return np.take(a, indices, axis=axis, mode=mode)


def _take_vjp(g, ans, x, indices, axis=None, out=None, mode='raise'):
    xs = _shape(x)
    base, ax = _along(x, axis)
    idx = _index_array(indices)
    if mode == 'wrap':
        idx = idx % base[ax]
    elif mode == 'clip':
        idx = np.clip(idx, 0, base[ax] - 1)
    gx = scatter_add(g, _axis_slice(ax, idx), base)
    return np.reshape(gx, xs) if axis is None or not xs else gx


defvjp(np.take, _take_vjp, fn=_take, linear='joint', structure='select')


def _take_along_axis_vjp(g, ans, x, indices, axis=-1):
    xs = _shape(x)
    idx = _index_array(indices)
    if axis is None:
        return np.reshape(scatter_add(g, (idx,), (_size(x),)), xs)
    nd = len(xs)
    ax = axis % nd
    fancy = tuple(idx if d == ax else np.arange(n).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
                  for d, n in enumerate(xs))
    return scatter_add(g, fancy, xs)


defvjp(np.take_along_axis, _take_along_axis_vjp, linear='joint', structure='select')


def _diagonal_vjp(g, ans, x, offset=0, axis1=0, axis2=1):
    xs = _shape(x)
    nd = len(xs)
    a1, a2 = axis1 % nd, axis2 % nd
    rest = tuple(n for d, n in enumerate(xs) if d not in (a1, a2))
    i = np.arange(shape_of(ans)[-1])
    rows, cols = i + max(-offset, 0), i + max(offset, 0)
    full = scatter_add(g, (Ellipsis, rows, cols), rest + (xs[a1], xs[a2]), unique=True)
    return np.moveaxis(full, (-2, -1), (a1, a2))


defvjp(np.diagonal, _diagonal_vjp, view=True, linear='joint',   # NumPy's is a read-only view
       structure='select')

_diag_1d = Primitive(np.diag, (lambda g, ans, v, k=0: np.diagonal(g, k),), name='np.diag',
                     linear='joint', structure='select')


def _diag(v, k=0):
    nd = len(_shape(v))
    if nd == 1:
        return apply(_diag_1d, (v, k), {})
    if nd == 2:
        return np.diagonal(v, k)
    raise ValueError('np.diag: input must be 1-d or 2-d')


defcomposite(np.diag, _diag)


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise TypeError('np.sort(..., order=...) applies to structured arrays, which tracked '
                        'does not support')
    if axis is None:
        a, axis = np.ravel(a), -1
    idx = np.argsort(a, axis=axis, kind=kind, stable=stable)     # plain: non-differentiable
    return np.take_along_axis(a, idx, axis=axis)


defcomposite(np.sort, _sort)
