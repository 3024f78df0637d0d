"""``flatten(value) -> (vector, unflatten)``: autograd's flattening of nested containers."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...tree_util import flatten as _tree_flatten, unflatten as _tree_unflatten
from ...boxes import Tracked

__all__ = ['flatten']


def _leaf(x: Any) -> bool:
    """autograd's leaves: arrays and numbers (ints included), tracked or not."""
    if isinstance(x, (np.ndarray, Tracked)):
        return x.dtype.kind in 'fiuc'
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, bool)


def flatten(value: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``flat, unflatten = flatten(value)``: the arrays and numbers of nested lists,
    tuples and dicts as one float vector (differentiable: tracked leaves give a tracked
    vector), and ``unflatten(v)``, which rebuilds the containers from such a vector.

    >>> import numpy as np
    >>> from tracked.autograd.misc import flatten
    >>> flat, unflatten = flatten({'w': np.ones((2, 2)), 'b': [0.5, np.zeros(1)]})
    >>> flat
    array([1. , 1. , 1. , 1. , 0.5, 0. ])
    >>> unflatten(flat * 2)['b']
    [np.float64(1.0), array([0.])]
    """
    leaves, treedef = _tree_flatten(value, _leaf)
    shapes = [np.shape(leaf.data if isinstance(leaf, Tracked) else leaf) for leaf in leaves]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    pieces = [np.ravel(leaf) if isinstance(leaf, Tracked) else np.ravel(np.asarray(leaf))
              for leaf in leaves]
    flat = np.concatenate(pieces) if pieces else np.zeros(0)
    offsets = np.cumsum([0] + sizes)

    def unflatten(vector: Any) -> Any:
        parts = []
        for shape, lo, hi in zip(shapes, offsets[:-1], offsets[1:]):
            piece = vector[int(lo):int(hi)]
            parts.append(piece[0] if shape == () else np.reshape(piece, shape))
        return _tree_unflatten(treedef, parts)
    return flat, unflatten
