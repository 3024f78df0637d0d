"""The arguments of a recorded tape as leaves and structure, on tracked/tree_util.py.

Each argument is flattened on its own (as ``tr.gradient`` treats arguments): an
array that occurs twice in one argument is one leaf (tied weights get the total
gradient, shared in both places), while the same array passed as two arguments is
two leaves.  The structure of a call is the tuple of its arguments' ``TreeDef``s,
hashable (``AutoCompiled``'s cache key) and compared on replay.

Leaves (the inputs of a tape, ``is_input``) are decided by the calling convention,
``arguments.tape_input``: the leaves ``tr.gradient`` differentiates, plus bool arrays
(inputs whose values may change; never differentiated, so their gradient is None, as
in ``tr.gradient``).  A Python ``complex`` leaf is held as ``np.complex128`` (the tape's
inputs are typed), a Python int outside ``wrt`` is a constant of the tape (a size or
an index), checked on every replay (``tapes.py``).  Everything else (None, bools,
strings, functions, ``@tr.leaf`` objects, arrays of strings) is static: part of the
structure, compared by value (by identity when unhashable) on replay.  A tracked value
is refused, and so are ``tr.Const``/``tr.Duplicated`` (taken by ``tr.gradient`` only).
"""
import numpy as np

from ..arguments import refuse_annotation, tape_input
from ..tree_util import DICT, LEAF, LIST, STATIC, TUPLE, flatten, unflatten, keystr
from ..boxes import Tracked

__all__ = ['TrackedArgumentError', 'is_input', 'flatten_args', 'unflatten_args', 'arg_leaves',
           'describe', 'leaf_path', 'is_one_leaf', 'tree_literal']


class TrackedArgumentError(TypeError):
    """A tracked value among the arguments of a recorded tape."""


def is_input(x):
    """``is_input(x)``: whether ``x`` is a leaf (an input) of a recorded tape,
    ``arguments.tape_input``; raises ``TrackedArgumentError`` for a tracked value.

    >>> import numpy as np
    >>> [is_input(v) for v in (np.ones(2, bool), 3, True, 1j, np.complex64(1j), 'a')]
    [True, True, False, True, True, False]
    """
    if type(x) is not np.ndarray and isinstance(x, Tracked):
        raise TrackedArgumentError('a recorded tape takes plain arrays, not tracked '
                                   'values (tr.data(x) gives the value)')
    return tape_input(x)


_ARRAY_DEF = flatten(np.zeros(1), is_input)[1]      # an argument that is one array


def flatten_args(args):
    """``flatten_args(args) -> (leaves, treedefs)``: the leaves of the argument tuple in
    walk order and one ``TreeDef`` per argument (leaves numbered within it).

    >>> import numpy as np
    >>> w = np.ones(2)
    >>> leaves, defs = flatten_args(({'a': w, 'b': w, 'n': 3}, w))
    >>> len(leaves), describe(defs)
    (3, "({'a': array, 'b': array (tied), 'n': array}, array)")
    """
    leaves = []
    defs = []
    for a in args:
        if type(a) is np.ndarray and a.dtype.kind in 'fiubc':   # the common case
            leaves.append(a)
            defs.append(_ARRAY_DEF)
        else:
            refuse_annotation(a, 'a recorded tape')
            ls, d = flatten(a, is_input)
            if complex in map(type, ls):      # typed inputs: a Python complex as NumPy's
                ls = [np.complex128(x) if type(x) is complex else x for x in ls]
            leaves.extend(ls)
            defs.append(d)
    return leaves, tuple(defs)


def unflatten_args(treedefs, leaves, statics=True, only=None):
    """The argument tuple of ``treedefs`` holding ``leaves`` (``tree_util.unflatten``);
    arguments whose positions are not in ``only`` (if given) are None.

    >>> import numpy as np
    >>> leaves, defs = flatten_args(([np.ones(1), 'tanh'], np.ones(2)))
    >>> unflatten_args(defs, [1.0, 2.0]), unflatten_args(defs, [1.0, 2.0], False, only=(0,))
    (([1.0, 'tanh'], 2.0), ([1.0, None], None))
    """
    out = []
    start = 0
    for a, d in enumerate(treedefs):
        n = d.num_leaves
        out.append(unflatten(d, leaves[start:start + n], statics)
                   if only is None or a in only else None)
        start += n
    return tuple(out)


def arg_leaves(treedefs):
    """For each argument, the positions of its leaves in the flat list.

    >>> import numpy as np
    >>> arg_leaves(flatten_args(([np.ones(1), 2.0], np.ones(2)))[1])
    [range(0, 2), range(2, 3)]
    """
    out = []
    start = 0
    for d in treedefs:
        out.append(range(start, start + d.num_leaves))
        start += d.num_leaves
    return out


def describe(treedefs):
    """A readable structure of the arguments, for error messages.

    >>> import numpy as np
    >>> layer = [np.ones(1)]
    >>> describe(flatten_args(([layer, layer], 'relu'))[1])
    "([[array], <shared list>], 'relu')"
    """
    inner = ', '.join(d.format('array') for d in treedefs)
    return f'({inner}{"," if len(treedefs) == 1 else ""})'


def leaf_path(treedefs, pos):
    """Where leaf ``pos`` sits, for error messages.

    >>> import numpy as np
    >>> leaf_path(flatten_args((np.ones(1), {'W': [np.ones(1), np.ones(2)]}))[1], 2)
    "argument 1['W'][1]"
    """
    for a, (d, where) in enumerate(zip(treedefs, arg_leaves(treedefs))):
        if pos in where:
            return f'argument {a}{keystr(d.paths()[pos - where.start])}'
    return f'leaf {pos}'


def is_one_leaf(treedef):
    """Whether an argument's ``treedef`` is a single leaf (an array or a number).

    >>> import numpy as np
    >>> [is_one_leaf(d) for d in flatten_args((np.ones(2), 1.5, [np.ones(1)]))[1]]
    [True, True, False]
    """
    return treedef == _ARRAY_DEF


def tree_literal(treedef, names):
    """A Python expression building a gradient tree of ``treedef`` (statics None) from
    the expressions ``names`` of its leaves; None for structures other than leaves,
    statics and plain dicts (of str or int keys), lists and tuples (calls.py).

    >>> import numpy as np
    >>> tree_literal(flatten_args(({'w': np.ones(1), 'act': 'tanh'},))[1][0], ['g0'])
    "{'w': g0, 'act': None}"
    """
    return _literal(treedef.form, names)


def _literal(form, names):
    """``tree_literal`` of a TreeDef's form."""
    kind = form[0]
    if kind == LEAF:
        return names[form[1]]
    if kind == STATIC:
        return 'None'
    if kind not in (DICT, LIST, TUPLE) or form[1] not in (dict, list, tuple):
        return None
    kids = [_literal(k, names) for k in form[3]]
    if any(k is None for k in kids):
        return None
    if kind == DICT:
        if not all(type(key) in (str, int) for key in form[2]):
            return None
        return '{' + ', '.join(f'{key!r}: {k}' for key, k in zip(form[2], kids)) + '}'
    if kind == LIST:
        return '[' + ', '.join(kids) + ']'
    return '(' + ''.join(k + ', ' for k in kids) + ')'
