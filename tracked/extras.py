"""Optional dependencies: stand-ins for public names whose module needs an extra that is
not installed, so that ``import tracked`` works without it and a call says what to
install."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ['needs_extra']


def needs_extra(name: str, error: ImportError) -> Callable[..., Any]:
    """``needs_extra(name, error)``: a function named ``name`` that raises ``error`` (the
    ImportError naming the extra) when called.

    >>> f = needs_extra('coloring', ImportError("needs SciPy: pip install 'tracked[scipy]'"))
    >>> f(None)
    Traceback (most recent call last):
    ...
    ImportError: tr.coloring needs SciPy: pip install 'tracked[scipy]'
    """
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(f'tr.{name} {error}') from error
    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = f'``{name}``: not available: {error}'
    return stand_in
