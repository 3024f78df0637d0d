"""``tracked.autograd.misc.optimizers``: autograd's ``sgd``, ``rmsprop`` and ``adam``.

Each takes ``grad(x, i)`` (the gradient at ``x`` in iteration ``i``), a starting point
``x0`` (an array, or nested lists, tuples and dicts of them: flattened with
``flatten``), an optional ``callback(x, i, g)``, and autograd's keyword arguments, and
returns the final point, as autograd's do.  (``tracked.optimise`` holds Flux-style
optimisers for models; these are for programs ported from autograd.)
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .flatten import flatten

__all__ = ['sgd', 'rmsprop', 'adam']

Grad = Callable[[Any, int], Any]


def _on_trees(optimize: Callable[..., Any]) -> Callable[..., Any]:
    """``optimize`` on flat vectors, run on trees (autograd's ``unflatten_optimizer``)."""
    @functools.wraps(optimize)
    def on_trees(grad: Grad, x0: Any, callback: Callable[..., Any] | None = None,
                 *args: Any, **kwargs: Any) -> Any:
        x, unflatten = flatten(x0)

        def flat_grad(v: Any, i: int) -> Any:
            return flatten(grad(unflatten(v), i))[0]
        flat_callback = None if callback is None else (
            lambda v, i, g: callback(unflatten(v), i, unflatten(g)))
        return unflatten(optimize(flat_grad, x, flat_callback, *args, **kwargs))
    return on_trees


@_on_trees
def sgd(grad: Grad, x: Any, callback: Callable[..., Any] | None = None, num_iters: int = 200,
        step_size: float = 0.1, mass: float = 0.9) -> Any:
    """Stochastic gradient descent with momentum ``mass``.

    >>> import numpy as np
    >>> from tracked.autograd.misc.optimizers import sgd
    >>> bool(abs(sgd(lambda x, i: 2 * x, np.array([1.0]), num_iters=300)[0]) < 1e-6)
    True
    """
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@_on_trees
def rmsprop(grad: Grad, x: Any, callback: Callable[..., Any] | None = None,
            num_iters: int = 100, step_size: float = 0.1, gamma: float = 0.9,
            eps: float = 1e-8) -> Any:
    """Root-mean-square propagation.

    >>> import numpy as np
    >>> from tracked.autograd.misc.optimizers import rmsprop
    >>> bool(abs(rmsprop(lambda x, i: 2 * (x - 3), np.array([0.0]), step_size=0.01,
    ...                  num_iters=1000)[0] - 3) < 0.05)
    True
    """
    avg_sq_grad = np.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g ** 2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(avg_sq_grad) + eps)
    return x


@_on_trees
def adam(grad: Grad, x: Any, callback: Callable[..., Any] | None = None, num_iters: int = 100,
         step_size: float = 0.001, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> Any:
    """Adam (Kingma and Ba), with bias correction.

    >>> import numpy as np
    >>> from tracked.autograd.misc.optimizers import adam
    >>> x = adam(lambda p, i: {'w': 2 * (p['w'] - 1)}, {'w': np.zeros(2)}, step_size=0.1,
    ...          num_iters=500)
    >>> np.round(x['w'], 3)
    array([1., 1.])
    """
    m = np.zeros(len(x))
    v = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g ** 2 + b2 * v
        mhat = m / (1 - b1 ** (i + 1))
        vhat = v / (1 - b2 ** (i + 1))
        x = x - step_size * mhat / (np.sqrt(vhat) + eps)
    return x
