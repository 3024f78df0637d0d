"""Tracked integers: a differentiated integer argument (``tr.gradient(f, x, 3)``'s 3) is
the ``int`` it holds in every Python use, and its arithmetic is recorded like any
tracked value's (``IntBehaviour``, ``TrackedInt``); a float computed from integers alone
reads as a number (``RatioBehaviour``, ``IntRatio``).  Forward mode mixes the same
behaviours into its ``DualInt`` and ``DualRatio``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .box import plain
from .boxes import Tracked, TrackedReal
from .tape import Node

__all__ = ['IntBehaviour', 'TrackedInt', 'RatioBehaviour', 'IntRatio', 'as_int', 'as_ratio']


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
                return as_int(result) if value.dtype.kind in 'iu' else as_ratio(result)
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


def as_int(t: Any) -> Any:
    """0-d integer value ``t`` as a ``TrackedInt`` (forward mode: its ``DualInt``), whose
    arithmetic with integers stays integer (``IntBehaviour``)."""
    if t._forward:
        return t._as_int()          # forward.py's Dual knows its own integer type
    return TrackedInt.make(t._value, t._node)


def as_ratio(t: Any) -> Any:
    """0-d float ``t`` computed from integers alone as an ``IntRatio`` (forward mode: its
    ``DualRatio``), which ``float()`` and ``int()`` read."""
    if t._forward:
        return t._as_ratio()
    if type(t) is not TrackedReal:
        return t
    r = object.__new__(IntRatio)
    r._value, r._node = t._value, t._node
    return r
