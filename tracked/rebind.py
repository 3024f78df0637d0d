"""A custom rule's pullback rebuilt over the values of one differentiation level.

A ``@tr.rule`` function returns its value and a pullback that closes over what the
forward saw.  When the forward cannot run on tracked values (SciPy, numba, C), it
runs on plain ones, and its pullback closes over plain arrays: first order is exact,
but an outer differentiation cannot see how the pullback depends on the input.
autograd applies a primitive level by level and builds its VJP from the arguments
and output *at each level* (tracked at the levels below); this module does the same
for a closure: ``rebind(pullback, rule_fn, pairs)`` returns the pullback with every
closed-over argument and output replaced by its value at the level (``pairs`` maps
the plain objects the forward saw to those values), so that a pullback written with
NumPy operations is differentiated by the outer levels.

It is only sound when nothing else the pullback reads depends on the input: a float
array, number or tracked value computed by the forward (a local of ``rule_fn`` that
is neither an argument nor the output) may, so rebinding is refused then, naming
the variable; so is a pullback whose closure cannot be rebuilt (a bound method, a
``functools.partial``).  Integer and boolean values (shapes, indices, masks) are
piecewise constant in the input and are kept, as are functions and modules.
"""
from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .boxes import Tracked

__all__ = ['rebind', 'RebindError']


class RebindError(Exception):
    """Why a pullback cannot be rebuilt over a level's values (see the module docstring)."""


def rebind(pullback: Callable[..., Any], rule_fn: Callable[..., Any],
           pairs: Sequence[tuple[Any, Any]]) -> Callable[..., Any]:
    """``pullback`` with the objects ``p`` of ``pairs`` (by identity) replaced by ``v``,
    in its closure, its defaults and the closures it calls that ``rule_fn`` defines;
    raises ``RebindError`` saying what else it reads that may depend on the input.

    >>> import numpy as np
    >>> def rule(x):
    ...     return np.sin(x), lambda g: (g * np.cos(x),)
    >>> x = np.array(0.0)
    >>> y, pb = rule(x)
    >>> rebind(pb, rule, [(x, np.array(np.pi))])(1.0)
    (np.float64(-1.0),)
    """
    return _Rebinder(rule_fn, pairs).function(pullback, 'the pullback')


def _is_data(x: Any) -> bool:
    """A value whose dependence on the input would matter: float or complex numbers."""
    if isinstance(x, Tracked):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in 'fcO'
    return type(x) in (float, complex)


_BUSY = object()


class _Rebinder:
    def __init__(self, rule_fn: Callable[..., Any], pairs: Sequence[tuple[Any, Any]]) -> None:
        self.pairs = pairs
        code = getattr(rule_fn, '__code__', None)
        self.prefix = getattr(rule_fn, '__qualname__', '') + '.<locals>.'
        self.locals = set(code.co_cellvars) if code is not None else set()
        self.enclosing = set(code.co_freevars) if code is not None else set()
        self.made: dict[int, Any] = {}

    def value(self, x: Any, where: str, local: bool) -> Any:
        for p, v in self.pairs:
            if x is p:
                return v
        if type(x) in (tuple, list):
            return type(x)(self.value(v, where, local) for v in x)
        if type(x) is dict:
            return {k: self.value(v, where, local) for k, v in x.items()}
        if isinstance(x, types.FunctionType):
            if x.__qualname__.startswith(self.prefix):
                return self.function(x, where)
            return x                          # defined outside the rule: no local state
        if local and _is_data(x):
            raise RebindError(f'{where} reads {type(x).__name__} values computed in the '
                              f'forward; compute them inside the pullback from the '
                              f'arguments and the output')
        return x

    def function(self, fn: Any, where: str) -> Any:
        if isinstance(fn, (types.BuiltinFunctionType, np.ufunc)):
            return fn
        if not isinstance(fn, types.FunctionType):
            raise RebindError(f'{where} is a {type(fn).__name__}, whose state cannot be '
                              f'rebuilt; write it as a def or lambda inside the rule')
        done = self.made.get(id(fn))
        if done is not None:
            if done is _BUSY:
                raise RebindError(f'{where} refers to itself through its closure')
            return done
        self.made[id(fn)] = _BUSY
        nested = fn.__qualname__.startswith(self.prefix) or where == 'the pullback'
        cells = []
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                content = cell.cell_contents
            except ValueError:                # an empty cell (a name not bound yet)
                cells.append(cell)
                continue
            # a local of the rule, or of a closure the rule defines, may come from the input
            local = nested and (name in self.locals or name not in self.enclosing)
            cells.append(types.CellType(self.value(content, f'{where} (variable {name!r})',
                                                   local)))
        defaults = fn.__defaults__
        if defaults is not None:
            defaults = tuple(self.value(d, f'{where} (a default)', nested) for d in defaults)
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults,
                                 tuple(cells) if fn.__closure__ is not None else None)
        if fn.__kwdefaults__:
            new.__kwdefaults__ = {k: self.value(v, f'{where} (a default)', nested)
                                  for k, v in fn.__kwdefaults__.items()}
        new.__qualname__ = fn.__qualname__
        self.made[id(fn)] = new
        return new
