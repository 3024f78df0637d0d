"""The tree semantics tracked promises (API.md §3), written without tracked.tree_util.

Tuples, lists and dicts are containers, always (a list of numbers is never one array).
Everything else is a leaf: a float array of one or more dimensions is tied by identity
within one argument (the same object in two places is one parameter; in two arguments,
two: arguments are differentiated one by one, as Zygote's ``gradient(f, x, x)``); a
float number (Python float, NumPy scalar, 0-d array) is a value, each place its own
parameter; an integer is a constant
(never mapped by ``fmap``, never taken by ``destructure``); anything else (strings) is
passed as is.  The reference implementation and the oracle both read trees through
this module, so the fuzzer states the semantics once.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

CONTAINERS = (tuple, list, dict)


def is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim >= 1 and x.dtype.kind == 'f'


def is_number(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, (float, np.floating)) or (
        isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind == 'f')


def is_integer(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def items(node: Any) -> list[tuple[Any, Any]]:
    return list(node.items()) if isinstance(node, dict) else list(enumerate(node))


def rebuild_node(node: Any, children: list[Any]) -> Any:
    if isinstance(node, dict):
        return dict(zip(node.keys(), children))
    return type(node)(children)


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``fn`` on every leaf; containers rebuilt with their own types."""
    if isinstance(tree, CONTAINERS):
        return rebuild_node(tree, [tree_map(fn, v) for _, v in items(tree)])
    return fn(tree)


def leaves(tree: Any) -> list[Any]:
    if isinstance(tree, CONTAINERS):
        return [leaf for _, v in items(tree) for leaf in leaves(v)]
    return [tree]


class Parameters:
    """The differentiable parameters of a tree as one flat vector ``theta``: its float
    arrays (an object that occurs in several places once) and its float numbers (each
    place its own), in the order of the leaves."""

    def __init__(self, tree: Any, arrays_only: bool = False, arguments: bool = False) -> None:
        self.tree = tree
        self.leaves = leaves(tree)
        self.slots: list[Any] = []          # per parameter: the array, or None (a number)
        self.places: list[list[int]] = []   # per parameter: the leaf indices it occupies
        # ``arguments``: ``tree`` is an argument tuple, whose arguments are differentiated
        # one by one (an array in two arguments is two parameters, tied within each)
        owner = [k for k, (_, a) in enumerate(items(tree)) for _ in leaves(a)] \
            if arguments else [0] * len(self.leaves)
        first: dict[tuple[int, int], int] = {}
        for place, leaf in enumerate(self.leaves):
            if is_array(leaf):
                key = (owner[place], id(leaf))
                if key in first:
                    self.places[first[key]].append(place)
                    continue
                first[key] = len(self.slots)
                self.slots.append(leaf)
                self.places.append([place])
            elif is_number(leaf) and not arrays_only:
                self.slots.append(None)
                self.places.append([place])
        self.offsets = np.cumsum([0] + [1 if s is None else s.size for s in self.slots])

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def theta(self) -> np.ndarray:
        parts = [np.ravel(np.asarray(self.leaves[p[0]], dtype=float)) for p in self.places]
        return np.concatenate(parts) if parts else np.zeros(0)

    def piece(self, k: int, theta: Any) -> Any:
        lo, hi = self.offsets[k], self.offsets[k + 1]
        s = self.slots[k]
        if s is None:
            return theta[lo]
        part = np.reshape(theta[lo:hi], s.shape)
        # a plain vector's parts are copied: arguments that were views of one buffer
        # would be views of each other to tracked (a tracked vector's are, on purpose)
        return np.array(part) if isinstance(theta, np.ndarray) else part

    def mirror_slots(self, values: list[Any], empty: Any = None) -> Any:
        """A tree like ``tree`` with ``values[k]`` at every place of parameter ``k`` and
        ``empty`` at the other leaves (``empty(leaf)`` if callable)."""
        at = {p: v for ps, v in zip(self.places, values) for p in ps}
        counter = iter(range(len(self.leaves)))

        def put(leaf: Any) -> Any:
            place = next(counter)
            if place in at:
                return at[place]
            return empty(leaf) if callable(empty) else empty
        return tree_map(put, self.tree)

    def rebuild(self, theta: Any) -> Any:
        """The tree holding ``theta``'s values: a tied array one new array in all its
        places, a number its own value (a Python float stays one when ``theta`` is plain),
        everything else as it was."""
        values = []
        for k, ps in enumerate(self.places):
            v = self.piece(k, theta)
            if type(self.leaves[ps[0]]) is float and isinstance(v, np.floating):
                v = float(v)
            values.append(v)
        at = {p: v for ps, v in zip(self.places, values) for p in ps}
        counter = iter(range(len(self.leaves)))
        return tree_map(lambda leaf: at.get(next(counter), leaf), self.tree)

    def mirror(self, flat: np.ndarray, empty: Any = None) -> Any:
        """``mirror_slots`` of the parts of vector ``flat`` (arrays, and NumPy scalars)."""
        return self.mirror_slots([np.float64(p) if s is None else np.array(p) for s, p in
                                  zip(self.slots, (self.piece(k, flat) for k in
                                                   range(len(self.slots))))], empty)

    def flat(self, per_leaf: list[Any]) -> np.ndarray:
        """The vector of per-leaf values (None: zeros), a tied array's from its first place."""
        parts = []
        for k, ps in enumerate(self.places):
            v = per_leaf[ps[0]]
            n = int(self.offsets[k + 1] - self.offsets[k])
            parts.append(np.zeros(n) if v is None else np.ravel(np.asarray(v, dtype=float)))
        return np.concatenate(parts) if parts else np.zeros(0)
