"""Reverse mode's core: ``vjp`` over flat arguments, and the eager gradient of an
argument tuple.

``vjp`` is the one primitive: it records ``f`` at a fresh trace level (above every
level that exists, so calls nest without perturbation confusion) and returns the
value and a reusable ``back``.  ``pullback_args`` adds argument trees and
``eager_withgradient`` is the eager tape's ``withgradient``, the backend ``AutoTracked``
(``EAGER``: the default of ``gradient``).  The user-facing
operators (api.py, jacobians.py), the backends and ``tr.Duplicated`` are built on
these; this module imports none of them, so none of them imports another in a
circle.  Values returned are plain relative to the call's level: at the top level
NumPy values, under nesting possibly tracked at an outer level, which is what makes
derivatives of derivatives work.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .arguments import ADType, Args, check_function, leaf_value, loss_output, match_gradient
from .registry import Primitive
from .tape import Node, backward, new_level, new_node, thread_state
from .tree_util import is_node, tree_map
from . import box
from .box import plain
from .boxes import Tracked
from .values import leaf

__all__ = ['vjp', 'pullback_args', 'eager_withgradient', 'WithGradient', 'AutoTracked',
           'EAGER']

WithGradient = namedtuple('WithGradient', ['val', 'grad'])


# --------------------------------------------------------------------------
# The core: vjp over flat arguments
# --------------------------------------------------------------------------

def vjp(f: Callable[..., Any], *args: Any) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
    """``vjp(f, *args) -> (y, back)``: the core of every operator; ``back(dy)`` returns
    one cotangent per argument (``None`` where ``y`` does not depend on it).

    Arguments are array-likes (``pullback`` adds trees and non-numeric arguments).
    ``y`` may be a tree (tuple, dict, ...) of outputs; ``dy`` then mirrors it, with
    ``None`` for outputs that get no cotangent.  ``back`` may be called many times;
    ``back(dy, last=True)`` promises it is the last call, and frees the recorded
    values as it goes (a smaller working set on large arrays).

    >>> import numpy as np, tracked as tr
    >>> y, back = tr.api.vjp(lambda x: np.sin(x) * 2, np.array([0.0, 1.0]))
    >>> back(np.ones(2))[0]
    array([2.        , 1.08060461])
    >>> back(np.ones(2), last=True)[0]     # the last call: frees the graph as it goes
    array([2.        , 1.08060461])
    """
    level = new_level()
    # a float array is its own leaf value (what leaf_value returns for it, checked here
    # inline: ~1 µs a leaf)
    boxed = [box.array_leaf(a, level) if type(a) is np.ndarray and a.ndim and a.dtype.kind in 'fc'
             else leaf(leaf_value(a), level) for a in args]
    state = thread_state                  # differentiating(), for layers' automatic mode
    state.depth = getattr(state, 'depth', 0) + 1
    try:
        out = f(*boxed)
    finally:
        state.depth -= 1
    y = _unbox(out, level)

    def back(dy: Any = None, *, last: bool = False) -> tuple[Any, ...]:
        # ``last``: the caller will not call back again (gradient, withgradient), so
        # the graph, private to this call, is released while it is swept.
        if isinstance(out, Tracked) and box.level(out) == level:
            cts = backward(box.node(out), _seed(dy, out, single=True), retain=True, private=last)
        else:
            roots = _roots(out, dy, level)
            if not roots:
                return tuple(None for _ in boxed)
            cts = backward(_joint_root(roots, level), np.float64(1.0), retain=True,
                           private=last)
        grads = []
        for b in boxed:
            g = cts.get(box.node(b))
            if g is not None:
                x = box.unboxed(b)
                if not (type(g) is np.ndarray and g.dtype is getattr(x, 'dtype', None)):
                    g = _cast_like(g, x)        # (the common case needs no cast)
            grads.append(g)
        return tuple(grads)
    # for pullback's protection of y
    back.out, back.level = out, level  # type: ignore[attr-defined]
    return y, back


def _cast_like(g: Any, x: Any) -> Any:
    """Cotangent ``g`` in float argument ``x``'s dtype (a float32 input gets a float32
    gradient even where the tape promoted); integer arguments keep a float gradient."""
    dtype = getattr(x, 'dtype', None)
    if g is None or dtype is None or dtype.kind not in 'fc' or getattr(g, 'dtype', None) == dtype:
        return g
    return g.astype(dtype) if hasattr(g, 'astype') else np.asarray(g, dtype=dtype)[()]


def _at_level(y: Any, level: int) -> Any:
    """``y`` seen from outside ``level``: its value if tracked there, else ``y`` itself."""
    return box.unboxed(y) if isinstance(y, Tracked) and box.level(y) == level else y


def _unbox(out: Any, level: int) -> Any:
    if isinstance(out, Tracked):
        return _at_level(out, level)
    if not is_node(out):
        return out
    return tree_map(lambda t: _at_level(t, level), out, is_leaf=box.is_box, shared=False)


def _roots(out: Any, dy: Any, level: int) -> list[tuple[Node, Any]]:
    """(node, seed) for each output tracked at ``level`` whose cotangent is given
    (``back`` itself serves a single output tracked there)."""
    if isinstance(out, Tracked) or not is_node(out):
        return []
    pairs = []

    def take(o: Tracked, d: Any) -> None:
        if box.level(o) == level and d is not None:
            pairs.append((box.node(o), _seed(d, o)))
    try:
        # shared=False: an output that occurs twice is seeded in each place
        tree_map(take, out, dy, is_leaf=box.is_box, shared=False)
    except (IndexError, KeyError, AttributeError, TypeError) as e:
        raise ValueError(f'back(dy): dy must mirror the structure of the output '
                         f'({type(out).__name__}), with None for outputs without a '
                         f'cotangent; could not match it ({e})') from None
    return pairs


def _seed(dy: Any, out: Tracked, single: bool = False) -> Any:
    """``dy`` as a cotangent for output ``out``: its shape, a float dtype."""
    ans = box.unboxed(out)
    shape = ans.shape
    if (type(dy) is np.ndarray and dy.shape == shape and dy.dtype == ans.dtype
            and dy.dtype.kind in 'fc'):
        return dy                      # the common case, e.g. Jacobian rows
    if dy is None and single:
        if shape != ():
            raise ValueError(f'back(dy) needs dy for an output of shape {shape}')
        dtype = ans.dtype           # the output's value dtype, also when it is tracked
        return dtype.type(1.0) if dtype.kind in 'fc' else np.float64(1.0)
    seed: Any
    if isinstance(dy, Tracked):
        seed = dy
    else:
        dtype = plain(ans).dtype
        seed = np.asarray(dy, dtype=dtype if dtype.kind in 'fc' else np.float64)
        if seed.ndim == 0:
            seed = seed[()]
    if seed.shape != shape:
        raise ValueError(f'back(dy): dy has shape {seed.shape}, the output has shape {shape}')
    return seed


def _constant(seed: Any) -> Callable[[Any, Any], Any]:
    return lambda g, ans: seed


def _joint_root(roots: Sequence[tuple[Node, Any]], level: int) -> Node:
    """One entry whose parents are all seeded outputs, so one backward pass serves them."""
    prim = Primitive(None, [_constant(s) for _, s in roots], name='outputs')
    return new_node(prim, (), {}, np.float64(0.0), tuple((i, n) for i, (n, _) in enumerate(roots)),
                level)


def pullback_args(f: Callable[..., Any],
                  args: Sequence[Any]) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
    """``pullback(f, *args)`` (argument trees) whose ``back`` also takes ``last=True``
    (see ``vjp``)."""
    spec = Args(args, 'pullback')
    y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)
    return y, lambda dy=None, last=False: spec.gradients(back(dy, last=last))


def eager_withgradient(f: Callable[..., Any], args: Sequence[Any]) -> WithGradient:
    """``withgradient(f, *args)`` on the eager tape: no backend, no ``tr.Duplicated``."""
    for a in args:
        if not (type(a) is np.ndarray and a.ndim and a.dtype.kind == 'f'):
            y, back = pullback_args(f, args)
            break
    else:       # float arrays only: each is a leaf, ``Args`` would change nothing (~1 µs)
        y, back_flat = vjp(f, *args)

        def back(dy: Any, last: bool) -> tuple[Any, ...]:
            return tuple([match_gradient(g, a) for g, a in zip(back_flat(dy, last=last), args)])
    dy = loss_output(y)[1]
    # A scalar output's seed 1.0 as None: ``vjp``'s back makes it in the output's dtype
    # without converting a Python float (~1 µs a call)
    return WithGradient(y, back(None if type(dy) is float else dy, last=True))


class AutoTracked(ADType):
    """``AutoTracked()``: the default backend, the eager tape.

    >>> import tracked as tr
    >>> tr.gradient(lambda x: x * x, tr.AutoTracked(), 3.0)
    (np.float64(6.0),)
    """

    def withgradient(self, f: Callable[..., Any], *args: Any) -> WithGradient:
        if self is not EAGER:           # (api.withgradient checked f already)
            check_function(f, 'AutoTracked().withgradient')
        return eager_withgradient(f, args)


EAGER = AutoTracked()       # the backend of gradient(f, *args)
