"""Custom rules: ``@rule`` (``ignoring.py`` switches differentiation off, ``checkpoint.py``
trades memory for recomputation).

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
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, overload

import numpy as np

from . import tape as _tape
from .registry import Primitive
from .rebind import RebindError, rebind
from .reverse import vjp
from .tape import active_recorder
from . import box
from .box import plain
from .boxes import Tracked
from .dispatch import apply

__all__ = ['rule']


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
