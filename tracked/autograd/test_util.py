"""``tracked.autograd.test_util``: autograd's ``check_grads`` and ``combo_check``.

``check_grads(fun, argnum=0, modes=('fwd', 'rev'), order=2)(*args)`` checks reverse
mode (``tr.gradcheck``: vector-Jacobian products against central finite differences,
the gradient function itself at the next order) and forward mode (``tr.jvpcheck``:
tangents against finite differences and the pullback, then the tangent function at
the next order) up to ``order``, with respect to argument ``argnum`` (an int or a
tuple), as autograd's does; a mismatch raises ``AssertionError``.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..jacobians import jvp
from ..testing import gradcheck, jvpcheck

__all__ = ['check_grads', 'combo_check']


def _forward(f: Callable[..., Any], xs: Sequence[Any], order: int, seed: int) -> None:
    jvpcheck(f, *xs, seed=seed)
    if order > 1:
        rng = np.random.default_rng(seed)
        vs = tuple(rng.standard_normal(np.shape(x)) for x in xs)

        def tangent_of_f(*ys: Any) -> Any:
            return jvp(f, tuple(ys), vs)[1]
        _forward(tangent_of_f, xs, order - 1, seed + 1)


def check_grads(fun: Callable[..., Any], argnum: int | Sequence[int] = 0,
                modes: Sequence[str] = ('fwd', 'rev'), order: int = 2) -> Callable[..., None]:
    """``check_grads(fun, argnum=0, modes=('fwd', 'rev'), order=2)(*args, **kwargs)``:
    raise ``AssertionError`` unless ``fun``'s derivatives in ``argnum`` match finite
    differences up to ``order`` in each mode.

    >>> import tracked.numpy as np
    >>> from tracked.autograd.test_util import check_grads
    >>> check_grads(lambda x, y: np.sum(np.sin(x) * y), modes=['rev'])(np.ones(3), 2.0)
    """
    if not set(modes) <= {'fwd', 'rev'}:
        raise ValueError(f"modes={modes!r}: expected a list of 'fwd' and 'rev'")
    nums = (argnum,) if isinstance(argnum, int) else tuple(argnum)

    def checker(*args: Any, **kwargs: Any) -> None:
        def f(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(nums, xs):
                full[i] = x
            return fun(*full, **kwargs)
        xs = [np.asarray(args[i], float) if np.asarray(args[i]).dtype.kind in 'iub'
              else args[i] for i in nums]
        if 'rev' in modes:
            gradcheck(f, *xs, order=order)
        if 'fwd' in modes:
            _forward(f, xs, order, 0)
    return checker


def combo_check(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., None]:
    """``combo_check(fun, argnums, **options)(*arg_choices, **kwarg_choices)``: autograd's
    ``check_grads`` for every combination of the given argument and keyword values.

    >>> import tracked.numpy as np
    >>> from tracked.autograd.test_util import combo_check
    >>> combo_check(np.power, [0], modes=['rev'])([np.ones(2), 2.0], [2.0, 3.0])
    """
    def run(*arg_choices: Sequence[Any], **kwarg_choices: Sequence[Any]) -> None:
        keyed = [[(k, v) for v in vs] for k, vs in kwarg_choices.items()]
        for chosen in itertools.product(*arg_choices):
            for kws in itertools.product(*keyed):
                check_grads(fun, *args, **kwargs)(*chosen, **dict(kws))
    return run
