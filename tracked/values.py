"""Leaves: ``param`` (a value whose gradient ``back`` accumulates), ``leaf`` (a value
that a differentiation traces) and ``as_value`` (what a leaf may hold).
The box types are box.py's protocol, boxes.py's operators and integers.py's ints;
recording is dispatch.py's.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from .box import Box, make
from .boxes import Boxed, TrackedArray, TrackedReal
from .conversions import object_array_error, refuse_subclass
from .integers import TrackedInt
from .tape import new_node

__all__ = ['param', 'leaf', 'as_value']


def as_value(x: Any, int_to_float: bool = True) -> Any:
    """Normalise ``x`` into a NumPy array (or NumPy scalar for 0-d) suitable for a leaf."""
    if isinstance(x, Box):
        raise TypeError('value is already tracked; use tr.data(x) to start a new leaf')
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        refuse_subclass(x)
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind == 'O':
        raise object_array_error(arr)
    if kind not in 'fiubc':
        raise TypeError(f'expected a number or an array of numbers, got {type(x).__name__} '
                        f'with dtype {arr.dtype}')
    if kind in 'iub' and (int_to_float or kind == 'b'):
        arr = arr.astype(np.float64)
    if isinstance(x, np.ndarray) and arr is x and arr.ndim > 0:
        return arr
    return arr[()] if arr.ndim == 0 else arr


def leaf(value: Any, level: int) -> 'Boxed | TrackedInt':
    """A new leaf at ``level`` holding ``value`` (already normalised), without a grad
    buffer; an integer scalar becomes a ``TrackedInt``."""
    node = new_node(None, None, None, value, (), level)
    if getattr(value, 'ndim', 1) == 0 and value.dtype.kind in 'iu':
        return TrackedInt.make(value, node)
    return make(value, node)


def param(x: npt.ArrayLike) -> 'TrackedArray | TrackedReal':
    """``param(x)``: a leaf of the tape whose gradient ``back`` accumulates in ``.grad``.

    Float arrays keep their dtype; integer and bool input becomes float64.

    >>> import numpy as np, tracked as tr
    >>> W = tr.param(np.ones((2, 3)))
    >>> W.grad
    array([[0., 0., 0.],
           [0., 0., 0.]])
    """
    value = as_value(x)
    t = leaf(value, 0)
    t._node.grad = np.zeros(np.shape(value), dtype=getattr(value, 'dtype', np.float64))
    return cast('TrackedArray | TrackedReal', t)     # as_value made any integer a float
