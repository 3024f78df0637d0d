"""Indexing rules: x[idx], the scatter-add that is its adjoint, and x[idx] = v."""
import operator

import numpy as np

from ..registry import Primitive, defvjp
from ..values import apply


def _scatter_add_fwd(g, idx, shape):
    out = np.zeros(shape, dtype=g.dtype)
    np.add.at(out, idx, g)
    return out


_scatter = Primitive(_scatter_add_fwd, (lambda g, ans, h, idx, shape: g[idx],), name='scatter_add')


def scatter_add(g, idx, shape):
    """Zeros of ``shape`` with ``g`` added at ``idx`` (repeated indices accumulate)."""
    return apply(_scatter, (g, idx, shape), {})


defvjp(operator.getitem, lambda g, ans, x, idx: scatter_add(g, idx, np.shape(x)), view=True)
