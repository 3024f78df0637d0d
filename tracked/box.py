"""The box protocol: what every tracked value holds, and the functions the rest of the
package reads it through.

A tracked value (a *box*) holds its value one level down (plain, or a box of a lower
level under nesting) and its tape entry: a ``Node`` in reverse mode, a ``DualLevel`` for
forward mode's ``Dual`` (which also holds a tangent).  Outside the box modules (this one,
boxes.py, integers.py, dispatch.py, values.py, views.py and forward.py, which define box
types, make boxes or keep their aliasing) nothing reads the slots: it calls ``node``,
``unboxed``, ``level``, ``is_forward``, ``state``/``restore``, ``alias``/``chain``,
``plain`` and ``make`` (tests/test_layering.py enforces it).

The concrete box types are defined above the modules that record operations (their
operators record through ``dispatch.apply``), so the package registers them here
(``register_types``), as autograd's ``ArrayBox`` registers itself with its tracer.
Also here: the two reads a user makes of a box, ``value`` (``tr.data``) and ``back``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import tape as _tape
from .tape import Node, SparseCotangent, backward

__all__ = ['Box', 'is_box', 'node', 'unboxed', 'level', 'is_forward', 'state', 'restore', 'alias',
           'chain', 'set_alias', 'plain', 'make', 'value', 'back', 'register_types',
           'TYPES']


class Box:
    """Base of every tracked type (``tracked.boxes.Tracked`` and its subclasses).  The
    slots live in the subclasses, because ``TrackedInt`` is also an ``int``, which allows
    no slots of a base class."""

    __slots__ = ()
    _forward = False            # True for forward mode's ``Dual`` (no tape entry)
    # Held in the subclasses' slots (annotations only):
    _node: Any                  # its tape ``Node`` (forward mode's ``Dual``: a ``DualLevel``)
    _value: Any                 # its value: plain, or tracked at a lower level
    _alias: Any                 # views.py: the Alias it shares memory in (unset: none)
    _chain: Any                 # views.py: the view steps from its Alias's root
    _tangent: Any               # forward mode's ``Dual`` only: its tangent

    if TYPE_CHECKING:       # every box type has them (boxes.Tracked's properties)
        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def dtype(self) -> np.dtype[Any]: ...
        @property
        def ndim(self) -> int: ...

    def _concrete(self, kind: str) -> Any:
        """The value, read on purpose (a guard on a recorded tape): boxes.py's."""
        raise NotImplementedError


def is_box(x: Any) -> bool:
    """Whether ``x`` is a tracked value (of any level or mode): the leaf test of trees
    of tracked values (``tree_map(f, out, is_leaf=is_box)``)."""
    return isinstance(x, Box)


def node(x: Box) -> Any:
    """The tape entry of box ``x`` (a ``Node``; forward mode: its ``DualLevel``)."""
    return x._node


def unboxed(x: Box) -> Any:
    """The value box ``x`` holds: plain, or a box of a lower level under nesting."""
    return x._value


def level(x: Box) -> int:
    """The trace level ``x`` was recorded at (``tape.new_level``)."""
    return int(x._node.level)


def is_forward(x: Box) -> bool:
    """Whether ``x`` is forward mode's (a ``Dual``: no tape entry, a tangent)."""
    return x._forward


def state(x: Box) -> tuple[Any, Any, Any]:
    """``(entry, value, tangent)`` of box ``x`` (tangent None but for a ``Dual``):
    what ``restore`` puts back (checkpoint's recomputation, views.py's aliases)."""
    return x._node, x._value, x._tangent if x._forward else None


def restore(x: Box, saved: tuple[Any, Any, Any]) -> None:
    """Put ``state(...)``'s ``saved`` into box ``x`` (its alias and chain stay its own)."""
    x._node, x._value = saved[0], saved[1]
    if x._forward:
        x._tangent = saved[2]


def alias(x: Box) -> Any:
    """The views.py ``Alias`` (or marker) ``x`` shares memory in; None when unset."""
    return getattr(x, '_alias', None)


def chain(x: Box) -> Any:
    """The view steps that make ``x`` from its alias's root (views.py)."""
    return x._chain


def set_alias(x: Box, shared: Any, steps: Any = None) -> None:
    """Make ``x`` part of views.py's ``shared`` (an ``Alias`` or marker), made from its
    root by ``steps`` (None: left as it is)."""
    x._alias = shared
    if steps is not None:
        x._chain = steps


def plain(x: Any) -> Any:
    """Strip every level of tracking from ``x`` (recursing into lists, tuples, dicts).

    >>> import tracked as tr
    >>> from tracked.box import plain
    >>> plain([tr.param(1.0), (2.0, {'a': tr.param(3.0)})])
    [np.float64(1.0), (2.0, {'a': np.float64(3.0)})]
    """
    while isinstance(x, Box):
        x = x._value
    if type(x) in (list, tuple):
        return type(x)(plain(v) for v in x)
    if type(x) is dict:
        return {k: plain(v) for k, v in x.items()}
    return x


class BoxTypes:
    """The concrete box types (``register_types``)."""

    __slots__ = ('array', 'real')
    array: type
    real: type

    def __getattr__(self, name: str) -> Any:       # only for a slot not set yet
        if name in self.__slots__:
            raise RuntimeError('tracked\'s box types are registered by the package: import '
                               'tracked, not one of its modules alone')
        raise AttributeError(name)


TYPES = BoxTypes()


def register_types(array: type, real: type) -> None:
    """Make ``array`` and ``real`` the classes of the boxes that recording makes (of an
    n-d and a 0-d value; called once by the package's ``__init__``)."""
    TYPES.array, TYPES.real = array, real


def make(ans: Any, entry: Node) -> Any:
    """A box of tape entry ``entry`` holding NumPy value ``ans``.

    >>> import numpy as np, tracked as tr
    >>> from tracked.box import make, node
    >>> x = tr.param(2.0)
    >>> make(np.float64(2.0), node(x))
    TrackedReal(np.float64(2.0)) (tracked)
    """
    t: Any = object.__new__(TYPES.real if ans.ndim == 0 else TYPES.array)
    t._node = entry
    t._value = ans
    return t


def array_leaf(a: np.ndarray, level: int) -> Any:
    """A box of a new leaf at ``level`` holding n-d array ``a``: ``make(a, new_node(None,
    None, None, a, (), level))`` in one call, for ``vjp``'s arguments (~0.5 µs a leaf)."""
    n = Node()
    n.prim = n.args = n.kwargs = n.real_parents = n.grad = None
    n.ans = a
    n.shape = a.shape
    n.parents = ()
    n.level = level
    n.seq = _next_seq()
    n.same_shape = False
    t: Any = object.__new__(TYPES.array)
    t._node = n
    t._value = a
    return t


_next_seq = _tape.sequence.__next__


def value(t: Box) -> Any:
    """Tracked ``t``'s value as ``tr.data`` gives it to the caller.  A computed value's
    array may be saved by the entries that use it, whose pullbacks read it at back():
    it is read-only until its own entry is released (by back()) or dropped, so that a
    write fails at once instead of changing the gradient (tape.py, "Arrays saved by
    entries").  A leaf's is protected by the entries that save it.

    >>> import tracked as tr
    >>> from tracked.box import value
    >>> value(tr.param(2.0) * 3.0)
    np.float64(6.0)
    """
    v = t._value
    if type(v) is np.ndarray and type(t._node) is Node and v.flags.writeable:
        entry = t._node
        if entry.prim is not None and not _tape.released(entry):
            _tape.protect(entry, [v])
    return v


def back(y: Box, dy: npt.ArrayLike | None = None, retain_graph: bool = False) -> None:
    """``back(y, dy=None)``: accumulate ``dy``-weighted gradients of ``y`` into its leaves.

    ``dy`` defaults to 1 for a scalar ``y`` and is required otherwise.  The entries
    used are released unless ``retain_graph=True``.

    >>> import numpy as np, tracked as tr
    >>> x = tr.param(np.array([1.0, 2.0, 3.0]))
    >>> tr.back(np.sum(x ** 2)); x.grad
    array([2., 4., 6.])
    """
    if not isinstance(y, Box):
        raise TypeError(f'back expects a tracked value, got {type(y).__name__}: nothing '
                        f'that produced it was tracked (did you call tr.param?)')
    node = y._node
    ans = y._value
    shape = plain(ans).shape
    seed: Any
    if dy is None:
        if getattr(ans, 'ndim', 0) != 0:
            raise ValueError(f'back(y) needs dy for a y of shape {shape}: pass '
                             f'back(y, dy) with dy of that shape, or reduce y to a scalar')
        seed = np.ones((), dtype=plain(ans).dtype)[()]
    else:
        seed = dy if isinstance(dy, Box) else np.asarray(dy, dtype=plain(ans).dtype)
        if seed.shape != shape:
            raise ValueError(f'back(y, dy): dy has shape {seed.shape}, y has shape {shape}')
    for leafnode, g in backward(node, seed, retain=retain_graph, sparse=True).items():
        buf = leafnode.grad
        if buf is not None:
            if type(g) is SparseCotangent:
                g.add_into(buf)         # slices of a parameter: no zero-filled copy
            else:
                buf += plain(g)

