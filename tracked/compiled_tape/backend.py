"""``AutoCompiled``: the compiled-tape backend of ``gradient(f, tr.AutoCompiled(), *args)``."""

from ..backends import ADType
from ..values import Tracked
from .guards import TapeGuardError
from .tapes import GradientTape, compile as compile_tape
from .trees import flatten

__all__ = ['AutoCompiled']


def _spec(x):
    t = type(x)
    if t is float or t is int:
        return t
    return (x.shape, x.dtype.str)


def _has_tracked(args):
    for a in args:
        if isinstance(a, Tracked):
            return True
        if isinstance(a, (list, tuple)) and _has_tracked(a):
            return True
        if isinstance(a, dict) and _has_tracked(a.values()):
            return True
    return False


class AutoCompiled(ADType):
    """``AutoCompiled(compile=True, paths=4)``: record and compile a ``GradientTape`` per
    argument signature (structure, shapes, dtypes and static values), keep it, and
    replay it on later calls; a failed guard (another branch taken) records the new
    path, keeping up to ``paths`` tapes per signature.

    Under an outer differentiation (tracked arguments) it falls back to the eager tape.
    ``compile=False`` keeps the recorded tapes and replays them in NumPy.

    >>> import numpy as np, tracked as tr
    >>> ad = tr.AutoCompiled(compile=False)
    >>> tr.gradient(lambda x: np.sum(x ** 2), ad, np.array([1.0, 2.0]))
    (array([2., 4.]),)
    """

    def __init__(self, compile=True, paths=4):
        self.compile = compile
        self.paths = paths
        self.tapes = {}

    def __repr__(self):
        return f'AutoCompiled(compile={self.compile})'

    def withgradient(self, f, *args):
        if _has_tracked(args):
            from ..api import withgradient
            return tuple(withgradient(f, *args))
        leaves, treedef = flatten(args)
        key = (f, treedef, tuple(_spec(x) for x in leaves))
        try:
            tapes = self.tapes.get(key)
        except TypeError:                      # an unhashable static argument
            key = (f, id(treedef))
            tapes = self.tapes.get(key)
        if tapes is None:
            tapes = self.tapes[key] = []
        for n, tape in enumerate(tapes):
            try:
                val, grads = tape.withgradient(*args)
            except TapeGuardError:
                continue
            if n:
                tapes.insert(0, tapes.pop(n))  # the path taken last is tried first
            return val, grads
        tape = GradientTape(f, *args)
        if self.compile:
            tape = compile_tape(tape)
        tapes.insert(0, tape)
        del tapes[self.paths:]
        return tape.withgradient(*args)
