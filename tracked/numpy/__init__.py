"""``import tracked.numpy as np``: NumPy, plus what NumPy's protocols never see.

For code written against ``autograd.numpy`` or ``jax.numpy``: changing that import line
is all it takes.  Every public NumPy name is here; ufuncs, constants, types and
submodules' objects are NumPy's own (tracked values reach tracked through NumPy's
dispatch).  What NumPy runs before any tracked value could be seen is tracked's:

- ``array``, ``asarray``, ``asanyarray``, ``ascontiguousarray``: nested lists and tuples
  holding tracked values become one recorded ``stack`` (differentiable, nestable,
  replayable); ``asarray`` of a tracked value returns it;
- ``r_`` and ``c_`` with tracked items;
- ``stack``, ``concatenate``, ``hstack``, ``vstack``, ``dstack``, ``column_stack`` of
  lists whose items are (nested lists of) tracked scalars;
- every other NumPy function that dispatches (``sum``, ``mean``, ``max``, ``dot``,
  ``linalg.norm``, ...) given a list of tracked values (``np.sum([a, b])``): NumPy's
  own call, retried with the list made an array when NumPy refuses it (autograd
  accepts such lists through object arrays); the function is then a thin wrapper of
  NumPy's (``np.sum.__wrapped__ is numpy.sum``);
- ``select`` with a tracked ``default`` (NumPy does not dispatch on it);
- ``zeros_like``/``ones_like``/``empty_like`` of a tracked float array: a tracked array
  that ``out[i] = t`` can write tracked values into (NumPy's are plain);
- ``full``/``full_like`` with a tracked fill value, and ``vectorize`` (the Python
  function runs on tracked scalars, one element at a time).

Plain ``numpy`` keeps refusing ``np.array([t0, t1])`` with a message pointing here and
to ``np.stack``.  ``tracked.numpy.linalg``, ``.fft`` and ``.random`` are modules (as
``autograd.numpy``'s are) holding NumPy's functions, with lists accepted as above.

>>> import tracked as tr
>>> import tracked.numpy as np
>>> tr.gradient(lambda a, b: np.sum(np.array([a * b, a, [b, 2.0]][:2])), 2.0, 3.0)
(np.float64(4.0), np.float64(2.0))
"""
from __future__ import annotations

# any and bool are the builtins, as _builtins.any/bool: ``from numpy import *`` binds
# NumPy's, and NumPy's any of a generator is the truth of the generator object (True).
import builtins as _builtins
import importlib as _importlib
from collections.abc import Callable as _Callable
from typing import Any as _Any

import numpy as _np
import numpy.typing as _npt
from numpy import *  # noqa: F401,F403  (NumPy's own names: tracked values dispatch there)

from ._lists import wrap_dispatched as _wrap_dispatched
from ..registry import RULES as _RULES
from ..boxes import Tracked as _Tracked
from ..dispatch import holds_tracked as _holds_tracked

__all__ = [n for n in dir(_np) if not n.startswith('_')]


def __getattr__(name: str) -> _Any:         # everything else: NumPy's (np.newaxis, ...)
    return getattr(_np, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_np)))


def _build(obj: _Any) -> _Any:
    """A (nested) list or tuple holding tracked values as one array: stacked level by level."""
    if isinstance(obj, _Tracked):
        return obj
    if type(obj) in (list, tuple):
        return _np.stack([_build(v) for v in obj]) if obj else _np.array(obj)
    return _np.asarray(obj)


def array(object: _Any, dtype: _npt.DTypeLike | None = None, *,
          copy: _builtins.bool | None = True, order: _Any = 'K', subok: _builtins.bool = False,
          ndmin: int = 0, like: _Any = None) -> _Any:
    """``array(object, ...)``: ``numpy.array``, also for (nested) lists of tracked values.

    >>> import tracked as tr, tracked.numpy as np
    >>> tr.gradient(lambda x, y: np.sum(np.array([[x, y], [x * y, 1.0]]) ** 2), 1.0, 2.0)
    (np.float64(10.0), np.float64(8.0))
    """
    if not _holds_tracked(object):
        return _np.array(object, dtype=dtype, copy=copy, order=order, subok=subok,
                         ndmin=ndmin, like=like)
    out = _build(object)
    if isinstance(object, _Tracked) and copy:
        out = _np.copy(out)
    if dtype is not None and _np.dtype(dtype) != out.dtype:
        out = out.astype(dtype)
    if out.ndim < ndmin:
        out = _np.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def asarray(a: _Any, dtype: _npt.DTypeLike | None = None, order: _Any = None, *,
            like: _Any = None, **kwargs: _Any) -> _Any:
    """``asarray(a)``: ``numpy.asarray``; a tracked value is returned as it is, and lists
    holding tracked values become a tracked array."""
    if isinstance(a, _Tracked) and (dtype is None or _np.dtype(dtype) == a.dtype):
        return a
    if not _holds_tracked(a):
        return _np.asarray(a, dtype=dtype, order=order, like=like, **kwargs)
    return array(a, dtype=dtype, copy=False)


asanyarray = asarray  # type: ignore[assignment]  # shadows NumPy's on purpose


def ascontiguousarray(a: _Any, dtype: _npt.DTypeLike | None = None, *,
                      like: _Any = None) -> _Any:
    """``ascontiguousarray(a)``: ``numpy.ascontiguousarray``, tracked values kept tracked."""
    if _holds_tracked(a):
        return asarray(a, dtype=dtype)
    return _np.ascontiguousarray(a, dtype=dtype, like=like)


def _joiner(fn: _Callable[..., _Any]) -> _Callable[..., _Any]:
    def join(arrays: _Any, *args: _Any, **kwargs: _Any) -> _Any:
        if type(arrays) in (list, tuple) and _holds_tracked(arrays):
            arrays = [asarray(a) for a in arrays]
        return fn(arrays, *args, **kwargs)
    join.__name__ = fn.__name__
    join.__doc__ = (f'``{fn.__name__}(arrays, ...)``: ``numpy.{fn.__name__}``; items that '
                    f'are lists of tracked scalars are arrays first.')
    return join


stack = _joiner(_np.stack)
concatenate = _joiner(_np.concatenate)
hstack = _joiner(_np.hstack)
vstack = _joiner(_np.vstack)
dstack = _joiner(_np.dstack)
column_stack = _joiner(_np.column_stack)


class _Concatenator:
    """``r_`` and ``c_``: NumPy's, unless an item holds a tracked value."""

    def __init__(self, numpy_version: _Any, columns: _builtins.bool) -> None:
        self.numpy_version = numpy_version
        self.columns = columns

    def __getitem__(self, key: _Any) -> _Any:
        items = key if type(key) is tuple else (key,)
        if not _builtins.any(_holds_tracked(i) for i in items):
            return self.numpy_version[key]
        if items and isinstance(items[0], str):
            raise TypeError('tracked.numpy: r_/c_ with a string directive and tracked items '
                            'is not supported; use np.concatenate')
        parts = []
        for item in items:
            part = self.numpy_version[item] if type(item) is slice else asarray(item)
            if self.columns:
                part = _np.reshape(part, (-1, 1)) if _np.ndim(part) < 2 else part
            else:
                part = _np.atleast_1d(part)
            parts.append(part)
        return _np.concatenate(parts, axis=-1 if self.columns else 0)

    def __len__(self) -> int:
        return 0


# (NumPy's stubs make r_ and c_ Final: this module shadows them on purpose)
r_ = _Concatenator(_np.r_, columns=False)  # type: ignore[misc, assignment]
c_ = _Concatenator(_np.c_, columns=True)  # type: ignore[misc, assignment]


def full(shape: _Any, fill_value: _Any, dtype: _npt.DTypeLike | None = None, order: _Any = 'C',
         **kwargs: _Any) -> _Any:
    """``full(shape, fill_value)``: a tracked fill value gives a tracked array (NumPy's
    own ``full`` writes it into a plain array, where its gradient would be lost)."""
    if not isinstance(fill_value, _Tracked):
        return _np.full(shape, fill_value, dtype=dtype, order=order, **kwargs)
    out: _Any = _np.broadcast_to(fill_value, shape)
    return out * _np.ones((), dtype=dtype or fill_value.dtype)     # a copy, not a view


def full_like(a: _Any, fill_value: _Any, dtype: _npt.DTypeLike | None = None, order: _Any = 'K',
              subok: _builtins.bool = True, shape: _Any = None, **kwargs: _Any) -> _Any:
    """``full_like(a, fill_value)``: a tracked fill value gives a tracked array."""
    if not isinstance(fill_value, _Tracked):
        return _np.full_like(a, fill_value, dtype=dtype, order=order, subok=subok,
                             shape=shape, **kwargs)
    return full(_np.shape(a) if shape is None else shape, fill_value,
                dtype=dtype or _np.result_type(a))


def _like(name: str, fill: float) -> _Callable[..., _Any]:
    numpy_fn = getattr(_np, name)

    def like(a: _Any, dtype: _npt.DTypeLike | None = None, order: _Any = 'K',
             subok: _builtins.bool = True, shape: _Any = None, **kwargs: _Any) -> _Any:
        kind = _np.dtype(dtype).kind if dtype is not None else \
            a.dtype.kind if isinstance(a, _Tracked) else None
        if kind is None or kind not in 'fc' or (shape is not None and
                                                tuple(_np.atleast_1d(shape)) != a.shape):
            return numpy_fn(a, dtype=dtype, order=order, subok=subok, shape=shape, **kwargs)
        values = _np.full(a.shape, fill, dtype=dtype or a.dtype)
        # tracked at a's level with a zero derivative, so that x[i] = t can write into it
        return _np.where(False, a, values)
    like.__name__ = like.__qualname__ = name
    like.__doc__ = (f'``{name}(a, ...)``: NumPy\'s, but a tracked float ``a`` gives a tracked '
                    f'array (with a zero derivative) that ``out[i] = t`` can write a tracked '
                    f'value into, as in PyTorch; a plain array cannot hold one.')
    return like


empty_like = _like('empty_like', 0.0)
zeros_like = _like('zeros_like', 0.0)
ones_like = _like('ones_like', 1.0)


class vectorize(_np.vectorize):
    """``vectorize(pyfunc)``: ``numpy.vectorize`` that runs ``pyfunc`` on tracked scalars
    (one element at a time, each result recorded) when an argument is tracked."""

    def __call__(self, *args: _Any, **kwargs: _Any) -> _Any:
        if not _builtins.any(isinstance(a, _Tracked) for a in args):
            return super().__call__(*args, **kwargs)
        arrays = _np.broadcast_arrays(*[asarray(a) for a in args])
        shape = arrays[0].shape
        flat = [_np.reshape(a, (-1,)) for a in arrays]
        n = flat[0].shape[0]
        out = [self.pyfunc(*[f[i] for f in flat], **kwargs) for i in range(n)]
        return _np.reshape(array(out), shape)


def select(condlist: _Any, choicelist: _Any, default: _Any = 0) -> _Any:
    """``select(condlist, choicelist, default=0)``: ``numpy.select``, also with a tracked
    ``default`` (NumPy dispatches on the conditions and choices only)."""
    if isinstance(default, _Tracked) or _holds_tracked(list(choicelist)):
        choicelist = [asarray(c) if type(c) in (list, tuple) else c for c in choicelist]
        return _RULES[_np.select](condlist, choicelist, default)
    return _np.select(condlist, choicelist, default)


_wrap_dispatched(globals(), _np, asarray)

# Always these modules, not NumPy's (``from numpy import *`` bound those names, which
# ``from . import linalg`` would then return).
linalg, fft, random = (_importlib.import_module(f'{__name__}.{m}')
                       for m in ('linalg', 'fft', 'random'))
