"""``tracked.scipy.special``: ``scipy.special`` for tracked values.

SciPy's ufuncs (``gammaln``, ``erf``, ``expit``, ``xlogy``, ...) are differentiated
unmodified (``tracked/rules/scipy_special.py``) and are the same objects here (the
ufuncs themselves even when SciPy's array-API mode wraps its public names), as is
every name this module does not define.  Defined here, with NumPy operations on
tracked values, are the Python functions that NumPy's protocols cannot intercept:
``logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``, ``multigammaln``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.special as _sp
from scipy.special import _ufuncs

__all__ = ['logsumexp', 'softmax', 'log_softmax', 'polygamma', 'multigammaln', 'digamma', 'zeta']


def __getattr__(name: str) -> Any:
    """Every other name is ``scipy.special``'s, and a ufunc is SciPy's ufunc object itself
    (differentiated unmodified; with SCIPY_ARRAY_API=1 SciPy's public name is a wrapper
    that would convert a tracked argument)."""
    uf = getattr(_ufuncs, name, None)
    return uf if isinstance(uf, np.ufunc) else getattr(_sp, name)


digamma = _ufuncs.psi


def zeta(x: Any, q: Any = None) -> Any:
    """``zeta(x, q=None)``: the Riemann zeta function, or the Hurwitz zeta function
    ``sum_k (k + q)^-x``, differentiable in ``q`` (as ``scipy.special.zeta``'s).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.special import zeta
    >>> bool(np.isclose(tr.gradient(lambda q: zeta(2.0, q), 1.0)[0], -2 * zeta(3.0)))
    True
    """
    return _ufuncs._riemann_zeta(x) if q is None else _ufuncs._zeta(x, q)


def _reduced_shape(shape: Any, axis: Any) -> Any:
    """``shape`` without the reduced ``axis`` (None: all; an int or a tuple)."""
    if axis is None:
        return ()
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    """``logsumexp(a, axis=None, b=None) -> log(sum(b * exp(a), axis))``, without overflow.

    As ``scipy.special.logsumexp``: ``b`` scales the terms (broadcast with ``a``; a
    term with ``b == 0`` does not set the shift), ``return_sign=True`` returns
    ``(log|s|, sign(s))`` for sums ``s`` that may be negative (without it a negative
    sum gives nan).  Differentiable in ``a`` and ``b``.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.special import logsumexp
    >>> round(float(logsumexp(np.array([1000.0, 1000.0]))), 6)      # 1000 + log 2
    1000.693147
    >>> tr.gradient(lambda a: logsumexp(a, b=np.array([1.0, 3.0])), np.zeros(2))
    (array([0.25, 0.75]),)
    """
    if b is not None:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
        if np.shape(a) != shape:
            a = np.broadcast_to(a, shape)
        m = np.max(np.where(b != 0, np.real(a), -np.inf), axis=axis, keepdims=True)
    else:
        m = np.max(np.real(a), axis=axis, keepdims=True)
    # The shift leaves the value unchanged and its gradient contribution is zero, so
    # it stays in the graph (no stop-gradient: a recorded tape recomputes it).  A lane
    # of -inf (or +inf) shifts by 0 instead, so that no inf - inf appears.
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(a - m)
    s = np.sum(e if b is None else b * e, axis=axis, keepdims=True)
    with np.errstate(divide='ignore', invalid='ignore'):
        if return_sign:
            sign = np.sign(s)
            out = np.log(np.abs(s)) + m
        else:
            out = np.log(s) + m
    if not keepdims:
        shape = _reduced_shape(np.shape(e), axis)
        out = np.reshape(out, shape)
        if return_sign:
            sign = np.reshape(sign, shape)
    return (out, sign) if return_sign else out


def softmax(x: Any, axis: Any = None) -> Any:
    """``softmax(x, axis=None) -> exp(x) / sum(exp(x), axis)``, as ``scipy.special.softmax``
    (over all elements by default).

    >>> import numpy as np
    >>> from tracked.scipy.special import softmax
    >>> softmax(np.array([0.0, np.log(3.0)]))
    array([0.25, 0.75])
    """
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def log_softmax(x: Any, axis: Any = None) -> Any:
    """``log_softmax(x, axis=None) -> x - logsumexp(x, axis)``, as ``scipy.special.log_softmax``.

    >>> import numpy as np
    >>> from tracked.scipy.special import log_softmax
    >>> np.exp(log_softmax(np.array([0.0, np.log(3.0)])))
    array([0.25, 0.75])
    """
    return x - logsumexp(x, axis=axis, keepdims=True)


def polygamma(n: Any, x: Any) -> Any:
    """``polygamma(n, x)``: the ``n``-th derivative of ``digamma`` at ``x``, differentiable
    in ``x`` to any order (``n`` is an integer order, without a gradient).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.special import polygamma
    >>> tr.gradient(lambda x: polygamma(1, x), 2.0)[0] == polygamma(2, 2.0)
    np.True_
    """
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for n >= 1: SciPy's own formula, with
    # the registered Hurwitz zeta ufunc (its derivative in x is the next polygamma).
    if isinstance(n, (int, np.integer)):
        if n == 0:
            return _ufuncs.psi(x)
        return (-1.0) ** (n + 1) * math.factorial(n) * _ufuncs._zeta(n + 1.0, x)
    n = np.asarray(n)
    s = np.where(n == 0, 2.0, n + 1.0)       # order 0 takes psi: no zeta(1, x) = inf
    return np.where(n == 0, _ufuncs.psi(x),
                    (-1.0) ** (n + 1) * _ufuncs.gamma(n + 1.0) * _ufuncs._zeta(s, x))


def multigammaln(a: Any, d: Any) -> Any:
    """``multigammaln(a, d)``: the log of the multivariate gamma function of dimension
    ``d``, ``d (d-1)/4 log(pi) + sum_j gammaln(a - j/2)`` for ``j < d``; differentiable in ``a``.

    >>> import numpy as np, scipy.special, tracked as tr
    >>> from tracked.scipy.special import multigammaln
    >>> bool(np.isclose(multigammaln(23.5, 10), scipy.special.multigammaln(23.5, 10)))
    True
    >>> bool(np.isclose(tr.gradient(lambda a: multigammaln(a, 2), 3.0)[0],
    ...                 scipy.special.psi(3.0) + scipy.special.psi(2.5)))
    True
    """
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError('d should be a positive integer (dimension)')
    if np.any(a <= 0.5 * (d - 1)):          # as SciPy (a guard on a recorded tape)
        raise ValueError(f'condition a > 0.5 * (d-1) ({0.5 * (d - 1)}) not met')
    terms = _ufuncs.gammaln(np.expand_dims(a, -1) - 0.5 * np.arange(d))
    return (d * (d - 1) * 0.25) * math.log(math.pi) + np.sum(terms, axis=-1)
