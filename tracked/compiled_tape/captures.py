"""What a function captures, as ``AutoCompiled`` keys and feeds its tapes.

A recording depends on ``f``'s code and on every value the code reads besides its
arguments: its closure cells, its defaults and the globals it loads (its own code's
and that of the functions and comprehensions it defines; not those of functions it
calls).  ``capture(f)`` splits them in two:

- *static* values (ints, bools, strings, None, functions, modules, classes) are part
  of the key: another value, another tape;
- the others are *dynamic*: the tape takes them as one more argument.  An array or a
  float captured as such is an input, read afresh at every call; in a captured list,
  dict or object (a model, a batch tuple) the arrays are inputs and the rest -- numbers
  included, as constants of NumPy calls often are -- is structure, compared by value
  (``Captured``).  So a new batch in a new closure gives that batch's gradient, and
  the tape keeps no closure (hence no batch) alive.

``Rebound`` calls the code with the captured values given as that argument (tracked
placeholders while recording).  Objects with no Python code of their own (a callable
instance, a ``functools.partial``) are keyed by identity, their captures unseen.
"""
import builtins
import dis
import types

import numpy as np

from ..tree_util import ById, flatten, register_node, unflatten
from ..boxes import Tracked
from .trees import TrackedArgumentError, is_input

__all__ = ['capture', 'Rebound', 'Captured', 'global_names']

_STATIC = frozenset([int, bool, str, bytes, type(None), types.FunctionType,
                     types.BuiltinFunctionType, types.ModuleType, type, np.ufunc])
_LOADS = ('LOAD_GLOBAL', 'LOAD_NAME', 'LOAD_FROM_DICT_OR_GLOBALS')
_NAMES: dict[int, tuple[types.CodeType, tuple[str, ...]]] = {}   # id(code) -> (code, names)
_MISSING = object()                    # a global not defined (yet): static
_EMPTY = object()                      # an empty closure cell: static
_BUILTINS = vars(builtins)


def global_names(code):
    """The names ``code`` (and the code objects it defines) loads as globals, once each.

    >>> import numpy as np
    >>> global_names((lambda x: np.sum([abs(v) for v in x])).__code__)
    ('np', 'abs')
    """
    hit = _NAMES.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    found: dict[str, None] = {}
    todo = [code]
    while todo:
        c = todo.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in _LOADS:
                found.setdefault(ins.argval)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    if len(_NAMES) > 4096:             # code made afresh again and again (exec): start over
        _NAMES.clear()
    _NAMES[id(code)] = (code, tuple(found))      # holds code: its id is not reused
    return tuple(found)


def capture(f):
    """``capture(f) -> (key, dynamic, recipe)``: ``key`` (hashable) names ``f``'s code
    and static captures; ``dynamic`` is the tuple of the other captured values, empty
    when there are none (``f`` can then be recorded as it is); ``recipe`` is what
    ``Rebound`` needs to call ``f``'s code with other values.

    >>> import numpy as np
    >>> make = lambda d: (lambda w: np.sum(w * d))
    >>> k1, dyn1, _ = capture(make(np.ones(2)))
    >>> k2, dyn2, _ = capture(make(np.zeros(2)))
    >>> k1 == k2, dyn2
    (True, (array([0., 0.]),))
    """
    t = type(f)
    if t is types.FunctionType:
        fn = f
    elif t is types.MethodType:
        fn = f.__func__
    else:
        return ('object', f), (), None
    code = fn.__code__
    names = global_names(code)
    # the captured values: closure cells, defaults, keyword defaults, globals read, and
    # the instance of a bound method
    cells = fn.__closure__
    defaults = fn.__defaults__
    kw = fn.__kwdefaults__
    values = _cells(cells) if cells else []
    if defaults:
        values.extend(defaults)
    if kw:
        values.append(kw)
    g = fn.__globals__
    for n in names:
        v = g.get(n, _MISSING)
        values.append(_BUILTINS.get(n, _MISSING) if v is _MISSING else v)
    if t is types.MethodType:
        values.append(f.__self__)
    statics = []
    dynamic = []
    for v in values:
        if type(v) in _STATIC or v is _MISSING or v is _EMPTY:
            statics.append(v)
        else:
            statics.append(_Dyn)
            dynamic.append(_dynamic(v))
    layout = (len(cells) if cells else 0, len(defaults) if defaults else 0, 1 if kw else 0,
              names, t is types.MethodType)
    key_statics = tuple(statics)
    return (code, ById(g), layout, key_statics), tuple(dynamic), (fn, layout, key_statics)


def _cells(cells):
    """The contents of closure ``cells`` (``_EMPTY`` for an empty one)."""
    out = []
    for c in cells or ():
        try:
            out.append(c.cell_contents)
        except ValueError:
            out.append(_EMPTY)
    return out


def _dynamic(v):
    """A dynamic capture as the tape takes it: an array or a number as it is, anything
    else as a ``Captured`` holding its arrays (a tracked value raises:
    ``TrackedArgumentError``, for the eager tape)."""
    if type(v) is np.ndarray or type(v) is float or isinstance(v, np.generic):
        return v
    return Captured(*flatten(v, _array))


def _array(x):
    if type(x) is np.ndarray:
        return is_input(x)
    if isinstance(x, Tracked):
        raise TrackedArgumentError('f captures a tracked value')
    return False


class Captured:
    """A captured list, dict, object or other tree, as a tape's argument: its arrays are
    the children (inputs of the tape), the rest is its structure (``treedef``, static:
    its numbers compared by value), and it is rebuilt whole for ``f`` while recording.

    >>> import numpy as np
    >>> c = Captured(*flatten({'a': np.ones(2), 'b': [0.5, 'x']}, _array))
    >>> len(c.arrays), unflatten(c.treedef, c.arrays)['b']
    (1, [0.5, 'x'])
    """

    __slots__ = ('arrays', 'treedef')

    def __init__(self, arrays, treedef):
        self.arrays = tuple(arrays)
        self.treedef = treedef


register_node(Captured, lambda c: (c.arrays, c.treedef),
              lambda treedef, arrays: unflatten(treedef, arrays))


class _Dyn:
    """The place of a dynamic value among the statics of a key."""


class Rebound:
    """``Rebound(recipe)(*args, dynamic)``: ``f``'s code called on ``args`` with
    ``dynamic`` in place of its dynamic captures (``capture``).  It holds the code, the
    globals and the static captures, never ``f`` (whose cells hold the batch).

    >>> import numpy as np
    >>> f = (lambda d: (lambda w: float(np.sum(w * d))))(np.ones(2))
    >>> _, dyn, recipe = capture(f)
    >>> Rebound(recipe)(np.array([1.0, 2.0]), (np.array([10.0, 100.0]),))
    210.0
    """

    def __init__(self, recipe):
        fn, self.layout, self.statics = recipe
        self.code, self.globals = fn.__code__, fn.__globals__
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__

    def __call__(self, *given):
        """Call the code on ``given[:-1]`` with the captures ``given[-1]`` in place."""
        *args, dynamic = given
        it = iter(dynamic)
        values = [next(it) if s is _Dyn else s for s in self.statics]
        nc, nd, nk, names, method = self.layout
        cells = tuple(types.CellType() if v is _EMPTY else types.CellType(v)
                      for v in values[:nc])
        defaults = tuple(values[nc:nc + nd])
        rest = values[nc + nd:]
        kw = rest[0] if nk else None
        gl = rest[nk:nk + len(names)]
        g = self.globals
        if names:
            g = dict(g)                # a copy: the module's own globals stay as they are
            g.update((n, v) for n, v in zip(names, gl) if v is not _MISSING)
        h = types.FunctionType(self.code, g, self.__name__, defaults or None, cells or None)
        h.__kwdefaults__ = kw
        if method:
            return types.MethodType(h, rest[-1])(*args)
        return h(*args)

    def __repr__(self):
        return f'<{self.__name__}: its code with the captured values of the last argument>'
