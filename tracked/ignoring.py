"""Switching differentiation off: ``ignore_derivatives`` (JAX's ``stop_gradient``,
Zygote's ``ignore_derivatives``) and ``@non_differentiable``.
"""
from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np

from . import box
from . import dispatch as _dispatch
from .box import plain
from .boxes import Tracked
from .tape import pause_recording
from .tree_util import is_node, tree_map

__all__ = ['ignore_derivatives', 'non_differentiable']

P = ParamSpec('P')
R = TypeVar('R')


_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
              functools.partial)


def _untracked(x: Any) -> Any:
    if isinstance(x, Tracked):
        return plain(x)
    if not is_node(x):
        return x
    return tree_map(plain, x, is_leaf=box.is_box)


def ignore_derivatives(x: Any) -> Any:
    """``ignore_derivatives(x)``: ``x`` without tracking (at every level); for a function,
    ``ignore_derivatives(fn)`` runs ``fn()`` without recording and returns its result.

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda x: x * tr.ignore_derivatives(x), 3.0)
    (np.float64(3.0),)
    >>> tr.gradient(lambda x: tr.ignore_derivatives(lambda: x ** 2) + x, 3.0)
    (np.float64(1.0),)
    """
    if isinstance(x, _FUNCTIONS):
        with pause_recording():
            out = x()
        return _untracked(out)
    return _new_value(_untracked(x))


def _new_value(x: Any) -> Any:
    """``x`` with each array a new object (a view): a value whose derivatives are ignored
    is never the same array as its input, so a tree holding both does not tie them,
    whether the input was tracked (a new array then) or plain (the same one, before)."""
    if type(x) is np.ndarray:
        return x.view() if x.ndim else x
    if not is_node(x):
        return x
    return tree_map(lambda a: a.view() if type(a) is np.ndarray and a.ndim else a, x,
                    is_leaf=lambda a: type(a) is np.ndarray)


def non_differentiable(fn: Callable[P, R]) -> Callable[P, R]:
    """``@non_differentiable``: ``fn`` gets plain values and its outputs never carry gradients.

    >>> import numpy as np, tracked as tr
    >>> @tr.non_differentiable
    ... def top(x):
    ...     return int(np.argmax(x))
    >>> tr.gradient(lambda x: x[top(x)] * 2, np.array([1.0, 3.0, 2.0]))
    (array([0., 2., 0.]),)
    """
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for a in args:
            if isinstance(a, Tracked) or is_node(a):
                return _untracked(_dispatch.call_nondiff(
                    fn, tuple(_untracked_arg(a) for a in args), kwargs))
        return _untracked(fn(*args, **kwargs))
    return wrapper


def _untracked_arg(a: Any) -> Any:
    # call_nondiff strips tracked scalars/arrays; trees are stripped here.
    return a if isinstance(a, Tracked) or not is_node(a) else _untracked(a)
