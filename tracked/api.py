"""The convenience API (Zygote/Flux style), each operator a few lines over ``vjp``."""
import numpy as np

from .tape import backward, new_level
from .values import Tracked, as_value, leaf

__all__ = ['vjp']


def _seed_leaf(x, level):
    """A leaf at ``level`` for argument ``x``; a lower-level tracked ``x`` is kept as its value."""
    return leaf(x if isinstance(x, Tracked) else as_value(x, int_to_float=False), level)


def _at_level(y, level):
    """``y`` seen from outside ``level``: its value if tracked there, else ``y`` itself."""
    return y._node.ans if isinstance(y, Tracked) and y._node.level == level else y


def vjp(f, *args):
    """``vjp(f, *args) -> (y, back)``: the core of every operator; ``back(dy)`` returns
    one cotangent per argument (``None`` where ``y`` does not depend on it).

    Arguments are array-likes; trees and non-numeric arguments are handled by the
    public operators built on this.

    >>> import numpy as np, tracked as tr
    >>> y, back = tr.api.vjp(lambda x: np.sin(x) * 2, np.array([0.0, 1.0]))
    >>> back(np.ones(2))[0]
    array([2.        , 1.08060461])
    """
    level = new_level()
    boxed = [_seed_leaf(a, level) for a in args]
    out = f(*boxed)
    y = _at_level(out, level)

    def back(dy):
        if not (isinstance(out, Tracked) and out._node.level == level):
            return tuple(None for _ in boxed)
        leaves = backward(out._node, dy, retain=True)
        return tuple(leaves.get(b._node) for b in boxed)
    return y, back
