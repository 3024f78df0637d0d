"""Backends for ``gradient(f, adtype, *args)`` / ``withgradient(f, adtype, *args)``.

As in Flux, an AD-type object may follow ``f``.  Each backend implements
``withgradient(f, *args) -> (val, grads)`` with the conventions of
tracked/arguments.py: ``grads`` has one entry per argument mirroring its structure,
None where there is no gradient.  ``AutoTracked``, the eager tape and the default,
lives in tracked/reverse.py (below the API); ``AutoCompiled`` in ``tracked.compiled_tape``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .arguments import ADType, Args, first_output, float_dtype, loss_output
from .reverse import AutoTracked

__all__ = ['ADType', 'AutoTracked', 'AutoFiniteDifferences']


class AutoFiniteDifferences(ADType):
    """``AutoFiniteDifferences(eps=6e-6)``: central differences in float64, for checking.

    Each differentiated leaf element is moved by ``eps * max(1, |x|)`` both ways.  An
    integer scalar is moved too; if ``f`` cannot take the moved value (it is used as
    an index or size) its gradient is None, as it is for non-numeric arguments.

    >>> import numpy as np, tracked as tr
    >>> val, (g,) = tr.withgradient(lambda x: np.sum(x ** 2), tr.AutoFiniteDifferences(),
    ...                             np.array([1.0, 2.0]))
    >>> val, np.round(g, 6)
    (np.float64(5.0), array([2., 4.]))
    """

    def __init__(self, eps: float = 6e-6) -> None:
        self.eps = eps

    def __repr__(self) -> str:
        return f'AutoFiniteDifferences(eps={self.eps})'

    def withgradient(self, f: Callable[..., Any], *args: Any) -> tuple[Any, tuple[Any, ...]]:
        spec = Args(args, 'AutoFiniteDifferences')
        val = f(*args)
        loss_output(val)
        base = [np.array(x, dtype=np.float64) for x in spec.flat]

        def value(j: int, moved: np.ndarray) -> float:
            vals = list(spec.flat)
            vals[j] = moved if np.ndim(spec.flat[j]) else moved[()]
            return float(first_output(f(*spec.rebuild(vals)))[0])
        grads: list[Any] = []
        for j, x in enumerate(base):
            g = np.zeros(x.shape)
            try:
                for i in np.ndindex(x.shape):
                    h = self.eps * max(1.0, abs(x[i]))
                    up, down = x.copy(), x.copy()
                    up[i] += h
                    down[i] -= h
                    g[i] = (value(j, up) - value(j, down)) / (2 * h)
            except (TypeError, IndexError):
                grads.append(None)         # an integer used as an index or size
                continue
            dtype = float_dtype(spec.flat[j])
            grads.append(g.astype(dtype) if isinstance(spec.flat[j], np.ndarray)
                         else dtype.type(g[()]))
        return val, spec.gradients(grads, lambda g, a: g)
