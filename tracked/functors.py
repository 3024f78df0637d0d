"""Models as trees: ``fmap`` and the tree versions of ``param``/``data``/``grad``.

A model is any tree of dicts, lists, tuples, named tuples, dataclasses, ordinary
objects and registered classes whose leaves are arrays, as in Flux's Functors.jl;
the tree protocol (what is walked, how a node is rebuilt, ``@leaf``,
``register_node``) is tracked/tree_util.py's, and ``fmap`` is its ``tree_map``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import values as _values
from .arguments import is_number_list
from .tree_util import isnumeric, is_node, leaf, leaves, tree_map
from . import box
from .box import value
from .boxes import Tracked

T = TypeVar('T')

__all__ = ['fmap', 'leaf', 'isnumeric', 'param', 'data', 'grad', 'zero_grad', 'istracked']


def fmap(fn: Callable[..., Any], tree: Any, *others: Any,
         exclude: Callable[[Any], bool] | None = None) -> Any:
    """``fmap(fn, tree)``: a new tree of the same types with ``fn`` applied to each array leaf.

    The walk enters dicts, lists, tuples, named tuples, dataclasses, objects (their
    ``__dict__`` and ``__slots__``) and ``tr.register_node`` classes; classes marked
    ``@tr.leaf`` are kept whole.  An array that occurs twice is mapped once and the
    result is shared in both places.  ``exclude(x)`` says what a leaf is (default:
    arrays of numbers, tracked values, floats); other atoms (strings, ints,
    functions, None) are kept.  With ``others``, ``fn(leaf, *leaves_of_others)``
    walks trees of the same structure together (a None subtree in ``others`` gives
    None leaves).

    >>> import numpy as np, tracked as tr
    >>> model = {'W': np.ones((2, 2)), 'b': np.zeros(2), 'act': 'tanh'}
    >>> tr.fmap(lambda a: a + 1, model)['b'], tr.fmap(lambda a: a + 1, model)['act']
    (array([1., 1.]), 'tanh')
    """
    return tree_map(fn, tree, *others, is_leaf=exclude)


# --------------------------------------------------------------------------
# Tree versions of param, data, grad, zero_grad, istracked
# --------------------------------------------------------------------------

def _is_single(x: Any) -> bool:
    return isinstance(x, (np.ndarray, Tracked, int, float, np.generic)) or not is_node(x)


def param(x: Any) -> Any:
    """``param(x)``: a tracked leaf for an array or number (a list of numbers is an
    array); for a model, ``fmap(param, model)``: every array and float leaf a parameter.

    >>> import numpy as np, tracked as tr
    >>> m = tr.param({'W': np.ones((2, 2)), 'n': 3})
    >>> tr.istracked(m['W']), m['n']
    (True, 3)
    >>> tr.param([1, 2]).shape
    (2,)
    """
    if _is_single(x) or is_number_list(x):
        return _values.param(x)
    return fmap(_values.param, x)


def _data1(x: Any) -> Any:
    return value(x) if isinstance(x, Tracked) else x


def data(x: Any) -> Any:
    """``data(x)``: the value of a tracked value, or a model with every tracked leaf
    replaced by its value (one level of tracking is removed).

    The array is the value itself, not a copy: ``tr.data(w)[...] -= lr * w.grad``
    updates a parameter between steps.  While a live tape entry saved it (before
    ``back``) it is read-only, so a write fails instead of changing the gradient;
    ``.copy()`` it to change a copy.

    >>> import numpy as np, tracked as tr
    >>> tr.data(tr.param(np.array([1.0, 2.0])))
    array([1., 2.])
    >>> tr.data({'w': tr.param(2.0), 'name': 'dense'})
    {'w': np.float64(2.0), 'name': 'dense'}
    """
    if isinstance(x, Tracked):
        return value(x)
    if _is_single(x):
        return x
    return fmap(_data1, x, exclude=box.is_box)


def _grad1(x: Any) -> Any:
    return x.grad if isinstance(x, Tracked) else None


def grad(x: Any) -> Any:
    """``grad(x)``: the accumulated gradient of a leaf made by ``param``, or the gradient
    tree of a model (None where there is no gradient buffer).

    >>> import numpy as np, tracked as tr
    >>> m = tr.param({'w': np.array([1.0, 2.0]), 'act': 'relu'})
    >>> tr.back(np.sum(m['w'] ** 2)); tr.grad(m)
    {'w': array([2., 4.]), 'act': None}
    """
    if callable(x) and not is_node(x):     # (a callable model is a node: a layer)
        # JAX's grad(f): the None it would give makes scipy.optimize.minimize(f, x0,
        # jac=tr.grad(f)) fall back to finite differences without a word
        raise TypeError('tr.grad(x) reads the gradients that tr.back left in tracked leaves '
                        '(or a model of them); it got a function. For the gradient of f at '
                        'x call tr.gradient(f, x); for a gradient function (JAX\'s grad(f), '
                        'e.g. jac= of scipy.optimize.minimize) write '
                        'lambda x: tr.gradient(f, x)[0]')
    if _is_single(x):
        return _grad1(x)
    return tree_map(_grad1, x, statics=False)


def _zero1(x: Any) -> Any:
    if isinstance(x, Tracked):
        node = box.node(x)
        if node.prim is None and isinstance(node.grad, np.ndarray):
            node.grad[...] = 0
    return x


def zero_grad(x: T) -> T:
    """``zero_grad(x)``: set the gradient buffers of a leaf or of a whole model to zero;
    returns ``x``.

    >>> import numpy as np, tracked as tr
    >>> m = [tr.param(np.ones(2))]
    >>> tr.back(np.sum(m[0] * 3)); tr.zero_grad(m)[0].grad
    array([0., 0.])
    """
    if _is_single(x):
        return _zero1(x)
    for v in leaves(x, box.is_box):
        _zero1(v)
    return x


def istracked(x: Any) -> bool:
    """``istracked(x)``: whether ``x`` is a tracked value, or a model holds one.

    >>> import numpy as np, tracked as tr
    >>> tr.istracked(tr.param(1.0)), tr.istracked([np.ones(2), tr.param(1.0)]), tr.istracked(1.0)
    (True, True, False)
    """
    if _is_single(x):
        return isinstance(x, Tracked)
    return bool(leaves(x, box.is_box))
