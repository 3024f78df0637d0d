"""Dispatch and recording: every operation on tracked values reaches ``apply`` (or
``call``, which finds the callable's rule in the registry first), which records one
tape entry at the highest level among the arguments, or hands the operation to forward
mode when that level is a ``Dual``'s.  Nothing here lists NumPy functions: that is the
rules' job; nothing here defines a box type: box.py's ``TYPES`` are what it makes.

Modules above this one connect through registration calls made by the package's
``__init__``: forward mode's ``apply`` (``register_forward``) and the view tracking of
views.py (``register_views``).
"""
from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import registry
from . import tape as _tape
from .box import TYPES, Box, make, plain
from .conversions import plain_result
from .tape import Cotangents, Node, active_recorder, new_node, recording_paused

__all__ = ['apply', 'call', 'call_nondiff', 'record', 'record_outputs', 'box_outputs',
           'holds_tracked', 'bind_keywords', 'ufunc_call', 'plain_index', 'sequence_operand',
           'register_forward', 'register_views', 'HOOKS', 'SELECT', 'VIEW_WRITE',
           'LEAF_VIEW_WRITE']

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
        if isinstance(a, Box):
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
        return HOOKS.forward(prim, args, kwargs, level)
    if _tape.special_threads:
        if recording_paused():
            return prim.fn(*[plain(a) for a in args], **kwargs)
        rec = active_recorder()
        if rec is not None and rec.level == level:  # a GradientTape records this level
            out = rec.record(prim, args, kwargs)
            if prim.view:
                HOOKS.note(out, args[0], (prim, args[1:], kwargs))
            return out
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, Box):
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
        if isinstance(a, Box):
            n = a._node
            if n.level == level:
                a = a._value
                if isinstance(a, Box):
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
        HOOKS.note(out, args[0], (prim, args[1:], kwargs))
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


def _index_level(positions: Sequence[int], args: Sequence[Any], below: int | None = None) -> int:
    """The highest level of a tracked part of the index arguments at ``positions``
    (below ``below`` if given), or -1."""
    level = -1
    for p in positions:
        if p < len(args) and type(args[p]) in (tuple, list):
            for part in args[p]:
                if isinstance(part, Box):
                    lv = part._node.level
                    if lv > level and (below is None or lv < below):
                        level = lv
    return level


def record(prim: registry.Primitive, vals: Sequence[Any], kwargs: dict[str, Any], ans: Any,
           parents: Sequence[tuple[int, Node]], key: int, level: int,
           same_shape: bool = False) -> Any:
    """Box ``ans`` = ``prim.fn(*vals, **kwargs)`` with its tape entry; ``parents`` are
    (position, node) pairs at ``level``, ``key`` is ``registry.plan_key(parents,
    len(vals))``.  ``tape.new_node`` inline: a call and its helpers cost ~15% of ``apply``.
    """
    if type(ans) is not np.ndarray and not isinstance(ans, np.generic) or ans.dtype.kind == 'O':
        ans = plain_result(prim.name, ans)
    keep_ans, saver, _ = prim.saves.get(key) or prim.plan(key)
    t: Any = object.__new__(TYPES.real if ans.ndim == 0 else TYPES.array)
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
    if isinstance(a, Box):
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
            a = make(a, sel)
        out.append(a)
    return type(ans)(*out) if hasattr(type(ans), '_fields') else tuple(out)


_NOKW: dict[str, Any] = {}
_KEY_SHIFT = registry.KEY_SHIFT
_MAX_ARGS = registry.MAX_ARGS
_next_seq = _tape.sequence.__next__
_OPERANDS = registry.OPERANDS

_SEQUENCES = (list, tuple)


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


def _no_forward(prim: registry.Primitive, args: Sequence[Any], kwargs: dict[str, Any],
                level: int) -> Any:
    raise RuntimeError('a forward-mode value reached tracked.dispatch before forward mode '
                       'was registered; import tracked (the package), not its modules alone')


class Hooks:
    """What dispatch hands on to the modules above it, registered by the package:
    ``forward(prim, args, kwargs, level)``, forward mode's apply (``register_forward``;
    only its ``Dual`` values lead there), and views.py's ``note`` and ``write``
    (``register_views``; until then views are not tracked and writes through them are
    refused with ``VIEW_WRITE``)."""

    def __init__(self) -> None:
        self.forward: Callable[..., Any] = _no_forward
        self.note: Callable[[Any, Any, Any], None] = _untracked_view
        self.write: Callable[[Any, Any], bool] = _untracked_write


HOOKS = Hooks()


def register_forward(forward: Callable[..., Any]) -> None:
    """Make ``forward(prim, args, kwargs, level)`` the apply of operations whose highest
    level is a forward-mode one (tracked/forward.py; called once by the package)."""
    HOOKS.forward = forward


def register_views(note: Callable[[Any, Any, Any], None],
                   write: Callable[[Any, Any], bool]) -> None:
    """Make ``note(view, base, step)`` and ``write(box, new) -> handled`` the boxes' view
    tracking (tracked/views.py; called once by the package's ``__init__``)."""
    HOOKS.note = note
    HOOKS.write = write



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
                if isinstance(v, Box) or (type(v) in _SEQUENCES and holds_tracked(v)):
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
    >>> from tracked.dispatch import holds_tracked
    >>> holds_tracked([1.0, (2.0, tr.param(3.0))]), holds_tracked([1.0])
    (True, False)
    """
    if isinstance(v, Box):
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
        pv: Any = plain(v) if isinstance(v, Box) else None
        if getattr(pv, 'ndim', None) == 0 and pv.dtype.kind in 'iub':
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
            inputs = [sequence_operand(a) if type(a) in _SEQUENCES else a for a in inputs]
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


def plain_index(self: Any, idx: Any) -> Any:
    """Indices are constants of the tape; a tracked index is read (a guard when recording)."""
    if isinstance(idx, Box):
        return plain(idx) if active_recorder() is None else idx._concrete('index-array')
    if type(idx) is tuple:
        return tuple(plain_index(self, i) for i in idx)
    return idx



def sequence_operand(x: Sequence[Any]) -> np.ndarray:
    """A list or tuple operand as an array, converted once when the entry is recorded."""
    try:
        return np.asarray(x)
    except TypeError:
        raise TypeError('an operand is a list holding tracked values; build an array from '
                        'them with np.stack (or import tracked.numpy as np, whose np.array '
                        'accepts them)') from None

