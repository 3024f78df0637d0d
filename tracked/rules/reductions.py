"""Reductions: sum, mean, prod, max/min, var/std, cumulative sums, norms."""
import numpy as np

from ..registry import defvjp, REDUCE, ACCUMULATE


def _expand(g, shape, axis, keepdims):
    """Broadcast a reduced cotangent back to the input's shape."""
    if axis is not None and not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(g, shape)


defvjp(np.sum, lambda g, ans, x, axis=None, keepdims=False, **kw:
       _expand(g, np.shape(x), axis, keepdims))
REDUCE[np.add] = np.sum
