"""Lists of tracked values where NumPy expects arrays: ``tracked.numpy``'s wrappers.

NumPy converts a list argument with ``np.asarray`` before it dispatches, so
``np.sum([a, b])`` with tracked ``a`` meets ``Tracked.__array__``, which refuses
(conversions.py).  ``tracked.numpy`` offers each dispatched NumPy function through
``accepting_lists``: NumPy's own call, retried with such lists made arrays.
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping
from types import ModuleType
from typing import Any

from ..conversions import ConversionError
from ..dispatch import holds_tracked

__all__ = ['accepting_lists', 'wrap_dispatched']


def accepting_lists(fn: Callable[..., Any], as_array: Callable[[Any], Any],
                    module: str) -> Callable[..., Any]:
    """``fn`` (a NumPy function) as ``tracked.numpy`` offers it: NumPy's own call, and when
    NumPy refuses a list or tuple holding tracked values (``np.sum([a, b])``: it converts
    the list, it never dispatches on it), the same call again with each such argument
    made an array by ``as_array``.  Nothing else changes: a call NumPy accepts is NumPy's.
    A tuple of integers stays as it is (a shape or axes, even holding a tracked int).

    >>> import numpy, tracked as tr, tracked.numpy as np
    >>> tr.gradient(lambda a, b: np.sum([a, a * b]), 2.0, 3.0)
    (np.float64(4.0), np.float64(2.0))
    """
    def convert(x: Any) -> Any:
        if type(x) in (list, tuple) and holds_tracked(x) and not all(
                isinstance(v, int) for v in x):
            return as_array(x)
        return x

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConversionError:
            new_args = [convert(a) for a in args]
            new_kwargs = {k: convert(v) for k, v in kwargs.items()}
            if all(a is b for a, b in zip(new_args, args)) and all(
                    new_kwargs[k] is kwargs[k] for k in kwargs):
                raise
        return fn(*new_args, **new_kwargs)
    # NumPy's signature (through __wrapped__), not its docstring: its examples are NumPy's
    # doctests, not this module's
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = fn.__name__
    call.__module__ = module            # pickled by reference, as tracked.numpy's
    call.__doc__ = (f'``{module}.{fn.__name__}``: ``{fn.__module__}.{fn.__name__}``, also given '
                    f'lists of tracked values. NumPy\'s documentation: '
                    f'help({fn.__module__}.{fn.__name__}).')
    return call


def wrap_dispatched(namespace: MutableMapping[str, Any], numpy_module: ModuleType,
                    as_array: Callable[[Any], Any]) -> None:
    """Replace, in ``namespace`` (a module's globals), every NumPy function of
    ``numpy_module`` that dispatches and that the module does not define itself by
    ``accepting_lists(fn, as_array, ...)``: ``tracked.numpy`` and its submodules."""
    for name in getattr(numpy_module, '__all__', dir(numpy_module)):
        fn = getattr(numpy_module, name, None)
        if type(fn).__name__ == '_ArrayFunctionDispatcher' and namespace.get(name) is fn:
            # (mypy reads fn as Optional after the 'is'; a dispatcher is callable)
            namespace[name] = accepting_lists(fn,  # type: ignore[arg-type]
                                              as_array, namespace['__name__'])
