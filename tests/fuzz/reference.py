"""An independent implementation of the part of tracked's API programs call: plain
NumPy, the tree semantics of ``semantics.py``, and finite differences.

``build(program, Reference())`` runs a program with this object as its ``tr``: every
inner derivative is computed by central differences of fourth order, taken at steps
``h`` and ``2h``; where the two disagree the function is not smooth there (a branch
boundary within ``4h``), and ``NotSmooth`` is raised instead of a number.  A kink
exactly at the point (a tie of ``np.max`` or ``np.maximum`` between two parameters, a
branch whose condition is exactly at its boundary) is symmetric: both central
differences give the mean of the two one-sided slopes, and agree.  One-sided
differences of second order see it: they differ by the jump of the slope, where on a
smooth function they differ by ``h^3/2`` times its fourth derivative.  Errors of order
1e-12 per level of nesting usually leave the value of a whole program accurate to
about 1e-8; rounding errors amplified through three or four levels of differences can
reach 1e-7, so the value check asks the reference at larger steps too before it calls
a difference a failure (``oracle.check_value``).

A differentiated call runs its function on new objects (tracked's boxes, the
reference's rebuilt arrays), while the plain call that gives its value runs it on the
arguments themselves.  Where the function also closes over one of the arguments and
puts both in one tree of an inner call, the plain call sees one tied array and the
differentiated one two leaves: the value depends on the arguments' identity, not only
on their values, and jumps at this very point.  ``NotSmooth`` too.

``ignore_derivatives`` freezes values for differentiation: the differences of a
function that calls it are taken with the ignored values of the central evaluation,
which is what "the derivative treats them as constants" means.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from .semantics import CONTAINERS, Parameters, is_array, is_number, items, leaves, tree_map

STEP = 1e-3
KINK_RTOL = 1e-4        # one-sided slopes that differ by more: a kink (smooth: below 1e-6)

WithGradient = namedtuple('WithGradient', ['val', 'grad'])


class NotSmooth(Exception):
    """The reference cannot differentiate here (a kink within a few steps)."""


class StepsDisagree(NotSmooth):
    """The differences at two steps disagree: a kink within a few steps, or rounding
    amplified through nested differences (larger steps tell which)."""


class Frozen:
    """The ignored values of one evaluation, replayed in the nearby evaluations of a
    finite difference (a stack: an inner difference inside an outer one replays the
    outer's values, which hold for every level)."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, list[Any], list[int]]] = []

    def __call__(self, value: Callable[[], Any]) -> Any:
        for mode, values, position in self.stack:
            if mode == 'replay':
                if position[0] >= len(values):
                    raise NotSmooth('another path: more ignored values than at the centre')
                position[0] += 1
                return values[position[0] - 1]
        v = value()
        for mode, values, _ in reversed(self.stack):
            if mode == 'record':
                values.append(v)
                break
        return v

    def aside(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` evaluated as if it had not been: the ignored values it records are
        dropped and those it replays will be replayed again."""
        saved = [(values, len(values), position, position[0]) for _, values, position in self.stack]
        try:
            return fn()
        finally:
            for values, n, position, p in saved:
                del values[n:]
                position[0] = p


def derivative(phi: Callable[[float], Any], frozen: Frozen, step: float = STEP) -> np.ndarray:
    """``d phi(t) / dt`` at 0: fourth-order central differences at ``step`` and twice it,
    after checking that ``phi`` has no kink at 0 (one-sided differences)."""
    recorded: list[Any] = []
    frozen.stack.append(('record', recorded, [0]))
    try:
        at = {0: np.asarray(phi(0.0), dtype=float)}
    finally:
        frozen.stack.pop()
    for k in (1, -1, 2, -2, 4, -4):
        frozen.stack.append(('replay', recorded, [0]))
        try:
            at[k] = np.asarray(phi(k * step), dtype=float)
        finally:
            frozen.stack.pop()
    d1 = (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * step)
    d2 = (8 * (at[2] - at[-2]) - (at[4] - at[-4])) / (24 * step)
    if not np.allclose(d1, d2, rtol=1e-6, atol=1e-8):
        raise StepsDisagree(f'differences at two steps disagree: {d1} and {d2}')
    right = (-3 * at[0] + 4 * at[1] - at[2]) / (2 * step)
    left = (3 * at[0] - 4 * at[-1] + at[-2]) / (2 * step)
    if np.any(np.abs(right - left) > KINK_RTOL * (1 + np.abs(d1))):
        raise NotSmooth(f'a kink: one-sided slopes {right} and {left}')
    return d1


def _first(y: Any) -> Any:
    if isinstance(y, (tuple, list)):
        return y[0]
    if isinstance(y, dict):
        return next(iter(y.values()))
    return y


class Duplicated:
    def __init__(self, val: Any) -> None:
        self.val = val


class Const:
    def __init__(self, val: Any) -> None:
        self.val = val


class Reference:
    """The programs' ``tr``, by finite differences."""

    Duplicated = Duplicated
    Const = Const

    def __init__(self, step: float = STEP) -> None:
        self.frozen = Frozen()
        self.step = step

    # -------------------------------------------------------------- helpers

    def _jacobian(self, fun: Callable[[Any], Any], params: Parameters) -> np.ndarray:
        """``(m, n)``: the derivatives of ``ravel(fun(tree))`` in the parameters' vector."""
        theta = params.theta()
        cols = []
        for i in range(params.size):
            e = np.zeros(params.size)
            e[i] = 1.0
            cols.append(np.ravel(derivative(
                lambda t: np.ravel(fun(params.rebuild(theta + t * e))), self.frozen, self.step)))
        if not cols:
            return np.zeros((np.size(fun(params.tree)), 0))
        return np.stack(cols, axis=-1)

    def _along(self, fun: Callable[[Any], Any], params: Parameters,
               direction: np.ndarray) -> np.ndarray:
        theta = params.theta()
        return derivative(lambda t: fun(params.rebuild(theta + t * direction)), self.frozen,
                          self.step)

    def _slots(self, params: Parameters, columns: np.ndarray) -> Any:
        """Per parameter its block of ``columns`` (m, n), shaped as tracked documents a
        Jacobian (a matrix; a vector for a number), placed in a tree like the arguments."""
        blocks = []
        for k, s in enumerate(params.slots):
            block = columns[:, params.offsets[k]:params.offsets[k + 1]]
            blocks.append(block[:, 0] if not isinstance(s, np.ndarray) else block)
        return params.mirror_slots(blocks)

    def _value(self, f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``f(*args)``, the value a differentiated call gives, which must not depend on
        the arguments' identity: NotSmooth where ``f`` gives another value on new arrays
        with the same values (the derivatives are taken on such)."""
        val = f(*args)
        params = Parameters(args, arguments=True)
        again = self.frozen.aside(lambda: f(*params.rebuild(params.theta())))
        if len(leaves(val)) != len(leaves(again)) or not all(
                np.allclose(a, b, rtol=1e-9, atol=1e-12)
                for a, b in zip(leaves(val), leaves(again))):
            raise NotSmooth(f'the value depends on the identity of the arguments: {val} with '
                            f'the arguments themselves, {again} with new arrays')
        return val

    # -------------------------------------------------------------- reverse mode

    def withgradient(self, f: Callable[..., Any], *args: Any) -> WithGradient:
        val = self._value(f, args)
        params = Parameters(args, arguments=True)
        g = self._jacobian(lambda a: _first(f(*a)), params)[0]
        return WithGradient(val, params.mirror(g))

    def gradient(self, f: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
        if any(isinstance(a, Duplicated) for a in args):
            return self._duplicated(f, args)
        return self.withgradient(f, *args).grad

    def pullback(self, f: Callable[..., Any], *args: Any) -> tuple[Any, Callable[..., Any]]:
        y = self._value(f, args)

        def back(dy: Any) -> Any:
            params = Parameters(args, arguments=True)
            g = self._jacobian(lambda a: np.sum(f(*a) * dy), params)[0]
            return params.mirror(g)
        return y, back

    def _duplicated(self, f: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        vals = tuple(a.val if isinstance(a, (Duplicated, Const)) else a for a in args)
        wrt = [i for i, a in enumerate(args) if isinstance(a, Duplicated)]
        params = Parameters(tuple(vals[i] for i in wrt), arrays_only=True, arguments=True)

        def fun(models: Any) -> Any:
            full = list(vals)
            for i, m in zip(wrt, models):
                full[i] = m
            return f(*full)
        g = params.mirror(self._jacobian(fun, params)[0])
        return tuple(g[wrt.index(i)] if i in wrt else None for i in range(len(args)))

    # -------------------------------------------------------------- Jacobians

    def jacobian(self, f: Callable[..., Any], *args: Any, mode: str = 'auto') -> tuple[Any, ...]:
        params = Parameters(args, arguments=True)
        J = self._jacobian(lambda a: f(*a), params)
        return self._slots(params, J)

    def hessian(self, f: Callable[..., Any], x: Any) -> Any:
        params = Parameters((x,))
        H = self._jacobian(lambda a: self._jacobian(lambda b: f(*b), Parameters(a))[0], params)
        return H[0, 0] if np.ndim(x) == 0 else H

    hessian_reverse = hessian

    def hvp(self, f: Callable[..., Any], x: Any, v: Any) -> Any:
        params = Parameters((x,))
        hv = self._along(lambda a: self._jacobian(lambda b: f(*b), Parameters(a))[0], params,
                         np.ravel(np.asarray(v, dtype=float)))
        return hv[0] if np.ndim(x) == 0 else np.reshape(hv, np.shape(x))

    def diaghessian(self, f: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
        params = Parameters(args, arguments=True)
        theta = params.theta()
        diag = np.zeros(params.size)
        for i in range(params.size):
            e = np.zeros(params.size)
            e[i] = 1.0

            def slope(s: float) -> Any:
                return derivative(lambda t: f(*params.rebuild(theta + (s + t) * e)), self.frozen,
                                  self.step)
            diag[i] = derivative(slope, self.frozen, self.step)
        return params.mirror(diag)

    def jvp(self, f: Callable[..., Any], args: Any, tangents: Any) -> tuple[Any, Any]:
        if not isinstance(args, tuple):
            args, tangents = (args,), (tangents,)
        params = Parameters(args, arguments=True)
        direction = params.flat(_aligned(args, tangents))
        return self._value(f, args), self._along(lambda a: f(*a), params, direction)

    # -------------------------------------------------------------- the rest

    def checkpoint(self, f: Callable[..., Any], *args: Any) -> Any:
        return f(*args)

    def ignore_derivatives(self, x: Any) -> Any:
        if callable(x):
            return self.frozen(x)
        # a new value: never the same array as its input (so never tied to it)
        return self.frozen(lambda: tree_map(lambda a: a.view() if is_array(a) else a, x))

    def fmap(self, fn: Callable[[Any], Any], tree: Any) -> Any:
        done: dict[int, Any] = {}

        def one(leaf: Any) -> Any:
            if is_array(leaf):
                if id(leaf) not in done:
                    done[id(leaf)] = fn(leaf)        # a tied array: mapped once, shared
                return done[id(leaf)]
            return fn(leaf) if is_number(leaf) else leaf
        return tree_map(one, tree)

    def destructure(self, tree: Any) -> tuple[np.ndarray, Callable[[Any], Any]]:
        params = Parameters(tree, arrays_only=True)
        return params.theta(), lambda v: params.rebuild(np.asarray(v, dtype=float))

    def rule(self, fn: Any = None, *, opaque: bool = False, jvp: Any = None) -> Any:
        if fn is None:
            return lambda f: self.rule(f)
        return lambda *args, **kwargs: fn(*args, **kwargs)[0]


def _aligned(tree: Any, tangent: Any) -> list[Any]:
    """The tangent of each leaf of ``tree`` (None where the tangent tree has None)."""
    if tangent is None:
        return [None] * len(leaves(tree))
    if isinstance(tree, CONTAINERS):
        if type(tangent) is not type(tree) or len(tangent) != len(tree):
            raise ValueError(f'a tangent {type(tangent).__name__} for a {type(tree).__name__}')
        return [t for (_, sub), (_, tan) in zip(items(tree), items(tangent))
                for t in _aligned(sub, tan)]
    return [tangent]
