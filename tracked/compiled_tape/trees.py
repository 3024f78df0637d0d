"""Flattening argument trees into array leaves and a hashable structure, and back.

A minimal tree walk of its own (tracked/functors.py offers ``fmap`` but no
flattening into a leaf list): dicts, lists, tuples, named tuples, dataclasses and
ordinary objects with a ``__dict__`` are walked; NumPy arrays, NumPy scalars and
Python floats are leaves; everything else (None, bools, ints, strings, functions)
is static and part of the structure, compared by value on replay.  An array that
occurs twice is one leaf (tied weights get one gradient, shared in both places),
and that sharing is part of the structure too.
"""
import numpy as np

from ..values import Tracked

__all__ = ['flatten', 'unflatten', 'describe']

_LEAF = 'A'
_STATIC = 'S'
_SKIP_TYPES = (type, type(len), type(lambda: 0), type(np))


def _is_leaf(x):
    if isinstance(x, np.ndarray):
        return x.dtype.kind in 'fiub'
    if isinstance(x, np.generic):
        return x.dtype.kind in 'fiu'
    return type(x) is float or type(x) is int


def flatten(args):
    """``flatten(tree) -> (leaves, treedef)``: array leaves in walk order, each once."""
    if type(args) is tuple and all(type(a) is np.ndarray for a in args) and args:
        ids = [id(a) for a in args]
        if len(set(ids)) == len(ids):      # the common case: distinct plain arrays
            return list(args), ('tuple-of-arrays', len(args))
    leaves, seen = [], {}
    return leaves, _flatten(args, leaves, seen, set())


def _flatten(x, leaves, seen, active):
    if isinstance(x, Tracked):
        raise TypeError('a recorded tape takes plain arrays, not tracked values '
                        '(tr.data(x) gives the value)')
    if _is_leaf(x):
        key = id(x)
        pos = seen.get(key)
        if pos is None:
            pos = seen[key] = len(leaves)
            leaves.append(x)
        return (_LEAF, pos)
    t = type(x)
    if t in (list, tuple) or (isinstance(x, tuple) and hasattr(x, '_fields')):
        return (t, None, tuple(_flatten(v, leaves, seen, active) for v in x))
    if t is dict:
        keys = tuple(x)
        return (t, keys, tuple(_flatten(x[k], leaves, seen, active) for k in keys))
    if (hasattr(x, '__dict__') and not isinstance(x, _SKIP_TYPES)
            and not getattr(t, '__tracked_leaf__', False) and id(x) not in active):
        active.add(id(x))
        keys = tuple(vars(x))
        out = (t, keys, tuple(_flatten(vars(x)[k], leaves, seen, active) for k in keys))
        active.discard(id(x))
        return ('obj',) + out
    try:
        hash(x)
        return (_STATIC, x)
    except TypeError:
        return (_STATIC, ('id', id(x)))


def unflatten(treedef, leaves, static=True):
    """Rebuild a tree of ``treedef`` with ``leaves``; statics become None unless ``static``."""
    if treedef[0] == 'tuple-of-arrays':
        return tuple(leaves)
    return _unflatten(treedef, leaves, static)


def _unflatten(d, leaves, static):
    tag = d[0]
    if tag == _LEAF:
        return leaves[d[1]]
    if tag == _STATIC:
        v = d[1]
        return (v if not (type(v) is tuple and len(v) == 2 and v[0] == 'id') else None) \
            if static else None
    if tag == 'obj':
        _, t, keys, kids = d
        obj = object.__new__(t)
        obj.__dict__.update(zip(keys, (_unflatten(k, leaves, static) for k in kids)))
        return obj
    t, keys, kids = d
    vals = [_unflatten(k, leaves, static) for k in kids]
    if t is dict:
        return dict(zip(keys, vals))
    if t is list:
        return vals
    if t is tuple:
        return tuple(vals)
    return t(*vals)                        # named tuple


def top_level_leaves(treedef, nargs):
    """For each top-level argument, the leaf positions inside it."""
    if treedef[0] == 'tuple-of-arrays':
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
    elif tag == _STATIC:
        return
    else:
        for k in d[-1]:
            _collect(k, acc)


def arg_treedefs(treedef, nargs):
    """The structure of each top-level argument."""
    if treedef[0] == 'tuple-of-arrays':
        return [(_LEAF, i) for i in range(nargs)]
    return list(treedef[2])


def describe(treedef):
    """A short readable form of a structure, for error messages."""
    if treedef[0] == 'tuple-of-arrays':
        return '(' + ', '.join('array' for _ in range(treedef[1])) + ')'
    return _describe(treedef)


def _describe(d):
    tag = d[0]
    if tag == _LEAF:
        return 'array'
    if tag == _STATIC:
        return repr(d[1])
    if tag == 'obj':
        _, t, keys, kids = d
        return f'{t.__name__}(' + ', '.join(f'{k}={_describe(v)}' for k, v in zip(keys, kids)) + ')'
    t, keys, kids = d
    if t is dict:
        return '{' + ', '.join(f'{k!r}: {_describe(v)}' for k, v in zip(keys, kids)) + '}'
    inner = ', '.join(_describe(v) for v in kids)
    if t is list:
        return f'[{inner}]'
    if t is tuple:
        return f'({inner}{"," if len(kids) == 1 else ""})'
    return f'{t.__name__}({inner})'


def normalise_treedef(treedef, nargs):
    """The general form of the fast path's structure, so both compare equal."""
    if treedef[0] == 'tuple-of-arrays':
        return (tuple, None, tuple((_LEAF, i) for i in range(nargs)))
    return treedef


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
    ``dtype``).  Generated once per tape: a replay's argument check then costs a few
    attribute reads per leaf instead of a generic tree walk.
    """
    lines = ['def check(tree):']
    consts = {'ndarray': np.ndarray}
    counter = [0]
    n = len(leaf_checks)
    seen = set()

    def var():
        counter[0] += 1
        return f'v{counter[0]}'

    def const(v):
        name = f'K{len(consts)}'
        consts[name] = v
        return name

    def walk(node, expr, ind):
        pad = '    ' * ind
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
        if node is None:
            return
        if t is dict:
            v = var()
            lines.append(f'{pad}{v} = {expr}')
            lines.append(f'{pad}if type({v}) is not dict or len({v}) != {len(node)}: return None')
            for k, kid in node.items():
                walk(kid, f'{v}[{const(k)}]', ind)
            return
        if t in (list, tuple) or (isinstance(node, tuple) and hasattr(node, '_fields')):
            v = var()
            lines.append(f'{pad}{v} = {expr}')
            lines.append(f'{pad}if type({v}) is not {const(t)} or len({v}) != {len(node)}: '
                         f'return None')
            for k, kid in enumerate(node):
                walk(kid, f'{v}[{k}]', ind)
            return
        if hasattr(node, '__dict__') and not isinstance(node, _SKIP_TYPES) and \
                not getattr(t, '__tracked_leaf__', False):
            v = var()
            lines.append(f'{pad}{v} = {expr}')
            lines.append(f'{pad}if type({v}) is not {const(t)}: return None')
            lines.append(f'{pad}{v} = {v}.__dict__')
            lines.append(f'{pad}if len({v}) != {len(vars(node))}: return None')
            for k, kid in vars(node).items():
                lines.append(f'{pad}if {const(k)} not in {v}: return None')
                walk(kid, f'{v}[{const(k)}]', ind)
            return
        if isinstance(node, (str, bool, int)) or node is None:
            lines.append(f'{pad}if {expr} != {const(node)}: return None')
        # other statics (functions, objects): not compared on the fast path

    lines.append('    try:')
    walk(template, 'tree', 2)
    lines.append('    except (KeyError, IndexError, TypeError):')
    lines.append('        return None')
    lines.append('    return [' + ', '.join(f'l{p}' if p in seen else 'None' for p in range(n)) + ']')
    ns = dict(consts)
    exec('\n'.join(lines), ns)       # generated from the recorded structure only
    return ns['check']
