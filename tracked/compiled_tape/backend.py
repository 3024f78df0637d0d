"""``AutoCompiled``: the compiled-tape backend of ``gradient(f, tr.AutoCompiled(), *args)``.

Tapes are keyed by what determines a recording, not by the function object: ``f``'s
code and static captures (captures.py), the structure, shapes and dtypes of the
arguments and of ``f``'s other captures, which the tape takes as one more argument.
So the closure a training loop makes at each step, ``lambda m: loss(m, xb, yb)``,
replays one tape on each new batch, and no tape keeps a batch alive.  The keys are
bounded: past ``maxsize`` the least recently used goes.
"""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends import ADType
from ..conversions import ConversionError
from ..reverse import eager_withgradient
from ..tree_util import follow
from .captures import Rebound, capture
from .guards import TapeGuardError
from .record import OuterTrackedError
from .tapes import GradientTape, compile as compile_tape
from .trees import flatten_args, leaf_path, TrackedArgumentError

__all__ = ['AutoCompiled']

_EAGER = object()        # in place of a signature's tapes: answered by the eager tape


def _spec(x):
    t = type(x)
    if t is float or t is int:
        return t
    return (x.shape, x.dtype.str)


_ALL: dict[int, tuple[int, ...]] = {}     # n -> (0, ..., n - 1)


def _positions(wrt, n):
    """``wrt`` as a tuple of positions among ``n`` arguments; None if it is not one (the
    tape's own check then says why)."""
    if wrt is None:
        every = _ALL.get(n)
        if every is None:
            every = _ALL[n] = tuple(range(n))
        return every
    ws = (wrt,) if isinstance(wrt, (int, np.integer)) else wrt
    if isinstance(ws, (tuple, list)) and all(
            isinstance(w, (int, np.integer)) and not isinstance(w, bool) and -n <= w < n
            for w in ws):
        return tuple(int(w) % n for w in ws)
    return None


def _specs(leaves, treedefs, positions):
    """The leaves' shapes and dtypes; a Python int outside ``positions`` (a constant of
    the tape: a size, a count) by its value."""
    if len(positions) == len(treedefs):
        return tuple([_spec(x) for x in leaves])
    out = []
    start = 0
    for a, d in enumerate(treedefs):
        const = a not in positions
        for x in leaves[start:start + d.num_leaves]:
            out.append(('int', x) if const and type(x) is int else _spec(x))
        start += d.num_leaves
    return tuple(out)


class AutoCompiled(ADType):
    """``AutoCompiled(compile=True, paths=4, maxsize=32)``: record and compile a
    ``GradientTape`` per signature, keep it, and replay it on later calls; a failed
    guard (another branch taken) records the new path, keeping up to ``paths`` tapes
    per signature, and past ``maxsize`` signatures the least recently used is dropped.
    The first call of a signature is answered by the eager tape, the second records;
    the compiled kernels take over when a background process has compiled them
    (``tr.compile``).

    A signature is ``f``'s code and what determines its recording: the structure,
    shapes and dtypes of the arguments, and the values ``f`` captures -- its closure
    cells, defaults and the globals its code reads.  Captured arrays and floats (and
    those of captured models) are inputs of the tape, read afresh at each call: a
    closure made per step over a new batch of the same shape replays the same tape on
    that batch.  Captured ints, strings, functions and modules are part of the
    signature by value (by identity for functions and modules): another value records
    another tape.  What a tape cannot see is what the functions ``f`` calls read from
    their own globals or closures: pass what changes as arguments or capture it in ``f``.
    Under an outer differentiation (tracked arguments, or ``f`` capturing a tracked
    value) it falls back to the eager tape.  ``compile=False`` keeps the recorded tapes
    and replays them in NumPy.

    ``withgradient(f, *args, wrt=None, out=None)`` also takes, as ``GradientTape``
    does, ``wrt`` (the positions of the differentiated arguments, default all) and
    ``out``: one gradient tree per argument (None for those outside ``wrt``) whose
    arrays receive the gradients, each at its leaf's place (how ``tr.Duplicated``
    stores its gradient); a gradient with no array at its place (a Python float of
    the model) goes to a scratch array, made once, and is not returned.  With ``out``
    the gradient returned is ``out``, and a compiled tape allocates no array.

    >>> import numpy as np, tracked as tr
    >>> ad = tr.AutoCompiled(compile=False)
    >>> tr.gradient(lambda x: np.sum(x ** 2), ad, np.array([1.0, 2.0]))
    (array([2., 4.]),)
    """

    def __init__(self, compile: bool = True, paths: int = 4, maxsize: int = 32) -> None:
        self.compile = compile
        self.paths = paths
        self.maxsize = maxsize
        # signature -> (what the tapes call: Rebound or f, [tapes, the last path first])
        self.tapes: OrderedDict[Any, tuple[Any, list[GradientTape]]] = OrderedDict()

    def __repr__(self) -> str:
        return f'AutoCompiled(compile={self.compile})'

    def wait(self, timeout: float | None = None) -> bool:
        """``ad.wait(timeout=None)``: wait until every tape recorded so far runs its
        numba kernels (they compile in the background, see ``tr.compile``); True if
        they all do."""
        return all([tape.wait(timeout) for _, tapes in list(self.tapes.values())
                    for tape in list(tapes)])

    def withgradient(self, f: Callable[..., Any], *args: Any,
                     wrt: int | Sequence[int] | None = None,
                     out: Sequence[Any] | None = None) -> tuple[Any, Any]:
        """``(val, grads)`` of ``f`` at ``args``: the eager tape for a signature's first
        call (and under an outer differentiation), else a replay of the signature's
        tapes, the last path taken first, recording a new one on a failed guard."""
        try:
            head, dynamic, recipe = capture(f)
            tape_args = args + (dynamic,) if dynamic else args
            leaves, treedefs = flatten_args(tape_args)
        except TrackedArgumentError:           # under an outer differentiation: eager
            return self._eager(f, args, wrt, out)
        positions = _positions(wrt, len(args))
        if positions is None:
            GradientTape(f, *args, wrt=wrt)    # raises, saying what is wrong with wrt
            raise TypeError(f'wrt={wrt!r}: give argument positions')
        key = (head, treedefs, _specs(leaves, treedefs, positions), positions)
        try:
            entry = self.tapes.get(key)
        except TypeError:                      # a captured value whose hash raises
            return self._eager(f, args, wrt, out)
        if entry is None:
            entry = self.tapes[key] = (Rebound(recipe) if dynamic else f, [])
            while len(self.tapes) > self.maxsize:
                with contextlib.suppress(KeyError):     # (another thread's eviction)
                    self.tapes.popitem(last=False)
            if wrt is None and out is None:
                # A signature's first call is answered by the eager tape: recording costs
                # a few eager gradients, and a signature met once needs no tape.
                return self._eager(f, args, wrt, out)
        else:
            with contextlib.suppress(KeyError):         # (evicted by another thread)
                self.tapes.move_to_end(key)
            if entry[0] is _EAGER:
                return self._eager(f, args, wrt, out)
        tape_out = tuple(out) + (None,) if dynamic and out is not None else out
        tapes = entry[1]
        for n, tape in enumerate(tapes):
            try:
                val, grads = _replay(tape, tape_args, tape_out)
            except TapeGuardError:
                continue
            if n:                              # the path taken last is tried first
                try:                           # (not pop(n): another thread may be
                    tapes.remove(tape)         # moving it, and n be out of date)
                    tapes.insert(0, tape)
                except ValueError:
                    pass
            return val, grads if not dynamic else _own(grads, args, out)
        try:
            tape = GradientTape(entry[0], *tape_args, wrt=positions)
        except OuterTrackedError:              # f reaches an outer tracked value
            self.tapes.pop(key, None)
            return self._eager(f, args, wrt, out)
        except ConversionError:
            if not dynamic:
                raise
            # f hands a captured array to NumPy as a constant (np.array of a captured list
            # of arrays), which a tape input cannot be: the eager tape, for this signature
            self.tapes[key] = (_EAGER, [])
            return self._eager(f, args, wrt, out)
        if self.compile:
            tape = compile_tape(tape)
        tapes.insert(0, tape)
        del tapes[self.paths:]
        val, grads = _replay(tape, tape_args, tape_out)
        return val, grads if not dynamic else _own(grads, args, out)

    @staticmethod
    def _eager(f, args, wrt, out):
        """The eager tape's answer (no ``wrt=``/``out=``: those need a tape)."""
        if wrt is None and out is None:
            return tuple(eager_withgradient(f, args))
        # The eager tape has no wrt= or out=: the caller (tr.Duplicated) falls back itself.
        raise TrackedArgumentError('AutoCompiled.withgradient(..., wrt=, out=) records a tape, '
                                   'which takes no values of an outer differentiation')


def _own(grads, args, out):
    """The gradients of the caller's arguments: ``out`` itself if given, else the tape's
    without that of the captured values (its last argument)."""
    return out if out is not None else grads[:len(args)]


def _replay(tape, args, out):
    """``tape.withgradient(*args)``; with ``out``, into its arrays (see ``AutoCompiled``)."""
    if out is None:
        return tape.withgradient(*args)
    last = tape.__dict__.get('_out_places')
    if last is None or len(last[0]) != len(out) or any(a is not b for a, b in zip(last[0], out)):
        last = tape._out_places = (tuple(out), _places(tape, out))
    val, _ = tape.withgradient(*args, out=last[1])    # the same tuple: checked once
    return val, out


def _places(tape, out):
    """The arrays of ``out`` in the order of ``tape``'s gradients, as one tuple."""
    flat = []
    for k, p in enumerate(tape.grad_leaves):
        a = next(a for a, r in enumerate(tape.per_arg) if p in r)
        shape, dtype = tape.out_specs[k]
        g = out[a]
        if g is not None:
            try:
                g = follow(g, tape.arg_defs[a].paths()[p - tape.per_arg[a].start])
            except (AttributeError, KeyError, IndexError, TypeError):
                raise ValueError(f'out= does not mirror argument {a}: no place for '
                                 f'{leaf_path(tape.arg_defs, p)}') from None
        if g is None:
            g = np.zeros(shape, dtype)         # a gradient out= has no place for
        elif not (type(g) is np.ndarray and g.shape == shape and g.dtype == dtype):
            raise ValueError(f'out= for {leaf_path(tape.arg_defs, p)} must be an array of '
                             f'shape {shape} and dtype {dtype}, got {type(g).__name__} '
                             f'{getattr(g, "shape", "")} {getattr(g, "dtype", "")}')
        flat.append(g)
    return tuple(flat)

