"""``gradcheck``: reverse mode against central finite differences, to any order."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .reverse import vjp
from .arguments import Args
from .box import plain

__all__ = ['gradcheck', 'jvpcheck']


def _as_numbers(y: Any) -> np.ndarray:
    y = np.asarray(plain(y))
    return y.astype(np.complex128 if y.dtype.kind == 'c' else np.float64)


def _directional(f: Callable[[Any], Any], x: np.ndarray, v: np.ndarray,
                 eps: float) -> np.ndarray:
    """Central difference of ``f`` at ``x`` along ``v``: an array like f's output."""
    return (_as_numbers(f(x + eps * v)) - _as_numbers(f(x - eps * v))) / (2 * eps)


def _random_like(rng: np.random.Generator, x: Any) -> np.ndarray:
    """A random direction of ``x``'s shape: complex for a complex ``x``."""
    v = rng.standard_normal(np.shape(x))
    if np.iscomplexobj(x):
        v = v + 1j * rng.standard_normal(np.shape(x))
    return v


def _inner(a: Any, b: Any) -> float:
    """The real inner product ``Re(sum(conj(a) * b))`` under which pullbacks are adjoints
    (ChainRules' convention: a complex number is a pair of reals)."""
    return float(np.real(np.sum(np.conj(a) * b)))


def _check_first(f: Callable[[Any], Any], x: np.ndarray, rng: np.random.Generator,
                 eps: float, rtol: float, atol: float, what: str) -> np.ndarray:
    y = _as_numbers(f(x))
    v = _random_like(rng, x)
    u = _random_like(rng, y)
    _, back = vjp(f, x)
    g = back(u if np.ndim(y) else u[()])[0]
    if g is None:
        g = np.zeros(np.shape(x), np.result_type(x, 0.0))
    g = plain(g)
    if np.shape(g) != np.shape(x):
        raise AssertionError(f'{what}: gradient has shape {np.shape(g)}, input has {np.shape(x)}')
    if np.asarray(g).dtype != np.asarray(x).dtype:
        raise AssertionError(f'{what}: gradient has dtype {np.asarray(g).dtype}, '
                             f'input has {np.asarray(x).dtype}')
    reverse = _inner(np.asarray(g), v)
    numeric = _inner(u, _directional(f, x, v, eps))
    if not np.isclose(reverse, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f'{what}: reverse mode gives {reverse!r} along a random direction, central '
            f'finite differences give {numeric!r} (difference {abs(reverse - numeric):.3g}; '
            f'rtol={rtol}, atol={atol})')
    return u


def gradcheck(f: Callable[..., Any], *args: Any, order: int = 2, eps: float = 1e-6,
              rtol: float = 1e-5, atol: float = 1e-6, seed: int = 0) -> bool:
    """``gradcheck(f, *args, order=2)``: check reverse-mode derivatives of ``f`` against
    central finite differences in float64, up to ``order``; raise ``AssertionError``
    with a readable report on mismatch, return ``True`` otherwise.

    Each argument is checked along a random direction (and, for array outputs, a
    random output weighting); complex arguments and outputs along complex ones,
    under the real inner product ``Re(sum(conj(a) * b))`` of ChainRules' convention.
    Order 2 checks the gradient function itself the same way, which exercises the
    backward pass recorded on an outer tape.  Arguments may also be trees (dicts, lists,
    objects: each array or float leaf is checked) and values that are passed unchecked
    (strings, functions, None, bools); beside such arguments an integer scalar is a
    constant too (a size or an index).

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
    args = tuple(np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind in 'iub'
                 else np.asarray(a) for a in args)
    for i, x in enumerate(args):
        def fi(xi: Any, i: int = i) -> Any:
            return f(*args[:i], xi, *args[i + 1:])
        _check_order(fi, x, order, rng, eps, rtol, atol, f'argument {i}')
    return True


def _array_like(a: Any) -> bool:
    """An array or number, checked as one array.  A list or tuple is a container, as
    everywhere (API.md section 3): its leaves are checked, and ``f`` gets it as a list."""
    if isinstance(a, np.ndarray):
        return True
    return isinstance(a, (float, int, complex, np.number)) and not isinstance(a, bool)


def _gradcheck_leaves(f: Callable[..., Any], args: Sequence[Any], **options: Any) -> bool:
    """``gradcheck`` over the float leaves of argument trees; the rest are constants."""
    spec = Args(args)
    checked = [i for i, v in enumerate(spec.flat) if not isinstance(v, (int, np.integer))]

    def f_leaves(*xs: Any) -> Any:
        vals = list(spec.flat)
        for i, x in zip(checked, xs):
            vals[i] = x
        return f(*spec.rebuild(vals))
    return gradcheck(f_leaves, *[spec.flat[i] for i in checked], **options)


def _check_order(f: Callable[[Any], Any], x: np.ndarray, order: int,
                 rng: np.random.Generator, eps: float, rtol: float, atol: float,
                 what: str) -> None:
    u = _check_first(f, x, rng, eps, rtol, atol, f'{what}, order 1')
    if order <= 1:
        return
    u = u if np.ndim(u) else u[()]

    def grad_along_u(xx: Any) -> Any:
        g = vjp(f, xx)[1](u)[0]
        return np.zeros(np.shape(xx), np.result_type(xx, 0.0)) if g is None else g
    eps2 = max(eps, 1e-5)
    _check_order(grad_along_u, x, order - 1, rng, eps2, rtol * 10, atol * 10,
                 what.replace(', order 1', '') + f' (order {order})')


def jvpcheck(f: Callable[..., Any], *args: Any, eps: float = 1e-6, rtol: float = 1e-5,
             atol: float = 1e-6, seed: int = 0) -> bool:
    """``jvpcheck(f, *args)``: check forward-mode tangents of ``f`` against central finite
    differences and against its own pullback (``<u, J v> == <J^T u, v>``), one argument
    at a time along random directions, and forward-mode Jacobians (all tangents in one
    pass) against reverse-mode ones; raise ``AssertionError`` on mismatch.

    >>> import numpy as np, tracked as tr
    >>> tr.jvpcheck(lambda x: np.sin(x) * x, np.array([0.5, -1.0, 2.0]))
    True
    """
    from .jacobians import jacobian, jvp
    rng = np.random.default_rng(seed)
    args = tuple(np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind in 'iub'
                 else np.asarray(a) for a in args)
    for i, x in enumerate(args):
        def fi(xi: Any, i: int = i) -> Any:
            return f(*args[:i], xi, *args[i + 1:])
        what = f'argument {i}'
        v = _random_like(rng, x)
        y, t = jvp(fi, (x,), (v,))
        t = np.asarray(plain(t))
        y = _as_numbers(y)
        numeric = _directional(fi, x, v, eps)
        if t.shape != numeric.shape or not np.allclose(t, numeric, rtol=rtol, atol=atol):
            raise AssertionError(f'{what}: forward mode gives the tangent {t!r}, central '
                                 f'finite differences {numeric!r}')
        u = _random_like(rng, y)
        g = vjp(fi, x)[1](u if np.ndim(y) else u[()])[0]
        g = np.zeros(np.shape(x), np.result_type(x, 0.0)) if g is None else plain(g)
        if not np.isclose(_inner(u, t), _inner(np.asarray(g), v), rtol=rtol, atol=atol):
            raise AssertionError(f'{what}: the tangent rule and the pullback disagree: '
                                 f'<u, J v> = {_inner(u, t)!r}, <J^T u, v> = '
                                 f'{_inner(np.asarray(g), v)!r}')
        _check_batch(fi, x, rng, rtol, atol, what)
        if np.iscomplexobj(x):
            continue                  # Jacobians refuse complex arguments (ambiguous)
        jf = jacobian(fi, x, mode='forward')[0]
        jr = jacobian(fi, x, mode='reverse')[0]
        if not np.allclose(jf, jr, rtol=rtol, atol=atol):
            raise AssertionError(f'{what}: the forward-mode Jacobian (one pass, batched '
                                 f'tangents) differs from the reverse-mode one')
    return True


def _check_batch(f: Callable[[Any], Any], x: np.ndarray, rng: np.random.Generator,
                 rtol: float, atol: float, what: str, k: int = 3) -> None:
    """Random tangents carried at once along a leading axis give each one's tangent:
    a rule that mixed the batch (a reduction over it) would pass the Jacobian check
    where the batch is one tangent (a 0-d argument)."""
    from .forward import Dual, DualLevel, tangent
    from .jacobians import jvp
    vs = np.stack([_random_like(rng, x) for _ in range(k)])
    lvl = DualLevel(k)
    t = tangent(f(Dual.make(x, vs, lvl)), lvl)
    for j in range(k):
        want = np.asarray(plain(jvp(f, (x,), (vs[j],))[1]))
        got = np.zeros_like(want) if t is None else np.asarray(plain(t))[j]
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            raise AssertionError(f'{what}: {k} tangents carried at once give {got!r} for '
                                 f'tangent {j}, carried alone {want!r}')
