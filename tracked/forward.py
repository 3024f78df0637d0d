"""Forward mode: ``Dual`` values carry tangents alongside their primal, without a tape.

A ``Dual`` at trace level ``L`` holds a primal (plain, or tracked at a lower level)
and a tangent of the same shape, or ``K`` tangents stacked along a leading axis
(ForwardDiff's chunks, JAX's ``vmap(jvp)``): ``DualLevel.batch`` says which, for
every value of one level.  NumPy code runs on it unmodified through the same
protocols as tracked values; ``dispatch.apply`` sends an operation whose highest
level is a ``Dual``'s to ``forward_apply``, which computes the primal with
``apply`` (so lower levels record it: forward over reverse) and the tangent from
the primitive's registry entry (``registry.Primitive``: partials, ``linear``, an
explicit ``jvp``, or its pullback by the double-vjp trick).  Tangent rules are
themselves NumPy code, so a tangent tracked at a lower level is recorded too.

Levels make every combination nest without perturbation confusion: a reverse
tape at a lower level sees the dual's computations as ordinary operations, and a
reverse level above a dual one wraps duals as values.
"""
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from . import registry, views as _views
from .arguments import float_dtype, leaf_value
from .reverse import vjp
from .box import plain
from .boxes import Boxed, Tracked, foreign_operation
from .dispatch import apply, call, is_output_array, plain_index, ufunc_call
from .integers import IntBehaviour, RatioBehaviour
from .tape import Cotangents, new_level, thread_state, unbroadcast

__all__ = ['Dual', 'DualInt', 'DualLevel', 'make_dual', 'duals', 'primal', 'tangent',
           'run_forward', 'output_tangent',
           'forward_apply']


class DualLevel:
    """The trace level of a forward-mode evaluation: ``batch`` is the number of
    tangents every ``Dual`` of the level carries along its leading axis (None: one,
    without that axis).  Stands in a ``Dual``'s ``_node`` slot, where ``apply`` reads
    ``level``."""

    __slots__ = ('level', 'batch', 'prim')

    def __init__(self, batch=None):
        self.level = new_level()
        self.batch = batch
        self.prim = None

    def __repr__(self):
        return f'<DualLevel {self.level} batch={self.batch}>'


# DualMethods is mixed into subclasses of Tracked: mypy checks it as one.
if TYPE_CHECKING:
    _Mixin = Tracked
else:
    _Mixin = object


class DualMethods(_Mixin):
    """What a forward-mode value does, shared by ``Dual`` and ``DualInt`` (no slots of its
    own: ``DualInt`` is an ``int``, which allows none)."""

    _forward = True
    _tangent: Any               # the tangent(s) of the value (a batch on a leading axis)

    def __repr__(self):
        return f'Dual({self._value!r}, tangent={self._tangent!r})'

    @property  # type: ignore[misc]  # read-only: a Dual holds no gradient buffer
    def grad(self) -> None:
        return None

    def back(self, dy=None, retain_graph=False):
        raise TypeError('back() of a forward-mode value: it has a tangent, not a tape; '
                        'use tr.gradient or tr.pullback for reverse mode')

    # None of the eager fast paths (they build tape entries): operations go to
    # ``dispatch.apply`` and from there to ``forward_apply``, except elementwise ones,
    # which take ``_elementwise`` (the same result, a third of the Python work).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == '__call__' and not kwargs:
            out = _elementwise(ufunc, inputs, self._node)
            if out is not None:
                return out
        return ufunc_call(ufunc, method, inputs, kwargs)

    def __getitem__(self, idx):
        return call(operator.getitem, self, plain_index(self, idx))

    def _mutate(self, new, idx=None):
        """In-place syntax on a dual: a new value and tangent; a dual sharing memory with
        others (a view, or the base of live views) changes them all, as NumPy would
        (``views.write``)."""
        if not isinstance(new, DUALS) or new._node is not self._node:
            raise TypeError('an in-place operation on a forward-mode value gave a value '
                            'without its tangent')
        if new.shape != self.shape:
            raise ValueError(f'in-place operation would change the shape from {self.shape} '
                             f'to {new.shape}')
        if getattr(self, '_alias', None) is not None and _views.write(self, new):
            return
        self._value, self._tangent = new._value, new._tangent

    def _as_int(self):
        """This 0-d integer dual as a ``DualInt`` (integer arithmetic, ``IntBehaviour``)."""
        return DualInt.make(self._value, self._tangent, self._node)

    def _as_ratio(self):
        """This 0-d float dual computed from integers alone as a ``DualRatio``."""
        if type(self) is not Dual:
            return self
        d = object.__new__(DualRatio)
        d._value, d._tangent, d._node = self._value, self._tangent, self._node
        return d


class Dual(DualMethods, Boxed):
    """A primal value and its tangent(s) at one forward-mode level (see the module
    docstring).  Made by ``tr.jvp`` and forward-mode Jacobians; never on a tape.

    >>> import numpy as np, tracked as tr
    >>> from tracked.forward import DualLevel, Dual, tangent
    >>> d = Dual.make(np.array([0.0, 1.0]), np.array([1.0, 1.0]), DualLevel())
    >>> tangent(np.sin(d) * 2)
    array([2.        , 1.08060461])
    """

    __slots__ = ('_tangent',)

    @staticmethod
    def make(value, t, level):
        """A ``Dual`` of ``level`` (a ``DualLevel``) holding ``value`` and tangent ``t``."""
        d = object.__new__(Dual)
        d._value = value
        d._tangent = t
        d._node = level
        return d


# (int's and Tracked's signatures differ on purpose, as for values.TrackedInt)
class DualInt(IntBehaviour, DualMethods, Tracked, int):  # type: ignore[misc]
    """A differentiated integer scalar in forward mode (``tr.jvp(f, (x, 3), ...)``'s 3):
    the ``int`` it holds in every Python use, as ``TrackedInt`` is in reverse mode.

    >>> import tracked as tr
    >>> tr.jvp(lambda x, n: x * [1.0, 2.0, 4.0][n] * n, (2.0, 2), (1.0, 1.0))
    (np.float64(16.0), np.float64(16.0))
    """

    @staticmethod
    def make(value, t, level):
        """The ``DualInt`` of ``level`` holding integer scalar ``value`` and tangent ``t``."""
        d = int.__new__(DualInt, int(plain(value)))
        d._value = value
        d._tangent = t
        d._node = level
        return d


class DualRatio(RatioBehaviour, Dual):
    """``RatioBehaviour`` in forward mode (``DualInt`` arithmetic)."""

    __slots__ = ()


DUALS = (Dual, DualInt)


def make_dual(value, t, level):
    """A ``Dual`` of ``level`` holding ``value`` and tangent ``t``; a ``DualInt`` for an
    integer scalar (a differentiated int argument)."""
    if getattr(value, 'ndim', None) == 0 and value.dtype.kind in 'iu':
        return DualInt.make(value, t, level)
    return Dual.make(value, t, level)


def _operators():
    """Operator methods without the eager fast paths (those build tape entries)."""
    table = {'add': np.add, 'sub': np.subtract, 'mul': np.multiply, 'truediv': np.true_divide,
             'pow': np.power, 'matmul': np.matmul, 'mod': np.remainder,
             'floordiv': np.floor_divide}

    def make(uf, op, reflected):
        def method(self, other):
            if type(other) in _SEQUENCES:
                other = np.asarray(other)
            elif not isinstance(other, _PLAIN_OPERANDS):    # e.g. a SciPy sparse matrix
                out = foreign_operation(op, self, other, reflected)
                if out is not None:
                    return out
            args = (other, self) if reflected else (self, other)
            out = _elementwise(uf, args, self._node)
            return call(uf, *args) if out is None else out
        return method
    for name, uf in table.items():
        op = getattr(operator, name)
        setattr(DualMethods, f'__{name}__', make(uf, op, False))
        setattr(DualMethods, f'__r{name}__', make(uf, op, True))


_SEQUENCES = (list, tuple)
_PLAIN_OPERANDS = (np.ndarray, Tracked, float, int)
_RULES = registry.RULES
_Primitive = registry.Primitive


def _elementwise(ufunc, inputs, lvl):
    """The fast path of an elementwise rule (``defpartials``) whose tracked inputs are
    all duals of ``lvl`` holding plain values: ``forward_apply`` spelled out, or None
    when it does not apply (nesting, other levels, no partials)."""
    prim = _RULES.get(ufunc)
    if type(prim) is not _Primitive or prim.partials is None:
        return None
    if len(inputs) == 1 and lvl.batch is None:
        # one dual holding a plain value, one tangent: the commonest case, inline
        a = inputs[0]
        v = a._value
        if a._node is not lvl or isinstance(v, Tracked):
            return None
        ans = prim.fn(v)
        d = prim.partials[0]
        t = a._tangent
        t = d(ans, v) * t if callable(d) else t if d == 1 else t * d
        out = object.__new__(Dual)
        out._value = ans
        out._tangent = _fit(t, ans, None)
        out._node = lvl
        return out
    if len(inputs) == 2 and lvl.batch is None:
        # a binary operation, inline too (x * 1.01, x + y)
        a, b = inputs
        ta = tb = None
        if isinstance(a, Tracked):
            if a._node is not lvl or isinstance(a._value, Tracked):
                return None
            ta, a = a._tangent, a._value  # at lvl: a Dual
        if isinstance(b, Tracked):
            if b._node is not lvl or isinstance(b._value, Tracked):
                return None
            tb, b = b._tangent, b._value  # at lvl: a Dual
        ans = prim.fn(a, b)
        da, db = prim.partials
        t = None
        if ta is not None and da is not None:
            t = da(ans, a, b) * ta if callable(da) else ta if da == 1 else ta * da
        if tb is not None and db is not None:
            term = db(ans, a, b) * tb if callable(db) else tb if db == 1 else tb * db
            t = term if t is None else t + term
        out = object.__new__(Dual)
        out._value = ans
        out._tangent = _fit(t, ans, None)
        out._node = lvl
        return out
    primals, tangents = [], []
    for a in inputs:
        if isinstance(a, Tracked):
            if a._node is not lvl or isinstance(a._value, Tracked):
                return None
            primals.append(a._value)
            tangents.append(a._tangent)  # at lvl: a Dual
        else:
            primals.append(a)
            tangents.append(None)
    ans = prim.fn(*primals)
    t = _from_partials(prim.partials, tangents, ans, primals, lvl.batch)
    return Dual.make(ans, _fit(t, ans, lvl.batch), lvl)


_operators()


def primal(x):
    """The primal of a ``Dual`` (``x`` itself otherwise)."""
    return x._value if isinstance(x, DUALS) else x


def tangent(x, level=None):
    """The tangent of a ``Dual`` of ``level`` (any level if None), or None."""
    if isinstance(x, DUALS) and (level is None or x._node is level):
        return x._tangent
    return None


def duals(values, tangents, level):
    """``Dual``s of ``level`` for ``values`` with ``tangents`` (None: no tangent)."""
    return [v if t is None else make_dual(v, t, level) for v, t in zip(values, tangents)]


def run_forward(f, spec, tangents, batch):
    """``f`` on the leaves of ``spec`` (``arguments.Args``) made duals of one new level
    carrying ``tangents`` (None: a constant leaf), ``batch`` of them each (None: one);
    returns the level and ``f``'s output."""
    lvl = DualLevel(batch)
    leaves = duals([leaf_value(a) for a in spec.flat], tangents, lvl)
    state = thread_state                  # differentiating(), for layers' automatic mode
    state.depth = getattr(state, 'depth', 0) + 1
    try:
        return lvl, f(*spec.rebuild(leaves))
    finally:
        state.depth -= 1


def output_tangent(out, lvl, batch=None):
    """The primal and tangent of ``out`` at ``lvl`` (zeros if it does not depend on it)."""
    if isinstance(out, DUALS) and out._node is lvl:
        return out._value, out._tangent
    shape = np.shape(plain(out))
    return out, np.zeros(shape if batch is None else (batch,) + shape, float_dtype(out))


# --------------------------------------------------------------------------
# One operation
# --------------------------------------------------------------------------

def forward_apply(prim, args, kwargs, level):
    """Run primitive ``prim`` on ``args`` whose highest level ``level`` is a forward one:
    the primal through ``apply`` (lower levels record it), the tangent from the rule."""
    lvl = None
    primals, tangents = [], []
    for a in args:
        if isinstance(a, DUALS) and a._node.level == level:
            lvl = a._node
            primals.append(a._value)
            tangents.append(a._tangent)
        else:
            primals.append(a)
            tangents.append(None)
    if prim.index_args:                       # an index holding duals: only its value
        primals = [_strip_level(a, level) if p in prim.index_args else a
                   for p, a in enumerate(primals)]
    # A custom rule (``direct``) runs its own forward on lower-level values, as
    # ``dispatch.apply`` lets it: its pullback then closes over them, so the tangent
    # it gives (double vjp) is differentiable at those levels.
    ans = prim.fn(*primals, **kwargs) if prim.direct else apply(prim, primals, kwargs)
    if lvl is None:                           # duals only inside an index
        return ans
    vjps = prim.vjps
    nv = len(vjps)
    tangents = [t if t is not None and p < nv and vjps[p] is not None else None
                for p, t in enumerate(tangents)]
    if all(t is None for t in tangents):
        return ans
    if prim.multi and isinstance(ans, tuple):
        out = tangent_of(prim, tangents, ans, primals, kwargs, lvl.batch)
        return _box_outputs(ans, out, lvl)
    t = tangent_of(prim, tangents, ans, primals, kwargs, lvl.batch)
    out = Dual.make(ans, _fit(t, ans, lvl.batch), lvl)
    if prim.view:                       # NumPy's aliasing, kept by the boxes (views.py)
        _views.note(out, args[0], (prim, args[1:], kwargs))
    return out


def _strip_level(a, level):
    if isinstance(a, DUALS) and a._node.level == level:
        return a._value
    if type(a) in (tuple, list):
        return type(a)(_strip_level(b, level) for b in a)
    return a


def _box_outputs(ans, out, lvl):
    boxed = []
    for a, t in zip(ans, out):
        if t is None or not is_output_array(a):
            boxed.append(a)
        else:
            boxed.append(Dual.make(a, _fit(t, a, lvl.batch), lvl))
    return type(ans)(*boxed) if hasattr(type(ans), '_fields') else tuple(boxed)


def _fit(t, ans, batch):
    """Tangent ``t`` of output ``ans``: its shape (with the batch axis) and a real dtype
    for a real output."""
    if batch is None and type(t) is np.ndarray and type(ans) is np.ndarray and \
            t.shape == ans.shape and t.dtype == ans.dtype:
        return t                              # the common case, checked cheaply
    shape = np.shape(ans) if batch is None else (batch,) + tuple(np.shape(ans))
    if t is None:                             # the output does not depend on the tangents
        return np.zeros(shape, np.result_type(plain(ans), 0.0))
    if _kind(t) == 'c' and _kind(ans) != 'c':
        t = np.real(t)
    if np.shape(t) != shape:
        t = np.broadcast_to(t, shape)
        if not isinstance(t, Tracked):
            t = np.array(t)
    dtype = getattr(ans, 'dtype', None)
    if dtype is not None and getattr(t, 'dtype', dtype) != dtype and dtype.kind in 'fc':
        t = t.astype(dtype)
    return t


def _kind(x):
    return getattr(getattr(x, 'dtype', None), 'kind', 'c' if type(x) is complex else 'f')


# --------------------------------------------------------------------------
# Tangent rules
# --------------------------------------------------------------------------

def tangent_of(prim, tangents, ans, args, kwargs, batch=None):
    """The output tangent of ``prim`` (a tuple for a multi-output one) given argument
    ``tangents`` (None where an argument has none); with ``batch``, each tangent has a
    leading axis of that length."""
    if prim.partials is not None:
        return _from_partials(prim.partials, tangents, ans, args, batch)
    if batch is not None and prim.batched is not None:
        if prim.batched is True:              # the operation maps batches to batches
            return tangent_of(prim, tangents, ans, args, kwargs)
        out = prim.batched(tuple(tangents), ans, *args, **kwargs)
        if out is not NotImplemented:
            return out
    if batch is not None:         # the other rule forms see one tangent at a time
        rows = [tangent_of(prim, [None if t is None else t[k] for t in tangents], ans, args,
                           kwargs) for k in range(batch)]
        if isinstance(rows[0], tuple):
            return tuple(None if any(x is None for x in r) else np.stack(r) for r in zip(*rows))
        return None if any(r is None for r in rows) else np.stack(rows)
    if prim.linear == 'joint':
        targs = [t if t is not None else (_zeros_like(a) if _differentiable(prim, p) else a)
                 for p, (a, t) in enumerate(zip(args, tangents))]
        return apply(prim, targs, kwargs)
    if prim.linear == 'each':
        out = None
        for p, t in enumerate(tangents):
            if t is not None:
                term = apply(prim, [t if q == p else a for q, a in enumerate(args)], kwargs)
                out = term if out is None else out + term
        return out
    if prim.jvp is not None:
        return prim.jvp(tuple(tangents), ans, *args, **kwargs)
    return _by_double_vjp(prim, tangents, ans, args, kwargs)


def _differentiable(prim, p):
    vjps = prim.vjps
    return p < len(vjps) and vjps[p] is not None


def _zeros_like(a):
    """Plain zeros shaped like ``a``: the tangent of an argument that has none."""
    return np.zeros(np.shape(a), np.result_type(plain(a), 0.0))


def align_batch(t, a, ans):
    """Batched tangent ``t`` of argument ``a`` with axes lined up with output ``ans``'s
    (a broadcast argument gets size-1 axes after the batch axis), for broadcasting.

    >>> align_batch(np.ones((4, 3)), np.ones(3), np.ones((2, 3))).shape
    (4, 1, 3)
    """
    extra = np.ndim(ans) - np.ndim(a)
    if extra <= 0:
        return t
    return np.reshape(t, np.shape(t)[:1] + (1,) * extra + tuple(np.shape(a)))


def _from_partials(partials, tangents, ans, args, batch):
    """``sum(d_k(ans, *args) * t_k)``; batched tangents are aligned on the right."""
    out = None
    for d, t, a in zip(partials, tangents, args):
        if t is None or d is None:
            continue
        if batch is not None:
            t = align_batch(t, a, ans)
        if callable(d):
            term = d(ans, *args) * t
        elif d == 1:
            term = t
        elif d == -1:
            term = -t
        else:
            term = t * d
        out = term if out is None else out + term
    return out


def _by_double_vjp(prim, tangents, ans, args, kwargs):
    """The tangent from the pullback: ``u -> J^T u`` is linear, and its own pullback
    along the tangents is ``J t`` (for this operation alone)."""
    vjps = prim.vjps
    positions = [p for p, t in enumerate(tangents) if t is not None]
    multi = isinstance(ans, tuple)
    u0 = tuple(_zeros_like(a) for a in ans) if multi else _zeros_like(ans)

    def transpose(*u):
        g = Cotangents(u) if multi else u[0]
        return tuple(_full_cotangent(vjps[p](g, ans, *args, **kwargs), args[p])
                     for p in positions)
    if multi:
        _, back = vjp(transpose, *u0)
        return back(tuple(tangents[p] for p in positions))
    _, back = vjp(transpose, u0)
    return back(tuple(tangents[p] for p in positions))[0]


def _full_cotangent(g, a):
    """A pullback's cotangent as an array of its argument's shape (pullbacks may
    return a lazy one that broadcasts to it, or one of the broadcast output's shape)."""
    shape = np.shape(a)
    if g is None:
        return _zeros_like(a)
    if np.shape(g) != shape:
        g = unbroadcast(g, shape)
        if np.shape(g) != shape:
            g = np.broadcast_to(g, shape)
    return g




def batch_axes(axis, ndim):
    """``axis`` (None, an int or a tuple, of an array of ``ndim`` dimensions) as the same
    axes of a batch of such arrays stacked along a new leading axis (batched rules).

    A 0-d array has no axis to reduce (NumPy takes ``axis=0`` or ``-1`` there as none):
    the batch axis must stay, so that is ``()``, never None or 0.

    >>> batch_axes(None, 2), batch_axes(-1, 2), batch_axes((0, 1), 3), batch_axes(0, 0)
    ((1, 2), 2, (1, 2), ())
    """
    if not ndim:
        return ()
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(operator.index(a) % ndim + 1 for a in axis)
    return operator.index(axis) % ndim + 1
