"""Tracked values: ``TrackedArray`` and ``TrackedReal``, NumPy dispatch, ``param``/``back``.

A tracked value is a box holding its value (``_value``) and its tape ``Node``.
Operators and NumPy's protocols (``__array_ufunc__``, ``__array_function__``) route
every call to ``apply``, which looks the callable up in the rule registry and
records one node.  Nothing here lists NumPy functions: that is the rules' job.
"""
from __future__ import annotations

import dis
import functools
import inspect
import math
import operator
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from . import registry
from .conversions import conversion_error, library_caller, numba_type
from . import tape as _tape
from .tape import (Cotangents, Node, SparseCotangent, backward, new_node, recording_paused,
                   active_recorder)

__all__ = ['Tracked', 'TrackedArray', 'TrackedReal', 'param', 'back', 'istracked',
           'apply', 'call', 'value', 'register_foreign_operand', 'foreign_operation']

# Typing: operations on tracked values return ``Any``.  The result is a tracked value
# where the operation is recorded, and a plain one where it is not (inside
# ``ignore_derivatives``, a non-differentiable result such as a comparison, a value on
# no tape); NumPy's stubs, which type ``np.sin(x)`` by ``x``'s ``__array__``, cannot
# say either.  ``Primitive`` and tape ``Node`` fields are typed in their modules.


# --------------------------------------------------------------------------
# Recording one operation
# --------------------------------------------------------------------------

def apply(prim: registry.Primitive, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Run primitive ``prim`` on ``args`` and record it at the highest level among them."""
    # The hot path of the eager tape: every line here costs on each operation.
    level = -1
    top = None
    lists = False
    for a in args:
        if isinstance(a, Tracked):
            lv = a._node.level
            if lv > level:
                level = lv
                top = a
        elif type(a) in _SEQUENCES:
            lists = True
    if prim.index_args:                 # indexing: parts of an index may be recorded values
        lv = _index_level(prim.index_args, args)
        if lv > level:
            level = lv
    if level < 0:
        return prim.fn(*args, **kwargs)
    if lists:                           # before every path: eager, forward, a recorder
        args = array_operands(prim, args)
    if top is not None and top._forward:    # the highest level carries tangents (forward.py)
        return forward_apply(prim, args, kwargs, level)
    if _tape.special_threads:
        if recording_paused():
            return prim.fn(*[plain(a) for a in args], **kwargs)
        rec = active_recorder()
        if rec is not None and rec.level == level:  # a GradientTape records this level
            out = rec.record(prim, args, kwargs)
            if prim.view:
                _view_hooks.note(out, args[0], (prim, args[1:], kwargs))
            return out
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, Tracked):
                raise TypeError(f'{prim.name}: pass tracked values as positional arguments, '
                                f'not as keyword arguments')
    vals = []
    parents = []
    nested = False
    vjps = prim.vjps
    nv = len(vjps)
    mask = 0                # the parents' positions, for the save plan (registry.plan_key)
    i = 0
    for a in args:
        if isinstance(a, Tracked):
            n = a._node
            if n.level == level:
                a = a._value
                if isinstance(a, Tracked):
                    nested = True
                if i < nv and vjps[i] is not None:
                    parents.append((i, n))
                    mask |= 1 << i
            else:
                nested = True
        vals.append(a)
        i += 1
    if prim.index_args and _index_level(prim.index_args, args, below=level) >= 0:
        nested = True               # computed at the index's own (lower) level too
    # A custom rule (``direct``) runs its own forward on lower-level tracked values, so
    # that the pullback it returns closes over them and is itself differentiable.
    ans = apply(prim, vals, kwargs) if nested and not prim.direct else prim.fn(*vals, **kwargs)
    if not parents:
        return ans
    if i > _MAX_ARGS:
        registry.plan_key(parents, i)           # raises the error for too many arguments
    if prim.multi and isinstance(ans, tuple):
        return record_outputs(prim, vals, kwargs, ans, parents, mask << _KEY_SHIFT | i, level)
    out = record(prim, vals, kwargs, ans, parents, mask << _KEY_SHIFT | i, level)
    if prim.view:                   # NumPy's aliasing, kept by the boxes (views.py)
        _view_hooks.note(out, args[0], (prim, args[1:], kwargs))
    return out


def array_operands(prim: registry.Primitive, args: Sequence[Any]) -> Sequence[Any]:
    """``args`` with each plain list or tuple at an array-operand position of ``prim``
    (one with a pullback, not an index or a declared sequence: see ``Primitive``)
    converted to an array, so that pullbacks, saved arguments and recorded
    instructions see an array (once: a replay reads the array).  Where ``_operand``
    keeps a list, the forward gets it as given and raises as it did before."""
    vjps = prim.vjps
    nv = len(vjps)
    out = None
    for p, a in enumerate(args):
        if type(a) in _SEQUENCES and p < nv and vjps[p] is not None \
                and p not in prim.index_args and p not in prim.sequences:
            arr = _operand(a)
            if arr is not a:
                if out is None:
                    out = list(args)
                out[p] = arr
    return args if out is None else tuple(out)


def composite_operands(operands: Any, args: Sequence[Any], kwargs: dict[str, Any]
                       ) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of a composite with plain lists and tuples at its array-operand
    parameters (``registry.OPERANDS``) converted as ``array_operands`` does."""
    named, rest = operands
    args, kwargs = list(args), dict(kwargs)
    for name, pos in named:
        if pos is not None and pos < len(args):
            args[pos] = _operand(args[pos])
        elif name in kwargs:
            kwargs[name] = _operand(kwargs[name])
    if rest is not None:
        for p in range(rest, len(args)):
            args[p] = _operand(args[p])
    return args, kwargs


def _operand(a: Any) -> Any:
    """A plain list or tuple of numbers as an array; anything else (a list holding
    tracked values, a ragged one, non-numbers) as given, for the forward to raise or
    stack as NumPy does."""
    if type(a) not in _SEQUENCES or holds_tracked(a):
        return a
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError):
        return a
    return arr if arr.dtype.kind in 'biufc' else a


def forward_apply(prim: registry.Primitive, args: Sequence[Any], kwargs: dict[str, Any],
                  level: int) -> Any:
    """Forward mode at ``level``: ``tracked.forward`` puts its own here when imported
    (it builds on this module, so this module does not import it back).  Only its
    ``Dual`` values lead here, so it is always in place by then."""
    raise RuntimeError('a forward-mode value reached tracked.values before tracked.forward '
                       'was imported; import tracked (the package), not its modules alone')


def _index_level(positions: Sequence[int], args: Sequence[Any], below: int | None = None) -> int:
    """The highest level of a tracked part of the index arguments at ``positions``
    (below ``below`` if given), or -1."""
    level = -1
    for p in positions:
        if p < len(args) and type(args[p]) in (tuple, list):
            for part in args[p]:
                if isinstance(part, Tracked):
                    lv = part._node.level
                    if lv > level and (below is None or lv < below):
                        level = lv
    return level


def record(prim: registry.Primitive, vals: Sequence[Any], kwargs: dict[str, Any], ans: Any,
           parents: Sequence[tuple[int, Node]], key: int, level: int,
           same_shape: bool = False) -> 'Boxed':
    """Box ``ans`` = ``prim.fn(*vals, **kwargs)`` with its tape entry; ``parents`` are
    (position, node) pairs at ``level``, ``key`` is ``registry.plan_key(parents,
    len(vals))``.  ``tape.new_node`` inline: a call and its helpers cost ~15% of ``apply``.
    """
    if type(ans) is not np.ndarray and not isinstance(ans, np.generic) or ans.dtype.kind == 'O':
        ans = plain_result(prim.name, ans)
    keep_ans, saver, _ = prim.saves.get(key) or prim.plan(key)
    t = object.__new__(TrackedReal if ans.ndim == 0 else TrackedArray)
    t._value = ans
    t._node = node = Node()
    node.prim = prim
    node.args = saved = vals if saver is None else saver(vals)
    node.kwargs = kwargs
    node.ans = ans if keep_ans else None
    node.shape = ans.shape
    node.parents = parents
    node.level = level
    node.seq = _next_seq()
    node.same_shape = same_shape
    node.real_parents = real_parents(parents, vals) if ans.dtype.kind == 'c' else None
    for a in saved:                 # an array the caller might change in place?
        if type(a) is np.ndarray:
            protect_saved(node, saved, key)
            break
    return t


def protect_saved(node: Node, saved: Sequence[Any], key: int) -> None:
    """Make the arrays that ``node`` saved and the caller could change in place
    read-only while it lives (``tape.protect``): a leaf's value (also when saved
    through views of it, such as ``x[:-1]``) and constant arrays with the arrays they
    are views of."""
    arrays = []
    mask = key >> _KEY_SHIFT
    for pos, parent in node.parents:
        if type(saved[pos]) is np.ndarray:
            root = leaf_root(parent)
            if root is not None:
                arrays.append(root)
    for j, a in enumerate(saved):
        if type(a) is np.ndarray and not mask >> j & 1:
            arrays.append(a)
            base = a.base           # a view (c[:2], or a composite's reshape of c): its
            if isinstance(base, np.ndarray):    # owner is what the caller can change
                arrays.append(base)
    if arrays:
        _tape.protect(node, arrays)


def leaf_root(node: Node) -> np.ndarray | None:
    """The value array of the leaf that ``node``'s value is (a view of), or None."""
    while node.prim is not None:
        if not node.prim.view or not node.parents:
            return None
        node = node.parents[0][1]
    return node.ans if type(node.ans) is np.ndarray else None


def real_parents(parents: Sequence[tuple[int, Node]],
                 vals: Sequence[Any]) -> tuple[int, ...] | None:
    """Positions of the real-valued parents of an entry whose output is complex: their
    cotangents are projected onto the reals (a real input's gradient is real)."""
    return tuple(p for p, _ in parents
                 if getattr(getattr(vals[p], 'dtype', None), 'kind', 'f') != 'c') or None


# --------------------------------------------------------------------------
# Primitives with several outputs
# --------------------------------------------------------------------------
# One entry holds the primitive (its pullback gets a ``tape.Cotangents``: one cotangent
# per output, None where unused); each output is boxed with a small "select" entry
# whose pullback puts its cotangent in its place.  The outputs keep NumPy's tuple or
# named-tuple type (``SVDResult``, ``EighResult``, ...).

def _select_fwd(outputs: Sequence[Any], k: int, n: int) -> Any:
    return outputs[k]


def _select_vjp(g: Any, ans: Any, outputs: Any, k: int, n: int) -> Cotangents:
    return Cotangents.one(k, g, n)


SELECT = registry.Primitive(_select_fwd, (_select_vjp, None, None), name='output')


def is_output_array(a: Any) -> bool:
    """Whether an output of a multi-output primitive is differentiable (and boxed)."""
    if isinstance(a, Tracked):
        return True
    return isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind in 'fc'


def record_outputs(prim: registry.Primitive, vals: Sequence[Any], kwargs: dict[str, Any],
                   ans: tuple[Any, ...], parents: Sequence[tuple[int, Node]], key: int,
                   level: int) -> tuple[Any, ...]:
    """Record a multi-output primitive's entry; returns its outputs boxed."""
    keep_ans, saver, _ = prim.saves.get(key) or prim.plan(key)
    node = Node()
    node.prim = prim
    node.args = saved = vals if saver is None else saver(vals)
    node.kwargs = kwargs
    node.ans = tuple(ans) if keep_ans else None
    node.shape = None
    node.parents = parents
    node.level = level
    node.seq = _next_seq()
    node.same_shape = False
    node.real_parents = real_parents(parents, vals) if any(
        getattr(getattr(a, 'dtype', None), 'kind', None) == 'c' for a in ans) else None
    for a in saved:                 # an array the caller might change in place?
        if type(a) is np.ndarray:
            protect_saved(node, saved, key)
            break
    return box_outputs(ans, node, level)


def box_outputs(ans: tuple[Any, ...], node: Node, level: int,
                on_output: Callable[[int, Node, Any], Any] | None = None) -> tuple[Any, ...]:
    """``ans`` (a tuple from ``node``'s primitive) with each differentiable output boxed
    with its select entry; ``on_output(k, select_node, value)`` sees each (a recorder
    makes it an instruction).  Other outputs (integer ranks, pivots) stay plain."""
    n = len(ans)
    out = []
    for k, a in enumerate(ans):
        if is_output_array(a):
            sel = new_node(SELECT, (None, k, n), _NOKW, a, ((0, node),), level, True)
            if on_output is not None:
                on_output(k, sel, a)
            a = box(a, sel)
        out.append(a)
    return type(ans)(*out) if hasattr(type(ans), '_fields') else tuple(out)


_NOKW: dict[str, Any] = {}
_KEY_BOTH = registry.plan_key(((0, None), (1, None)), 2)
_KEY_X = registry.plan_key(((0, None),), 2)   # x[idx] with x tracked, idx not
_KEY_UNARY = registry.plan_key(((0, None),), 1)
_KEY_SHIFT = registry.KEY_SHIFT
_MAX_ARGS = registry.MAX_ARGS
_NONE1 = (None,)
_ANS = registry.ANS
_FAST = registry.FAST
_REAL_SCALARS = frozenset((float, int, np.float64))   # no complex check needed
_next_seq = _tape.sequence.__next__
_RULES = registry.RULES
_OPERANDS = registry.OPERANDS
_Primitive = registry.Primitive


# The error of an in-place write into a view that the boxes do not track (a view of a
# copy NumPy made, or of a value seen on another path): NumPy would change both arrays.
VIEW_WRITE = ('in-place change of a tracked array that shares memory with another: it is a '
              'view (such as x[1:], x.T or x.reshape(...)), and NumPy would change both. Call '
              '.copy() first, or compute a new array.')
LEAF_VIEW_WRITE = ('in-place change of a view of a leaf made by tr.param (such as x[1:] or '
                   'x.T of a parameter): the tape cannot record it. Update the value with '
                   'tr.data(x)[...] = ..., or compute a new array.')


def _untracked_view(view: Any, base: Any, step: Any) -> None:
    return None


def _untracked_write(box: Any, new: Any) -> bool:
    return False


class _ViewHooks:
    """What the boxes call when a view is made and when one is written: tracked/views.py's
    ``note`` and ``write``, registered by the package (``register_views``).  Until then
    views are not tracked and writes through them are refused (``VIEW_WRITE``)."""

    def __init__(self) -> None:
        self.note: Callable[[Any, Any, Any], None] = _untracked_view
        self.write: Callable[[Any, Any], bool] = _untracked_write


_view_hooks = _ViewHooks()


def register_views(note: Callable[[Any, Any, Any], None],
                   write: Callable[[Any, Any], bool]) -> None:
    """Make ``note(view, base, step)`` and ``write(box, new) -> handled`` the boxes' view
    tracking (tracked/views.py; called once by the package's ``__init__``)."""
    _view_hooks.note = note
    _view_hooks.write = write


def call(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call NumPy callable ``fun`` with tracked arguments through the registry."""
    rule = registry.RULES.get(fun)
    if rule is None:
        if fun in registry.NONDIFF:
            return call_nondiff(fun, args, kwargs)
        raise TypeError(_no_rule_message(fun))
    if type(rule) is registry.Primitive:
        if kwargs:
            for v in kwargs.values():
                if isinstance(v, Tracked) or (type(v) in _SEQUENCES and holds_tracked(v)):
                    args, kwargs = bind_keywords(fun, args, kwargs)
                    break
        return apply(rule, args, kwargs)
    operands = _OPERANDS.get(fun)
    if operands is not None:
        cargs, kwargs = composite_operands(operands, args, kwargs)
        return rule(*cargs, **kwargs)
    return rule(*args, **kwargs)        # a composite takes tracked keywords as Python does


def holds_tracked(v: Any) -> bool:
    """``holds_tracked(v)``: whether ``v`` is a tracked value or a (nested) list or tuple
    holding one.

    >>> import tracked as tr
    >>> from tracked.values import holds_tracked
    >>> holds_tracked([1.0, (2.0, tr.param(3.0))]), holds_tracked([1.0])
    (True, False)
    """
    if isinstance(v, Tracked):
        return True
    return type(v) in _SEQUENCES and any(holds_tracked(e) for e in v)


@functools.lru_cache(maxsize=None)
def _positional_parameters(fun: Callable[..., Any]) -> tuple[inspect.Parameter, ...] | None:
    """The parameters of ``fun`` that can be passed by position, or None (no signature)."""
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    return tuple(p for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def bind_keywords(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                  name: str | None = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``fun(*args, **kwargs)`` with tracked keyword arguments moved to their positions,
    by ``fun``'s signature (the parameters before them take their defaults), so that
    rules see them as they see positional ones: ``np.clip(x, a_min=lo)`` is
    ``np.clip(x, lo)``.  A tracked integer for a keyword-only parameter (an ``axis=``)
    is read as its value; any other tracked keyword-only argument is refused.
    Returns ``(args, kwargs)``.
    """
    params = _positional_parameters(fun) or ()
    names = [p.name for p in params]
    last = max((names.index(k) for k, v in kwargs.items()
                if k in names and holds_tracked(v)), default=-1)
    args, kwargs = list(args), dict(kwargs)
    for i in range(len(args), last + 1):
        p = params[i]
        if p.name in kwargs:
            args.append(kwargs.pop(p.name))
        elif p.default is not p.empty:
            args.append(p.default)
        else:
            break           # a required argument is missing: NumPy's own error follows
    for k, v in list(kwargs.items()):
        if isinstance(v, Tracked) and v.dtype.kind in 'iub' and v.ndim == 0:
            kwargs[k] = operator.index(v)       # an integer used as a size or axis
        elif holds_tracked(v):
            what = name or registry.display_name(fun)
            raise TypeError(f'{what}: the tracked keyword argument {k}= cannot be passed '
                            f'by position ({what} takes it by keyword only), so its '
                            f'gradient would be lost; pass tr.data(...) if you do not need '
                            f'its gradient, or compute it with operations on the '
                            f'positional arguments')
    return tuple(args), kwargs


def call_nondiff(fun: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    rec = active_recorder()
    if rec is not None:
        return rec.nondiff(fun, args, kwargs)
    return fun(*plain(args), **plain(kwargs))


def _conversion_message(call: str) -> str:
    return (f'{call} of a tracked value would drop its gradient (so would math.*, '
            f'np.float64(...), storing it into a plain array with a[i] = t or a.fill(t), '
            f'and np.array([...]) of tracked values). Read the value on purpose with '
            f't.item() or tr.data(t) (guarded on recorded tapes), branch with a comparison '
            f'(if t > 0: ...), and build arrays from tracked values with np.stack([...]) '
            f'(or import tracked.numpy as np, whose np.array accepts them, and whose '
            f'zeros_like/empty_like(x) of a tracked x give an array that out[i] = t can '
            f'write into).')


# ``'%.3f' % loss`` (and logging's ``'loss %f', loss``) reach __float__ from C exactly as
# float(loss) and math.exp(loss) do; the caller's current instruction tells them apart:
# only %-formatting runs the ``%`` operator there (a number's ``%`` with a tracked
# operand is tracked's __rmod__).  Text keeps no gradient to lose, so it is allowed,
# as f'{loss:.3f}' (__format__) is; on an unknown bytecode the conversion refuses.
_PERCENT: tuple[tuple[int, tuple[int, ...] | None], ...]    # (opcode, its args or None)
if 'BINARY_OP' in dis.opmap:            # Python >= 3.11: NB_REMAINDER, NB_INPLACE_REMAINDER
    _PERCENT = ((dis.opmap['BINARY_OP'], (6, 19)),)
else:
    _PERCENT = ((dis.opmap['BINARY_MODULO'], None), (dis.opmap['INPLACE_MODULO'], None))


def _formatting_as_text(frame: Any) -> bool:
    """Whether ``frame`` is running a ``%`` operator (string formatting, see above)."""
    try:
        code, i = frame.f_code.co_code, frame.f_lasti
        return any(code[i] == op and (args is None or code[i + 1] in args)
                   for op, args in _PERCENT)
    except (AttributeError, IndexError, KeyError):
        return False


def _no_rule_message(fun: Any) -> str:
    name = registry.display_name(fun) if callable(fun) else str(fun)
    why = registry.UNSUPPORTED.get(fun) if callable(fun) else None
    return (f'tracked has no derivative rule for {name}' + (f' ({why})' if why else '')
            + '. Define one with @tr.rule (a forward function returning (value, pullback)), '
            'or call it on tr.data(x) if you do not need its gradient.')


def no_method_rule(ufunc: np.ufunc, method: str) -> TypeError:
    """The error for a ufunc method (``np.maximum.reduceat``, ...) without a rule."""
    return TypeError(f'tracked has no derivative rule for {registry.display_name(ufunc)}.'
                     f'{method}. Define one with @tr.rule, or call it on tr.data(x).')


def plain(x: Any) -> Any:
    """Strip every level of tracking from ``x`` (recursing into lists, tuples, dicts)."""
    while isinstance(x, Tracked):
        x = x._value
    if type(x) in (list, tuple):
        return type(x)(plain(v) for v in x)
    if type(x) is dict:
        return {k: plain(v) for k, v in x.items()}
    return x


def value(t: Tracked) -> Any:
    """Tracked ``t``'s value as ``tr.data`` gives it to the caller.  A computed value's
    array may be saved by the entries that use it, whose pullbacks read it at back():
    it is read-only until its own entry is released (by back()) or dropped, so that a
    write fails at once instead of changing the gradient (tape.py, "Arrays saved by
    entries").  A leaf's is protected by the entries that save it."""
    v = t._value
    if type(v) is np.ndarray and type(t._node) is Node and v.flags.writeable:
        node = t._node
        if node.prim is not None and not _tape.released(node):
            _tape.protect(node, [v])
    return v


def box(ans: Any, node: Node) -> 'Boxed':
    cls = TrackedReal if ans.ndim == 0 else TrackedArray
    t = object.__new__(cls)
    t._node = node
    t._value = ans
    return t


# --------------------------------------------------------------------------
# The tracked types
# --------------------------------------------------------------------------

def _binop(uf: np.ufunc, op: Callable[[Any, Any], Any]
           ) -> tuple[Callable[['Tracked', Any], Any], Callable[['Tracked', Any], Any]]:
    """``__op__`` and ``__rop__`` for ufunc ``uf`` (Python's operator ``op``), with the
    tracked operand at ``pos``."""
    def make(pos: int) -> Callable[['Tracked', Any], Any]:
        bit, slot = 1 << pos, pos + 1       # this parent's bit, its Primitive.fast slot
        def method(self: Tracked, other: Any) -> Any:
            # The eager fast path: one tracked operand holding a plain value, nothing
            # paused or recording.  Written out inline (no helper calls, Node filled
            # slot by slot): each Python-level call costs ~5% of an eager operation.
            node = self._node
            v = self._value
            scalar = type(other) in _REAL_SCALARS
            both = not scalar and isinstance(other, Tracked)
            if not (scalar or both) and type(other) is not _ndarray:
                if type(other) in _SEQUENCES:
                    other = _sequence_operand(other)    # a pullback must never see a list
                elif _FOREIGN_KINDS.get(type(other)) is not _NOT_FOREIGN:  # SciPy's sparse
                    out = foreign_operation(op, self, other, pos == 1)
                    if out is not None:
                        return out
            if not (_tape.special_threads or both or isinstance(v, Tracked)):
                prim = _RULES.get(uf)
                if type(prim) is _Primitive:
                    args = (v, other) if pos == 0 else (other, v)
                    ans = prim.fn(*args)
                    if scalar or (type(ans) is np.ndarray and ans.dtype.kind not in 'cO'):
                        t = (TrackedReal if ans.ndim == 0 else TrackedArray)()
                        t._value = ans
                        t._node = n = Node()
                        n.prim = prim
                        kept = (prim.fast or prim.fast_plans())[slot]
                        # An untracked ``other`` is kept whatever the plan says: it
                        # is the caller's constant, so keeping it costs no memory.
                        n.args = args if kept & bit else \
                            (None, other) if pos == 0 else (other, None)
                        n.kwargs = _NOKW
                        n.ans = ans if kept & _ANS else None
                        n.shape = node.shape if scalar else ans.shape
                        n.parents = ((pos, node),)
                        n.level = node.level
                        n.seq = _next_seq()
                        n.same_shape = scalar
                        n.real_parents = None     # (a complex result takes the slow path)
                        if type(other) is np.ndarray or (kept & bit and (
                                node.prim is None or node.prim.view)):
                            protect_saved(n, n.args, bit << _KEY_SHIFT | 2)
                        return t
            elif both and not _tape.special_threads:
                # Both operands tracked (a - b): when they are at one level and hold plain
                # values, skip apply's search for tracked arguments (a third of its cost).
                onode = other._node
                ov = other._value
                prim = _RULES.get(uf)
                if onode.level == node.level and type(prim) is _Primitive and not (
                        isinstance(v, Tracked) or isinstance(ov, Tracked)):
                    args = (v, ov) if pos == 0 else (ov, v)
                    ans = prim.fn(*args)
                    if ans.dtype.kind != 'c':
                        parents = ((0, node), (1, onode)) if pos == 0 else \
                            ((0, onode), (1, node))
                        same = prim.elementwise and v.shape == ov.shape
                        return record(prim, args, _NOKW, ans, parents, _KEY_BOTH, node.level,
                                      same)
            return call(uf, self, other) if pos == 0 else call(uf, other, self)
        return method
    return make(0), make(1)


_SEQUENCES = (list, tuple)
_ndarray = np.ndarray


# --------------------------------------------------------------------------
# Operands NumPy cannot take (a SciPy sparse matrix): register_foreign_operand
# --------------------------------------------------------------------------

_OWN_OPERATORS = object()   # a type with ``__array_ufunc__ = None``: its operators decide
_NOT_FOREIGN = object()     # NumPy takes it (np.float32(2), complex): the common case
_FOREIGN: list[tuple[Callable[[type], bool], Callable[[Any], Any]]] = []
# operand type -> converter, _OWN_OPERATORS or _NOT_FOREIGN (a dict lookup per operation)
_FOREIGN_KINDS: dict[type, Any] = {}
_DISPATCHERS: list[Callable[[Any, Any], Any]] = []


def register_foreign_operand(accepts: Callable[[type], bool], convert: Callable[[Any], Any],
                             dispatcher: Callable[[Any, Any], Any] | None = None) -> None:
    """Let the operators of tracked values (``x @ A``, ``A @ x``, ``x * A``, ...) take
    operands of the types ``accepts(type)`` admits, which NumPy cannot convert:
    ``convert(A)`` gives an object whose operators take tracked values (its type sets
    ``__array_ufunc__ = None``, NumPy's sign that its operators decide, which tracked
    values honour as arrays do).  ``dispatcher(frame, x)`` answers library code that
    asks ``np.asarray`` for tracked ``x`` only to decide how to dispatch (to return
    ``NotImplemented`` on a 0-d object array, so that Python calls ``x``'s reflected
    operator): the array ``Tracked.__array__`` gives it, or None for any other caller,
    which gets the ``ConversionError``.

    >>> import numpy as np, tracked as tr
    >>> class Twice:
    ...     __array_ufunc__ = None
    ...     def __rmul__(self, x): return x * 2.0
    >>> tr.gradient(lambda x: np.sum(x * Twice()), np.ones(2))
    (array([2., 2.]),)
    """
    _FOREIGN.append((accepts, convert))
    _FOREIGN_KINDS.clear()
    if dispatcher is not None:
        _DISPATCHERS.append(dispatcher)


def foreign_operation(op: Callable[[Any, Any], Any], x: Tracked, other: Any,
                      reflected: bool) -> Any:
    """``x op other`` (``other op x`` if ``reflected``) for an operand ``other`` that NumPy
    cannot take (see ``register_foreign_operand``), or NotImplemented for one whose own
    operators decide; None when ``other`` is not such an operand."""
    kind = _foreign_kind(type(other))
    if kind is _NOT_FOREIGN:
        return None
    if kind is _OWN_OPERATORS:
        return NotImplemented                   # Python calls other's operator
    alt = kind(other)
    return op(alt, x) if reflected else op(x, alt)


def _foreign_kind(t: type) -> Any:
    """How an operator of a tracked value takes an operand of type ``t`` that is neither
    a Python float, an array, a tracked value nor a list (see ``register_foreign_operand``),
    remembered per type."""
    kind = _FOREIGN_KINDS.get(t)
    if kind is None:
        if getattr(t, '__array_ufunc__', 0) is None:
            kind = _OWN_OPERATORS
        else:
            kind = next((convert for accepts, convert in _FOREIGN if accepts(t)), _NOT_FOREIGN)
        _FOREIGN_KINDS[t] = kind
    return kind


def _sequence_operand(x: Sequence[Any]) -> np.ndarray:
    """A list or tuple operand as an array, converted once when the entry is recorded."""
    try:
        return np.asarray(x)
    except TypeError:
        raise TypeError('an operand is a list holding tracked values; build an array from '
                        'them with np.stack (or import tracked.numpy as np, whose np.array '
                        'accepts them)') from None


def _inplace(uf: np.ufunc) -> Callable[['Tracked', Any], 'Tracked']:
    def method(self: Tracked, other: Any) -> Tracked:
        new = call(uf, self, other)
        if getattr(self._value, 'ndim', 0) == 0:
            # A number is a value (API.md section 3): n += 1 rebinds, as for Python's
            # and NumPy's scalars, also for a leaf (a float or int argument)
            return new
        self._mutate(new)
        return self
    return method


def _compare(uf: np.ufunc, reflected: bool = False) -> Callable[['Tracked', Any], Any]:
    """A non-differentiable operator (comparisons, ``& | ^`` of masks): a plain result,
    or a recorded instruction on a ``GradientTape`` (see ``call_nondiff``)."""
    def method(self: Tracked, other: Any) -> Any:
        if type(other) in _SEQUENCES:
            other = _sequence_operand(other)
        return call_nondiff(uf, (other, self) if reflected else (self, other), {})
    return method


class Tracked:
    """Base of the tracked types: ``TrackedArray``, ``TrackedReal``, ``TrackedInt`` (values
    recorded on a tape) and forward mode's ``Dual``.  Each holds ``_node`` (its tape
    entry) and ``_value``; the slots live in the subclasses, because ``TrackedInt``
    is also an ``int``, which allows no slots of a base class."""

    __slots__ = ()
    __array_priority__ = 1000.0
    __hash__ = object.__hash__
    _forward = False            # True for forward mode's ``Dual`` (no tape entry)
    # Held in the subclasses' slots (annotations only):
    _node: Any                  # its tape ``Node`` (forward mode's ``Dual``: a ``DualLevel``)
    _value: Any                 # its value: plain, or tracked at a lower level
    _alias: Any                 # views.py: the Alias it shares memory in (unset: none)
    _chain: Any                 # views.py: the view steps from its Alias's root

    @property
    def _numba_type_(self) -> Any:
        """numba's hook for the type of an argument: refuses, naming the compiled function
        (``conversions.numba_type``).  Read by numba only: ``import tracked`` never
        imports numba."""
        return numba_type(self)

    def _as_int(self) -> Tracked:
        """This 0-d integer value as a ``TrackedInt`` (integer arithmetic, ``IntBehaviour``)."""
        return TrackedInt.make(self._value, self._node)

    def _as_ratio(self) -> Tracked:
        """This 0-d float computed from integers alone as an ``IntRatio``."""
        if type(self) is not TrackedReal:
            return self
        r = object.__new__(IntRatio)
        r._value, r._node = self._value, self._node
        return r

    # -- value and metadata -------------------------------------------------
    @property
    def data(self) -> Any:
        """The value without tracking (one level down under nesting); read-only while
        the entries that saved it live, for a value computed on the tape (``value``)."""
        return value(self)

    @property
    def grad(self) -> npt.NDArray[Any] | np.generic | None:
        """The accumulated gradient of a leaf made by ``param`` (None for other values)."""
        node = self._node
        if node.prim is not None:
            return None
        g = node.grad
        if g is None:
            return None
        return g[()] if g.ndim == 0 else g

    @grad.setter
    def grad(self, value: npt.ArrayLike) -> None:
        node = self._node
        if node.prim is not None:
            raise AttributeError('only leaves made by tr.param hold a gradient buffer')
        node.grad[...] = plain(value)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def T(self) -> Any:
        return call(np.transpose, self)

    @property
    def real(self) -> Any:
        return call(np.real, self)

    @property
    def imag(self) -> Any:
        return call(np.imag, self)

    @property
    def mT(self) -> Any:
        return call(np.swapaxes, self, -1, -2)

    @property
    def flat(self) -> FlatIter:
        return FlatIter(self)


    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._value!r}) (tracked)'

    def __format__(self, spec: str) -> str:
        return format(plain(self), spec) if spec else repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # Its tape entry lives in this process only: a copy elsewhere would carry a
        # value cut off from its gradient.  (TrackedInt overrides this: it is its int.)
        raise TypeError(f'a tracked value ({type(self).__name__}) cannot be pickled or '
                        f'copied: it belongs to a tape in this process. Send tr.data(x) '
                        f'for its value, or the model itself (a tree of plain arrays), '
                        f'and differentiate where it arrives.')

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        for dispatcher in _DISPATCHERS:          # see register_foreign_operand
            answer = dispatcher(sys._getframe(1), self)
            if answer is not None:
                return answer
        raise conversion_error()

    # -- concretisation (guards in recorded tapes) ---------------------------
    def _concrete(self, kind: str) -> Any:
        value = plain(self)
        rec = active_recorder()
        if rec is not None:
            recorded = rec.concretize(self, kind, value)   # an index stays a recorded value
            if recorded is not None:
                return recorded
        return value

    def __bool__(self) -> bool:
        return bool(self._concrete('bool'))

    # Conversions to Python numbers would drop the gradient without a word (NumPy calls
    # them for np.float64(t), math.exp(t), a[i] = t, a.fill(t), np.array([t0, t1])):
    # refused, as JAX refuses them, unlike PyTorch's silent float(loss).  Reading a
    # value on purpose is t.item() or tr.data(t); branching is bool(t > 0).
    def __float__(self) -> float:
        return float(self._convert('float', 'float()'))

    def __complex__(self) -> complex:
        return complex(self._convert('complex', 'complex()'))

    def __int__(self) -> int:
        if getattr(plain(self), 'dtype', np.dtype(float)).kind in 'iub':
            return int(self._concrete('int'))       # an integer: a size, an index
        return int(self._convert('int', 'int()'))

    def __trunc__(self) -> int:     # math.trunc: int()'s rule (math.floor/ceil use float())
        return self.__int__()

    def _convert(self, kind: str, call: str) -> Any:
        """The value, when converting it loses no gradient: a value recorded by a
        ``GradientTape`` but not differentiated (an input outside ``wrt``), guarded; or
        a value printed with ``'%.3f' % t`` (text, as ``f'{t:.3f}'`` is)."""
        rec = active_recorder()
        if rec is not None and self._node.level == rec.level:
            return self._concrete(kind)
        if _formatting_as_text(sys._getframe(2)):
            return plain(self)
        caller = library_caller(2)          # SciPy's quad, brentq, ...: name the one called
        raise TypeError(_conversion_message(call) if caller is None else
                        f'{caller[0]} calls {call} on a tracked value.{caller[1]} '
                        f'{_conversion_message(call)}')

    def __index__(self) -> int:
        value = self._concrete('index')
        if getattr(value, 'dtype', np.dtype(float)).kind not in 'iub':
            raise TypeError(f'only integer tracked scalars can be used as an index (or '
                            f'where Python needs an int); this one holds a '
                            f'{np.asarray(value).dtype}: read its value on purpose with '
                            f'int(t.item()), which drops its gradient')
        return operator.index(value)

    def item(self, *args: Any) -> Any:
        return self._concrete('item').item(*args) if hasattr(plain(self), 'item') \
            else self._concrete('item')

    def tolist(self) -> Any:
        return np.asarray(self._concrete('item')).tolist()

    # -- NumPy protocols -----------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == '__call__' and not kwargs and len(inputs) == 1 and not _tape.special_threads:
            # The eager fast path for a unary ufunc, inline like _binop's (see there).
            # No complex check: a unary ufunc of a real value is real.
            node = self._node
            v = self._value
            prim = _RULES.get(ufunc)
            if type(prim) is _Primitive and not isinstance(v, Tracked):
                ans = prim.fn(v)
                t = (TrackedReal if ans.ndim == 0 else TrackedArray)()
                t._value = ans
                t._node = n = Node()
                n.prim = prim
                kept = (prim.fast or prim.fast_plans())[0]
                n.args = (v,) if kept & 1 else _NONE1      # a Meta is not worth it here
                n.kwargs = _NOKW
                n.ans = ans if kept & _ANS else None
                n.shape = node.shape
                n.parents = ((0, node),)
                n.level = node.level
                n.seq = _next_seq()
                n.same_shape = True
                if kept & 1 and (node.prim is None or node.prim.view):
                    protect_saved(n, n.args, _KEY_UNARY)
                return t
        return ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable[..., Any], types: Collection[type],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs.get('out') is not None:
            name = registry.display_name(func)
            raise TypeError(f'{name}(..., out=...) cannot write a tracked result into an '
                            f'array; use y = {name}(...) instead')
        return call(func, *args, **kwargs)

    # -- operators ------------------------------------------------------------
    __add__, __radd__ = _binop(np.add, operator.add)
    __sub__, __rsub__ = _binop(np.subtract, operator.sub)
    __mul__, __rmul__ = _binop(np.multiply, operator.mul)
    __truediv__, __rtruediv__ = _binop(np.true_divide, operator.truediv)
    __pow__, __rpow__ = _binop(np.power, operator.pow)
    __matmul__, __rmatmul__ = _binop(np.matmul, operator.matmul)
    __mod__, __rmod__ = _binop(np.remainder, operator.mod)
    __floordiv__, __rfloordiv__ = _binop(np.floor_divide, operator.floordiv)
    __iadd__ = _inplace(np.add)
    __isub__ = _inplace(np.subtract)
    __imul__ = _inplace(np.multiply)
    __itruediv__ = _inplace(np.true_divide)
    __ipow__ = _inplace(np.power)
    __imatmul__ = _inplace(np.matmul)
    __and__, __rand__ = _compare(np.bitwise_and), _compare(np.bitwise_and, True)
    __or__, __ror__ = _compare(np.bitwise_or), _compare(np.bitwise_or, True)
    __xor__, __rxor__ = _compare(np.bitwise_xor), _compare(np.bitwise_xor, True)
    __lt__ = _compare(np.less)
    __le__ = _compare(np.less_equal)
    __gt__ = _compare(np.greater)
    __ge__ = _compare(np.greater_equal)
    __eq__ = _compare(np.equal)
    __ne__ = _compare(np.not_equal)

    def __invert__(self) -> Any:
        return call_nondiff(np.invert, (self,), {})

    def __neg__(self) -> Any:
        return call(np.negative, self)

    def __pos__(self) -> Any:
        return call(np.positive, self)

    def __abs__(self) -> Any:
        return call(np.absolute, self)

    def __round__(self, ndigits: int | None = None) -> Any:
        return call(np.round, self, ndigits or 0)

    # -- indexing and mutation ---------------------------------------------------
    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, idx: Any) -> Any:
        if type(idx) is slice:
            v = self._value
            if type(v) is np.ndarray and not _tape.special_threads:
                # The eager fast path for x[a:b] (stencils, batches): a view of a plain
                # value, recorded without classifying the index or apply's search for
                # tracked arguments (a third of the cost of x[1:]).
                node = self._node
                t = record(_FAST['slice'], (v, idx), _NOKW, v[idx], ((0, node),), _KEY_X,
                           node.level)
                if node.prim is not None:            # a leaf's views are refused writes
                    _view_hooks.note(t, self, (_FAST['slice'], (idx,), _NOKW))
                return t
        else:                                   # (_plain_index leaves a slice as it is)
            idx = plain_index(self, idx)
        return call(operator.getitem, self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        idx = plain_index(self, idx)
        self._mutate(call(operator.setitem, self, idx, value), idx)

    def _mutate(self, new: Any, idx: Any = None) -> None:
        """Point this box at ``new``'s entry: in-place syntax, functional recording.

        The old entry stays on the tape untouched, so pullbacks that saved the old
        value stay correct.  A box sharing memory with others (a view, or the base of
        live views) changes them all as NumPy would (``views.write``).  Refused: a
        leaf (its gradient buffer would silently detach) and the views of one.
        """
        node = self._node
        if node.prim is None:
            raise ValueError('in-place change of a leaf made by tr.param: the tape cannot '
                             'record it. Update its value with tr.data(x)[...] = ..., or '
                             'compute a new array (y = x + v).')
        if not isinstance(new, Tracked):
            raise TypeError('in-place operation produced an untracked value')
        if new.dtype != self.dtype:
            new = call(np.ndarray.astype, new, self.dtype)
        if new.shape != self.shape:
            raise ValueError(f'in-place operation would change the shape from {self.shape} '
                             f'to {new.shape}')
        alias = getattr(self, '_alias', None)
        if alias is not None and _view_hooks.write(self, new):
            return
        if alias is None and getattr(node.prim, 'view', False):
            raise ValueError(LEAF_VIEW_WRITE if leaf_root(node) is not None else VIEW_WRITE)
        self._node = new._node
        self._value = new._value

    # -- methods ---------------------------------------------------------------
    def sum(self, *a: Any, **k: Any) -> Any: return np.sum(self, *a, **k)
    def mean(self, *a: Any, **k: Any) -> Any: return np.mean(self, *a, **k)
    def prod(self, *a: Any, **k: Any) -> Any: return np.prod(self, *a, **k)
    def max(self, *a: Any, **k: Any) -> Any: return np.max(self, *a, **k)
    def min(self, *a: Any, **k: Any) -> Any: return np.min(self, *a, **k)
    def var(self, *a: Any, **k: Any) -> Any: return np.var(self, *a, **k)
    def std(self, *a: Any, **k: Any) -> Any: return np.std(self, *a, **k)
    def cumsum(self, *a: Any, **k: Any) -> Any: return np.cumsum(self, *a, **k)
    def cumprod(self, *a: Any, **k: Any) -> Any: return np.cumprod(self, *a, **k)
    def dot(self, other: Any) -> Any: return np.dot(self, other)
    def conj(self) -> Any: return np.conjugate(self)
    def conjugate(self) -> Any: return np.conjugate(self)
    def clip(self, *a: Any, **k: Any) -> Any: return np.clip(self, *a, **k)
    def ravel(self) -> Any: return np.ravel(self)
    def flatten(self) -> Any: return np.ravel(self).copy()
    def squeeze(self, *a: Any, **k: Any) -> Any: return np.squeeze(self, *a, **k)
    def swapaxes(self, a1: int, a2: int) -> Any: return np.swapaxes(self, a1, a2)
    def trace(self, *a: Any, **k: Any) -> Any: return np.trace(self, *a, **k)
    def diagonal(self, *a: Any, **k: Any) -> Any: return np.diagonal(self, *a, **k)
    def round(self, *a: Any, **k: Any) -> Any: return np.round(self, *a, **k)
    def argmax(self, *a: Any, **k: Any) -> Any: return np.argmax(self, *a, **k)
    def argmin(self, *a: Any, **k: Any) -> Any: return np.argmin(self, *a, **k)
    def argsort(self, *a: Any, **k: Any) -> Any: return np.argsort(self, *a, **k)
    def nonzero(self) -> Any: return np.nonzero(self)
    def any(self, *a: Any, **k: Any) -> Any: return np.any(self, *a, **k)
    def all(self, *a: Any, **k: Any) -> Any: return np.all(self, *a, **k)
    def copy(self) -> Any: return np.copy(self)
    def take(self, *a: Any, **k: Any) -> Any: return np.take(self, *a, **k)

    def astype(self, dtype: npt.DTypeLike, **kwargs: Any) -> Any:
        return call(np.ndarray.astype, self, np.dtype(dtype))

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return np.reshape(self, shape, **kwargs)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]
        return np.transpose(self, axes or None)

    def back(self, dy: npt.ArrayLike | None = None, retain_graph: bool = False) -> None:
        """``y.back(dy=None)``: same as ``tr.back(y, dy)``."""
        back(self, dy, retain_graph=retain_graph)


class Boxed(Tracked):
    """The slots of the tracked array types (``_alias``, ``_chain``: unset unless the box
    shares memory with others, see views.py)."""
    __slots__ = ('_node', '_value', '__weakref__', '_alias', '_chain')


class TrackedArray(Boxed):
    """An n-dimensional array recorded on the tape.

    >>> import numpy as np, tracked as tr
    >>> x = tr.param(np.array([1.0, 2.0]))
    >>> y = np.sum(x * x); y.back(); x.grad
    array([2., 4.])
    """
    __slots__ = ()


class TrackedReal(Boxed):
    """A 0-dimensional (scalar) value recorded on the tape.

    >>> import tracked as tr
    >>> x = tr.param(3.0)
    >>> (x * x).back(); float(x.grad)
    6.0
    """
    __slots__ = ()


class FlatIter:
    """``x.flat`` of a tracked array, as ``ndarray.flat``: ``x.flat[i]`` reads element
    ``i`` of ``x`` in row-major order (an int, a slice or an index array), iteration
    yields the elements, and ``x.flat[i] = v`` writes into ``x`` (with ``x[...] = v``'s
    rules for in-place changes; ``v`` is repeated to fill the selection, as NumPy does).

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda x: x.flat[3] * x.flat[0], np.array([[1.0, 2.0], [3.0, 4.0]]))
    (array([[4., 0.],
           [0., 1.]]),)
    """

    __slots__ = ('base',)

    def __init__(self, base: Tracked) -> None:
        self.base = base

    def __len__(self) -> int:
        return self.base.size

    def __iter__(self) -> Iterator[Any]:
        return iter(np.ravel(self.base))

    def __getitem__(self, idx: Any) -> Any:
        return np.ravel(self.base)[idx]

    def __setitem__(self, idx: Any, value: Any) -> None:
        base = self.base
        pos = np.arange(base.size)[idx]
        n = np.size(pos)
        if np.size(value) not in (1, n):
            value = np.resize(np.ravel(value), n)
        base[np.unravel_index(pos, base.shape)] = np.reshape(value, np.shape(pos)) \
            if np.size(value) == n else value

    def copy(self) -> Any:
        return np.ravel(self.base).copy()


_REPEATABLE = (list, tuple, str, bytes, bytearray)

# The behaviour classes below (and forward mode's) are mixed into subclasses of Tracked,
# whose operators their super() calls reach: mypy checks them as such subclasses.
if TYPE_CHECKING:
    _Mixin = Tracked
else:
    _Mixin = object


class IntBehaviour(_Mixin):
    """Python's ``int`` protocol for a differentiated integer scalar (``TrackedInt``, and
    forward mode's ``DualInt``, both subclasses of ``int``): in every Python use it is
    the int it holds -- ``isinstance(n, int)``, hashing, ``==``, ``<``, formatting
    (``f'{n:.2f}'`` too), indexing, sizes, ``[x] * n``, ``n & 1``, shifts, seeding a
    generator, ``json``, C and Cython code that wants an int.

    Its arithmetic is recorded like any tracked value's (Zygote differentiates integers
    the same way), and arithmetic with integers gives such an integer again: ``n + 1``,
    ``2 * n``, ``n // 2``, ``n % 3``, ``-n``, ``n ** 2`` still repeat lists, index and
    hash as ints (``[0] * (n + 1)``); ``n / 2`` is a tracked float that ``float()`` and
    ``int()`` read, as they read ``n``.  Integer division and modulo by zero raise
    ``ZeroDivisionError``, and a negative integer power is a float, as for ints.

    ``float(n)``, ``int(n)``, ``round(n)``, ``math.*`` and ``np.array(n)`` read the value
    as they do for an int (a tracked float refuses them): an integer argument is mostly
    a size, a count or a seed, and ``np.arange(n)``, ``f'{n:.2f}'`` or ``math.sqrt(n)``
    must run as on the int.  What they compute carries no derivative in ``n``.

    One limit of being an ``int``: with a Python ``float`` on the left (``2.5 * n``,
    ``1.0 + n``), Python's float converts the int itself before ``n`` is asked, so the
    result is a plain float and carries no derivative in ``n``.  When the derivative
    in an integer argument matters, write ``n * 2.5`` or ``np.multiply(2.5, n)``, or
    pass the number as a float.  (The alternative, an object that only claims to be an
    int, fails in C and Cython code: ``np.random.default_rng(n)``, ``json.dumps``.)
    """

    __hash__ = int.__hash__
    __eq__, __ne__ = int.__eq__, int.__ne__
    __lt__, __le__, __gt__, __ge__ = int.__lt__, int.__le__, int.__gt__, int.__ge__
    __and__, __or__, __xor__ = int.__and__, int.__or__, int.__xor__
    __rand__, __ror__, __rxor__ = int.__rand__, int.__ror__, int.__rxor__
    __lshift__, __rshift__, __invert__ = int.__lshift__, int.__rshift__, int.__invert__
    __rlshift__, __rrshift__ = int.__rlshift__, int.__rrshift__
    __index__, __int__, __bool__ = int.__index__, int.__int__, int.__bool__
    # int's signatures, not Tracked's: on purpose (an int in every Python use)
    __format__ = int.__format__  # type: ignore[assignment]
    __round__, __trunc__, __floor__, __ceil__ = (
        int.__round__, int.__trunc__, int.__floor__, int.__ceil__)  # type: ignore[assignment]
    __repr__ = __str__ = int.__repr__
    __float__ = int.__float__

    def __complex__(self) -> complex:
        return complex(int(self))

    def __array__(self, dtype: npt.DTypeLike | None = None,
                  copy: bool | None = None) -> np.ndarray:
        return np.asarray(int(self), dtype=dtype)

    def __reduce__(self) -> tuple[Any, ...]:    # a copy or pickle is the int it holds
        return int, (int(self),)

    def _integer(self, result: Any, other: Any) -> Any:
        """``result`` of arithmetic with ``other``: when both operands are integers, an
        integer of this kind again (or, for ``/``, a float that ``float()`` reads).  An
        int computed from a float could change on a replay: it stays a tracked value
        whose Python uses are guarded."""
        if isinstance(other, IntBehaviour) or (
                isinstance(other, (int, np.integer)) and not isinstance(other, Tracked)):
            value = plain(result)
            if getattr(value, 'ndim', None) == 0:
                return result._as_int() if value.dtype.kind in 'iu' else result._as_ratio()
        return result

    def __truediv__(self, other: Any) -> Any:
        return self._integer(super().__truediv__(other), other)

    def __rtruediv__(self, other: Any) -> Any:
        return self._integer(super().__rtruediv__(other), other)

    def __add__(self, other: Any) -> Any:
        return self._integer(super().__add__(other), other)

    def __radd__(self, other: Any) -> Any:
        return self._integer(super().__radd__(other), other)

    def __sub__(self, other: Any) -> Any:
        return self._integer(super().__sub__(other), other)

    def __rsub__(self, other: Any) -> Any:
        return self._integer(super().__rsub__(other), other)

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, _REPEATABLE):         # [x] * n, 'ab' * n: repetition
            return NotImplemented
        return self._integer(super().__mul__(other), other)

    def __rmul__(self, other: Any) -> Any:
        if isinstance(other, _REPEATABLE):
            return NotImplemented
        return self._integer(super().__rmul__(other), other)

    def __floordiv__(self, other: Any) -> Any:
        _nonzero(other)
        return self._integer(super().__floordiv__(other), other)

    def __rfloordiv__(self, other: Any) -> Any:
        _nonzero(self)
        return self._integer(super().__rfloordiv__(other), other)

    def __mod__(self, other: Any) -> Any:
        _nonzero(other)
        return self._integer(super().__mod__(other), other)

    def __rmod__(self, other: Any) -> Any:
        _nonzero(self)
        return self._integer(super().__rmod__(other), other)

    def __divmod__(self, other: Any) -> Any:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        return other // self, other % self

    def __pow__(self, other: Any, mod: Any = None) -> Any:
        if mod is not None:
            return pow(int(self), other, mod)
        if isinstance(other, (int, np.integer)) and not isinstance(other, Tracked) and other < 0:
            return self._integer(super().__pow__(float(other)), other)   # 2 ** -1 is 0.5
        return self._integer(super().__pow__(other), other)

    def __rpow__(self, other: Any) -> Any:
        if int(self) < 0 and isinstance(other, (int, np.integer)):
            return self._integer(super().__rpow__(float(other)), other)
        return self._integer(super().__rpow__(other), other)

    def __neg__(self) -> Any:
        return self._integer(super().__neg__(), 0)

    def __pos__(self) -> Any:
        return self._integer(super().__pos__(), 0)

    def __abs__(self) -> Any:
        return self._integer(super().__abs__(), 0)


def _nonzero(divisor: Any) -> None:
    if isinstance(divisor, (int, np.integer)) and divisor == 0:
        raise ZeroDivisionError('integer division or modulo by zero')


# Its arithmetic is Tracked's (recorded), its Python behaviour int's: the bases'
# signatures differ on purpose.
class TrackedInt(IntBehaviour, Tracked, int):  # type: ignore[misc]
    """A differentiated integer scalar (``tr.gradient(f, x, 3)``'s 3), or integer
    arithmetic on one: the ``int`` it holds in every Python use (``IntBehaviour``), its
    arithmetic recorded like any tracked value's.  On a recorded tape the value of an
    integer argument is guarded.

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda a, t: np.sum(a * t[0]) + t[1], np.array([1., 2., 3.]), (4, 5))
    (array([4., 4., 4.]), (np.float64(6.0), np.float64(1.0)))
    >>> tr.gradient(lambda x, n: x ** {3: 2.0}.get(n, 7.0) * len(f'{n}'), 2.0, 3)
    (np.float64(4.0), None)
    >>> tr.gradient(lambda x, n: n * 0.5 * np.sum(np.stack([x] * (n + 1))), 2.0, 3)
    (np.float64(6.0), np.float64(4.0))
    """

    @staticmethod
    def make(value: Any, node: Node) -> 'TrackedInt':
        """The ``TrackedInt`` of tape entry ``node`` holding integer scalar ``value``."""
        t = int.__new__(TrackedInt, int(plain(value)))
        t._value = value
        t._node = node
        return t


class RatioBehaviour(_Mixin):
    """A tracked float computed from integers alone (``n / 2`` of a differentiated int):
    ``float()``, ``int()``, ``math.*`` and formatting read its value, as they read the
    integers' (``np.arange(n)`` computes ``n / 1``).  Its arithmetic is a tracked
    float's."""

    def __float__(self) -> float:
        return float(plain(self))

    def __int__(self) -> int:
        return int(float(self))

    def __format__(self, spec: str) -> str:
        return format(float(self), spec)

    def __floor__(self) -> int:
        return math.floor(float(self))

    def __ceil__(self) -> int:
        return math.ceil(float(self))

    def __trunc__(self) -> int:
        return math.trunc(float(self))


class IntRatio(RatioBehaviour, TrackedReal):
    """``RatioBehaviour`` on the tape (``TrackedInt`` arithmetic)."""

    __slots__ = ()


def ufunc_call(ufunc: np.ufunc, method: str, inputs: Sequence[Any],
               kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__`` beyond the eager fast path: every ufunc method on tracked
    values (``Dual`` values of forward mode come here directly)."""
    if kwargs.get('out') is not None:
        name = registry.display_name(ufunc)
        raise TypeError(f'{name}(..., out=...) cannot write a tracked result into an array; '
                        f'use y = {name}(...) instead')
    if method == '__call__':
        if any(type(a) in _SEQUENCES for a in inputs):
            inputs = [_sequence_operand(a) if type(a) in _SEQUENCES else a for a in inputs]
        if 'where' in kwargs:
            raise TypeError(f'{registry.display_name(ufunc)}(..., where=...) is not supported on '
                            f'tracked values (without out= NumPy leaves the masked '
                            f'entries uninitialised); use np.where(mask, '
                            f'{registry.display_name(ufunc)}(...), other) instead')
        if kwargs:
            kwargs = _ufunc_kwargs(ufunc, kwargs)
        return call(ufunc, *inputs, **kwargs)
    table = {'reduce': registry.REDUCE, 'accumulate': registry.ACCUMULATE}.get(method)
    if table is not None and ufunc in table:
        kwargs.pop('out', None)
        if kwargs.get('dtype') is not None:
            raise TypeError(f'{registry.display_name(ufunc)}.{method}: dtype= is not supported '
                            f'on tracked values; use .astype first')
        kwargs.pop('dtype', None)
        kwargs.setdefault('axis', 0)   # ufunc.reduce/accumulate default to axis 0, np.sum to None
        return call(table[ufunc], *inputs, **kwargs)
    method_rule = registry.UFUNC_METHODS.get(method)
    if method_rule is not None:            # outer, at, reduceat, and other reduce/accumulate
        return method_rule(ufunc, *inputs, **kwargs)
    raise no_method_rule(ufunc, method)


def _ufunc_kwargs(ufunc: np.ufunc, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Drop ufunc keywords that do not change the value; refuse the ones that would.

    Elementwise pullbacks take no keywords, so none of these may reach the tape;
    the rest (``axis=``, ``keepdims=`` of gufuncs such as ``np.vecdot``) pass through.
    """
    kwargs = dict(kwargs)
    kwargs.pop('out', None)
    if kwargs.pop('subok', True) is not True or kwargs.pop('order', 'K') not in ('K', 'C', 'A'):
        raise TypeError(f'{registry.display_name(ufunc)}: subok=/order= are not supported on '
                        f'tracked values')
    kwargs.pop('casting', None)
    dtype = kwargs.pop('dtype', None)
    if dtype is not None:
        raise TypeError(f'{registry.display_name(ufunc)}(..., dtype=...) is not supported on '
                        f'tracked values; convert with x.astype(dtype) first')
    return kwargs


def plain_index(self: Tracked, idx: Any) -> Any:
    """Indices are constants of the tape; a tracked index is read (a guard when recording)."""
    if isinstance(idx, Tracked):
        return plain(idx) if active_recorder() is None else idx._concrete('index-array')
    if type(idx) is tuple:
        return tuple(plain_index(self, i) for i in idx)
    return idx


# --------------------------------------------------------------------------
# Leaves, param and back
# --------------------------------------------------------------------------

def as_value(x: Any, int_to_float: bool = True) -> Any:
    """Normalise ``x`` into a NumPy array (or NumPy scalar for 0-d) suitable for a leaf."""
    if isinstance(x, Tracked):
        raise TypeError('value is already tracked; use tr.data(x) to start a new leaf')
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        refuse_subclass(x)
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind not in 'fiubc':
        raise TypeError(f'expected a number or an array of numbers, got {type(x).__name__} '
                        f'with dtype {arr.dtype}')
    if kind in 'iub' and (int_to_float or kind == 'b'):
        arr = arr.astype(np.float64)
    if isinstance(x, np.ndarray) and arr is x and arr.ndim > 0:
        return arr
    return arr[()] if arr.ndim == 0 else arr


def plain_result(name: str, ans: Any) -> np.ndarray | np.generic:
    """The result of ``name`` as a NumPy value, or a ``TypeError`` when it is not one
    that tracked can differentiate (an operand was a masked array, a matrix, or held
    Python objects)."""
    if type(ans) in (float, int, bool, complex):
        return np.asarray(ans)[()]
    if isinstance(ans, np.ndarray) and type(ans) is not np.ndarray:
        refuse_subclass(ans, name)
    if getattr(ans, 'dtype', None) is None or ans.dtype.kind == 'O':
        raise TypeError(f'{name} gave {_describe_value(ans)}: an operand holds Python '
                        f'objects (an array of dtype object?). tracked differentiates '
                        f'numeric arrays: convert it with .astype(float) first')
    return ans


def _describe_value(v: Any) -> str:
    dtype = getattr(v, 'dtype', None)
    return f'an array of dtype {dtype}' if dtype is not None else f'a {type(v).__name__}'


def refuse_subclass(x: Any, operation: str | None = None) -> None:
    """Refuse the ndarray subclasses whose arithmetic is not NumPy's (a masked array's
    mask, np.matrix's ``*``): tracked differentiates plain arrays, and would drop the
    mask or change the product without a word.  Other subclasses (np.memmap, ...) are
    taken as plain arrays."""
    if isinstance(x, np.ma.MaskedArray):
        fix = ('compute with plain arrays: x.filled(0.0) or np.where(mask, 0.0, x), '
               'and a weight array for masked reductions')
    elif isinstance(x, np.matrix):
        fix = 'convert it with np.asarray(m) (and write matrix products with @)'
    elif operation is None:
        return
    else:
        fix = 'convert it with np.asarray(...) first'
    where = f' from {operation}' if operation else ''
    raise TypeError(f'tracked differentiates plain NumPy arrays, got a '
                    f'{type(x).__module__}.{type(x).__name__}{where}; {fix}')


def leaf(value: Any, level: int) -> 'Boxed | TrackedInt':
    """A new leaf at ``level`` holding ``value`` (already normalised), without a grad
    buffer; an integer scalar becomes a ``TrackedInt``."""
    node = new_node(None, None, None, value, (), level)
    if getattr(value, 'ndim', 1) == 0 and value.dtype.kind in 'iu':
        return TrackedInt.make(value, node)
    return box(value, node)


def param(x: npt.ArrayLike) -> 'TrackedArray | TrackedReal':
    """``param(x)``: a leaf of the tape whose gradient ``back`` accumulates in ``.grad``.

    Float arrays keep their dtype; integer and bool input becomes float64.

    >>> import numpy as np, tracked as tr
    >>> W = tr.param(np.ones((2, 3)))
    >>> W.grad
    array([[0., 0., 0.],
           [0., 0., 0.]])
    """
    value = as_value(x)
    t = leaf(value, 0)
    t._node.grad = np.zeros(np.shape(value), dtype=getattr(value, 'dtype', np.float64))
    return cast('TrackedArray | TrackedReal', t)     # as_value made any integer a float


def istracked(x: object) -> bool:
    """``istracked(x)``: whether ``x`` is a tracked value.

    >>> import tracked as tr
    >>> tr.istracked(tr.param(1.0)), tr.istracked(1.0)
    (True, False)
    """
    return isinstance(x, Tracked)


def back(y: Tracked, dy: npt.ArrayLike | None = None, retain_graph: bool = False) -> None:
    """``back(y, dy=None)``: accumulate ``dy``-weighted gradients of ``y`` into its leaves.

    ``dy`` defaults to 1 for a scalar ``y`` and is required otherwise.  The entries
    used are released unless ``retain_graph=True``.

    >>> import numpy as np, tracked as tr
    >>> x = tr.param(np.array([1.0, 2.0, 3.0]))
    >>> tr.back(np.sum(x ** 2)); x.grad
    array([2., 4., 6.])
    """
    if not isinstance(y, Tracked):
        raise TypeError(f'back expects a tracked value, got {type(y).__name__}: nothing '
                        f'that produced it was tracked (did you call tr.param?)')
    node = y._node
    ans = y._value
    seed: Any
    if dy is None:
        if getattr(ans, 'ndim', 0) != 0:
            raise ValueError(f'back(y) needs dy for a y of shape {y.shape}: pass '
                             f'back(y, dy) with dy of that shape, or reduce y to a scalar')
        seed = np.ones((), dtype=plain(ans).dtype)[()]
    else:
        seed = dy if isinstance(dy, Tracked) else np.asarray(dy, dtype=plain(ans).dtype)
        if seed.shape != y.shape:
            raise ValueError(f'back(y, dy): dy has shape {seed.shape}, y has shape {y.shape}')
    for leafnode, g in backward(node, seed, retain=retain_graph, sparse=True).items():
        buf = leafnode.grad
        if buf is not None:
            if type(g) is SparseCotangent:
                g.add_into(buf)         # slices of a parameter: no zero-filled copy
            else:
                buf += plain(g)

