"""``tracked.autograd``: HIPS autograd's function transformations, on tracked's tape.

For a program written against autograd, the imports are all that change:

```python
import tracked.numpy as np                        # was: import autograd.numpy as np
from tracked.autograd import grad, value_and_grad  # was: from autograd import ...
from tracked.scipy.special import gammaln         # was: from autograd.scipy.special ...
```

As autograd's, ``grad(fun, argnum=0)`` returns a function; it differentiates argument
``argnum`` (an int, or a tuple of them for a tuple of gradients), the other arguments
are constants, and an argument the output does not depend on gets zeros.  Shapes are
autograd's: ``jacobian`` of ``f: (m,) -> (k,)`` is ``(k, m)`` (the output's shape then
the input's), ``hessian`` of a scalar function of ``x`` is ``x.shape + x.shape``.
Everything nests (``grad(grad(f))``).  tracked's own API (``tr.gradient(f, *args)``,
all arguments at once, evaluated now) is the same machinery.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..api import pullback, withgradient
from ..jacobians import hessian as _hessian, withjacobian
from ..box import plain

__all__ = ['grad', 'value_and_grad', 'elementwise_grad', 'jacobian', 'hessian']


def _at(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
        argnum: Sequence[int]) -> Callable[..., Any]:
    """``fun`` as a function of the arguments at ``argnum`` alone (a tuple of positions)."""
    def f(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(argnum, xs):
            full[i] = x
        return fun(*full, **kwargs)
    return f


def _positions(argnum: int | Sequence[int]) -> tuple[int, ...]:
    return (argnum,) if isinstance(argnum, int) else tuple(argnum)


def _zeros_if_none(g: Any, x: Any) -> Any:
    """autograd's zeros for an argument the output does not depend on (tracked: None)."""
    return np.zeros(np.shape(plain(x)), np.result_type(plain(x), 0.0)) if g is None else g


def value_and_grad(fun: Callable[..., Any],
                   argnum: int | Sequence[int] = 0) -> Callable[..., tuple[Any, Any]]:
    """``value_and_grad(fun, argnum=0)(*args) -> (fun(*args), gradient)``, as autograd's.

    >>> import tracked.numpy as np
    >>> from tracked.autograd import value_and_grad
    >>> value_and_grad(lambda x, y: np.sum(x ** 2) * y)(np.array([1.0, 2.0]), 3.0)
    (np.float64(15.0), array([ 6., 12.]))
    """
    nums = _positions(argnum)

    def value_and_gradient(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        xs = [args[i] for i in nums]
        val, gs = withgradient(_at(fun, args, kwargs, nums), *xs)
        gs = tuple(_zeros_if_none(g, x) for g, x in zip(gs, xs))
        return val, (gs[0] if isinstance(argnum, int) else gs)
    return value_and_gradient


def grad(fun: Callable[..., Any], argnum: int | Sequence[int] = 0) -> Callable[..., Any]:
    """``grad(fun, argnum=0)(*args)``: the gradient of scalar ``fun`` in argument
    ``argnum``, as autograd's (a function; nests).

    >>> import tracked.numpy as np
    >>> from tracked.autograd import grad
    >>> grad(grad(lambda x: x ** 3))(2.0)
    np.float64(12.0)
    """
    vg = value_and_grad(fun, argnum)

    def gradient(*args: Any, **kwargs: Any) -> Any:
        return vg(*args, **kwargs)[1]
    return gradient


def elementwise_grad(fun: Callable[..., Any], argnum: int = 0) -> Callable[..., Any]:
    """``elementwise_grad(fun, argnum=0)(*args)``: the vector-Jacobian product with ones,
    which is the elementwise derivative of an elementwise ``fun``, as autograd's.

    >>> import tracked.numpy as np
    >>> from tracked.autograd import elementwise_grad
    >>> elementwise_grad(np.tanh)(np.array([0.0, 1.0]))
    array([1.        , 0.41997434])
    """
    def vjp_ones(*args: Any, **kwargs: Any) -> Any:
        y, back = pullback(_at(fun, args, kwargs, (argnum,)), args[argnum])
        return _zeros_if_none(back(np.ones(np.shape(plain(y))))[0], args[argnum])
    return vjp_ones


def jacobian(fun: Callable[..., Any], argnum: int = 0) -> Callable[..., Any]:
    """``jacobian(fun, argnum=0)(*args)``: shaped ``output.shape + input.shape``, as
    autograd's.

    >>> import tracked.numpy as np
    >>> from tracked.autograd import jacobian
    >>> jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    def jac(*args: Any, **kwargs: Any) -> Any:
        x = args[argnum]
        y, (J,) = withjacobian(_at(fun, args, kwargs, (argnum,)), x)
        J = _zeros_if_none(J, np.zeros(np.size(plain(y)) * np.size(plain(x))))
        return np.reshape(J, np.shape(plain(y)) + np.shape(plain(x)))
    return jac


def hessian(fun: Callable[..., Any], argnum: int = 0) -> Callable[..., Any]:
    """``hessian(fun, argnum=0)(*args)``: of a scalar ``fun``, shaped ``x.shape + x.shape``,
    as autograd's.

    >>> import tracked.numpy as np
    >>> from tracked.autograd import hessian
    >>> hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    def hess(*args: Any, **kwargs: Any) -> Any:
        x = args[argnum]
        H = _hessian(_at(fun, args, kwargs, (argnum,)), x)
        return np.reshape(H, np.shape(plain(x)) * 2)
    return hess
