"""Custom rules and control of differentiation: ``rule``, ``ignore_derivatives``,
``non_differentiable``, ``checkpoint``.

A custom rule is one tape entry: a ``Primitive(direct=True)`` whose
forward gets the arguments tracked at lower (outer) levels as they are, so the
pullback it produces closes over them and is itself differentiable there (that is
what nests).  The per-call pullback travels in a ``_Call`` object passed as the
keyword ``_state``: each argument position's vjp reads it, the user's pullback runs
once per backward step, and a replayed tape that re-runs the forward refreshes it
(a replay never uses a pullback captured while recording).

Opaque rules.  A forward that cannot run on tracked values (SciPy, ``math``, a C
extension) is called on plain values instead, at every lower level, as the
primitive ``name[opaque]`` whose pullback is the user's: first order is exact at
every level.  Where an argument is differentiated at a level, the pullback is
rebuilt over that level's arguments and output (``rebind.py``) and run with NumPy
operations the lower levels record: higher orders are exact too (autograd's
level-by-level primitive).  Otherwise its backward step is the primitive
``name[opaque].pullback[i]`` (the user's pullback on the plain cotangent), so a
recorded tape holds one opaque forward and one opaque pullback instruction that
call the user's function again on replay.  Differentiating that pullback in its
cotangent (it is linear there) traces it at run time (``.pullback[i].T``);
differentiating it in the input is impossible then, and a guard entry
(``_poisoned``) raises, naming why, if a backward pass needs it.
"""
from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, overload

import numpy as np

from . import tape as _tape
from . import dispatch as _dispatch
from .registry import Primitive
from .rebind import RebindError, rebind
from .reverse import vjp
from .tape import Dropped, pause_recording, active_recorder
from .tree_util import is_node, leaves, tree_map
from . import box
from .box import plain
from .boxes import Tracked
from .dispatch import apply, leaf_root

__all__ = ['rule', 'ignore_derivatives', 'non_differentiable', 'checkpoint']


class _Call:
    """The state of one call of a custom rule: its pullback and the last cotangents."""

    __slots__ = ('pullback', 'g', 'cts', 'seen', 'rebound')

    def __init__(self) -> None:
        self.pullback: Any = None       # the rule's pullback, once its forward ran
        self.g: Any = None
        self.cts: Any = None
        self.seen: Any = None           # (args, raw value) the forward ran on: plain
        self.rebound: Any = None        # {level: rebuilt pullback or RebindError} (rebind.py)

    def __reduce__(self):          # per-call state: a replay of the forward refreshes it
        return _Call, ()

    def cotangents(self, g, nargs):
        if g is not self.g:          # once per backward step, shared by every position
            self._store(g, self.pullback(g), nargs)
        return self.cts

    def first(self, g, ans, args, kwargs, forward):
        """``cotangents`` for a new ``g``; a pullback that fails on tracked values
        makes the call opaque (``forward`` re-runs on plain values)."""
        mark = _guard_mark() if _tape.special_threads else None    # (inlined test: hot)
        try:
            cts = self.pullback(g)
        except Exception:
            if forward is None or type(self.pullback) is _OpaquePullback or not (
                    isinstance(g, Tracked) or _any_tracked(args)):
                raise
            _rollback_guards(mark)
            self.pullback = forward.opaque(args, kwargs)
            cts = self.pullback(g)
        if not (type(cts) is tuple and len(cts) == len(args)):
            cts = self._store(g, cts, len(args))
        _check_shapes(cts, args, ans)
        self.g, self.cts = g, cts
        return cts

    def _store(self, g, cts, nargs):
        if not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if len(cts) != nargs:
            raise ValueError(f'a custom pullback returned {len(cts)} cotangents for '
                             f'{nargs} arguments; return one per positional argument '
                             f'(None for those without a gradient)')
        self.g, self.cts = g, tuple(cts)
        return self.cts


_NUMBERS = (float, int, complex, bool)


def _check_shapes(cts, args, ans):
    """A cotangent is shaped like its argument (or like the output, which the tape sums
    down to the argument's shape); any other shape is a bug in the pullback that
    summing would hide."""
    out = getattr(ans, 'shape', None)
    for i, (ct, a) in enumerate(zip(cts, args)):
        if ct is None or type(ct) in _NUMBERS:
            continue                # a number: shaped like anything (broadcast by the tape)
        shape = getattr(ct, 'shape', None)
        expected = () if type(a) in _NUMBERS else getattr(a, 'shape', None)
        if shape is not None and expected is not None and shape != expected and shape != out:
            raise ValueError(f'a custom pullback returned a cotangent of shape {shape} for '
                             f'argument {i} of shape {expected}'
                             + (f' (the output has shape {out})' if out is not None else '')
                             + '; return one shaped like its argument')


def _position_vjp(i, forward=None):
    def vjp(g, ans, *args, _state, **kwargs):
        if g is _state.g:
            return _state.cts[i]
        return _state.first(g, ans, args, kwargs, forward)[i]
    return vjp


def _primitive(forward, nargs, name, cache, rule_forward=None, jvp=None):
    prim = cache.get(nargs)
    if prim is None:
        prim = cache[nargs] = Primitive(
            forward, [_position_vjp(i, rule_forward) for i in range(nargs)],
            name=name, direct=True, sequences=range(nargs),   # the user's arguments as given
            jvp=None if getattr(rule_forward, 'jvp', None) is None else _user_jvp(rule_forward.jvp))
        # pickles as this lookup: the rule's function by reference
        prim.ref = (_rule_primitive, (rule_forward, nargs))
    return prim


def _user_jvp(jvp):
    """A ``@tr.rule``'s tangent rule ``jvp(tangents, y, *args)`` as the registry calls it
    (without the rule's per-call state)."""
    def rule_jvp(tangents, ans, *args, _state=None, **kwargs):
        return jvp(tangents, ans, *args, **kwargs)
    return rule_jvp


def _rule_primitive(forward, key):
    """The primitive of rule ``forward`` for ``key`` (its number of arguments, or an
    opaque entry's key: ``RuleForward._prim``)."""
    if type(key) is int:
        return _primitive(forward, key, forward.name, forward.prims, forward)
    return forward._prim(key)


def _any_tracked(args):
    for a in args:
        if isinstance(a, Tracked):
            return True
    return False


def _recording():
    """The recorder of the ``GradientTape`` recording on this thread, or None."""
    return active_recorder() if _tape.special_threads else None


def _guard_mark():
    """Where the active recording's guards end now (None when nothing records)."""
    rec = _recording()
    return None if rec is None else (rec, len(rec.guards))


def _rollback_guards(mark):
    """Drop the guards a failed attempt recorded: its instructions are dead code."""
    if mark is not None:
        rec, n = mark
        del rec.guards[n:]


class RuleForward:
    """The forward of a ``@rule`` primitive; ``.function`` is the user's function.

    Called as ``forward(*args, _state=call, **kwargs)`` it runs the user's function
    and stores the pullback in ``call``.  On lower-level tracked arguments it first
    tries the function on them (that nests); if that fails, or returns an untracked
    value, or the rule is ``opaque``, the call becomes opaque (module docstring).
    """

    __slots__ = ('function', 'name', 'always_opaque', 'prims', 'jvp', 'why')

    def __init__(self, function, name=None, opaque=False, jvp=None):
        self.why = None      # why the last opaque pullback could not be rebuilt (rebind.py)
        self.function = function
        self.name = name or getattr(function, '__name__', 'rule')
        self.always_opaque = opaque
        self.prims = {}      # number of arguments or opaque key -> Primitive
        self.jvp = jvp       # the rule's tangent rule, or None (double vjp)

    def __reduce__(self):
        # By reference to the module-level @rule function that holds it, as pickle sends
        # functions; one defined in __main__ (a script, a notebook) travels by value,
        # which cloudpickle (Dask's fallback) can do.
        owner: Any = sys.modules.get(getattr(self.function, '__module__', None) or '')
        if owner is not None and owner.__name__ != '__main__':
            for part in self.function.__qualname__.split('.'):
                owner = getattr(owner, part, None)
            if getattr(owner, 'forward', None) is self:
                return _rule_forward, (owner,)
        return RuleForward, (self.function, self.name, self.always_opaque)

    def __call__(self, *args, _state, **kwargs):
        for a in args:
            if isinstance(a, Tracked):
                return self._on_tracked(args, _state, kwargs)
        y, pb = self._split(self.function(*args, **kwargs))
        _state.pullback = pb
        _state.g = _state.cts = None     # a replay may reuse a cotangent buffer
        _state.seen, _state.rebound = (args, y), None
        return _as_output(y, self.function.__name__)

    def _on_tracked(self, args, state, kwargs):
        if not self.always_opaque:
            mark = _guard_mark()
            try:
                result = self.function(*args, **kwargs)
            except Exception:
                pass                         # not NumPy that tracked can trace: opaque
            else:
                y, pb = self._split(result)
                if isinstance(y, Tracked):
                    state.pullback = pb
                    state.g = state.cts = None
                    return y
                # An untracked value from tracked inputs: the forward read values
                # (float(x), math.*) instead of computing with them.
            _rollback_guards(mark)
        pb = state.pullback = self.opaque(args, kwargs)
        state.g = state.cts = None
        return pb.y

    def _split(self, result):
        """``(value, pullback)`` from what the rule's function returned, or a clear error."""
        if type(result) not in (tuple, list) or len(result) != 2 or not callable(result[1]):
            got = (f'a {type(result).__name__} of {len(result)}' if type(result) in (tuple, list)
                   else f'a {type(result).__name__}')
            raise TypeError(f'@tr.rule function {self.name} must return (value, pullback): '
                            f'a 2-tuple whose second item is a function of the cotangent; '
                            f'it returned {got}')
        return result

    # -- opaque calls ------------------------------------------------------------
    def opaque(self, args, kwargs):
        """Call the function on the plain values of ``args`` as the primitive
        ``name[opaque]`` (recorded at every lower level); returns its pullback."""
        inner = _Call()
        kw = dict(kwargs)
        kw['_state'] = inner
        y = apply(self._prim(('fwd', len(args))), args, kw)
        return _OpaquePullback(self, inner, y, args)

    def _prim(self, key):
        prim = self.prims.get(key)
        if prim is None:
            prim = self.prims[key] = _make_opaque_prim(self, key)
            prim.ref = (_rule_primitive, (self, key))        # pickles as this lookup
        return prim


def _rule_forward(function):
    """The ``RuleForward`` of a ``@rule`` function (unpickling it)."""
    return function.forward


class _OpaquePullback:
    """The pullback of an opaque call at one level: the user's pullback on the plain
    cotangent, recorded as ``name[opaque].pullback[i]`` where anything is tracked."""

    __slots__ = ('forward', 'inner', 'y', 'args')

    def __init__(self, forward, inner, y, args):
        self.forward, self.inner, self.y, self.args = forward, inner, y, args

    def __call__(self, g):
        return tuple(_opaque_cotangent(self.forward, self.inner, i, g, self.y, self.args)
                     for i in range(len(self.args)))


def _opaque_vjp(forward, i):
    def vjp(g, ans, *args, _state, **kwargs):
        return _opaque_cotangent(forward, _state, i, g, ans, args)
    return vjp


def _opaque_cotangent(forward, inner, i, g, y, args):
    """Cotangent ``i`` of an opaque call with output ``y`` (seen at this level)."""
    nargs = len(args)
    if _differentiated(args):
        cts = _rebound_cotangents(forward, inner, g, y, args)
        if cts is not None:
            return cts[i]
    ct = inner.cotangents(plain(g), nargs)[i]
    if ct is None:
        return None
    if not isinstance(ct, (np.ndarray, np.generic)):
        ct = np.asarray(ct)
        ct = ct[()] if ct.ndim == 0 else ct
    if isinstance(g, Tracked) or (isinstance(y, Tracked) and _recording() is not None):
        # differentiable in g, or recorded: one entry calling the (fresh) pullback
        kw = {'_state': inner, '_shape': np.shape(ct), '_dtype': ct.dtype}
        ct = apply(forward._prim(('pb', nargs, i)), (g, y), kw)
    return _poisoned(forward, ct, args)


def _differentiated(args):
    """Whether an argument is tracked at a level that is differentiated (not a
    recording's own)."""
    rec = _recording()
    floor = -1 if rec is None else rec.level
    return any(isinstance(a, Tracked) and box.level(a) > floor for a in args)


def _rebound_cotangents(forward, inner, g, y, args):
    """The cotangents of an opaque call from its pullback rebuilt over this level's
    ``args`` and ``y`` (rebind.py), computed with NumPy operations that the lower levels
    record: autograd's level-by-level primitive.  None when it cannot be (the reason is
    kept for the second-order error)."""
    if inner.seen is None:
        return None
    level = max(box.level(a) for a in args if isinstance(a, Tracked))
    made = inner.rebound if inner.rebound is not None else {}
    inner.rebound = made
    key = (level, id(g))
    hit = made.get(key)
    if hit is None:
        fn = made.get(level)
        if fn is None:
            seen_args, seen_y = inner.seen
            pairs = list(zip(seen_args, args)) + [(seen_y, y)]
            try:
                fn = rebind(inner.pullback, forward.function, pairs)
            except RebindError as e:
                fn = e
            made[level] = fn
        if isinstance(fn, RebindError):
            forward.why = str(fn)
            return None
        mark = _guard_mark()
        try:
            cts = fn(g)
        except Exception as e:          # the pullback is opaque too
            _rollback_guards(mark)
            forward.why = (f'its pullback could not run on tracked values '
                           f'({type(e).__name__}: {e})')
            made[level] = RebindError(forward.why)
            return None
        if not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if len(cts) != len(args):
            raise ValueError(f'a custom pullback returned {len(cts)} cotangents for '
                             f'{len(args)} arguments; return one per positional argument '
                             f'(None for those without a gradient)')
        hit = made[key] = (g, tuple(cts))   # g kept alive: its id stays its own
    return hit[1]


def _poisoned(forward, ct, args):
    """``ct`` with an entry at every level where an argument is tracked whose pullback
    towards the argument raises: an opaque pullback's dependence on its input is
    unknown, and a backward pass that needs it must not get zero silently."""
    rec = _recording()
    floor = -1 if rec is None else rec.level   # a recording's own level is not differentiated
    for a in args:
        if isinstance(a, Tracked) and box.level(a) > floor:
            xs = [a for a in args if isinstance(a, Tracked)]
            return apply(forward._prim(('poison',)), [ct] + xs, {})
    return ct


class _OpaquePullbackFn:
    """Forward of ``name[opaque].pullback[i]``: the stored pullback on a plain cotangent."""

    __slots__ = ('nargs', 'i')

    def __init__(self, nargs, i):
        self.nargs, self.i = nargs, i

    def __call__(self, g, y, *, _state, _shape, _dtype):
        ct = _state.cotangents(g, self.nargs)[self.i]
        if ct is None:                   # a replay where the pullback gives no gradient
            return np.zeros(_shape, _dtype)[()] if _shape == () else np.zeros(_shape, _dtype)
        if not isinstance(ct, (np.ndarray, np.generic)):
            ct = np.asarray(ct)
            ct = ct[()] if ct.ndim == 0 else ct
        return ct


class _TransposedPullbackFn:
    """Forward of ``name[opaque].pullback[i].T``: the pullback's adjoint in its
    cotangent, by tracing the stored pullback on a tracked ``dy`` now."""

    __slots__ = ('name', 'nargs', 'i')

    def __init__(self, name, nargs, i):
        self.name, self.nargs, self.i = name, nargs, i

    def __call__(self, h, y, *, _state, _shape, _dtype):
        pb, i = _state.pullback, self.i
        dtype = y.dtype if getattr(y, 'dtype', np.dtype(float)).kind == 'f' else np.float64
        u0 = np.ones(np.shape(y), dtype)         # any point: a pullback is linear in dy
        u0 = u0[()] if u0.ndim == 0 else u0

        def along(u):
            cts = pb(u)
            return (cts if isinstance(cts, (tuple, list)) else (cts,))[i]
        try:
            ct, back = vjp(along, u0)
            out = back(h)[0]
        except Exception as e:
            raise TypeError(self._message(f'it failed on a tracked dy ({type(e).__name__}: '
                                          f'{e})')) from e
        if out is None:
            if ct is not None and np.any(plain(ct) != 0):
                raise TypeError(self._message('its result does not depend on a tracked dy '
                                              '(it read the value of dy)'))
            out = np.zeros(np.shape(y), dtype)
            out = out[()] if out.ndim == 0 else out
        return out

    def _message(self, why):
        return (f'differentiating the pullback of @tr.rule {self.name} in its cotangent '
                f'(second derivatives, jvp, hvp) needs the pullback written with NumPy '
                f'operations on dy: {why}')


def _identity_vjp(g, ans, *args, **kwargs):
    return g


class _PoisonVjps:
    """Pullbacks of the second-order guard: identity for the cotangent, an error for
    each input."""

    def __init__(self, forward):
        self.forward = forward

    def __len__(self):
        return 1 << 62

    def __getitem__(self, i):
        return _identity_vjp if i == 0 else self._refuse

    def _refuse(self, g, ans, *args, **kwargs):
        f = self.forward
        why = f.why or ('it is marked opaque' if f.always_opaque else
                        'its forward and pullback ran on plain values')
        raise TypeError(
            f'second derivatives through @tr.rule {f.name} need its pullback written with '
            f'NumPy operations on its arguments, its output and dy: {why}. Its forward may '
            f'call anything (it runs on plain values); the pullback is then rebuilt over '
            f'the tracked arguments and output. First derivatives are exact: '
            f'tr.gradcheck(f, *args, order=1) checks them alone. For forward mode inside a '
            f'gradient, a jvp= written with NumPy operations is enough: @tr.rule(jvp=...).')


def _poison_fn(forward):
    def fn(ct, *xs):
        return _poisoned(forward, ct, xs)
    return fn


# The pullback depends on the input too, unknown: where the output ``y`` is tracked
# (a jvp by double vjp inside a gradient), the adjoints are poisoned through it, or
# that dependence would be dropped silently.
def _pullback_vjp(forward, nargs, i):
    def vjp(h, ans, g, y, **kwargs):     # pullback[i] is linear in g: its adjoint
        return _poisoned(forward, apply(forward._prim(('pbT', nargs, i)), (h, y), kwargs), (y,))
    return vjp


def _transposed_vjp(forward, nargs, i):
    def vjp(k, ans, h, y, **kwargs):     # the adjoint of the adjoint: pullback[i] again
        return _poisoned(forward, apply(forward._prim(('pb', nargs, i)), (k, y), kwargs), (y,))
    return vjp


def _make_opaque_prim(forward, key):
    name = forward.name
    kind = key[0]
    if kind == 'fwd':
        nargs = key[1]
        return Primitive(forward, [_opaque_vjp(forward, i) for i in range(nargs)],
                         name=f'{name}[opaque]', sequences=range(nargs))
    if kind == 'pb':
        _, nargs, i = key
        return Primitive(_OpaquePullbackFn(nargs, i), [_pullback_vjp(forward, nargs, i), None],
                         name=f'{name}[opaque].pullback[{i}]')
    if kind == 'pbT':
        _, nargs, i = key
        return Primitive(_TransposedPullbackFn(name, nargs, i),
                         [_transposed_vjp(forward, nargs, i), None],
                         name=f'{name}[opaque].pullback[{i}].T')
    prim = Primitive(_poison_fn(forward), (), name=f'{name}[opaque] (second order)',
                     direct=True)
    prim.vjps = _PoisonVjps(forward)     # Primitive() would turn a sequence into a tuple
    return prim


def _as_output(y, name):
    if isinstance(y, Tracked):
        return y
    if getattr(y, 'dtype', None) is None or not hasattr(y, 'ndim'):
        if isinstance(y, (tuple, list, dict)):
            raise TypeError(f'@tr.rule function {name} returned a {type(y).__name__} as its '
                            f'value; a rule has one array output (write multi-output '
                            f'functions as several rules)')
        y = np.asarray(y)
        y = y[()] if y.ndim == 0 else y
    return y


# A rule's forward: ``fn(*args) -> (value, pullback)``, ``pullback(dy)`` a cotangent per
# positional argument; its optional tangent rule ``jvp(tangents, value, *args)``.
RuleFunction = Callable[..., tuple[Any, Callable[[Any], Sequence[Any]]]]
TangentRule = Callable[..., Any]
P = ParamSpec('P')
R = TypeVar('R')


@overload
def rule(fn: RuleFunction, *, opaque: bool = False,
         jvp: TangentRule | None = None) -> Callable[..., Any]: ...
@overload
def rule(fn: None = None, *, opaque: bool = False,
         jvp: TangentRule | None = None) -> Callable[[RuleFunction], Callable[..., Any]]: ...


def rule(fn: RuleFunction | None = None, *, opaque: bool = False,
         jvp: TangentRule | None = None) -> Any:
    """``@rule``: make ``fn`` a primitive with its own pullback; ``fn(*args)`` returns
    ``(value, pullback)`` and ``pullback(dy)`` one cotangent per positional argument.

    On tracked arguments the call records one tape entry.  At the top level ``fn``
    sees plain arrays; under nesting it sees values tracked at the outer level, so a
    forward and pullback written with NumPy operations give second derivatives too.
    Keyword arguments are constants.

    A forward that cannot run on tracked values (SciPy, ``math``, a C extension)
    works at first order everywhere: under nesting or in a recorded tape, when it
    raises on tracked values or returns an untracked value, it is called again on
    plain values ("opaque").  ``@rule(opaque=True)`` decides that up front (no
    attempt: for a costly forward, one with side effects, or one that reads part of
    its input with ``float``).  A recorded or compiled tape calls ``fn`` and its
    pullback again on every replay (instructions ``name[opaque]`` and
    ``name[opaque].pullback[i]``).  Under nesting an opaque rule's pullback is
    rebuilt over each level's tracked arguments and output (``tracked/rebind.py``, as
    autograd applies a primitive level by level), so a pullback written with NumPy
    operations gives higher derivatives although the forward is never traced; one
    that reads other values the forward computed, or cannot run on tracked values,
    gives a ``TypeError`` naming the cause when a second derivative needs it.

    Forward mode (``tr.jvp``, forward-mode Jacobians and Hessians) gets the rule's
    tangent from its pullback by the double-vjp trick, or, faster, from ``jvp=``: a
    function ``jvp(tangents, y, *args)`` returning the tangent of ``y`` given one
    tangent per positional argument (None where an argument has none).

    >>> import numpy as np, tracked as tr
    >>> @tr.rule
    ... def softplus(x):
    ...     y = np.logaddexp(0.0, x)
    ...     return y, lambda dy: (dy / (1 + np.exp(-x)),)
    >>> tr.gradient(lambda x: np.sum(softplus(x)), np.array([0.0, 1.0]))
    (array([0.5       , 0.73105858]),)
    >>> import math
    >>> @tr.rule
    ... def erf(x):                      # math.erf cannot see tracked values: opaque
    ...     y = np.vectorize(math.erf)(x)
    ...     return y, lambda dy: (dy * 2 / np.sqrt(np.pi) * np.exp(-x ** 2),)
    >>> tape = tr.GradientTape(lambda x: np.sum(erf(x)), np.zeros(2))
    >>> tape.gradient(np.array([0.0, 1.0]))[0]
    array([1.12837917, 0.4151075 ])
    >>> @tr.rule(jvp=lambda t, y, x: t[0] * (1 - y * y))
    ... def tanh(x):
    ...     y = np.tanh(x)
    ...     return y, lambda dy: (dy * (1 - y * y),)
    >>> tr.jvp(tanh, (np.array([0.0, 1.0]),), (np.ones(2),))[1]
    array([1.        , 0.41997434])
    """
    if fn is None:
        return functools.partial(rule, opaque=opaque, jvp=jvp)
    name = getattr(fn, '__name__', 'rule')
    forward = RuleForward(fn, name, opaque, jvp)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _any_tracked(args):
            return fn(*args, **kwargs)[0]
        for v in kwargs.values():
            if isinstance(v, Tracked):
                raise TypeError(f'{name}: pass tracked values to a @tr.rule function as '
                                f'positional arguments')
        kw = dict(kwargs)
        kw['_state'] = _Call()
        return apply(_primitive(forward, len(args), name, forward.prims, forward), args, kw)
    wrapper.forward = forward  # type: ignore[attr-defined]  # pickling finds it there
    return wrapper


# --------------------------------------------------------------------------
# Switching differentiation off
# --------------------------------------------------------------------------

_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
              functools.partial)


def _untracked(x: Any) -> Any:
    if isinstance(x, Tracked):
        return plain(x)
    if not is_node(x):
        return x
    return tree_map(plain, x, is_leaf=box.is_box)


def ignore_derivatives(x: Any) -> Any:
    """``ignore_derivatives(x)``: ``x`` without tracking (at every level); for a function,
    ``ignore_derivatives(fn)`` runs ``fn()`` without recording and returns its result.

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda x: x * tr.ignore_derivatives(x), 3.0)
    (np.float64(3.0),)
    >>> tr.gradient(lambda x: tr.ignore_derivatives(lambda: x ** 2) + x, 3.0)
    (np.float64(1.0),)
    """
    if isinstance(x, _FUNCTIONS):
        with pause_recording():
            out = x()
        return _untracked(out)
    return _new_value(_untracked(x))


def _new_value(x: Any) -> Any:
    """``x`` with each array a new object (a view): a value whose derivatives are ignored
    is never the same array as its input, so a tree holding both does not tie them,
    whether the input was tracked (a new array then) or plain (the same one, before)."""
    if type(x) is np.ndarray:
        return x.view() if x.ndim else x
    if not is_node(x):
        return x
    return tree_map(lambda a: a.view() if type(a) is np.ndarray and a.ndim else a, x,
                    is_leaf=lambda a: type(a) is np.ndarray)


def non_differentiable(fn: Callable[P, R]) -> Callable[P, R]:
    """``@non_differentiable``: ``fn`` gets plain values and its outputs never carry gradients.

    >>> import numpy as np, tracked as tr
    >>> @tr.non_differentiable
    ... def top(x):
    ...     return int(np.argmax(x))
    >>> tr.gradient(lambda x: x[top(x)] * 2, np.array([1.0, 3.0, 2.0]))
    (array([0., 2., 0.]),)
    """
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for a in args:
            if isinstance(a, Tracked) or is_node(a):
                return _untracked(_dispatch.call_nondiff(
                    fn, tuple(_untracked_arg(a) for a in args), kwargs))
        return _untracked(fn(*args, **kwargs))
    return wrapper


def _untracked_arg(a: Any) -> Any:
    # call_nondiff strips tracked scalars/arrays; trees are stripped here.
    return a if isinstance(a, Tracked) or not is_node(a) else _untracked(a)


# --------------------------------------------------------------------------
# Checkpointing
# --------------------------------------------------------------------------
# ``f`` is recorded as it runs without checkpoint, so every derivative is that of
# ``f(*args)`` by construction (what it closes over, nesting, forward mode); only the
# values its entries saved are dropped, and a backward pass that needs them runs ``f``
# again and takes them from that run's entries, matched in recording order (PyTorch's
# non-reentrant checkpoint).  Rejected: one tape entry whose forward ran ``f`` on the
# values of its arguments (what this was), which lost what ``f`` closes over; and
# detecting closures to fall back to ``f(*args)``, which gave up the memory saving in
# the commonest case, a layer closing over its weights.

class _Region(Dropped):
    """The entries one ``checkpoint`` call recorded, whose saved values it dropped."""

    __slots__ = ('f', 'args', 'states', 'depth', 'outputs', 'entries')

    def __init__(self, f, args, states, depth, out, entries, start):
        self.f, self.args, self.states, self.depth = f, args, states, depth
        self.outputs = [_fingerprint(plain(t)) for t in _tracked_leaves(out)]
        # weakly: an entry holds its region, and must die with the values using it
        self.entries = {level: [weakref.ref(n) for n in nodes] for level, nodes in entries.items()}
        for nodes in entries.values():
            for n in nodes:
                n.args = n.ans = None
                n.kwargs = self
                # What a recomputation reads must not change meanwhile, as a saved value
                # must not (tape.py): the values of leaves from outside f stay read-only;
                # the rest (f's own arrays) is let go.
                _tape.unprotect(n)
                roots = [leaf_root(p) for _, p in n.parents if p.seq < start]
                _tape.protect(n, [a for a in roots if a is not None])

    def recompute(self, level):
        state = _tape.thread_state
        depth = getattr(state, 'depth', 0)
        state.depth = self.depth        # differentiating() as f saw it (layers' modes)
        start = next(_tape.sequence)
        now = [_state_of(t) for t, _ in self.states]
        for st in self.states:
            _set_state(*st)
        try:
            out = self.f(*self.args)
        finally:
            state.depth = depth
            for st in now:
                _set_state(*st)
        new = _entries(out, start).get(level, [])
        old = self.entries[level]
        outputs = [_fingerprint(plain(t)) for t in _tracked_leaves(out)]
        if len(new) != len(old) or len(outputs) != len(self.outputs) or not all(
                map(_same, self.outputs, outputs)):
            raise RuntimeError(_NOT_AGAIN)
        saved = {}
        for ref, twin in zip(old, new):
            n = ref()
            if n is not None:
                if n.prim is not twin.prim or n.shape != twin.shape:
                    raise RuntimeError(_NOT_AGAIN)
                saved[n] = (twin.args, twin.kwargs, twin.ans)
        return saved


_NOT_AGAIN = ('tr.checkpoint: f computed something else when it ran again in the backward '
              'pass (it draws random numbers, or reads a value that changed since); its '
              'gradient would be wrong. Make f a function of its arguments and what it '
              'closes over, or do not checkpoint it.')


def _fingerprint(v):
    """A few numbers of array ``v`` that change when it does (a sample, its sum and
    squared norm), to compare with a recomputation: keeping ``v`` itself would hold an
    array the checkpoint frees."""
    a = np.ravel(v)
    return np.shape(v), a[::max(1, a.size // 16)].copy(), np.sum(a), np.vdot(a, a).real


def _same(old, new):
    """Whether fingerprint ``new`` is of ``old``'s array computed again: close, not equal
    (a BLAS may round differently on differently aligned memory)."""
    shape, sample, total, squares = old
    if new[0] != shape:
        return False
    norm = np.sqrt(squares) if np.isfinite(squares) else 0.0    # (inf, nan: relative)
    return bool(np.allclose(new[1], sample, rtol=1e-6, atol=1e-6 * norm, equal_nan=True)
                and np.allclose(new[2:], (total, squares), rtol=1e-6,
                                atol=1e-6 * norm * np.sqrt(np.prod(shape)), equal_nan=True))


def _tracked_leaves(out):
    return [out] if isinstance(out, Tracked) else leaves(out, box.is_box)


def _entries(out, start):
    """The non-leaf entries recorded after number ``start`` that ``out`` depends on, per
    level, in recording order: at every level of each tracked value in ``out`` (a dual's
    tangent too), except those a checkpoint inside already dropped."""
    todo = _tracked_leaves(out)
    found: list[_tape.Node] = []
    for t in todo:              # grows while it is walked
        if isinstance(t, Tracked):
            node = box.node(t)
            if type(node) is _tape.Node and node.seq > start:
                found.append(node)
            todo.append(box.unboxed(t))
            if box.is_forward(t):
                todo.append(box.state(t)[2])        # a Dual's tangent
    seen = set(found)
    for node in found:          # grows while it is walked
        for _, parent in node.parents:
            if parent.seq > start and parent not in seen:
                seen.add(parent)
                found.append(parent)
    entries: dict[int, list[_tape.Node]] = {}
    for node in sorted(seen, key=_seq):
        if node.prim is not None and not isinstance(node.kwargs, Dropped):
            entries.setdefault(node.level, []).append(node)
    return entries


def _seq(node):
    return node.seq


def _snapshot(args):
    """The tracked values among ``args`` with their state now (entry, value, tangent).  A
    recomputation runs ``f`` on the same boxes, each put back to that state for the
    run: their identity is part of what ``f`` computes (a tied array: ``f`` may pass an
    argument and the value it closes over to ``destructure``), and an in-place write in
    ``f`` (``a[0] = y``) re-points the box, which must not change what the next
    recomputation starts from."""
    states: list[tuple[Any, ...]] = []
    seen: set[int] = set()

    def note(t):
        if id(t) not in seen and not isinstance(t, int):     # an int is immutable
            seen.add(id(t))
            states.append(_state_of(t))
        return t
    for a in args:
        if isinstance(a, Tracked):
            note(a)
        elif is_node(a) and leaves(a, box.is_box):
            tree_map(note, a, is_leaf=box.is_box)
    return states


def _state_of(t):
    return (t, box.state(t))


def _set_state(t, saved):
    box.restore(t, saved)


def checkpoint(f: Callable[..., Any], *args: Any) -> Any:
    """``checkpoint(f, *args)``: ``f(*args)``, whose intermediate values are not kept for
    the backward pass but recomputed (``f`` runs again) when it needs them.

    Every derivative is that of ``f(*args)``, for the arguments and for what ``f``
    closes over (weights of a layer, say), nested, in forward mode and on recorded
    tapes: ``f`` is recorded as usual, and only the values its entries saved are
    dropped.  The backward pass runs ``f`` again on the same arguments and takes the
    values from the entries of that run, matched in recording order; ``f`` must
    compute the same thing again (a ``RuntimeError`` says so when its output differs,
    say it draws random numbers).  What stays in memory is ``args``, what ``f`` closes
    over, and its tape entries without their arrays.  A ``GradientTape`` keeps every
    buffer anyway: while one records, ``checkpoint`` is ``f(*args)``.

    >>> import numpy as np, tracked as tr
    >>> def loss(W, x):
    ...     layer = lambda h: np.tanh(W @ h)          # closes over W
    ...     return np.sum(tr.checkpoint(layer, tr.checkpoint(layer, x)) ** 2)
    >>> W, x = np.array([[1.0, -0.5], [0.3, 0.2]]), np.array([0.5, 1.0])
    >>> tr.gradient(loss, W, x)[0]
    array([[-0.14193274, -0.39284709],
           [ 0.08369316,  0.21237365]])
    """
    if _recording() is not None:
        return f(*args)
    states = _snapshot(args)
    depth = getattr(_tape.thread_state, 'depth', 0)
    start = next(_tape.sequence)
    out = f(*args)
    entries = _entries(out, start)
    if entries:
        _Region(f, args, states, depth, out, entries, start)
    return out
