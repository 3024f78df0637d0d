"""Recording: the instructions a traced function and its traced backward pass execute.

A ``Recorder`` owns the lowest trace level of a recording (``level``).  Inputs are
leaves at that level; differentiated inputs are wrapped in leaves at higher levels.
Every operation reaches the lowest level (``dispatch.apply`` recurses into lower
levels), where ``dispatch.apply`` hands it to ``Recorder.record``: one ``Instr`` per
operation, holding the primitive's *forward* function and its arguments with
``Ref`` in place of recorded values.  The backward pass is run on higher levels
with the pullbacks seeing lowest-level values, so it is recorded here as ordinary
forward operations: the program is forward functions only, and the derivative
rules exist once, in the registry.

Value-dependent Python (``bool``, ``float``, ``int``, ``.item()``, boolean masks)
reaches ``Recorder.concretize`` and becomes a ``Guard``; non-differentiable
functions (comparisons, argmax, ...) reach ``Recorder.nondiff`` and become
instructions too, so that a replay recomputes masks and indices from new inputs.
A ``@tr.rule`` whose forward cannot run on recorded values is recorded as opaque
instructions (``name[opaque]``, ``name[opaque].pullback[i]``: see custom.py) that
call the user's function and its fresh pullback again on every replay.
"""
from typing import Any

import numpy as np

from ..registry import NONDIFF, Primitive, display_name
from ..tape import new_node
from .. import box
from ..box import make, plain
from ..boxes import Tracked
from ..dispatch import SELECT, box_outputs, real_parents
from .guards import Guard, concrete_value, user_frame

__all__ = ['Ref', 'Instr', 'Recorder', 'instr_text']


class OuterTrackedError(TypeError):
    """A recorded function reached a value tracked by an enclosing differentiation."""


# --------------------------------------------------------------------------
# Instructions
# --------------------------------------------------------------------------

class Ref:
    """An argument that is the result of instruction ``i``."""

    __slots__ = ('i',)

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return f'%{self.i}'


class Instr:
    """One recorded operation: ``value = fn(*args, **kwargs)`` with ``Ref`` arguments.

    ``prim`` is the registry's ``Primitive`` (None for inputs); the compiler reads
    its ``kernel`` field; ``name`` is for printing only.
    """

    __slots__ = ('i', 'kind', 'fn', 'prim', 'name', 'args', 'kwargs', 'value', 'pos')

    def __init__(self, i, kind, fn, prim, name, args, kwargs, value, pos=None):
        self.i = i
        self.kind = kind          # 'input', 'op' (a primitive), 'nondiff'
        self.fn = fn
        self.prim = prim
        self.name = name
        self.args = args          # tuple; Ref anywhere at top level or inside a tuple/list
        self.kwargs = kwargs
        self.value = value        # the value computed while recording
        self.pos = pos            # inputs: the position among the flattened argument leaves

    def __repr__(self):
        return f'<{instr_text(self)}>'

    def __reduce__(self):
        # ``fn`` is ``prim.fn`` (a lambda for some rules): it travels as the primitive,
        # which pickles as a reference into the registry (``Primitive.__reduce__``).
        fn = None if self.prim is not None and self.fn is self.prim.fn else self.fn
        return _instr, (self.i, self.kind, fn, self.prim, self.name, self.args, self.kwargs,
                        self.value, self.pos)

    @property
    def shape(self):
        v = self.value            # a tuple for a multi-output primitive: one per output
        return tuple(np.shape(x) for x in v) if isinstance(v, tuple) else np.shape(v)

    @property
    def dtype(self):
        return getattr(self.value, 'dtype', None)

    def refs(self):
        """Indices of the instructions this one reads."""
        out = []
        for a in self.args:
            if type(a) is Ref:
                out.append(a.i)
            elif type(a) in (tuple, list):
                out.extend(b.i for b in a if type(b) is Ref)
        return out


def _instr(i, kind, fn, prim, *rest):
    """An unpickled ``Instr`` (see ``Instr.__reduce__``)."""
    return Instr(i, kind, prim.fn if fn is None and prim is not None else fn, prim, *rest)


def instr_text(ins):
    """``%i = name(args, kwargs)``; keywords starting with ``_`` (a rule's per-call
    state) are internal and not shown."""
    if ins.kind == 'input':
        return f'%{ins.i} = input[{ins.pos}]'
    args = ', '.join(fmt_arg(a) for a in ins.args)
    kw = ''.join(f', {k}={fmt_arg(v)}' for k, v in ins.kwargs.items() if not k.startswith('_'))
    if not args:
        kw = kw[2:]
    return f'%{ins.i} = {ins.name}({args}{kw})'


def fmt_arg(a):
    """An instruction argument as ``instr_text`` shows it: ``%3``, ``1:4``, a small array."""
    if type(a) is Ref:
        return repr(a)
    if type(a) in (tuple, list):
        inner = ', '.join(fmt_arg(b) for b in a)
        return f'({inner})' if type(a) is tuple else f'[{inner}]'
    if isinstance(a, np.ndarray):
        if a.size <= 4:
            return np.array2string(a, separator=',').replace('\n', '')
        return f'<const {a.dtype}{list(a.shape)}>'
    if isinstance(a, np.generic):
        return repr(a.item())
    if isinstance(a, slice):
        start = '' if a.start is None else fmt_arg(a.start)
        stop = '' if a.stop is None else fmt_arg(a.stop)
        return f'{start}:{stop}' + (f':{fmt_arg(a.step)}' if a.step is not None else '')
    if callable(a) and hasattr(a, '__name__'):
        return a.__name__
    return repr(a)


# --------------------------------------------------------------------------
# The recorder
# --------------------------------------------------------------------------

_NONDIFF_PRIMS: dict[Any, Primitive] = {}


def _nondiff_prim(fun):
    """The primitive recorded for non-differentiable ``fun``: no pullbacks, and the
    scalar template ``NONDIFF`` holds for it as its kernel (comparisons fuse)."""
    prim = _NONDIFF_PRIMS.get(fun)
    if prim is None:
        kernel = NONDIFF.get(fun)
        prim = _NONDIFF_PRIMS[fun] = Primitive(
            fun, (), name=display_name(fun) if callable(fun) else str(fun),
            kernel=kernel if isinstance(kernel, str) else None)
        prim.ref = (_nondiff_prim, (fun,))          # pickles as this lookup
    return prim


class Recorder:
    """Collects the instructions and guards of one recording (see the module docstring)."""

    def __init__(self, level):
        self.level = level
        self.instrs = []
        self.guards = []
        self.by_node = {}         # Node at ``level`` -> instruction index
        self.by_obj = {}          # id(recorded value) -> instruction index (values that leak out)

    # -- creating instructions ------------------------------------------------
    def _add(self, kind, fn, prim, name, args, kwargs, value, node, pos=None):
        """Append an ``Instr``; map ``node`` (and an array value's id) to its index."""
        i = len(self.instrs)
        self.instrs.append(Instr(i, kind, fn, prim, name, args, kwargs, value, pos))
        self.by_node[node] = i
        if isinstance(value, (np.ndarray, np.generic)) and type(value) is not np.bool_:
            self.by_obj[id(value)] = i
        return i

    def input(self, value, pos):
        """A leaf at the recording level for flattened argument ``pos``.

        The leaf holds a copy: ``f`` may also hold the caller's array itself as a
        constant (a closure over it), which must stay a constant on replay, while the
        leaf's value (``tr.data(x)`` inside ``f``) must follow the input.  An integer
        scalar is the int it holds in every Python use (``TrackedInt``): its value is
        guarded.
        """
        value = np.array(value, copy=True)
        if value.ndim == 0:
            value = value[()]
        node = new_node(None, None, None, value, (), self.level)
        i = self._add('input', None, None, f'input {pos}', (), {}, value, node, pos)
        if value.ndim == 0 and value.dtype.kind in 'iu':
            self.guards.append(Guard(i, 'int-argument', value, f'argument leaf {pos}'))
        return make(value, node)

    def _arg(self, a):
        """(template entry, plain value) for one argument at the recording level."""
        if isinstance(a, Tracked):
            n = box.node(a)
            if n.level == self.level:
                return Ref(self.by_node[n]), box.unboxed(a)
            # Tracked by an outer differentiation (a closure over its variable): the tape
            # would freeze it as a constant and the outer gradient would silently miss it.
            raise OuterTrackedError(
                'f uses a value tracked by an enclosing differentiation (a closure over '
                'an outer variable); a recorded tape would replay it as a constant. Pass '
                'it to f as an argument, or use the eager tape (tr.gradient without '
                'AutoCompiled) inside the outer differentiation.')
        if type(a) in (tuple, list):
            parts = [self._arg(b) for b in a]
            if any(type(t) is Ref for t, _ in parts):
                return type(a)(t for t, _ in parts), type(a)(v for _, v in parts)
            return a, type(a)(v for _, v in parts)
        if isinstance(a, (np.ndarray, np.generic)):
            i = self.by_obj.get(id(a))
            if i is not None:                                 # a recorded value that leaked out
                return Ref(i), a
        return a, a

    def record(self, prim, args, kwargs):
        """``dispatch.apply`` at the recording level: compute, record, return a tracked value."""
        if kwargs:
            for v in kwargs.values():
                if isinstance(v, Tracked):
                    raise TypeError(f'{prim.name}: pass tracked values as positional '
                                    f'arguments, not as keyword arguments')
        tmpl, vals, parents = [], [], []
        nv = len(prim.vjps)
        for pos, a in enumerate(args):
            t, v = self._arg(a)
            tmpl.append(t)
            vals.append(v)
            if type(t) is Ref and pos < nv and prim.vjps[pos] is not None \
                    and isinstance(a, Tracked):
                parents.append((pos, box.node(a)))
        ans = prim.fn(*vals, **kwargs)
        if prim.multi and isinstance(ans, tuple):
            return self._record_outputs(prim, tmpl, vals, kwargs, ans, parents)
        if not isinstance(ans, (np.ndarray, np.generic)):
            ans = np.asarray(ans)[()]
        node = new_node(prim, vals, kwargs, ans, tuple(parents), self.level)
        if ans.dtype.kind == 'c':
            node.real_parents = real_parents(parents, vals)
        self._add('op', prim.fn, prim, prim.name, tuple(tmpl), kwargs, ans, node)
        return make(ans, node)

    def _record_outputs(self, prim, tmpl, vals, kwargs, ans, parents):
        """A multi-output primitive: one instruction with a tuple value, and one
        ``values.SELECT`` instruction per differentiable output."""
        node = new_node(prim, vals, kwargs, tuple(ans), tuple(parents), self.level)
        node.shape = None
        if any(getattr(getattr(a, 'dtype', None), 'kind', None) == 'c' for a in ans):
            node.real_parents = real_parents(parents, vals)
        i = self._add('op', prim.fn, prim, prim.name, tuple(tmpl), kwargs, tuple(ans), node)

        def on_output(k, sel, value):
            self._add('op', SELECT.fn, SELECT, f'{prim.name}[{k}]', (Ref(i), k, len(ans)),
                      {}, value, sel)
        return box_outputs(ans, node, self.level, on_output)

    def _strip(self, a):
        """``a`` seen at the recording level (higher levels unwrapped)."""
        while isinstance(a, Tracked) and box.level(a) > self.level:
            a = box.unboxed(a)
        if type(a) in (tuple, list):
            return type(a)(self._strip(b) for b in a)
        return a

    def depends(self, args):
        """Whether any argument is a recorded value (at or above the recording level)."""
        for a in args:
            if isinstance(a, Tracked) and box.level(a) >= self.level:
                return True
            if type(a) in (tuple, list) and self.depends(a):
                return True
        return False

    def nondiff(self, fun, args, kwargs):
        """A non-differentiable function of recorded values: an instruction, no gradient."""
        if not self.depends(args):
            return fun(*plain(args), **plain(kwargs))
        kwargs = plain(kwargs)
        tmpl, vals = zip(*[self._arg(self._strip(a)) for a in args])
        res = fun(*vals, **kwargs)
        prim = _nondiff_prim(fun)
        name = prim.name
        if isinstance(res, (np.ndarray, np.generic)) and res.dtype.kind in 'biuf':
            node = new_node(prim, list(vals), kwargs, res, (), self.level)
            self._add('nondiff', fun, prim, name, tuple(tmpl), kwargs, res, node)
            return make(res, node)
        if fun in (np.shape, np.ndim, np.size):
            return res                                        # static: the signature fixes it
        # Any other result (tuples of index arrays, Python objects): its value is a guard.
        node = new_node(prim, list(vals), kwargs, res, (), self.level)
        i = self._add('nondiff', fun, prim, name, tuple(tmpl), kwargs, res, node)
        self.guards.append(Guard(i, 'value', res, user_frame()))
        return res

    # -- guards ------------------------------------------------------------------
    def concretize(self, value, kind, plain_value):
        """Python read a recorded value (``bool``, ``float``, an index...): a guard."""
        v = self._strip(value)
        if not (isinstance(v, Tracked) and box.level(v) == self.level):
            return                                            # a constant of this recording
        i = self.by_node[box.node(v)]
        if kind == 'index-array':
            # Used as an index: it stays a recorded value (returned to ``plain_index``),
            # so the indexing instruction and its adjoint read the new index on replay.
            # A boolean mask also decides a shape: guard its count.
            if getattr(plain_value, 'dtype', None) is not None and plain_value.dtype.kind == 'b':
                self.guards.append(Guard(i, 'mask-count', int(np.count_nonzero(plain_value)),
                                         user_frame()))
            return v
        if kind == 'bool':
            recorded = bool(plain_value)
        else:
            recorded = concrete_value(kind, plain_value)
        self.guards.append(Guard(i, kind, recorded, user_frame()))

    # -- outputs -----------------------------------------------------------------
    def output(self, y):
        """An output spec for ``y``: ``Ref`` if recorded, else the constant itself."""
        return self._arg(self._strip(y))[0]
