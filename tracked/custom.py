"""Custom rules and control of differentiation: ``rule``, ``ignore_derivatives``,
``non_differentiable``, ``checkpoint``.

A custom rule or a checkpoint is one tape entry: a ``Primitive(direct=True)`` whose
forward gets the arguments tracked at lower (outer) levels as they are, so the
pullback it produces closes over them and is itself differentiable there (that is
what nests).  The per-call pullback travels in a ``_Call`` object passed as the
keyword ``_state``: each argument position's vjp reads it, the user's pullback runs
once per backward step, and a replayed tape that re-runs the forward refreshes it
(a replay never uses a pullback captured while recording).
"""
import functools
import types

import numpy as np

from . import values as _values
from .functors import _kind, _map, _keep
from .registry import Primitive
from .tape import pause_recording
from .values import Tracked, apply, plain

__all__ = ['rule', 'ignore_derivatives', 'non_differentiable', 'checkpoint']


class _Call:
    """The state of one call of a custom rule: its pullback and the last cotangents."""

    __slots__ = ('pullback', 'g', 'cts')

    def __init__(self):
        self.pullback = None
        self.g = self.cts = None

    def cotangents(self, g, nargs):
        if g is not self.g:          # once per backward step, shared by every position
            cts = self.pullback(g)
            if not isinstance(cts, (tuple, list)):
                cts = (cts,)
            if len(cts) != nargs:
                raise ValueError(f'a custom pullback returned {len(cts)} cotangents for '
                                 f'{nargs} arguments; return one per positional argument '
                                 f'(None for those without a gradient)')
            self.g, self.cts = g, tuple(cts)
        return self.cts


def _position_vjp(i):
    def vjp(g, ans, *args, _state, **kwargs):
        return _state.cotangents(g, len(args))[i]
    return vjp


def _primitive(forward, nargs, name, cache):
    prim = cache.get(nargs)
    if prim is None:
        prim = cache[nargs] = Primitive(forward, [_position_vjp(i) for i in range(nargs)],
                                        name=name, direct=True)
    return prim


def _any_tracked(args):
    for a in args:
        if isinstance(a, Tracked):
            return True
    return False


class RuleForward:
    """The forward of a ``@rule`` primitive; ``.function`` is the user's function.

    Called as ``forward(*args, _state=call, **kwargs)`` it runs the user's function
    and stores the pullback in ``call``.
    """

    __slots__ = ('function',)

    def __init__(self, function):
        self.function = function

    def __call__(self, *args, _state, **kwargs):
        y, pb = self.function(*args, **kwargs)
        if not callable(pb):
            raise TypeError(f'@tr.rule function {self.function.__name__} must return '
                            f'(value, pullback); its second result is not callable')
        _state.pullback = pb
        _state.g = _state.cts = None     # a replay may reuse a cotangent buffer
        return _as_output(y, self.function.__name__)


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


def rule(fn):
    """``@rule``: make ``fn`` a primitive with its own pullback; ``fn(*args)`` returns
    ``(value, pullback)`` and ``pullback(dy)`` one cotangent per positional argument.

    On tracked arguments the call records one tape entry.  At the top level ``fn``
    sees plain arrays; under nesting it sees values tracked at the outer level, so a
    forward and pullback written with NumPy operations give second derivatives too.
    Keyword arguments are constants.

    >>> import numpy as np, tracked as tr
    >>> @tr.rule
    ... def softplus(x):
    ...     y = np.logaddexp(0.0, x)
    ...     return y, lambda dy: (dy / (1 + np.exp(-x)),)
    >>> tr.gradient(lambda x: np.sum(softplus(x)), np.array([0.0, 1.0]))
    (array([0.5       , 0.73105858]),)
    """
    forward = RuleForward(fn)
    cache = {}
    name = getattr(fn, '__name__', 'rule')

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _any_tracked(args):
            return fn(*args, **kwargs)[0]
        for v in kwargs.values():
            if isinstance(v, Tracked):
                raise TypeError(f'{name}: pass tracked values to a @tr.rule function as '
                                f'positional arguments')
        kw = dict(kwargs)
        kw['_state'] = _Call()
        return apply(_primitive(forward, len(args), name, cache), args, kw)
    wrapper.forward = forward
    return wrapper


# --------------------------------------------------------------------------
# Switching differentiation off
# --------------------------------------------------------------------------

_FUNCTIONS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
              functools.partial)


def _untracked(x):
    if isinstance(x, Tracked):
        return plain(x)
    if _kind(x) is None:
        return x
    return _map(plain, x, (), _is_tracked, _keep, {})


def _is_tracked(x):
    return isinstance(x, Tracked)


def ignore_derivatives(x):
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
    return _untracked(x)


def non_differentiable(fn):
    """``@non_differentiable``: ``fn`` gets plain values and its outputs never carry gradients.

    >>> import numpy as np, tracked as tr
    >>> @tr.non_differentiable
    ... def top(x):
    ...     return int(np.argmax(x))
    >>> tr.gradient(lambda x: x[top(x)] * 2, np.array([1.0, 3.0, 2.0]))
    (array([0., 2., 0.]),)
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for a in args:
            if isinstance(a, Tracked) or _kind(a) is not None:
                return _untracked(_values.call_nondiff(
                    fn, tuple(_untracked_arg(a) for a in args), kwargs))
        return _untracked(fn(*args, **kwargs))
    return wrapper


def _untracked_arg(a):
    # call_nondiff strips tracked scalars/arrays; trees are stripped here.
    return a if isinstance(a, Tracked) or _kind(a) is None else _untracked(a)


# --------------------------------------------------------------------------
# Checkpointing
# --------------------------------------------------------------------------

class _CheckpointForward:
    """Forward of a checkpoint: ``f`` on the values, recorded at no level of this call."""

    __slots__ = ()

    def __call__(self, *vals, _f, _state):
        from .api import vjp
        _state.pullback = _recompute(vjp, _f, vals)
        _state.g = _state.cts = None
        return _as_output(_f(*vals), getattr(_f, '__name__', 'f'))


def _recompute(vjp, f, vals):
    def pullback(g):
        return vjp(f, *vals)[1](g)      # runs f again, now recording, then its backward
    return pullback


_checkpoint_forward = _CheckpointForward()
_checkpoint_cache = {}


def checkpoint(f, *args):
    """``checkpoint(f, *args)``: ``f(*args)``, recomputed in the backward pass instead of
    keeping its intermediates (one tape entry; ``f`` returns one array).

    >>> import numpy as np, tracked as tr
    >>> f = lambda x: np.sum(np.sin(x) ** 2)
    >>> tr.gradient(lambda x: tr.checkpoint(f, x), np.array([0.5, 1.0]))[0]
    array([0.84147098, 0.90929743])
    """
    if not _any_tracked(args):
        if not any(_kind(a) is not None and _leaves_tracked(a) for a in args):
            return f(*args)
    flat, rebuild = _flatten_tracked(args)

    def f_flat(*vals):
        return f(*rebuild(vals))
    f_flat.__name__ = getattr(f, '__name__', 'f')
    prim = _primitive(_checkpoint_forward, len(flat), 'checkpoint', _checkpoint_cache)
    return apply(prim, flat, {'_f': f_flat, '_state': _Call()})


def _leaves_tracked(tree):
    from .functors import leaves
    return bool(leaves(tree, _is_tracked))


def _flatten_tracked(args):
    """Tracked leaves of ``args`` (positional arguments of the entry) and the way back."""
    from .functors import leaves
    flat = []
    for a in args:
        if isinstance(a, Tracked):
            flat.append(a)
        elif _kind(a) is not None:
            flat.extend(leaves(a, _is_tracked))

    def rebuild(vals):
        it = iter(vals)
        out = []
        for a in args:
            if isinstance(a, Tracked):
                out.append(next(it))
            elif _kind(a) is not None:
                out.append(_map(lambda t: next(it), a, (), _is_tracked, _keep, {}))
            else:
                out.append(a)
        return out
    return flat, rebuild
