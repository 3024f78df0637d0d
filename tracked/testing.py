"""``gradcheck``: reverse mode against central finite differences, to any order."""
import numpy as np

from .api import vjp
from .arguments import Args
from .values import plain

__all__ = ['gradcheck']


def _directional(f, x, v, eps):
    """Central difference of ``f`` at ``x`` along ``v``: an array like f's output."""
    return (np.asarray(plain(f(x + eps * v)), dtype=np.float64)
            - np.asarray(plain(f(x - eps * v)), dtype=np.float64)) / (2 * eps)


def _check_first(f, x, rng, eps, rtol, atol, what):
    y = np.asarray(plain(f(x)), dtype=np.float64)
    v = rng.standard_normal(np.shape(x))
    u = rng.standard_normal(np.shape(y))
    _, back = vjp(f, x)
    g = back(u if np.ndim(y) else u[()])[0]
    if g is None:
        g = np.zeros(np.shape(x))
    g = plain(g)
    if np.shape(g) != np.shape(x):
        raise AssertionError(f'{what}: gradient has shape {np.shape(g)}, input has {np.shape(x)}')
    if np.asarray(g).dtype != np.asarray(x).dtype:
        raise AssertionError(f'{what}: gradient has dtype {np.asarray(g).dtype}, '
                             f'input has {np.asarray(x).dtype}')
    reverse = float(np.sum(np.asarray(g) * v))
    numeric = float(np.sum(_directional(f, x, v, eps) * u))
    if not np.isclose(reverse, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f'{what}: reverse mode gives {reverse!r} along a random direction, central '
            f'finite differences give {numeric!r} (difference {abs(reverse - numeric):.3g}; '
            f'rtol={rtol}, atol={atol})')
    return u


def gradcheck(f, *args, order=2, eps=1e-6, rtol=1e-5, atol=1e-6, seed=0):
    """``gradcheck(f, *args, order=2)``: check reverse-mode derivatives of ``f`` against
    central finite differences in float64, up to ``order``; raise ``AssertionError``
    with a readable report on mismatch, return ``True`` otherwise.

    Each argument is checked along a random direction (and, for array outputs, a
    random output weighting).  Order 2 checks the gradient function itself the same
    way, which exercises the backward pass recorded on an outer tape.  Arguments may
    also be trees (dicts, lists, objects: each array or float leaf is checked) and
    values that are passed unchecked (strings, functions, None, bools); beside such
    arguments an integer scalar is a constant too (a size or an index).

    >>> import numpy as np, tracked as tr
    >>> tr.gradcheck(lambda x: np.sum(np.sin(x) * x), np.array([0.5, -1.0, 2.0]))
    True
    >>> tr.gradcheck(lambda m, n: np.sum(np.tanh(m['w'][:n]) * m['b']),
    ...              {'w': np.array([0.1, 0.2, 0.3]), 'b': 2.0, 'act': 'tanh'}, 2)
    True
    """
    if not all(_array_like(a) for a in args):
        return _gradcheck_leaves(f, args, order=order, eps=eps, rtol=rtol, atol=atol,
                                 seed=seed)
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind in 'iub'
            else np.asarray(a) for a in args]
    for i, x in enumerate(args):
        def fi(xi, i=i):
            return f(*args[:i], xi, *args[i + 1:])
        _check_order(fi, x, order, rng, eps, rtol, atol, f'argument {i}')
    return True


def _array_like(a, nested=False):
    """An array or number, or (nested) lists of numbers: checked as one array."""
    if isinstance(a, (list, tuple)):
        return all(_array_like(v, True) for v in a)
    if isinstance(a, np.ndarray):
        return not nested
    return isinstance(a, (float, int, np.number)) and not isinstance(a, bool)


def _gradcheck_leaves(f, args, **options):
    """``gradcheck`` over the float leaves of argument trees; the rest are constants."""
    spec = Args(args)
    checked = [i for i, v in enumerate(spec.flat) if not isinstance(v, (int, np.integer))]

    def f_leaves(*xs):
        vals = list(spec.flat)
        for i, x in zip(checked, xs):
            vals[i] = x
        return f(*spec.rebuild(vals))
    return gradcheck(f_leaves, *[spec.flat[i] for i in checked], **options)


def _check_order(f, x, order, rng, eps, rtol, atol, what):
    u = _check_first(f, x, rng, eps, rtol, atol, f'{what}, order 1')
    if order <= 1:
        return
    u = u if np.ndim(u) else u[()]

    def grad_along_u(xx):
        g = vjp(f, xx)[1](u)[0]
        return np.zeros(np.shape(xx)) if g is None else g
    eps2 = max(eps, 1e-5)
    _check_order(grad_along_u, x, order - 1, rng, eps2, rtol * 10, atol * 10,
                 what.replace(', order 1', '') + f' (order {order})')
