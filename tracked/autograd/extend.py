"""``tracked.autograd.extend``: autograd's ``primitive``, ``defvjp`` and ``defjvp``.

A function made a primitive is one tape entry whatever it does inside; its
derivatives come from the makers given to ``defvjp`` (``maker(ans, *args, **kwargs)``
returning ``g -> cotangent``) and, optionally, ``defjvp`` (``maker(t, ans, *args,
**kwargs)`` returning the tangent of the output for argument tangent ``t``).  As in
autograd, the primitive is applied level by level: at each differentiation level
the makers get the arguments and output of that level (tracked at the levels below),
so a VJP written with NumPy operations gives higher derivatives.  It is a registry
``Primitive`` like NumPy's own functions, so it also serves forward mode (from the
VJP when no JVP is given) and recorded and compiled tapes.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..registry import Primitive
from ..boxes import Tracked
from ..dispatch import apply

__all__ = ['primitive', 'defvjp', 'defjvp']


def _no_vjp(name: str, argnum: int) -> Callable[..., Any]:
    def vjp(g: Any, ans: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'VJP of {name} with respect to argument {argnum} is not '
                                  f'defined: give it with defvjp({name}, ...)')
    return vjp


class _Vjps:
    """The pullbacks of a primitive, one per argument position, set by ``defvjp``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.makers: dict[int, Callable[..., Any] | None] = {}

    def __len__(self) -> int:
        return 1 << 62

    def __getitem__(self, i: int) -> Callable[..., Any] | None:
        if i not in self.makers:
            return _no_vjp(self.name, i)
        maker = self.makers[i]
        if maker is None:                     # defvjp(f, None, ...): no gradient there
            return None

        def vjp(g: Any, ans: Any, *args: Any, **kwargs: Any) -> Any:
            return maker(ans, *args, **kwargs)(g)
        return vjp


def primitive(f_raw: Callable[..., Any]) -> Callable[..., Any]:
    """``@primitive``: make ``f_raw`` one tape entry, its derivatives given by ``defvjp``.

    >>> import numpy as np
    >>> import tracked as tr
    >>> from tracked.autograd.extend import primitive, defvjp
    >>> @primitive
    ... def cube(x):
    ...     return x ** 3
    >>> defvjp(cube, lambda ans, x: lambda g: 3 * g * x ** 2)
    >>> tr.hessian(cube, 2.0)
    np.float64(12.0)
    """
    name = getattr(f_raw, '__name__', 'primitive')
    vjps = _Vjps(name)
    prim = Primitive(f_raw, (), name=name)
    prim.vjps = vjps          # Primitive() would turn a sequence into a tuple

    @functools.wraps(f_raw)
    def f_wrapped(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, Tracked) for a in args):
            return apply(prim, args, kwargs)
        return f_raw(*args, **kwargs)
    f_wrapped.primitive = prim    # type: ignore[attr-defined]
    f_wrapped.fun = f_raw         # type: ignore[attr-defined]  # autograd's name for it
    return f_wrapped


def _prim(fun: Any, who: str) -> Primitive:
    prim = getattr(fun, 'primitive', None)
    if not isinstance(prim, Primitive):
        raise TypeError(f'{who}: {getattr(fun, "__name__", fun)!r} is not a primitive; '
                        f'decorate it with @primitive first')
    return prim


def defvjp(fun: Callable[..., Any], *vjpmakers: Callable[..., Any] | None,
           argnums: tuple[int, ...] | None = None) -> None:
    """``defvjp(fun, maker0, maker1, ...)``: the VJP makers of primitive ``fun``, one per
    argument (``argnums`` says which; None: no gradient there), each
    ``maker(ans, *args, **kwargs) -> (g -> cotangent)``.

    >>> import tracked as tr
    >>> from tracked.autograd.extend import primitive, defvjp
    >>> mul = primitive(lambda x, y: x * y)
    >>> defvjp(mul, lambda ans, x, y: lambda g: g * y, lambda ans, x, y: lambda g: g * x)
    >>> tr.gradient(mul, 2.0, 3.0)
    (np.float64(3.0), np.float64(2.0))
    """
    prim = _prim(fun, 'defvjp')
    for i, maker in zip(argnums if argnums is not None else range(len(vjpmakers)), vjpmakers):
        prim.vjps.makers[i] = maker
    prim.saves.clear()                # what an entry keeps depends on the pullbacks
    prim.fast = None


def defjvp(fun: Callable[..., Any], *jvpmakers: Callable[..., Any] | None,
           argnums: tuple[int, ...] | None = None) -> None:
    """``defjvp(fun, maker0, ...)``: the tangent rules of primitive ``fun`` for forward
    mode, ``maker(t, ans, *args, **kwargs)`` the output's tangent for argument
    tangent ``t`` (without them, forward mode transposes the VJP).

    >>> import numpy as np
    >>> import tracked as tr
    >>> from tracked.autograd.extend import primitive, defvjp, defjvp
    >>> sq = primitive(lambda x: x * x)
    >>> defvjp(sq, lambda ans, x: lambda g: 2 * g * x)
    >>> defjvp(sq, lambda t, ans, x: 2 * t * x)
    >>> tr.jvp(sq, (3.0,), (1.0,))
    (np.float64(9.0), np.float64(6.0))
    """
    prim = _prim(fun, 'defjvp')
    makers = dict(zip(argnums if argnums is not None else range(len(jvpmakers)), jvpmakers))

    def jvp(tangents: tuple[Any, ...], ans: Any, *args: Any, **kwargs: Any) -> Any:
        out = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            maker = makers.get(i)
            if maker is None:
                raise NotImplementedError(f'JVP of {prim.name} with respect to argument {i} '
                                          f'is not defined: give it with defjvp')
            term = maker(t, ans, *args, **kwargs)
            out = term if out is None else out + term
        return out
    prim.jvp = jvp
