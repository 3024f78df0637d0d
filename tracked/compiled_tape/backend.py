"""``AutoCompiled``: the compiled-tape backend of ``gradient(f, tr.AutoCompiled(), *args)``."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends import ADType
from ..reverse import eager_withgradient
from ..tree_util import follow
from .guards import TapeGuardError
from .record import OuterTrackedError
from .tapes import GradientTape, compile as compile_tape
from .trees import flatten_args, leaf_path, TrackedArgumentError

__all__ = ['AutoCompiled']


def _spec(x):
    t = type(x)
    if t is float or t is int:
        return t
    return (x.shape, x.dtype.str)


class AutoCompiled(ADType):
    """``AutoCompiled(compile=True, paths=4)``: record and compile a ``GradientTape`` per
    argument signature (structure, shapes, dtypes and static values), keep it, and
    replay it on later calls; a failed guard (another branch taken) records the new
    path, keeping up to ``paths`` tapes per signature.  The first call of a signature
    is answered by the eager tape, the second records; the compiled kernels take over
    when a background process has compiled them (``tr.compile``).

    Under an outer differentiation (tracked arguments, or ``f`` closing over a tracked
    value) it falls back to the eager tape.  Values ``f`` closes over are part of the
    signature by identity: rebinding one records a new tape.  What a tape cannot see
    is a global or an array changed in place: pass changing data as arguments.
    ``compile=False`` keeps the recorded tapes and replays them in NumPy.

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

    def __init__(self, compile: bool = True, paths: int = 4) -> None:
        self.compile = compile
        self.paths = paths
        self.tapes: dict[Any, tuple[Any, list[GradientTape]]] = {}

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
            leaves, treedefs = flatten_args(args)
        except TrackedArgumentError:           # under an outer differentiation: eager
            return self._eager(f, args, wrt, out)
        closure = _closure(f)
        key: tuple[Any, ...] = (f, treedefs, tuple(_spec(x) for x in leaves), wrt)
        try:
            entry = self.tapes.get(key)
        except TypeError:                      # a static whose hash raises
            key = (f, id(treedefs))
            entry = self.tapes.get(key)
        if entry is None or not _same(entry[0], closure):
            entry = self.tapes[key] = (closure, [])
            if wrt is None and out is None:
                # A signature's first call is answered by the eager tape: recording costs
                # a few eager gradients, and a signature met once needs no tape.
                return self._eager(f, args, wrt, out)
        tapes = entry[1]
        for n, tape in enumerate(tapes):
            try:
                val, grads = _replay(tape, args, out)
            except TapeGuardError:
                continue
            if n:                              # the path taken last is tried first
                try:                           # (not pop(n): another thread may be
                    tapes.remove(tape)         # moving it, and n be out of date)
                    tapes.insert(0, tape)
                except ValueError:
                    pass
            return val, grads
        try:
            tape = GradientTape(f, *args, wrt=wrt)
        except OuterTrackedError:              # f closes over an outer tracked value
            self.tapes.pop(key, None)
            return self._eager(f, args, wrt, out)
        if self.compile:
            tape = compile_tape(tape)
        tapes.insert(0, tape)
        del tapes[self.paths:]
        return _replay(tape, args, out)

    @staticmethod
    def _eager(f, args, wrt, out):
        """The eager tape's answer (no ``wrt=``/``out=``: those need a tape)."""
        if wrt is None and out is None:
            return tuple(eager_withgradient(f, args))
        # The eager tape has no wrt= or out=: the caller (tr.Duplicated) falls back itself.
        raise TrackedArgumentError('AutoCompiled.withgradient(..., wrt=, out=) records a tape, '
                                   'which takes no values of an outer differentiation')


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


def _closure(f):
    """The objects ``f`` closes over (and its defaults): part of a tape's signature."""
    cells = getattr(f, '__closure__', None) or ()
    out = []
    for c in cells:
        try:
            out.append(c.cell_contents)
        except ValueError:                     # an empty cell
            out.append(None)
    return tuple(out) + tuple(getattr(f, '__defaults__', None) or ())


def _same(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
