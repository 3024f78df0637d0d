"""In-place writes through views: NumPy's aliasing, recorded functionally.

NumPy lets ``v = y[1:]`` (or ``y.T``, ``y.reshape(...)``, ``y.real``, ...) share ``y``'s
memory, so a write through ``v`` changes ``y`` and every other view of it.  The tape
records values, not memory, so the boxes keep NumPy's aliasing themselves, as PyTorch
does with a view's base and view function:

- the first view of a non-leaf box makes it the *root* of an ``Alias``; each view box
  holds the ``Alias`` and its *chain*, the view steps ``(primitive, other arguments,
  keywords)`` that make it from the root (a view of a view has two);
- a write into any box of an ``Alias`` (the root or a view) computes the root's new
  value functionally: ``view_update(root, new)`` replaces the part the chain selects
  (a primitive, linear in both operands, so every path differentiates it: eager,
  nested, forward mode, recorded and compiled tapes);
- the root box (if it is still alive) and every live view box are then pointed at
  entries recomputed from the new root, so each reads what NumPy would show.

Where this differs from PyTorch: views are recomputed at each write (PyTorch does it
lazily, when a stale view is read), so a write costs a few recorded operations per
live view; and a view of a leaf (a parameter) stays read-only, as PyTorch refuses a
leaf's in-place change.  A view NumPy made read-only (``np.diagonal``,
``np.broadcast_to``) raises NumPy's error.  Forward mode's ``Dual`` values hold the
same state, in the same slots.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .registry import Primitive
from .box import alias, chain, is_forward, node, plain, restore, set_alias, state
from .boxes import Tracked
from .dispatch import LEAF_VIEW_WRITE, apply

__all__ = ['Alias', 'note', 'write', 'COPY']

Step = tuple[Primitive, Sequence[Any], dict[str, Any]]

READ_ONLY = 'assignment destination is read-only'        # NumPy's words


class Alias:
    """The boxes sharing one root's memory: ``root`` (a weak reference to the root box),
    ``state`` (a private box holding the root's current entry and value, kept when the
    root box is gone: its views still share that memory) and ``views`` (weak references
    to the live view boxes)."""

    __slots__ = ('root', 'state', 'views')

    def __init__(self, root: Tracked) -> None:
        self.root = weakref.ref(root)
        self.state = _copy(root)
        self.views: list[weakref.ref[Any]] = []

    def live(self) -> list[Any]:
        alive = [v for v in (r() for r in self.views) if v is not None]
        if len(alive) < len(self.views):
            self.views[:] = [weakref.ref(v) for v in alive]
        return alive


# A view of a leaf: writes through it are refused (the leaf's value cannot change).
LEAF = object()
# A view primitive's result that NumPy made a copy (reshape of a strided array): an
# array of its own, written like any other.
COPY = object()
_quiet = threading.local()      # views recomputed by ``write`` are not new views


def _copy(x: Any) -> Any:
    """A private box with ``x``'s state (entry and value; a dual's tangent too)."""
    new = object.__new__(type(x))
    _point(new, x)
    return new


def _point(dst: Any, src: Any) -> None:
    """``dst`` takes ``src``'s state; its alias and chain stay its own."""
    restore(dst, state(src))


def _is_leaf(x: Any) -> bool:
    return not is_forward(x) and node(x).prim is None


def note(view: Any, base: Any, step: Step) -> None:
    """Record that box ``view`` was made from box ``base`` (of the same level) by
    ``step``; nothing if NumPy made a copy (``reshape`` of a strided array)."""
    # Runs for every view of a computed value (x[1:], x.T): the slots are read directly
    # (views.py is one of the box modules), the common cases tested before NumPy's.
    if not isinstance(base, Tracked) or base._node.level != view._node.level \
            or getattr(_quiet, 'on', False):
        return
    vv, bv = plain(view._value), plain(base._value)
    # (an array NumPy made anew has no base: a copy, without the bounds test)
    if type(vv) is not np.ndarray or vv is not bv and (
            vv.base is None or not (vv.base is bv or vv.base is getattr(bv, 'base', None)
                                    or np.may_share_memory(vv, bv))):
        set_alias(view, COPY)
        return
    shared = alias(base)
    if shared is None or shared is COPY:
        # a leaf, or a view of one (views of leaves are not noted: the eager slice path
        # skips them), may not change
        if _is_leaf(base) or (shared is None and not is_forward(base)
                              and getattr(node(base).prim, 'view', False)):
            set_alias(view, LEAF)
            return
        shared = Alias(base)
        set_alias(base, shared, ())
    elif shared is LEAF:
        set_alias(view, LEAF)
        return
    # read-only as NumPy made it (not because the base is protected): writes refused
    readonly = False if vv.flags.writeable else bool(getattr(bv, 'flags', None) and
                                                     bv.flags.writeable)
    set_alias(view, shared, chain(base) + ((step[0], tuple(step[1]), step[2], readonly),))
    shared.views.append(weakref.ref(view))
    n = len(shared.views)
    if n >= 16 and not n & (n - 1):          # amortised pruning of dead views
        shared.live()


def write(x: Any, new: Any) -> bool:
    """``x`` (a root or a view of an ``Alias``) takes the value ``new`` as NumPy
    would write it: the root and every live view change with it.  False for a view
    primitive's result that NumPy made a copy: the caller writes it as any array."""
    shared = alias(x)
    if shared is COPY:
        return False
    if shared is LEAF:
        raise ValueError(LEAF_VIEW_WRITE)
    steps = chain(x)
    if any(step[3] for step in steps):
        raise ValueError(READ_ONLY)
    root = shared.root()
    current = root if root is not None else shared.state
    new_root = _scatter(current, steps, new)
    _point(shared.state, new_root)
    if root is not None:
        _point(root, new_root)
    _quiet.on = True
    try:
        for v in shared.live():
            _point(v, _replay(new_root, chain(v)))
    finally:
        _quiet.on = False
    return True


def _view(x: Any, step: Any) -> Any:
    prim, rest, kwargs, _ = step
    return apply(prim, (x,) + rest, kwargs)


def _replay(root: Any, chain: Sequence[Any]) -> Any:
    x = root
    for step in chain:
        x = _view(x, step)
    return x


def _scatter(base: Any, chain: Sequence[Any], new: Any) -> Any:
    """``base`` with the part that ``chain`` selects replaced by ``new``."""
    if not chain:
        return new
    step = chain[0]
    inner = _scatter(_view(base, step), chain[1:], new) if len(chain) > 1 else new
    return apply(VIEW_UPDATE, (base, inner), {'step': step})


# --------------------------------------------------------------------------
# view_update(base, v, step): base with step(base) replaced by v
# --------------------------------------------------------------------------

def _update(base: Any, v: Any, *, step: Any) -> Any:
    prim, rest, kwargs, _ = step
    out = np.array(base, copy=True)
    target = prim.fn(out, *rest, **kwargs)
    if not np.may_share_memory(target, out):
        raise RuntimeError(f'{prim.name} made a copy where a view was recorded')
    target[...] = v
    return out


def _update_vjp_base(g: Any, ans: Any, base: Any, v: Any, *, step: Any) -> Any:
    return apply(VIEW_UPDATE, (g, 0.0), {'step': step})        # g outside the part


def _update_vjp_v(g: Any, ans: Any, base: Any, v: Any, *, step: Any) -> Any:
    return _view(g, step)                                      # g on the part


VIEW_UPDATE = Primitive(_update, (_update_vjp_base, _update_vjp_v), name='view_update',
                        linear='joint')
