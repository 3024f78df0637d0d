"""``checkpoint(f, *args)``: ``f(*args)`` with the values its entries saved dropped, and
recomputed by running ``f`` again when a backward pass needs them.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import box
from . import tape as _tape
from .box import plain
from .boxes import Tracked
from .dispatch import leaf_root
from .tape import Dropped, active_recorder
from .tree_util import is_node, leaves, tree_map

__all__ = ['checkpoint']

# ``f`` is recorded as it runs without checkpoint, so every derivative is that of
# ``f(*args)`` by construction (what it closes over, nesting, forward mode); only the
# values its entries saved are dropped, and a backward pass that needs them runs ``f``
# again and takes them from that run's entries, matched in recording order (PyTorch's
# non-reentrant checkpoint).  Rejected: one tape entry whose forward ran ``f`` on the
# values of its arguments (what this was), which lost what ``f`` closes over; and
# detecting closures to fall back to ``f(*args)``, which gave up the memory saving in
# the commonest case, a layer closing over its weights.

class _Region(Dropped):
    """The entries one ``checkpoint`` call recorded, whose saved values it dropped."""

    __slots__ = ('f', 'args', 'states', 'depth', 'outputs', 'entries')

    def __init__(self, f, args, states, depth, out, entries, start):
        self.f, self.args, self.states, self.depth = f, args, states, depth
        self.outputs = [_fingerprint(plain(t)) for t in _tracked_leaves(out)]
        # weakly: an entry holds its region, and must die with the values using it
        self.entries = {level: [weakref.ref(n) for n in nodes] for level, nodes in entries.items()}
        for nodes in entries.values():
            for n in nodes:
                n.args = n.ans = None
                n.kwargs = self
                # What a recomputation reads must not change meanwhile, as a saved value
                # must not (tape.py): the values of leaves from outside f stay read-only;
                # the rest (f's own arrays) is let go.
                _tape.unprotect(n)
                roots = [leaf_root(p) for _, p in n.parents if p.seq < start]
                _tape.protect(n, [a for a in roots if a is not None])

    def recompute(self, level):
        state = _tape.thread_state
        depth = getattr(state, 'depth', 0)
        state.depth = self.depth        # differentiating() as f saw it (layers' modes)
        start = next(_tape.sequence)
        now = [_state_of(t) for t, _ in self.states]
        for st in self.states:
            _set_state(*st)
        try:
            out = self.f(*self.args)
        finally:
            state.depth = depth
            for st in now:
                _set_state(*st)
        new = _entries(out, start).get(level, [])
        old = self.entries[level]
        outputs = [_fingerprint(plain(t)) for t in _tracked_leaves(out)]
        if len(new) != len(old) or len(outputs) != len(self.outputs) or not all(
                map(_same, self.outputs, outputs)):
            raise RuntimeError(_NOT_AGAIN)
        saved = {}
        for ref, twin in zip(old, new):
            n = ref()
            if n is not None:
                if n.prim is not twin.prim or n.shape != twin.shape:
                    raise RuntimeError(_NOT_AGAIN)
                saved[n] = (twin.args, twin.kwargs, twin.ans)
        return saved


_NOT_AGAIN = ('tr.checkpoint: f computed something else when it ran again in the backward '
              'pass (it draws random numbers, or reads a value that changed since); its '
              'gradient would be wrong. Make f a function of its arguments and what it '
              'closes over, or do not checkpoint it.')


def _fingerprint(v):
    """A few numbers of array ``v`` that change when it does (a sample, its sum and
    squared norm), to compare with a recomputation: keeping ``v`` itself would hold an
    array the checkpoint frees."""
    a = np.ravel(v)
    return np.shape(v), a[::max(1, a.size // 16)].copy(), np.sum(a), np.vdot(a, a).real


def _same(old, new):
    """Whether fingerprint ``new`` is of ``old``'s array computed again: close, not equal
    (a BLAS may round differently on differently aligned memory)."""
    shape, sample, total, squares = old
    if new[0] != shape:
        return False
    norm = np.sqrt(squares) if np.isfinite(squares) else 0.0    # (inf, nan: relative)
    return bool(np.allclose(new[1], sample, rtol=1e-6, atol=1e-6 * norm, equal_nan=True)
                and np.allclose(new[2:], (total, squares), rtol=1e-6,
                                atol=1e-6 * norm * np.sqrt(np.prod(shape)), equal_nan=True))


def _tracked_leaves(out):
    return [out] if isinstance(out, Tracked) else leaves(out, box.is_box)


def _entries(out, start):
    """The non-leaf entries recorded after number ``start`` that ``out`` depends on, per
    level, in recording order: at every level of each tracked value in ``out`` (a dual's
    tangent too), except those a checkpoint inside already dropped."""
    todo = _tracked_leaves(out)
    found: list[_tape.Node] = []
    for t in todo:              # grows while it is walked
        if isinstance(t, Tracked):
            node = box.node(t)
            if type(node) is _tape.Node and node.seq > start:
                found.append(node)
            todo.append(box.unboxed(t))
            if box.is_forward(t):
                todo.append(box.state(t)[2])        # a Dual's tangent
    seen = set(found)
    for node in found:          # grows while it is walked
        for _, parent in node.parents:
            if parent.seq > start and parent not in seen:
                seen.add(parent)
                found.append(parent)
    entries: dict[int, list[_tape.Node]] = {}
    for node in sorted(seen, key=_seq):
        if node.prim is not None and not isinstance(node.kwargs, Dropped):
            entries.setdefault(node.level, []).append(node)
    return entries


def _seq(node):
    return node.seq


def _snapshot(args):
    """The tracked values among ``args`` with their state now (entry, value, tangent).  A
    recomputation runs ``f`` on the same boxes, each put back to that state for the
    run: their identity is part of what ``f`` computes (a tied array: ``f`` may pass an
    argument and the value it closes over to ``destructure``), and an in-place write in
    ``f`` (``a[0] = y``) re-points the box, which must not change what the next
    recomputation starts from."""
    states: list[tuple[Any, ...]] = []
    seen: set[int] = set()

    def note(t):
        if id(t) not in seen and not isinstance(t, int):     # an int is immutable
            seen.add(id(t))
            states.append(_state_of(t))
        return t
    for a in args:
        if isinstance(a, Tracked):
            note(a)
        elif is_node(a) and leaves(a, box.is_box):
            tree_map(note, a, is_leaf=box.is_box)
    return states


def _state_of(t):
    return (t, box.state(t))


def _set_state(t, saved):
    box.restore(t, saved)


def checkpoint(f: Callable[..., Any], *args: Any) -> Any:
    """``checkpoint(f, *args)``: ``f(*args)``, whose intermediate values are not kept for
    the backward pass but recomputed (``f`` runs again) when it needs them.

    Every derivative is that of ``f(*args)``, for the arguments and for what ``f``
    closes over (weights of a layer, say), nested, in forward mode and on recorded
    tapes: ``f`` is recorded as usual, and only the values its entries saved are
    dropped.  The backward pass runs ``f`` again on the same arguments and takes the
    values from the entries of that run, matched in recording order; ``f`` must
    compute the same thing again (a ``RuntimeError`` says so when its output differs,
    say it draws random numbers).  What stays in memory is ``args``, what ``f`` closes
    over, and its tape entries without their arrays.  A ``GradientTape`` keeps every
    buffer anyway: while one records, ``checkpoint`` is ``f(*args)``.

    >>> import numpy as np, tracked as tr
    >>> def loss(W, x):
    ...     layer = lambda h: np.tanh(W @ h)          # closes over W
    ...     return np.sum(tr.checkpoint(layer, tr.checkpoint(layer, x)) ** 2)
    >>> W, x = np.array([[1.0, -0.5], [0.3, 0.2]]), np.array([0.5, 1.0])
    >>> tr.gradient(loss, W, x)[0]
    array([[-0.14193274, -0.39284709],
           [ 0.08369316,  0.21237365]])
    """
    if _tape.special_threads and active_recorder() is not None:   # a GradientTape
        return f(*args)
    states = _snapshot(args)
    depth = getattr(_tape.thread_state, 'depth', 0)
    start = next(_tape.sequence)
    out = f(*args)
    entries = _entries(out, start)
    if entries:
        _Region(f, args, states, depth, out, entries, start)
    return out
