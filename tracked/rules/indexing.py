"""Indexing rules: ``x[idx]``, the scatter-add that is its adjoint, and ``x[idx] = v``.

``x[idx]`` is one registry entry over two primitives that differ only in their
``view`` flag: basic indexing that NumPy answers with a view (slices, ``None``,
``...``, fewer integers than dimensions) and everything that NumPy copies (integer
and boolean arrays, a full set of integers giving a scalar).  One always-view
primitive was rejected: it would make ``y[i] = y[i - 1] * 2`` on a 1-d ``y``
refuse the write for a view that does not exist.

``x[idx] = v`` (``TrackedArray.__setitem__``) records ``operator.setitem`` as a
primitive returning a new array; ``boxes.Tracked._mutate`` then points the box at
it.  Its adjoints are ``zero_at`` (for ``x``) and a gather (for ``v``).
"""
import operator

import numpy as np

from ..registry import FAST, Primitive, defcomposite, defvjp
from ..tape import SparseCotangent, shape_of
from ..boxes import Tracked
from ..dispatch import apply

__all__ = ['scatter_add', 'zero_at', 'getitem', 'has_int_arrays']


# --------------------------------------------------------------------------
# Classifying an index (plain: indices are constants of the tape)
# --------------------------------------------------------------------------

def _parts(idx):
    return idx if type(idx) is tuple else (idx,)


def has_int_arrays(idx):
    """Whether ``idx`` holds an integer array (or list), so positions may repeat."""
    for i in _parts(idx):
        if isinstance(i, (np.ndarray, list, tuple)):
            a = np.asarray(i)
            if a.ndim > 0 and a.dtype.kind != 'b':
                return True
    return False


def _is_view(idx, ndim):
    """Whether NumPy answers ``x[idx]`` with a view of ``x`` (basic indexing, not a scalar)."""
    n_int = 0
    view = False
    for i in _parts(idx):
        if type(i) is int or isinstance(i, np.integer):
            n_int += 1
        elif type(i) is slice or i is None or i is Ellipsis:
            view = True
        else:
            return False    # an array, list or bool: advanced indexing copies
    return view or n_int < ndim


# --------------------------------------------------------------------------
# scatter_add and zero_at: the linear maps behind the pullbacks
# --------------------------------------------------------------------------

def _scatter_add_fwd(g, idx, shape, unique=None):
    g = np.asarray(g)
    out = np.zeros(shape, dtype=g.dtype if g.dtype.kind in 'fc' else np.float64)
    if unique is None:
        unique = not has_int_arrays(idx)
    if unique:
        out[idx] = g            # no position repeats: plain assignment, much faster
    else:
        np.add.at(out, idx, g)  # repeated positions accumulate
    return out


def _batch_index(idx):
    """``idx`` for a batch of arrays stacked along a new leading axis, or None when a
    leading slice would not keep the batch axis first (advanced indices apart)."""
    parts = _parts(idx)
    arrays = [k for k, i in enumerate(parts) if isinstance(i, (np.ndarray, list, Tracked))]
    # beside an array, an integer is an advanced index too
    advanced = sorted(set(arrays) | {k for k, i in enumerate(parts) if arrays and (
        type(i) is int or isinstance(i, np.integer))})
    if advanced and advanced[-1] - advanced[0] + 1 != len(advanced):
        return None
    return (slice(None),) + tuple(parts)


def _scatter_batched(ts, ans, g, idx, shape, unique=None):
    bidx = _batch_index(idx)
    if bidx is None:
        return NotImplemented
    t = ts[0]
    return scatter_add(t, bidx, (shape_of(t)[0],) + tuple(shape), unique)


def _scatter_structure(varying, ans, g, idx, shape, unique=None):
    if 1 in varying:            # a recorded index: any element may receive
        return None
    target = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)[idx]
    source = np.arange(np.size(g)).reshape(np.shape(g))
    return {0: (target.ravel(), np.broadcast_to(source, np.shape(target)).ravel())}


_scatter = Primitive(_scatter_add_fwd, (lambda g, ans, h, idx, shape, unique=None: g[idx],),
                     name='scatter_add', kernel='scatter_add', index_args=(1,), linear='joint',
                     batched=_scatter_batched, structure=_scatter_structure)


SCATTER_ADD = _scatter      # the primitive (the NumPy replay fuses it into a following add)


def scatter_add(g, idx, shape, unique=None):
    """``scatter_add(g, idx, shape)``: zeros of ``shape`` with ``g`` added at ``idx``
    (repeated indices accumulate); the adjoint of ``x[idx]``, differentiable itself.

    ``unique=True`` promises that ``idx`` selects no position twice (assignment is
    used); by default that is assumed exactly when ``idx`` holds no integer array.

    >>> import numpy as np
    >>> scatter_add(np.array([1.0, 2.0, 3.0]), [0, 2, 0], (3,))
    array([4., 0., 2.])
    """
    return apply(_scatter, (g, idx, tuple(shape)), {} if unique is None else {'unique': unique})


def _zero_at_fwd(g, idx):
    out = np.array(g, copy=True)
    out[idx] = 0
    return out


def _zero_at_batched(ts, ans, g, idx):
    bidx = _batch_index(idx)
    return NotImplemented if bidx is None else zero_at(ts[0], bidx)


_zero = Primitive(_zero_at_fwd, (lambda gg, ans, g, idx: zero_at(gg, idx),), name='zero_at',
                  index_args=(1,), linear='joint', batched=_zero_at_batched, structure='select')


def zero_at(g, idx):
    """``zero_at(g, idx)``: a copy of ``g`` with ``g[idx]`` set to zero (a projection,
    its own adjoint); the pullback of ``x[idx] = v`` for ``x``.

    >>> import numpy as np
    >>> zero_at(np.ones(4), slice(1, 3))
    array([1., 0., 0., 1.])
    """
    return apply(_zero, (g, idx), {})


# --------------------------------------------------------------------------
# x[idx]
# --------------------------------------------------------------------------

def _getitem_vjp(g, ans, x, idx):
    # tape.SparseCotangent materialises into a real buffer: a complex cotangent goes dense
    dense = getattr(getattr(g, 'dtype', None), 'kind', 'f') == 'c'
    if type(idx) is slice and type(g) is np.ndarray and not dense:   # x[a:b], first order
        return SparseCotangent(g, idx, x.shape, True)
    if dense or isinstance(g, Tracked) or contains_tracked(idx):   # nested, or a recorded index
        return scatter_add(g, idx, shape_of(x))
    # First order: let backward add the slice into a buffer it owns (no zero-filled copy).
    return SparseCotangent(g, idx, shape_of(x), not has_int_arrays(idx))


def _getitem_batched(ts, ans, x, idx):
    bidx = _batch_index(idx)
    return NotImplemented if bidx is None else ts[0][bidx]


_getitem_view = Primitive(operator.getitem, (_getitem_vjp,), name='operator.getitem', view=True,
                          kernel='getitem', index_args=(1,), linear='joint',
                          batched=_getitem_batched, structure='select')
_getitem_copy = Primitive(operator.getitem, (_getitem_vjp,), name='operator.getitem',
                          kernel='getitem', index_args=(1,), linear='joint',
                          batched=_getitem_batched, structure='select')
FAST['slice'] = _getitem_view          # Tracked.__getitem__ records x[a:b] directly


def getitem(x, idx):
    """``x[idx]`` recorded as a view or a copy, as NumPy would return it."""
    ndim = x.ndim if isinstance(x, Tracked) else np.ndim(x)
    return apply(_getitem_view if _is_view(idx, ndim) else _getitem_copy, (x, idx), {})


defcomposite(operator.getitem, getitem)


# --------------------------------------------------------------------------
# x[idx] = v  (functional: returns a new array)
# --------------------------------------------------------------------------

def contains_tracked(v):
    """Whether ``v`` is tracked or a (nested) list or tuple holding a tracked value."""
    if isinstance(v, Tracked):
        return True
    if type(v) in (list, tuple):
        return any(contains_tracked(e) for e in v)
    return False


def _setitem_fwd(x, idx, v):
    if type(v) in (list, tuple) and contains_tracked(v):
        raise TypeError('x[idx] = [...] with tracked values inside a list would drop their '
                        'gradients; assign np.stack([...]) instead')
    if has_int_arrays(idx):
        shape = np.shape(x)
        pos = np.arange(int(np.prod(shape))).reshape(shape)[idx]
        if np.unique(pos).size != pos.size:
            raise ValueError('x[idx] = v with an integer index array that repeats a position: '
                             'NumPy keeps only the last write, so tracked refuses it. Assign '
                             'with indices that do not repeat (e.g. from np.unique).')
    out = np.array(x, copy=True)
    out[idx] = v
    return out


def _setitem_vjp_value(g, ans, x, idx, v):
    gv = g[idx]
    extra = len(shape_of(v)) - len(shape_of(gv))
    if extra > 0:   # NumPy lets v carry extra leading 1s: x[0] = v with v.shape == (1, n)
        gv = np.reshape(gv, (1,) * extra + shape_of(gv))
    return gv


defvjp(operator.setitem, lambda g, ans, x, idx, v: zero_at(g, idx), None, _setitem_vjp_value,
       fn=_setitem_fwd, index_args=(1,), linear='joint', structure='select')
