"""Flattening argument trees into array leaves and a hashable structure, and back.

The tree protocol is the one of tracked/functors.py (``fmap``, ``tr.gradient``), through
the helpers behind ``functors.children`` and ``functors.rebuild``: ``_kind`` says
which nodes are walked (dicts, lists, tuples, named tuples, dataclasses, objects
with a ``__dict__`` or ``__slots__``; not ``@tr.leaf`` classes, functions, ufuncs,
...), ``_attributes`` lists an object's children, ``_empty``/``_fill``/``_tuple``
make a node back.  Plain dicts, lists and tuples are handled inline (the same
result, without the calls: these walks are on the path of every AutoCompiled call).
What this module adds is the flat form a recorded tape needs: a list of leaves, a
hashable ``treedef`` that a replay compares with, and a generated checker for the
hot path.

Leaves (the inputs of a tape) are the values ``tr.gradient`` differentiates, as in
``api._differentiable``: arrays and NumPy scalars of numbers, Python floats and ints.
Intended differences, because a tape's inputs are typed and fixed once recorded:

- bool arrays are leaves too (inputs whose values may change; never differentiated,
  so their gradient is None, as in ``tr.gradient``);
- Python ints are leaves, but ``tapes.py`` makes one outside ``wrt`` a constant of
  the tape (a size or an index), checked on every replay;
- only the exact types ``float`` and ``int`` are leaves among Python numbers (a
  subclass such as ``IntEnum`` is static); Python ``complex`` is static too, complex
  arrays and NumPy complex scalars are leaves; any of them in ``wrt`` is refused
  (``complex_leaves``) as ``tr.gradient`` refuses them.

Everything else that is not walked (None, bools, strings, functions, ``@tr.leaf``
objects, arrays of strings) is static: part of the structure, compared by value
(by identity when unhashable) on replay.

As in ``tr.gradient``, an array that occurs twice in one argument is one leaf (tied
weights get the total gradient, shared in both places), while the same array
passed as two arguments is two leaves; a list, dict or object that occurs twice in
one argument (a shared layer, a cycle) is walked once and stays shared.

Structure nodes: ``('A', pos)`` a leaf, ``('S', value)`` a static, ``(type, keys,
kids)`` a dict (keys) or a sequence (keys None), ``('obj', type, names, kids)`` an
object, ``('ref', k, ())`` the k-th list/dict/object of the same argument again,
``('args', None, kids)`` the argument tuple.
"""
import numpy as np

from ..functors import _kind, _attributes, _slot_names, _empty, _fill, _tuple
from ..values import Tracked

__all__ = ['flatten', 'unflatten', 'describe']

_LEAF = 'A'
_STATIC = 'S'
_OBJ = 'obj'
_REF = 'ref'
_ARGS = 'args'
_FAST = 'tuple-of-arrays'
_ARRAY_KINDS = frozenset('fiubc')      # arrays that are inputs: numbers and bools
_SCALAR_KINDS = frozenset('fiuc')      # NumPy scalars that are inputs: numbers
_NONE = (_STATIC, None)


class TrackedArgumentError(TypeError):
    """A tracked value among the arguments of a recorded tape."""


class _ById:
    """An unhashable static (a set, an array of strings): compared by identity."""
    __slots__ = ('obj',)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _ById and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return repr(self.obj)


def _static(x):
    try:
        hash(x)
    except TypeError:
        return (_STATIC, _ById(x))
    return (_STATIC, x)


def is_leaf(x):
    """Whether ``x`` is a leaf (an input) of a recorded tape; see the module docstring.
    (``_flatten`` decides the same inline, type by type, for speed; tests hold them equal.)"""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in _ARRAY_KINDS
    if isinstance(x, np.generic):
        return x.dtype.kind in _SCALAR_KINDS
    return type(x) is float or type(x) is int


# --------------------------------------------------------------------------
# flatten, unflatten
# --------------------------------------------------------------------------

def flatten(args):
    """``flatten(args) -> (leaves, treedef)``: the leaves of the argument tuple ``args`` in
    walk order and a hashable structure; a tied array is one leaf within an argument.

    A non-tuple ``args`` is flattened as one argument.
    """
    if type(args) is not tuple:
        leaves = []
        return leaves, _flatten(args, leaves, {}, [0])
    for a in args:                         # the common case: plain arrays of numbers
        if type(a) is not np.ndarray or a.dtype.kind not in _ARRAY_KINDS:
            break
    else:
        if args:
            return list(args), (_FAST, len(args))
    leaves = []
    return leaves, (_ARGS, None, tuple([_flatten(a, leaves, {}, [0]) for a in args]))


def _flatten(x, leaves, memo, count):
    """The structure of one argument; ``memo`` (per argument) maps the id of an array or
    of a list/dict/object seen before to its node, ``count`` numbers the latter."""
    t = type(x)
    if t is float or t is int:
        leaves.append(x)
        return (_LEAF, len(leaves) - 1)
    if t is np.ndarray or isinstance(x, np.ndarray):
        if x.dtype.kind not in _ARRAY_KINDS:
            return _static(x)
        node = memo.get(id(x))
        if node is None:
            node = memo[id(x)] = (_LEAF, len(leaves))
            leaves.append(x)
        return node
    if x is None:
        return _NONE
    if t is tuple:
        return (t, None, tuple([_flatten(v, leaves, memo, count) for v in x]))
    kind = 'dict' if t is dict else 'list' if t is list else _kind(x)
    if kind is None:
        if isinstance(x, np.generic) and x.dtype.kind in _SCALAR_KINDS:
            leaves.append(x)
            return (_LEAF, len(leaves) - 1)
        if isinstance(x, Tracked):
            raise TrackedArgumentError('a recorded tape takes plain arrays, not tracked '
                                       'values (tr.data(x) gives the value)')
        return _static(x)
    if kind == 'namedtuple' or kind == 'tuple':
        return (t, None, tuple([_flatten(v, leaves, memo, count) for v in x]))
    node = memo.get(id(x))
    if node is not None:
        return node
    memo[id(x)] = (_REF, count[0], ())     # a shared node or a cycle: refer back to it
    count[0] += 1
    if kind == 'dict':
        return (t, tuple(x), tuple([_flatten(v, leaves, memo, count) for v in x.values()]))
    if kind == 'list':
        return (t, None, tuple([_flatten(v, leaves, memo, count) for v in x]))
    attrs = _attributes(x)
    return (_OBJ, t, tuple([n for n, _ in attrs]),
            tuple([_flatten(v, leaves, memo, count) for _, v in attrs]))


def unflatten(treedef, leaves, static=True):
    """Rebuild a tree of ``treedef`` with ``leaves``; statics become None unless ``static``."""
    tag = treedef[0]
    if tag == _LEAF:                       # an argument that is one array: the common case
        return leaves[treedef[1]]
    if tag == _FAST:
        return tuple(leaves)
    if tag == _ARGS:
        return tuple([_unflatten(d, leaves, static, []) for d in treedef[2]])
    return _unflatten(treedef, leaves, static, [])


def _unflatten(d, leaves, static, made):
    tag = d[0]
    if tag == _LEAF:
        return leaves[d[1]]
    if tag is dict or tag is list:         # plain containers inline; the rest: functors
        new = {} if tag is dict else []
        made.append(new)                   # numbered as flatten numbered it: first visits
        vals = [leaves[k[1]] if k[0] == _LEAF else _unflatten(k, leaves, static, made)
                for k in d[2]]
        if tag is dict:
            new.update(zip(d[1], vals))
        else:
            new[:] = vals
        return new
    if tag is tuple:
        return tuple([leaves[k[1]] if k[0] == _LEAF else _unflatten(k, leaves, static, made)
                      for k in d[2]])
    if tag == _STATIC:
        if not static:
            return None
        v = d[1]
        return v.obj if type(v) is _ById else v
    if tag == _REF:
        return made[d[1]]
    if tag == _OBJ:
        _, t, keys, kids = d
        kind = 'object'
    else:
        t, keys, kids = d
        kind = 'dict' if issubclass(t, dict) else 'list' if issubclass(t, list) else (
            'namedtuple' if hasattr(t, '_fields') else 'tuple')
    if kind == 'tuple' or kind == 'namedtuple':
        return _tuple(kind, t, [_unflatten(k, leaves, static, made) for k in kids])
    new = _empty(kind, t)
    made.append(new)
    return _fill(new, kind, keys, [_unflatten(k, leaves, static, made) for k in kids])


def top_level_leaves(treedef, nargs):
    """For each top-level argument, the leaf positions inside it."""
    if treedef[0] == _FAST:
        return [[i] for i in range(nargs)]
    out = []
    for kid in treedef[2]:
        acc = []
        _collect(kid, acc)
        out.append(acc)
    return out


def _collect(d, acc):
    tag = d[0]
    if tag == _LEAF:
        if d[1] not in acc:
            acc.append(d[1])
    elif tag != _STATIC:
        for k in d[-1]:
            _collect(k, acc)


def arg_treedefs(treedef, nargs):
    """The structure of each top-level argument."""
    if treedef[0] == _FAST:
        return [(_LEAF, i) for i in range(nargs)]
    return list(treedef[2])


def normalise_treedef(treedef, nargs):
    """The general form of the fast path's structure, so both compare equal."""
    if treedef[0] == _FAST:
        return (_ARGS, None, tuple((_LEAF, i) for i in range(nargs)))
    return treedef


def complex_leaves(treedef, leaves):
    """Whether a structure holds a complex leaf or a static Python complex (refused in wrt)."""
    tag = treedef[0]
    if tag == _FAST:
        return any(np.iscomplexobj(x) for x in leaves)
    if tag == _LEAF:
        return np.iscomplexobj(leaves[treedef[1]])
    if tag == _STATIC:
        return type(treedef[1]) is complex
    return any(complex_leaves(k, leaves) for k in treedef[-1])


# --------------------------------------------------------------------------
# describe: a readable structure for error messages
# --------------------------------------------------------------------------

def describe(treedef):
    """A short readable form of a structure, for error messages: a tied array reads
    ``array (tied)``, a shared list/dict/object ``<shared T>``."""
    tag = treedef[0]
    if tag == _FAST:
        return '(' + ', '.join('array' for _ in range(treedef[1])) + ')'
    seen = set()
    if tag == _ARGS:
        kids = treedef[2]
        inner = ', '.join(_describe(k, seen, []) for k in kids)
        return f'({inner}{"," if len(kids) == 1 else ""})'
    return _describe(treedef, seen, [])


def _describe(d, seen, made):
    tag = d[0]
    if tag == _LEAF:
        if d[1] in seen:
            return 'array (tied)'
        seen.add(d[1])
        return 'array'
    if tag == _STATIC:
        return repr(d[1])
    if tag == _REF:
        return f'<shared {made[d[1]].__name__}>'
    if tag == _OBJ:
        _, t, keys, kids = d
        made.append(t)
        return f'{t.__name__}(' + ', '.join(
            f'{k}={_describe(v, seen, made)}' for k, v in zip(keys, kids)) + ')'
    t, keys, kids = d
    if keys is not None:
        made.append(t)
        inner = ', '.join(f'{k!r}: {_describe(v, seen, made)}' for k, v in zip(keys, kids))
        return ('{' + inner + '}') if t is dict else f'{t.__name__}({{{inner}}})'
    if issubclass(t, list):
        made.append(t)
    inner = ', '.join(_describe(v, seen, made) for v in kids)
    if t is list:
        return f'[{inner}]'
    if issubclass(t, list):
        return f'{t.__name__}([{inner}])'
    if t is tuple:
        return f'({inner}{"," if len(kids) == 1 else ""})'
    return f'{t.__name__}({inner})'


# --------------------------------------------------------------------------
# Fast checkers: a generated function walking a known structure
# --------------------------------------------------------------------------

class _Marker:
    __slots__ = ('pos',)

    def __init__(self, pos):
        self.pos = pos


def markers(n):
    return [_Marker(p) for p in range(n)]


def make_checker(template, leaf_checks):
    """A function ``check(tree) -> list of leaves`` for trees shaped like ``template`` (a
    tree whose leaves are markers from ``markers``), or None when ``tree`` differs.

    ``leaf_checks[pos]`` is (kind, shape, dtype, value): kind 'array', 'float', 'int'
    (``value`` not None: it must equal it), or 'generic' (a NumPy scalar type in
    ``dtype``).  Statics are compared as ``flatten`` compares them (by value, by
    identity when unhashable), and a list/dict/object shared in ``template`` must be
    shared in ``tree``.  Generated once per tape: a replay's argument check then costs
    a few attribute reads per leaf instead of a generic tree walk; a None from it
    sends the caller to ``flatten``, which decides and explains.
    """
    lines = ['def check(tree):']
    consts = {'ndarray': np.ndarray}
    counter = [0]
    n = len(leaf_checks)
    seen = set()
    shared = {}                         # id of a template list/dict/object -> its variable

    def var():
        counter[0] += 1
        return f'v{counter[0]}'

    def const(v):
        name = f'K{len(consts)}'
        consts[name] = v
        return name

    def walk(node, expr, pad):
        if isinstance(node, _Marker):
            p = node.pos
            if p in seen:
                lines.append(f'{pad}if {expr} is not l{p}: return None')
                return
            seen.add(p)
            kind, shape, dtype, value = leaf_checks[p]
            lines.append(f'{pad}l{p} = {expr}')
            if kind == 'array':
                lines.append(f'{pad}if type(l{p}) is not ndarray or l{p}.shape != {shape!r} '
                             f'or l{p}.dtype != {const(dtype)}: return None')
            elif kind == 'float':
                lines.append(f'{pad}if type(l{p}) is not float: return None')
            elif kind == 'int':
                cond = f'type(l{p}) is not int'
                if value is not None:
                    cond += f' or l{p} != {value!r}'
                lines.append(f'{pad}if {cond}: return None')
            else:
                lines.append(f'{pad}if type(l{p}) is not {const(dtype)}: return None')
            return
        t = type(node)
        kind = 'dict' if t is dict else 'list' if t is list else 'tuple' if t is tuple \
            else _kind(node)
        if kind is None:                 # a static
            if node is None:
                lines.append(f'{pad}if {expr} is not None: return None')
                return
            try:
                hash(node)
            except TypeError:
                lines.append(f'{pad}if {expr} is not {const(node)}: return None')
                return
            k = const(node)
            lines.append(f'{pad}v = {expr}')
            lines.append(f'{pad}if v is not {k} and (type(v) is not {const(t)} or v != {k}): '
                         f'return None')
            return
        if kind in ('dict', 'list', 'object'):
            prev = shared.get(id(node))
            if prev is not None:
                lines.append(f'{pad}if {expr} is not {prev}: return None')
                return
        v = var()
        lines.append(f'{pad}{v} = {expr}')
        if kind in ('dict', 'list', 'object'):
            shared[id(node)] = v
        if kind == 'object':
            lines.append(f'{pad}if type({v}) is not {const(t)}: return None')
        else:
            lines.append(f'{pad}if type({v}) is not {const(t)} or len({v}) != {len(node)}: '
                         f'return None')
        if kind == 'dict':
            for k, kid in node.items():
                walk(kid, f'{v}[{const(k)}]', pad)
        elif kind != 'object':
            for k, kid in enumerate(node):
                walk(kid, f'{v}[{k}]', pad)
        else:
            slots = _slot_names(t)
            names = [name for name, _ in _attributes(node)]
            for s in slots:
                if s not in names:       # an unset slot must stay unset
                    lines.append(f'{pad}if hasattr({v}, {s!r}): return None')
            in_dict = [name for name in names if name not in slots]
            if hasattr(node, '__dict__'):
                d = var()
                lines.append(f'{pad}{d} = {v}.__dict__')
                lines.append(f'{pad}if len({d}) != {len(in_dict)}: return None')
            for name, kid in _attributes(node):
                walk(kid, f'{d}[{const(name)}]' if name in in_dict else f'{v}.{name}', pad)

    lines.append('    try:')
    walk(template, 'tree', '        ')
    lines.append('    except (KeyError, IndexError, TypeError, AttributeError, ValueError):')
    lines.append('        return None')
    lines.append('    return [' + ', '.join(f'l{p}' if p in seen else 'None' for p in range(n)) + ']')
    ns = dict(consts)
    exec('\n'.join(lines), ns)       # generated from the recorded structure only
    return ns['check']
