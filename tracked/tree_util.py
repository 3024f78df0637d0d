"""The tree protocol: which objects are nodes, their children, how they are rebuilt.

One module owns it, as ``jax.tree_util`` does; ``fmap``, the gradient trees of
``tr.gradient``, the inputs of recorded tapes and ``AutoCompiled``'s cache keys all
walk models through the names below.

Nodes are dicts, lists, tuples and named tuples (subclasses too), classes made nodes
with ``register_node``, and other objects through their ``__slots__`` and
``__dict__`` (dataclasses included; rebuilt without calling ``__init__``).  Not nodes
(atoms): ``@leaf`` classes, arrays, tracked values, numbers, strings, None,
functions, ufuncs, types, enums and builtin or NumPy objects.  ``is_leaf`` says which
values are leaves (default ``isnumeric``, what ``fmap`` maps); it is asked first, so
it may also stop the walk at a node.  Atoms that are not leaves are static: part of
the structure, kept (or None in a gradient tree).

The own attributes of a dict or list subclass are carried along as they are (not
walked; compared as statics), as ``fmap`` copies them.

As in ``fmap``: an array that occurs twice is one leaf (tied weights; a number that
occurs twice is two: numbers are values, see ``_tied``), and a list,
dict, object or registered node that occurs twice is walked once and stays shared,
cycles included (a registered node cannot be part of a cycle: ``rebuild`` needs its
children first).  Tuples are never shared: equal tuple constants may be one object.

- ``flatten(tree) -> (leaves, treedef)``, ``unflatten(treedef, leaves)``, ``TreeDef``
  (hashable, comparable, printable), ``tuple_def`` (a tuple of trees)
- ``tree_map(fn, tree, *others)``, ``leaves(tree)``: the walk of ``fmap``
- ``children(node)``, ``rebuild(cls, aux, children)``, ``is_node``: one level
- ``register_node(cls, children, rebuild)`` and ``@leaf``: the user's hooks
- ``TreeDef.paths()``, ``follow``, ``keystr``: where each leaf sits
- ``TreeDef.matcher()``: generated code taking the leaves of a tree of known structure

Why one module of ~950 lines: as ``jax.tree_util``, every part (node kinds, flatten,
the tree definition, paths, the map of ``fmap``) shares the node kinds and the memo that
keeps shared nodes shared; the matcher is the treedef's compiled form.
"""
from __future__ import annotations

import collections
import copy
import enum
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

from .box import Box

__all__ = ['register_node', 'leaf', 'isnumeric', 'is_node', 'children', 'rebuild',
           'flatten', 'unflatten', 'TreeDef', 'tuple_def', 'tree_map', 'leaves',
           'follow', 'keystr']

# Node kinds and the tags of a TreeDef's form (small ints: they survive pickling).
LEAF, STATIC, REF, DICT, LIST, TUPLE, NAMEDTUPLE, OBJECT, NODE = range(9)
_NUMBERED = (DICT, LIST, OBJECT, NODE)        # the nodes that may be shared
ITEM, ATTR, CHILD = range(3)                   # how a path steps into a node
_TIED = (np.ndarray, Box)                      # leaves that are tied when they recur


def _tied(x: Any) -> bool:
    """Whether leaf ``x`` is tied to its other occurrences: an array of one or more
    dimensions, plain or tracked.  Numbers -- Python and NumPy scalars, 0-d arrays,
    tracked or not -- are values: an outer differentiation turns a float into a 0-d
    tracked value, and the same number in two places must stay two leaves then too."""
    return isinstance(x, _TIED) and x.ndim > 0
# A path to a leaf, as ``TreeDef.paths`` gives it: (ITEM, key), (ATTR, name) or
# (CHILD, index) steps.
Path = tuple[tuple[int, Any], ...]
C = TypeVar('C', bound=type)


# --------------------------------------------------------------------------
# What is a node
# --------------------------------------------------------------------------

# class -> (children(x) -> (kids, aux), rebuild(aux, kids) -> x)
_REGISTERED: dict[type, tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]] = {}


def register_node(cls: C, children: Callable[[Any], tuple[Sequence[Any], Hashable]],
                  rebuild: Callable[[Any, tuple[Any, ...]], Any]) -> C:
    """``register_node(cls, children, rebuild)``: make instances of ``cls`` nodes with
    these two functions (``jax.tree_util.register_pytree_node``); returns ``cls``.

    ``children(obj) -> (children, aux)``: the children (a sequence) and whatever else
    ``rebuild`` needs (hashable: it is part of the structure, compared on replay).
    ``rebuild(aux, children) -> obj`` makes a new one.  It is also given tracked
    values (inside ``tr.gradient``) and None for children without a gradient (the
    gradient tree), so it should store them, not validate them.  Only exact
    instances of ``cls`` are nodes, as in JAX; ``dict``, ``list`` and ``tuple`` are
    built in and cannot be registered.

    >>> import numpy as np, tracked as tr
    >>> class Poly:                          # the degree is derived, not a child
    ...     def __init__(self, coef):
    ...         self.coef, self.degree = coef, len(coef) - 1
    ...     def __call__(self, x):
    ...         return sum(c * x ** k for k, c in enumerate(self.coef))
    >>> _ = tr.register_node(Poly, lambda p: ((p.coef,), None), lambda aux, ch: Poly(*ch))
    >>> g, = tr.gradient(lambda p: p(2.0), Poly(np.array([1.0, 1.0, 1.0])))
    >>> type(g).__name__, g.coef
    ('Poly', array([1., 2., 4.]))
    """
    if cls in (dict, list, tuple):
        raise ValueError(f'{cls.__name__} is a built-in node of the tree protocol; register '
                         f'a subclass instead')
    _REGISTERED[cls] = (children, rebuild)
    _class_kind.cache_clear()
    return cls


def leaf(cls: C) -> C:
    """``@leaf`` on a class: its instances are atoms, kept whole by every walk.

    >>> import numpy as np, tracked as tr
    >>> @tr.leaf
    ... class Config:
    ...     def __init__(self): self.table = np.ones(2)
    >>> cfg = Config()
    >>> tr.fmap(lambda a: a * 2, {'w': np.ones(1), 'cfg': cfg})['cfg'] is cfg
    True
    """
    cls.__tracked_leaf__ = True  # type: ignore[attr-defined]  # the mark the walk reads
    _class_kind.cache_clear()
    return cls


def isnumeric(x: Any) -> bool:
    """``isnumeric(x)``: the default leaves: an array of numbers (not bool), or a float
    or complex number, plain or tracked.  Integer scalars are sizes and counts, and are
    static -- also when tracked (an outer differentiation's integer argument) or 0-d.

    >>> import numpy as np, tracked as tr
    >>> [tr.tree_util.isnumeric(v) for v in (np.ones(2), 1.5, 3, 'a', np.array([True]))]
    [True, True, False, False, False]
    """
    if isinstance(x, _TIED):
        return x.dtype.kind in ('fiuc' if x.ndim else 'fc')
    return isinstance(x, (float, np.floating, complex, np.complexfloating))


_ATOMS = (str, bytes, int, float, complex, type(None), np.generic, np.ndarray, Box,
          enum.Enum, functools.partial, np.ufunc, np.dtype, type, range, slice)


@functools.lru_cache(maxsize=1024)
def _class_kind(cls):
    """The kind of node instances of ``cls`` are, or None for atoms.  Per class, so
    cached (``leaf`` and ``register_node`` clear it)."""
    if cls in _REGISTERED:
        return NODE
    if getattr(cls, '__tracked_leaf__', False) or issubclass(cls, _ATOMS):
        return None
    if issubclass(cls, dict):
        return DICT
    if issubclass(cls, list):
        return LIST
    if issubclass(cls, tuple):
        return NAMEDTUPLE if hasattr(cls, '_fields') else TUPLE
    module = cls.__module__ or ''
    if module == 'builtins' or module.startswith('numpy'):
        return None        # functions, methods, modules, builtin objects: not models
    if _slot_names(cls) or cls.__dictoffset__:
        return OBJECT
    return None            # an extension type without attributes


def _kind(x):
    t = type(x)
    return DICT if t is dict else LIST if t is list else TUPLE if t is tuple \
        else _class_kind(t)  # type: ignore[arg-type]  # a class is hashable (mypy#11470)


def is_node(x: Any) -> bool:
    """``is_node(x)``: whether the walk enters ``x``.

    >>> import numpy as np, tracked as tr
    >>> [tr.tree_util.is_node(v) for v in ({}, (1,), np.ones(1), 'a', np.tanh)]
    [True, True, False, False, False]
    """
    return _kind(x) is not None


@functools.lru_cache(maxsize=1024)
def _slot_names(cls):
    """The names of ``cls``'s ``__slots__`` (private ones mangled), base classes included."""
    names = []
    for c in cls.__mro__:
        slots = c.__dict__.get('__slots__', ())
        for s in (slots,) if isinstance(slots, str) else slots:
            if s in ('__dict__', '__weakref__'):
                continue
            if s.startswith('__') and not s.endswith('__'):
                s = f'_{c.__name__.lstrip("_")}{s}'     # name mangling of private slots
            if s not in names:
                names.append(s)
    return tuple(names)


def _attributes(x):
    """An object's attribute names and values: ``__slots__`` (those set), then ``__dict__``."""
    slots = _slot_names(type(x))  # type: ignore[arg-type]  # a class is hashable (mypy#11470)
    d = getattr(x, '__dict__', None)
    if not slots:
        return (tuple(d), tuple(d.values())) if d else ((), ())
    names = [n for n in slots if hasattr(x, n)]
    if d:
        names.extend(k for k in d if k not in slots)
    return tuple(names), tuple([getattr(x, n) for n in names])


# --------------------------------------------------------------------------
# One level: children and rebuild
# --------------------------------------------------------------------------

def children(x: Any) -> tuple[tuple[Any, ...], Any] | None:
    """``children(x) -> (children, aux)``: a node's children and what else ``rebuild``
    needs (dict keys, attribute names, a registered class's aux); None for an atom.

    >>> import tracked as tr
    >>> tr.tree_util.children({'w': 1.0, 'act': 'tanh'})
    ((1.0, 'tanh'), ('w', 'act'))
    >>> tr.tree_util.children('tanh') is None
    True
    """
    kind = _kind(x)
    if kind is None:
        return None
    return _children(x, kind)


def _children(x, kind):
    if kind == DICT:
        return tuple(x.values()), tuple(x)
    if kind == OBJECT:
        names, values = _attributes(x)
        return values, names
    if kind == NODE:
        kids, aux = _REGISTERED[type(x)][0](x)
        return tuple(kids), aux
    return tuple(x), None


def rebuild(cls: type, aux: Any, values: Sequence[Any]) -> Any:
    """``rebuild(cls, aux, children)``: a new node of type ``cls``, the inverse of
    ``children``; objects are made without calling ``__init__`` (frozen dataclasses,
    validating constructors), registered classes by their ``rebuild``.

    >>> import tracked as tr
    >>> from collections import namedtuple
    >>> P = namedtuple('P', 'a b')
    >>> values, aux = tr.tree_util.children(P(1.0, 'x'))
    >>> tr.tree_util.rebuild(P, aux, (2.0, values[1]))
    P(a=2.0, b='x')
    """
    kind = _class_kind(cls)
    if kind is None:
        raise TypeError(f'{cls.__name__} is not a node of the tree protocol')
    return _rebuild(kind, cls, aux, values)


def _rebuild(kind, cls, aux, values):
    if kind == TUPLE:
        return tuple(values) if cls is tuple else cls(values)
    if kind == NAMEDTUPLE:
        return cls._make(values)
    if kind == NODE:
        return _REGISTERED[cls][1](aux, tuple(values))
    return _fill(_empty(kind, cls), kind, aux, values)


def _empty(kind, cls, like=None):
    """A new, empty dict, list or object for ``_fill`` (made first, so that a cycle
    through it can refer to it).  ``like``, the node being copied, keeps the own
    state of a subclass and serves classes whose ``__new__`` needs arguments."""
    if kind == LIST and cls is list:
        return []
    if kind == DICT and cls is dict:
        return {}
    if like is not None and kind != OBJECT:
        return copy.copy(like)
    try:
        return cls.__new__(cls)        # no __init__: frozen dataclasses, validation, ...
    except TypeError:
        pass
    try:
        return object.__new__(cls)     # past a __new__ that needs arguments
    except TypeError:
        if like is None:
            raise TypeError(f'cannot rebuild a {cls.__name__} without calling its '
                            f'constructor; mark the class @tr.leaf to keep it whole, or '
                            f'tr.register_node it') from None
        return copy.copy(like)


def _fill(new, kind, keys, values):
    """Put ``values`` into the node made by ``_empty``; returns it."""
    if kind == LIST:
        new[:] = values
    elif kind == DICT:
        if new:
            new.clear()
        if type(new) is dict:
            new.update(zip(keys, values))
        else:
            for k, v in zip(keys, values):     # the subclass's own __setitem__ (Counter,
                new[k] = v                     # OrderedDict): update() may mean otherwise
    else:
        slots = _slot_names(type(new))  # type: ignore[arg-type]  # (mypy#11470)
        d = getattr(new, '__dict__', None)
        for name, v in zip(keys, values):
            if d is not None and name not in slots:
                d[name] = v                    # bypasses a frozen dataclass's __setattr__
            else:
                object.__setattr__(new, name, v)
    return new


# A defaultdict keeps its factory through flatten/unflatten: a registered node.
register_node(collections.defaultdict,
              lambda d: (tuple(d.values()), (d.default_factory, tuple(d))),
              lambda aux, kids: collections.defaultdict(aux[0], zip(aux[1], kids)))


# --------------------------------------------------------------------------
# flatten, unflatten
# --------------------------------------------------------------------------

class ById:
    """An object compared by identity (an unhashable static: an array, a set; the
    compiler's cache keys hold a module's globals so)."""
    __slots__ = ('obj',)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is ById and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return repr(self.obj)


class _AuxTuple(tuple):
    """A registered node's aux tuple whose unhashable items were wrapped in ``ById``."""
    __slots__ = ()


def _hashable(x):
    """``x`` as part of a TreeDef: itself if hashable, else compared by identity (a
    tuple item by item, so that a fresh aux tuple holding an array still compares)."""
    if type(x) is np.ndarray:
        return ById(x)
    try:
        hash(x)
    except TypeError:
        if type(x) is tuple:
            return _AuxTuple([_hashable(v) for v in x])
        return ById(x)
    return x


def _unwrap(x):
    t = type(x)
    if t is ById:
        return x.obj
    if t is _AuxTuple:
        return tuple([_unwrap(v) for v in x])
    return x


_NONE = (STATIC, type(None), None)
_BUSY = object()                # a registered node being flattened or rebuilt


def flatten(tree: Any,
            is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    """``flatten(tree, is_leaf=None) -> (leaves, treedef)``: the leaves in walk order and
    the rest of the tree as a hashable ``TreeDef``; ``unflatten`` inverts it.

    A tied array is one leaf; a shared list, dict or object is one node.

    >>> import numpy as np, tracked as tr
    >>> w = np.ones(2)
    >>> leaves, treedef = tr.tree_util.flatten({'enc': w, 'dec': w, 'b': 0.5, 'act': 'tanh'})
    >>> len(leaves), treedef
    (2, TreeDef({'enc': *, 'dec': * (tied), 'b': *, 'act': 'tanh'}))
    >>> tr.tree_util.unflatten(treedef, [np.zeros(2), 1.5])['dec']
    array([0., 0.])
    """
    leaves: list[Any] = []
    form = _flatten(tree, is_leaf or isnumeric, leaves, {}, [0])
    return leaves, TreeDef(form, len(leaves))


def _flatten(x, is_leaf, leaves, memo, count):
    """The form of ``x``; ``memo`` maps the id of a tied leaf or of a numbered node
    seen before to (the object, kept alive; its form), ``count`` numbers the nodes."""
    if is_leaf(x):
        if _tied(x):
            hit = memo.get(id(x))
            if hit is not None:
                return hit[1]
            form: tuple[Any, ...] = (LEAF, len(leaves))
            memo[id(x)] = (x, form)
        else:
            form = (LEAF, len(leaves))
        leaves.append(x)
        return form
    t = type(x)
    kind = DICT if t is dict else LIST if t is list else TUPLE if t is tuple \
        else _class_kind(t)  # type: ignore[arg-type]  # a class is hashable (mypy#11470)
    if kind is None:
        return _NONE if x is None else (STATIC, t, _hashable(x))
    if kind == TUPLE or kind == NAMEDTUPLE:
        return (kind, t, None, tuple([_flatten(v, is_leaf, leaves, memo, count) for v in x]))
    hit = _seen(memo, x)
    if hit is not None:
        return hit
    ref = (REF, count[0])              # a shared node or a cycle: refer back to it
    count[0] += 1
    if kind == DICT:
        memo[id(x)] = (x, ref)
        form = (DICT, t, tuple(x),
                tuple([_flatten(v, is_leaf, leaves, memo, count) for v in x.values()]))
        return form if t is dict else form + _state(x)
    if kind == LIST:
        memo[id(x)] = (x, ref)
        form = (LIST, t, None, tuple([_flatten(v, is_leaf, leaves, memo, count) for v in x]))
        return form if t is list else form + _state(x)
    if kind == OBJECT:
        memo[id(x)] = (x, ref)
        names, values = _attributes(x)
        return (OBJECT, t, names,
                tuple([_flatten(v, is_leaf, leaves, memo, count) for v in values]))
    memo[id(x)] = (x, _BUSY)
    kids, aux = _REGISTERED[t][0](x)
    form = (NODE, t, _hashable(aux),
            tuple([_flatten(v, is_leaf, leaves, memo, count) for v in kids]))
    memo[id(x)] = (x, ref)
    return form


def _state(x):
    """The attributes of a dict or list subclass instance, as a 5th element of its form:
    carried along as they are (not walked, as ``fmap`` copies them), compared as statics."""
    d = getattr(x, '__dict__', None)
    return (tuple([(k, _hashable(v)) for k, v in d.items()]),) if d else ()


def _seen(memo, x):
    """What ``memo`` holds for node ``x`` seen before (its form or its copy), or None."""
    hit = memo.get(id(x))
    if hit is None:
        return None
    if hit[1] is _BUSY:
        raise ValueError(f'a cycle through a {type(x).__name__} (a registered node) cannot '
                         f'be rebuilt: rebuild needs its children first')
    return hit[1]


def unflatten(treedef: TreeDef, leaves: Sequence[Any], statics: bool = True) -> Any:
    """``unflatten(treedef, leaves, statics=True)``: the tree of ``treedef`` holding
    ``leaves``; with ``statics=False`` the static atoms become None (a gradient tree).

    >>> import numpy as np, tracked as tr
    >>> leaves, treedef = tr.tree_util.flatten([np.ones(2), 'relu', 3])
    >>> tr.tree_util.unflatten(treedef, [np.zeros(2)])
    [array([0., 0.]), 'relu', 3]
    >>> tr.tree_util.unflatten(treedef, [1.0], statics=False)
    [1.0, None, None]
    """
    form = treedef._form
    if form[0] == LEAF:
        return leaves[form[1]]
    return _unflatten(form, leaves, statics, [])


def _unflatten(d, leaves, statics, made):
    kind = d[0]
    if kind == LEAF:
        return leaves[d[1]]
    if kind == STATIC:
        if not statics:
            return None
        v = d[2]
        return v.obj if type(v) is ById else v
    if kind == REF:
        return made[d[1]]
    cls, aux, kids = d[1], d[2], d[3]
    if kind == DICT or kind == LIST:
        new: Any = {} if cls is dict else [] if cls is list else _empty(kind, cls)
        made.append(new)              # numbered as flatten numbered them: first visits
        vals = [leaves[k[1]] if k[0] == LEAF else _unflatten(k, leaves, statics, made)
                for k in kids]
        if cls is dict:
            new.update(zip(aux, vals))
            return new
        if cls is list:
            new[:] = vals
            return new
        if len(d) > 4:                # a subclass's own attributes
            new.__dict__.update((k, _unwrap(v)) for k, v in d[4])
        return _fill(new, kind, aux, vals)
    if kind == TUPLE or kind == NAMEDTUPLE:
        vals = [leaves[k[1]] if k[0] == LEAF else _unflatten(k, leaves, statics, made)
                for k in kids]
        return _rebuild(kind, cls, aux, vals)
    if kind == OBJECT:
        new = _empty(kind, cls)
        made.append(new)
        return _fill(new, kind, aux, [_unflatten(k, leaves, statics, made) for k in kids])
    k = len(made)
    made.append(_BUSY)
    vals = [_unflatten(c, leaves, statics, made) for c in kids]
    new = made[k] = _REGISTERED[cls][1](_unwrap(aux), tuple(vals))
    return new


def tuple_def(treedefs: Sequence[TreeDef]) -> TreeDef:
    """``tuple_def(treedefs)``: the ``TreeDef`` of a tuple of trees flattened one by one
    (an array in two of them is two leaves), leaves numbered in order.

    >>> import numpy as np, tracked as tr
    >>> w = np.ones(1)
    >>> defs = [tr.tree_util.flatten(a)[1] for a in ([w, w], w)]
    >>> tr.tree_util.tuple_def(defs)
    TreeDef(([*, * (tied)], *))
    """
    kids, nleaves, nrefs = [], 0, 0
    for d in treedefs:
        kids.append(_shift(d._form, nleaves, nrefs))
        nleaves += d.num_leaves
        nrefs += _count_numbered(d._form)
    return TreeDef((TUPLE, tuple, None, tuple(kids)), nleaves)


def _shift(d, dleaf, dref):
    kind = d[0]
    if kind == LEAF:
        return (LEAF, d[1] + dleaf)
    if kind == REF:
        return (REF, d[1] + dref)
    if kind == STATIC or (dleaf == 0 and dref == 0):
        return d
    return d[:3] + (tuple([_shift(k, dleaf, dref) for k in d[3]]),) + d[4:]


def _count_numbered(d):
    if d[0] in (LEAF, STATIC, REF):
        return 0
    return (d[0] in _NUMBERED) + sum(_count_numbered(k) for k in d[3])


class TreeDef:
    """The structure of a flattened tree: node types, keys and attribute names, static
    atoms, which leaves are tied and which nodes shared.  Hashable and comparable
    (statics by value, unhashable ones by identity); ``num_leaves`` leaves.

    >>> import tracked as tr
    >>> a, b = tr.tree_util.flatten({'w': 1.0}), tr.tree_util.flatten({'w': 2.0})
    >>> a[1] == b[1], hash(a[1]) == hash(b[1]), a[1].num_leaves
    (True, True, 1)
    """

    __slots__ = ('_form', 'num_leaves', '_hash')
    _form: tuple[Any, ...]
    num_leaves: int
    _hash: int | None

    def __init__(self, form: tuple[Any, ...], num_leaves: int) -> None:
        self._form = form
        self.num_leaves = num_leaves
        self._hash = None

    @property
    def form(self) -> tuple[Any, ...]:
        """The nested tuple the structure is stored as (node kinds, statics, leaf
        numbers): what generated code reads (``matcher``, the compiler's literals)."""
        return self._form

    def __eq__(self, other: object) -> bool:
        return type(other) is TreeDef and (self is other or self._form == other._form)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self._form)
        return h

    def __reduce__(self) -> tuple[Any, ...]:   # the cached hash is per process (string hashing)
        return TreeDef, (_portable(self._form), self.num_leaves)

    def __repr__(self) -> str:
        return f'TreeDef({self.format()})'

    def format(self, leaf: str = '*') -> str:
        """``treedef.format(leaf='*')``: a readable form, each leaf written ``leaf``;
        a tied leaf reads ``* (tied)``, a shared node ``<shared T>``.

        >>> import numpy as np, tracked as tr
        >>> tr.tree_util.flatten((np.ones(1), 'tanh'))[1].format('array')
        "(array, 'tanh')"
        """
        return _format(self._form, leaf, set(), [])

    def statics(self) -> list[Any]:
        """``treedef.statics()``: the static atoms, in walk order.

        >>> import numpy as np, tracked as tr
        >>> tr.tree_util.flatten({'w': np.ones(1), 'n': 3, 'act': np.tanh})[1].statics()
        [3, <ufunc 'tanh'>]
        """
        out: list[Any] = []
        _statics(self._form, out)
        return out

    def paths(self) -> list[Path]:
        """``treedef.paths()``: for each leaf, the path to its first place (see ``follow``).

        >>> import numpy as np, tracked as tr
        >>> paths = tr.tree_util.flatten({'layers': [np.ones(1), {'b': np.ones(1)}]})[1].paths()
        >>> [tr.tree_util.keystr(p) for p in paths]
        ["['layers'][0]", "['layers'][1]['b']"]
        """
        out: list[Any] = [None] * self.num_leaves
        _paths(self._form, (), out)
        return out

    def matcher(self, checks: Sequence[tuple[type, dict[Any, Any]]] | None = None,
                distinct: Sequence[Sequence[int]] | None = None
                ) -> Callable[[Any], list[Any] | None]:
        """``treedef.matcher(checks=None, distinct=None)``: a generated function
        ``match(tree) -> leaves`` for trees of exactly this structure (types, keys,
        statics, ties, shared nodes), None for any other tree; for hot paths, where a
        fallback ``flatten`` explains.

        ``checks[p]``, if given, is ``(cls, attrs)``: leaf ``p`` must be of type ``cls``
        exactly, with ``getattr(leaf, a) == v`` for each ``a, v`` in ``attrs`` (``a``
        None: the leaf itself equals ``v``).  ``distinct`` lists groups of leaf
        positions that must be distinct objects (default: all of them) among those
        checked to be arrays: an array tied where the structure has two leaves is
        another structure (its gradient is the total).

        >>> import numpy as np, tracked as tr
        >>> _, treedef = tr.tree_util.flatten({'w': np.ones(2), 'act': 'tanh'})
        >>> match = treedef.matcher([(np.ndarray, {'shape': (2,)})])
        >>> match({'w': np.zeros(2), 'act': 'tanh'}), match({'w': np.zeros(3), 'act': 'tanh'})
        ([array([0., 0.])], None)
        """
        if distinct is None:
            distinct = [range(self.num_leaves)]
        return _make_matcher(self._form, self.num_leaves, checks, distinct)


class _TypeOf:
    """A static's type in a pickled form: unpickles as ``type(value)``, so that types
    pickle cannot name (``function``, ``builtin_function_or_method``) travel too."""
    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return type, (self.value,)


def _portable(d):
    """Form ``d`` with each static's type as a ``_TypeOf`` (``TreeDef.__reduce__``)."""
    tag = d[0]
    if tag == STATIC:
        return (STATIC, _TypeOf(_unwrap(d[2])), d[2])
    if tag == LEAF or tag == REF:
        return d
    return d[:3] + (tuple([_portable(c) for c in d[3]]),) + d[4:]


def _format(d, leaf, seen, made):
    kind = d[0]
    if kind == LEAF:
        if d[1] in seen:
            return f'{leaf} (tied)'
        seen.add(d[1])
        return leaf
    if kind == STATIC:
        return repr(d[2])
    if kind == REF:
        return f'<shared {made[d[1]].__name__}>'
    cls, aux, kids = d[1], d[2], d[3]
    if kind in _NUMBERED:
        made.append(cls)
    parts = [_format(k, leaf, seen, made) for k in kids]
    name = cls.__name__
    if kind == OBJECT:
        return f'{name}(' + ', '.join(f'{n}={p}' for n, p in zip(aux, parts)) + ')'
    if kind == NODE:
        return f'{name}(' + ', '.join(parts) + ')'
    if kind == DICT:
        inner = ', '.join(f'{k!r}: {p}' for k, p in zip(aux, parts))
        return '{' + inner + '}' if cls is dict else f'{name}({{{inner}}})'
    inner = ', '.join(parts)
    if kind == LIST:
        return f'[{inner}]' if cls is list else f'{name}([{inner}])'
    if cls is tuple:
        return f'({inner}{"," if len(parts) == 1 else ""})'
    return f'{name}({inner})'


def _statics(d, out):
    kind = d[0]
    if kind == STATIC:
        v = d[2]
        out.append(v.obj if type(v) is ById else v)
    elif kind not in (LEAF, REF):
        for k in d[3]:
            _statics(k, out)


def _paths(d, path, out):
    kind = d[0]
    if kind == LEAF:
        if out[d[1]] is None:
            out[d[1]] = path
    elif kind not in (STATIC, REF):
        aux, kids = d[2], d[3]
        for i, k in enumerate(kids):
            step = (ITEM, aux[i]) if kind == DICT else (ATTR, aux[i]) if kind == OBJECT \
                else (CHILD, i) if kind == NODE else (ITEM, i)
            _paths(k, path + (step,), out)


def follow(tree: Any, path: Path) -> Any:
    """``follow(tree, path)``: the value at ``path`` (from ``TreeDef.paths``) in ``tree``;
    None below a None subtree (a gradient tree without a gradient there).

    >>> import numpy as np, tracked as tr
    >>> tree = {'layers': [np.ones(1), {'b': np.zeros(1)}]}
    >>> tr.tree_util.follow(tree, tr.tree_util.flatten(tree)[1].paths()[1])
    array([0.])
    """
    for how, key in path:
        if tree is None:
            return None
        if how == ITEM:
            tree = tree[key]
        elif how == ATTR:
            tree = getattr(tree, key)
        else:
            tree = _REGISTERED[type(tree)][0](tree)[0][key]
    return tree


def keystr(path: Path) -> str:
    """``keystr(path)``: a path written as in Python, e.g. ``['layers'][0].weight``.

    >>> import tracked as tr
    >>> tr.tree_util.keystr(((0, 'layers'), (0, 0), (1, 'weight')))
    "['layers'][0].weight"
    """
    return ''.join(f'[{k!r}]' if how == ITEM else f'.{k}' if how == ATTR
                   else f'<child {k}>' for how, k in path)


# --------------------------------------------------------------------------
# The generated matcher
# --------------------------------------------------------------------------

def _make_matcher(form, nleaves, checks, distinct):
    """Generated once per structure: a match then costs a few attribute reads per node
    and leaf instead of a generic walk (the replay path of every recorded tape)."""
    lines = ['def match(tree):', '    try:']
    consts: dict[str, Any] = {}
    counter = [0]
    seen = set()
    numbered: list[str] = []           # the variable of each numbered node, in order

    def var():
        counter[0] += 1
        return f'v{counter[0]}'

    def const(v):
        name = f'K{len(consts)}'
        consts[name] = v
        return name

    def emit(line):
        lines.append('        ' + line)

    def walk(d, expr):
        kind = d[0]
        if kind == LEAF:
            p = d[1]
            if p in seen:
                emit(f'if {expr} is not l{p}: return None')
                return
            seen.add(p)
            emit(f'l{p} = {expr}')
            if checks is not None and checks[p] is not None:
                cls, attrs = checks[p]
                cond = [f'type(l{p}) is not {const(cls)}']
                cond += [f'l{p} != {const(v)}' if a is None else f'l{p}.{a} != {const(v)}'
                         for a, v in attrs.items()]
                emit(f'if {" or ".join(cond)}: return None')
            return
        if kind == STATIC:
            v = d[2]
            if v is None:
                emit(f'if {expr} is not None: return None')
            elif type(v) is ById:
                emit(f'if {expr} is not {const(v.obj)}: return None')
            else:
                k = const(v)
                emit(f's = {expr}')
                emit(f'if s is not {k} and (type(s) is not {const(d[1])} or s != {k}): '
                     f'return None')
            return
        if kind == REF:
            emit(f'if {expr} is not {numbered[d[1]]}: return None')
            return
        cls, aux, kids = d[1], d[2], d[3]
        v = var()
        emit(f'{v} = {expr}')
        if kind in _NUMBERED:
            numbered.append(v)
        if kind == OBJECT:
            emit(f'if type({v}) is not {const(cls)}: return None')
            slots = _slot_names(cls)
            for s in slots:
                if s not in aux:           # an unset slot must stay unset
                    emit(f'if hasattr({v}, {s!r}): return None')
            in_dict = [n for n in aux if n not in slots]
            dv = var()
            if in_dict or cls.__dictoffset__:
                emit(f'{dv} = {v}.__dict__')
                emit(f'if len({dv}) != {len(in_dict)}: return None')
            for n, k in zip(aux, kids):
                walk(k, f'{dv}[{const(n)}]' if n in in_dict else f'{v}.{n}')
            return
        if kind == NODE:
            c = var()
            emit(f'if type({v}) is not {const(cls)}: return None')
            emit(f'{c}, a = {const(_REGISTERED[cls][0])}({v})')
            emit(f'if {const(_hashable)}(a) != {const(aux)}: return None')
            emit(f'{c} = tuple({c})')
            emit(f'if len({c}) != {len(kids)}: return None')
            for i, k in enumerate(kids):
                walk(k, f'{c}[{i}]')
            return
        emit(f'if type({v}) is not {const(cls)} or len({v}) != {len(kids)}: return None')
        if kind != TUPLE and kind != NAMEDTUPLE and cls is not dict and cls is not list:
            emit(f'if {const(_state)}({v}) != {const(d[4:])}: return None')
        for i, k in enumerate(kids):
            walk(k, f'{v}[{const(aux[i])}]' if kind == DICT else f'{v}[{i}]')

    walk(form, 'tree')
    for group in distinct:
        arrays = [p for p in group if p in seen and checks is not None and checks[p] is not None
                  and checks[p][0] is np.ndarray]
        if len(arrays) > 1:
            ids = ', '.join(f'id(l{p})' for p in arrays)
            emit(f'if len({{{ids}}}) != {len(arrays)}: return None')
    lines.append('    except Exception:       # a registered children() may raise anything')
    lines.append('        return None')
    lines.append('    return [' + ', '.join(f'l{p}' for p in range(nleaves)) + ']')
    ns = dict(consts)
    exec('\n'.join(lines), ns)         # generated from a recorded structure only
    return ns['match']


# --------------------------------------------------------------------------
# The walk of fmap
# --------------------------------------------------------------------------

def tree_map(fn: Callable[..., Any], tree: Any, *others: Any,
             is_leaf: Callable[[Any], bool] | None = None, statics: bool = True,
             shared: bool = True) -> Any:
    """``tree_map(fn, tree, *others)``: a new tree of the same types with ``fn(leaf,
    *leaves_of_others)`` at each leaf; static atoms kept (None with ``statics=False``).

    ``others`` are walked along ``tree`` (a None subtree there gives None leaves).
    With ``shared`` (the default) a tied leaf is mapped once and a shared node
    rebuilt once, so both stay shared; ``shared=False`` maps every occurrence.

    >>> import numpy as np, tracked as tr
    >>> tree = {'w': np.ones(2), 'n': 3}
    >>> tr.tree_util.tree_map(lambda a, b: a + b, tree, {'w': np.ones(2), 'n': 4})
    {'w': array([2., 2.]), 'n': 3}
    """
    return _map(fn, tree, others, is_leaf or isnumeric, statics, {} if shared else None)


def _map(fn, tree, others, is_leaf, statics, memo):
    if is_leaf(tree):
        if memo is not None and _tied(tree):   # mutable: tied leaves map once
            hit = memo.get(id(tree))
            if hit is not None:
                return hit[1]
            out = fn(tree, *others)
            memo[id(tree)] = (tree, out)
            return out
        return fn(tree, *others)
    kind = _kind(tree)
    if kind is None:
        return tree if statics else None
    if kind == TUPLE or kind == NAMEDTUPLE:
        # Immutable, so never cyclic by itself, and never memoised: equal tuple
        # constants may be one object in CPython, and must not be tied.
        return _rebuild(kind, type(tree), None, [
            _map(fn, v, [None if o is None else o[i] for o in others], is_leaf, statics, memo)
            for i, v in enumerate(tree)])
    if memo is not None:
        hit = _seen(memo, tree)
        if hit is not None:
            return hit
    if kind == NODE:
        if memo is not None:
            memo[id(tree)] = (tree, _BUSY)
        kids, aux = _children(tree, kind)
        get = _REGISTERED[type(tree)][0]
        other_kids = [None if o is None else tuple(get(o)[0]) for o in others]
        new = _rebuild(kind, type(tree), aux, [
            _map(fn, v, [None if o is None else o[i] for o in other_kids], is_leaf, statics,
                 memo) for i, v in enumerate(kids)])
        if memo is not None:
            memo[id(tree)] = (tree, new)
        return new
    new = _empty(kind, type(tree), tree)
    if memo is not None:
        memo[id(tree)] = (tree, new)
    if kind == LIST:
        return _fill(new, kind, None, [
            _map(fn, v, [None if o is None else o[i] for o in others], is_leaf, statics, memo)
            for i, v in enumerate(tree)])
    if kind == DICT:
        keys, vals = tuple(tree), tree.values()
        return _fill(new, kind, keys, [
            _map(fn, v, [None if o is None else o[k] for o in others], is_leaf, statics, memo)
            for k, v in zip(keys, vals)])
    keys, vals = _attributes(tree)
    return _fill(new, kind, keys, [
        _map(fn, v, [None if o is None else getattr(o, k) for o in others], is_leaf, statics,
             memo) for k, v in zip(keys, vals)])


def leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """``leaves(tree, is_leaf=None)``: the leaves in walk order, a tied array once.

    >>> import numpy as np, tracked as tr
    >>> w = np.ones(1)
    >>> tr.tree_util.leaves({'a': w, 'b': [w, 2.0], 'n': 3})
    [array([1.]), 2.0]
    """
    out: list[Any] = []
    _map(out.append, tree, (), is_leaf or isnumeric, True, {})
    return out
