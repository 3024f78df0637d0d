"""Models as trees: ``fmap``, ``@leaf``, and the tree versions of ``param``/``data``/``grad``.

A model is any tree of dicts, lists, tuples, named tuples, dataclasses and ordinary
objects (their ``__dict__`` and ``__slots__``) whose leaves are arrays, as in Flux's
Functors.jl.  One walk, ``_map``, serves ``fmap``, the structural gradients of
``tracked.api`` and the helpers below: it rebuilds every container with its own
type (frozen dataclasses, named tuples and ``__slots__`` objects included) and maps
a mutable object that occurs twice only once, so tied arrays and shared layers stay
shared in the result.  ``children`` and ``rebuild`` are its two halves as functions
(how a node is taken apart and made back, from the helpers ``_kind``, ``_attributes``,
``_empty``, ``_fill``); tracked/compiled_tape/trees.py flattens argument trees with
the same helpers, so recorded tapes walk exactly the trees ``fmap`` walks.
"""
import copy
import enum
import functools

import numpy as np

from . import values as _values
from .values import Tracked

__all__ = ['fmap', 'leaf', 'isnumeric', 'param', 'data', 'grad', 'zero_grad', 'istracked']


# --------------------------------------------------------------------------
# What is a leaf, what is walked
# --------------------------------------------------------------------------

def leaf(cls):
    """``@leaf`` on a class: the walk treats its instances as opaque (not walked).

    >>> import numpy as np, tracked as tr
    >>> @tr.leaf
    ... class Config:
    ...     def __init__(self): self.table = np.ones(2)
    >>> cfg = Config()
    >>> tr.fmap(lambda a: a * 2, {'w': np.ones(1), 'cfg': cfg})['cfg'] is cfg
    True
    """
    cls.__tracked_leaf__ = True
    _walked_class.cache_clear()
    return cls


def isnumeric(x):
    """``isnumeric(x)``: whether ``fmap`` maps ``x`` by default: a tracked value, an
    array of numbers (not bool), or a float.  Integers are sizes and counts, and are kept.

    >>> import numpy as np, tracked as tr
    >>> [tr.functors.isnumeric(v) for v in (np.ones(2), 1.5, 3, 'a', np.array([True]))]
    [True, True, False, False, False]
    """
    if isinstance(x, (np.ndarray, Tracked)):
        return x.dtype.kind in 'fiuc'
    return isinstance(x, (float, np.floating, complex, np.complexfloating))


_ATOMS = (str, bytes, int, float, complex, type(None), np.generic, np.ndarray, Tracked,
          enum.Enum, functools.partial, np.ufunc, np.dtype, type, range, slice)


def _kind(x):
    """How the walk takes ``x`` apart: 'dict', 'list', 'tuple', 'namedtuple', 'object' or None."""
    if isinstance(x, dict):
        return 'dict'
    if isinstance(x, list):
        return 'list'
    if isinstance(x, tuple):
        return 'namedtuple' if hasattr(type(x), '_fields') else 'tuple'
    walked = _walked_class(type(x))
    if walked is None:
        return None
    return 'object' if walked or hasattr(x, '__dict__') else None


@functools.lru_cache(maxsize=1024)
def _walked_class(cls):
    """None if instances of ``cls`` are never walked; True if they are (slots); False if
    only those with a ``__dict__`` are.  Per class, so cached (``leaf`` clears it)."""
    if issubclass(cls, _ATOMS) or getattr(cls, '__tracked_leaf__', False):
        return None
    module = cls.__module__ or ''
    if module == 'builtins' or module.startswith('numpy'):
        return None        # functions, methods, modules, builtin objects: not models
    return bool(_slot_names(cls))


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
    """An object's attributes as (name, value) pairs: ``__slots__`` then ``__dict__``."""
    slots = _slot_names(type(x))
    d = getattr(x, '__dict__', None)
    if not slots:
        return list(d.items()) if d else []
    out = [(n, getattr(x, n)) for n in slots if hasattr(x, n)]
    if d:
        out.extend((k, v) for k, v in d.items() if k not in slots)
    return out


def _child(other, kind, key):
    """The child of a parallel tree ``other`` at ``key`` (None below a missing subtree)."""
    if other is None:
        return None
    if kind == 'object':
        return getattr(other, key)
    return other[key]


def children(x):
    """``children(x) -> (kind, keys, values)``: how the walk takes a node apart, or None
    for a leaf or an atom (arrays, numbers, strings, functions, ``@leaf`` objects).

    ``kind`` is 'dict', 'list', 'tuple', 'namedtuple' or 'object'; ``keys`` the dict's
    keys or the object's attribute names (``__slots__`` then ``__dict__``), None for
    sequences; ``values`` the children in walk order.  ``rebuild(kind, type(x), keys,
    values)`` makes a node of the same type back.

    >>> import numpy as np, tracked as tr
    >>> tr.functors.children({'w': 1.0, 'act': 'tanh'})
    ('dict', ('w', 'act'), (1.0, 'tanh'))
    >>> tr.functors.children(np.ones(2)) is None
    True
    """
    kind = _kind(x)
    if kind is None:
        return None
    if kind == 'dict':
        return kind, tuple(x), tuple(x.values())
    if kind == 'object':
        attrs = _attributes(x)
        return kind, tuple(n for n, _ in attrs), tuple(v for _, v in attrs)
    return kind, None, tuple(x)


def rebuild(kind, cls, keys, values):
    """``rebuild(kind, cls, keys, values)``: a new node of type ``cls`` with these children,
    the inverse of ``children``; objects are made without calling ``__init__`` (frozen
    dataclasses, validating constructors), as ``fmap`` makes them.

    >>> import tracked as tr
    >>> from collections import namedtuple
    >>> P = namedtuple('P', 'a b')
    >>> kind, keys, values = tr.functors.children(P(1.0, 'x'))
    >>> tr.functors.rebuild(kind, P, keys, (2.0, values[1]))
    P(a=2.0, b='x')
    """
    if kind in ('tuple', 'namedtuple'):
        return _tuple(kind, cls, values)
    return _fill(_empty(kind, cls), kind, keys, values)


def _tuple(kind, cls, values):
    if kind == 'namedtuple':
        return cls._make(values)
    return tuple(values) if cls is tuple else cls(values)


def _empty(kind, cls, like=None):
    """A new, empty node of ``cls`` for ``_fill`` (made first, so that a cycle through it
    can refer to it).  ``like``, the node being copied, keeps the own state of a
    subclass (a defaultdict's factory) and serves classes whose ``__new__`` needs
    arguments."""
    if kind == 'list' and cls is list:
        return []
    if kind == 'dict' and cls is dict:
        return {}
    if like is not None and kind != 'object':
        return copy.copy(like)
    try:
        return cls.__new__(cls)        # no __init__: frozen dataclasses, validation, ...
    except TypeError:
        if like is None:
            raise TypeError(f'cannot rebuild a {cls.__name__} without calling its '
                            f'constructor; mark the class @tr.leaf to keep it whole') from None
        return copy.copy(like)


def _fill(new, kind, keys, values):
    """Put ``values`` into the node made by ``_empty``; returns it."""
    if kind == 'list':
        new[:] = values
    elif kind == 'dict':
        if new:
            new.clear()
        if type(new) is dict:
            new.update(zip(keys, values))
        else:
            for k, v in zip(keys, values):     # the subclass's own __setitem__ (Counter,
                new[k] = v                     # OrderedDict): update() may mean otherwise
    else:
        slots = _slot_names(type(new))
        d = getattr(new, '__dict__', None)
        for name, v in zip(keys, values):
            if d is not None and name not in slots:
                d[name] = v                    # bypasses a frozen dataclass's __setattr__
            else:
                object.__setattr__(new, name, v)
    return new


# --------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------

def _map(fn, tree, others, is_leaf, other_fn, memo):
    """Rebuild ``tree`` with ``fn(leaf, *other_leaves)`` at leaves, ``other_fn`` at atoms."""
    if is_leaf(tree):
        if isinstance(tree, (np.ndarray, Tracked)):   # mutable: tied arrays map once
            hit = memo.get(id(tree))
            if hit is not None:
                return hit[1]
            out = fn(tree, *others)
            memo[id(tree)] = (tree, out)
            return out
        return fn(tree, *others)
    kind = _kind(tree)
    if kind is None:
        return other_fn(tree)
    if kind in ('tuple', 'namedtuple'):
        # Immutable, so never cyclic by itself, and never memoised: equal tuple
        # constants may be one object in CPython, and must not be tied.
        return _tuple(kind, type(tree), [
            _map(fn, v, [_child(o, kind, i) for o in others], is_leaf, other_fn, memo)
            for i, v in enumerate(tree)])
    hit = memo.get(id(tree))
    if hit is not None:
        return hit[1]
    new = _empty(kind, type(tree), tree)
    memo[id(tree)] = (tree, new)
    if kind == 'list':
        keys, vals = None, tree
    elif kind == 'dict':
        keys, vals = list(tree), list(tree.values())
    else:
        attrs = _attributes(tree)
        keys, vals = [n for n, _ in attrs], [v for _, v in attrs]
    if keys is None:
        vals = [_map(fn, v, [_child(o, kind, i) for o in others], is_leaf, other_fn, memo)
                for i, v in enumerate(vals)]
    else:
        vals = [_map(fn, v, [_child(o, kind, k) for o in others], is_leaf, other_fn, memo)
                for k, v in zip(keys, vals)]
    return _fill(new, kind, keys, vals)


def _keep(x):
    return x


def _none(x):
    return None


def fmap(fn, tree, *others, exclude=None):
    """``fmap(fn, tree)``: a new tree of the same types with ``fn`` applied to each array leaf.

    The walk enters dicts, lists, tuples, named tuples, dataclasses and objects
    (their ``__dict__`` and ``__slots__``); classes marked ``@tr.leaf`` are kept whole.
    An array that occurs twice is mapped once and the result is shared in both
    places.  ``exclude(x)`` says what a leaf is (default: arrays of numbers, tracked
    values, floats); other atoms (strings, ints, functions, None) are kept.  With
    ``others``, ``fn(leaf, *leaves_of_others)`` walks trees of the same structure
    together (a None subtree in ``others`` gives None leaves).

    >>> import numpy as np, tracked as tr
    >>> model = {'W': np.ones((2, 2)), 'b': np.zeros(2), 'act': 'tanh'}
    >>> tr.fmap(lambda a: a + 1, model)['b'], tr.fmap(lambda a: a + 1, model)['act']
    (array([1., 1.]), 'tanh')
    """
    return _map(fn, tree, others, exclude or isnumeric, _keep, {})


def structure_map(fn, tree, is_leaf, *others):
    """Like ``fmap``, but atoms that are not leaves become None (the shape of a gradient)."""
    return _map(fn, tree, others, is_leaf, _none, {})


def leaves(tree, is_leaf=None):
    """The leaves of ``tree`` in walk order, a tied array once."""
    out = []
    _map(out.append, tree, (), is_leaf or isnumeric, _keep, {})
    return out


# --------------------------------------------------------------------------
# Tree versions of param, data, grad, zero_grad, istracked
# --------------------------------------------------------------------------

def _is_single(x):
    return isinstance(x, (np.ndarray, Tracked, int, float, np.generic)) or _kind(x) is None


def _is_number_list(x):
    return type(x) in (list, tuple) and bool(x) and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in x)


def param(x):
    """``param(x)``: a tracked leaf for an array or number (a list of numbers is an
    array); for a model, ``fmap(param, model)``: every array and float leaf a parameter.

    >>> import numpy as np, tracked as tr
    >>> m = tr.param({'W': np.ones((2, 2)), 'n': 3})
    >>> tr.istracked(m['W']), m['n']
    (True, 3)
    >>> tr.param([1, 2]).shape
    (2,)
    """
    if _is_single(x) or _is_number_list(x):
        return _values.param(x)
    return fmap(_values.param, x)


def _data1(x):
    return x._value if isinstance(x, Tracked) else x


def data(x):
    """``data(x)``: the value of a tracked value, or a model with every tracked leaf
    replaced by its value (one level of tracking is removed).

    >>> import numpy as np, tracked as tr
    >>> tr.data(tr.param(np.array([1.0, 2.0])))
    array([1., 2.])
    >>> tr.data({'w': tr.param(2.0), 'name': 'dense'})
    {'w': np.float64(2.0), 'name': 'dense'}
    """
    if isinstance(x, Tracked):
        return x._value
    if _is_single(x):
        return x
    return fmap(_data1, x, exclude=_is_tracked)


def _is_tracked(x):
    return isinstance(x, Tracked)


def _grad1(x):
    return x.grad if isinstance(x, Tracked) else None


def grad(x):
    """``grad(x)``: the accumulated gradient of a leaf made by ``param``, or the gradient
    tree of a model (None where there is no gradient buffer).

    >>> import numpy as np, tracked as tr
    >>> m = tr.param({'w': np.array([1.0, 2.0]), 'act': 'relu'})
    >>> tr.back(np.sum(m['w'] ** 2)); tr.grad(m)
    {'w': array([2., 4.]), 'act': None}
    """
    if _is_single(x):
        return _grad1(x)
    return structure_map(_grad1, x, isnumeric)


def _zero1(x):
    if isinstance(x, Tracked):
        node = x._node
        if node.prim is None and isinstance(node.grad, np.ndarray):
            node.grad[...] = 0
    return x


def zero_grad(x):
    """``zero_grad(x)``: set the gradient buffers of a leaf or of a whole model to zero; returns ``x``.

    >>> import numpy as np, tracked as tr
    >>> m = [tr.param(np.ones(2))]
    >>> tr.back(np.sum(m[0] * 3)); tr.zero_grad(m)[0].grad
    array([0., 0.])
    """
    if _is_single(x):
        return _zero1(x)
    for v in leaves(x, _is_tracked):
        _zero1(v)
    return x


def istracked(x):
    """``istracked(x)``: whether ``x`` is a tracked value, or a model holds one.

    >>> import numpy as np, tracked as tr
    >>> tr.istracked(tr.param(1.0)), tr.istracked([np.ones(2), tr.param(1.0)]), tr.istracked(1.0)
    (True, True, False)
    """
    if _is_single(x):
        return isinstance(x, Tracked)
    return bool(leaves(x, _is_tracked))
