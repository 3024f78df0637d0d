"""The tracked types: ``Tracked``, with Python's operators and NumPy's protocols
(``__array_ufunc__``, ``__array_function__``), and the array boxes ``TrackedArray`` and
``TrackedReal``.  Every operation goes to dispatch.py (``call``, ``apply``); the most
common ones (binary operators, unary ufuncs, ``x[a:b]``) take an inline fast path here
that records the same entry ``apply`` would, without its search for tracked arguments.

Why one module of ~640 lines: it is one class, ``Tracked`` (Python's and NumPy's whole
protocol for a value), and the operator factories its body calls.
"""
from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Collection, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from . import registry
from . import tape as _tape
from .box import Box, back, plain, value
from .conversions import (PERCENT, STORE, conversion_error, conversion_message,
                          library_caller, numba_type, running)
from .dispatch import (HOOKS, LEAF_VIEW_WRITE, VIEW_WRITE, call, call_nondiff, holds_tracked,
                       leaf_root, plain_index, protect_saved, record, sequence_operand,
                       ufunc_call)
from .tape import Node, active_recorder

__all__ = ['Tracked', 'Boxed', 'TrackedArray', 'TrackedReal', 'FlatIter', 'write_into',
           'register_foreign_operand', 'foreign_operation']

_NOKW: dict[str, Any] = {}
_KEY_BOTH = registry.plan_key(((0, None), (1, None)), 2)
_KEY_X = registry.plan_key(((0, None),), 2)   # x[idx] with x tracked, idx not
_KEY_UNARY = registry.plan_key(((0, None),), 1)
_KEY_SHIFT = registry.KEY_SHIFT
_NONE1 = (None,)
_ANS = registry.ANS
_FAST = registry.FAST
_REAL_SCALARS = frozenset((float, int, np.float64))   # no complex check needed
_next_seq = _tape.sequence.__next__
_RULES = registry.RULES
_Primitive = registry.Primitive


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
                    other = sequence_operand(other)    # a pullback must never see a list
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
            other = sequence_operand(other)
        return call_nondiff(uf, (other, self) if reflected else (self, other), {})
    return method



class Tracked(Box):
    """Base of the tracked types: ``TrackedArray``, ``TrackedReal``, ``TrackedInt`` (values
    recorded on a tape) and forward mode's ``Dual``, with Python's operators and NumPy's
    protocols.  What each holds is box.py's protocol (``Box``)."""

    __slots__ = ()
    __array_priority__ = 1000.0
    __hash__ = object.__hash__

    @property
    def _numba_type_(self) -> Any:
        """numba's hook for the type of an argument: refuses, naming the compiled function
        (``conversions.numba_type``).  Read by numba only: ``import tracked`` never
        imports numba."""
        return numba_type(self)

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
    # value on purpose is tr.data(t); branching is bool(t > 0).
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
        frame = sys._getframe(2)
        if running(frame, PERCENT):
            return plain(self)
        if running(frame, STORE):
            raise TypeError(conversion_message('a[i] = t, storing a tracked value into a plain '
                                                'array,'))
        caller = library_caller(2)          # SciPy's quad, brentq, ...: name the one called
        raise TypeError(conversion_message(f'{call} of a tracked value') if caller is None else
                        f'{caller[0]} calls {call} on a tracked value.{caller[1]} '
                        f'{conversion_message(call)}')

    def __index__(self) -> int:
        value = self._concrete('index')
        if getattr(value, 'dtype', np.dtype(float)).kind not in 'iub':
            raise TypeError(f'only integer tracked scalars can be used as an index (or '
                            f'where Python needs an int); this one holds a '
                            f'{np.asarray(value).dtype}: read its value on purpose with '
                            f'int(tr.data(t)), which drops its gradient')
        return operator.index(value)

    # A Python number or list is as untracked as float()'s result: the same refusal
    # (a loss returned as loss.item() gave the gradient None without a word).
    def item(self, *args: Any) -> Any:
        return np.asarray(self._read('.item()')).item(*args)

    def tolist(self) -> Any:
        return np.asarray(self._read('.tolist()')).tolist()

    def _read(self, call: str) -> Any:
        if getattr(plain(self), 'dtype', np.dtype(float)).kind in 'iub':
            return self._concrete('item')           # an integer: a size, an index
        return self._convert('item', call)

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
        elif method == '__call__' and not kwargs and len(inputs) == 2 and \
                (type(self) is TrackedArray or type(self) is TrackedReal):
            # np.add(x, y), and ndarray @ tracked (NumPy's operator calls the ufunc): the
            # operator's method, whose eager fast path records what ufunc_call would
            ops = _UFUNC_OPERATORS.get(ufunc)
            if ops is not None:
                if inputs[0] is self:
                    return ops[0](self, inputs[1])
                if inputs[1] is self:
                    return ops[1](self, inputs[0])
        return ufunc_call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable[..., Any], types: Collection[type],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs.get('out') is not None:
            name = registry.display_name(func)
            raise TypeError(f'{name}(..., out=...) cannot write a tracked result into an '
                            f'array; use y = {name}(...) instead')
        if len(args) == 1 and args[0] is self and not (_tape.special_threads or self._forward):
            # The eager fast path for a primitive of this value alone (np.sum(x),
            # np.amax(x, axis=1, keepdims=True)): the entry apply would record, without
            # call's and apply's searches (~40% of np.sum(x)'s cost).
            prim = _RULES.get(func)
            v = self._value
            if type(prim) is _Primitive and type(v) is np.ndarray and prim.vjps and \
                    prim.vjps[0] is not None and not (prim.multi or prim.view or prim.index_args):
                for kv in kwargs.values():
                    if isinstance(kv, Tracked) or (type(kv) in _SEQUENCES and holds_tracked(kv)):
                        break               # a tracked keyword: call binds it
                else:
                    node = self._node
                    return record(prim, (v,), kwargs, prim.fn(v, **kwargs), ((0, node),),
                                  _KEY_UNARY, node.level)
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

    # (through __array_ufunc__, as np.negative(x): its unary fast path)
    def __neg__(self) -> Any:
        return self.__array_ufunc__(np.negative, '__call__', self)

    def __pos__(self) -> Any:
        return self.__array_ufunc__(np.positive, '__call__', self)

    def __abs__(self) -> Any:
        return self.__array_ufunc__(np.absolute, '__call__', self)

    def __round__(self, ndigits: int | None = None) -> Any:
        return call(np.round, self, ndigits or 0)

    # -- indexing and mutation ---------------------------------------------------
    # A 0-d value keeps __getitem__ (x[()], x[None], x[...] as for a 0-d array), which
    # makes it a sequence to C: NumPy reports a[i] = t, whose float(t) refuses, as
    # "setting an array element with a sequence", raised from tracked's TypeError
    # (its cause, shown first in the traceback).  Dropping 0-d indexing to get the
    # TypeError alone was rejected: it broke NumPy code that indexes scalars.
    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError('len() of a 0-d tracked value: it is unsized, as a 0-d array is')
        return len(self._value)

    def __iter__(self) -> Iterator[Any]:
        if not self.ndim:
            raise TypeError('iteration over a 0-d tracked value, as over a 0-d array')
        return (self[i] for i in range(len(self)))

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
                    HOOKS.note(t, self, (_FAST['slice'], (idx,), _NOKW))
                return t
        else:                                   # (plain_index leaves a slice as it is)
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
        if alias is not None and HOOKS.write(self, new):
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


# ufunc -> (Tracked's operator method with the box first, with the box second); the
# operators whose forward is the ufunc itself (not ** : x ** 2 is NumPy's square)
_UFUNC_OPERATORS: dict[np.ufunc, tuple[Callable[[Tracked, Any], Any],
                                       Callable[[Tracked, Any], Any]]] = {
    np.add: (Tracked.__add__, Tracked.__radd__),
    np.subtract: (Tracked.__sub__, Tracked.__rsub__),
    np.multiply: (Tracked.__mul__, Tracked.__rmul__),
    np.true_divide: (Tracked.__truediv__, Tracked.__rtruediv__),
    np.matmul: (Tracked.__matmul__, Tracked.__rmatmul__),
}


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


def write_into(x: Tracked, new: Any) -> None:
    """Tracked ``x`` takes the value of ``new`` in place (``x[...] = new`` recorded
    functionally, with ``Tracked._mutate``'s checks): for rules that write in place,
    such as ``np.add.at``."""
    x._mutate(new)
