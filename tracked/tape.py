"""The tape: entries (nodes), trace levels, and the backward pass.

Every operation on a tracked value creates a ``Node`` that records the primitive,
its (unboxed) arguments, its output and the nodes of its tracked arguments.  Nodes
carry a global sequence number, so the nodes reachable from an output, sorted by
that number, *are* the tape in recording order.  A node is kept alive only by the
values that descend from it: code evaluated in a loop without ``back`` frees its
entries as soon as their results are dropped (Tracker.jl's design, rather than an
append-only list that would need explicit clearing).

Nesting works by trace levels (HIPS autograd's design): a value tracked at level
``L`` wraps a value that may itself be tracked at a lower level.  An operation is
recorded at the highest level among its arguments; lower-level tracked arguments
are constants there, and computing the operation on them records it at their own
level too.  Pullbacks are written with NumPy operations, so a backward pass run on
cotangents tracked at an outer level is itself recorded on the outer tape.

This module knows nothing of NumPy's function list; rules live in ``tracked.rules``.
"""
import itertools
import threading
from heapq import heappop, heappush, heappushpop
from types import MappingProxyType

import numpy as np

from .registry import identity

_seq = itertools.count()          # next() is atomic under the GIL: safe across threads
_levels = itertools.count(1)      # level 0 is every thread's base tape (``param``)
_state = threading.local()        # per-thread switches: recording paused, active recorder
# How many threads pause recording or record a GradientTape now: while it is 0, every
# operation skips both thread-local lookups with one test (relies on the GIL).
_special_threads = 0

# The ``kwargs`` of an entry that takes no keywords and whose pullbacks return exactly
# their parents' shapes (a unary ufunc; a binary one with a scalar operand): the eager
# fast paths know this for free, and ``backward`` then skips the unbroadcast test.
SAME_SHAPE = MappingProxyType({})     # read-only: one object shared by every such entry


class GraphReleasedError(RuntimeError):
    """Raised when ``back`` runs through entries a previous ``back`` released."""


class Node:
    """One tape entry.  A leaf has ``prim is None``; its ``grad`` is a buffer or None.

    Made by ``new_node``, or slot by slot on the eager fast paths: a class without
    ``__init__`` is created at C speed, a Python ``__init__`` costs ~5% of an operation.
    """

    __slots__ = ('prim', 'args', 'kwargs', 'ans', 'parents', 'seq', 'level', 'grad')

    def __repr__(self):
        name = 'leaf' if self.prim is None else getattr(self.prim, 'name', self.prim)
        return f'<Node #{self.seq} {name} level={self.level} shape={np.shape(self.ans)}>'


def new_node(prim, args, kwargs, ans, parents, level):
    """A tape entry; ``parents`` is a sequence of (argument position, parent node)."""
    node = Node()
    node.prim = prim
    node.args = args
    node.kwargs = kwargs
    node.ans = ans
    node.parents = parents
    node.level = level
    node.seq = next(_seq)
    node.grad = None
    return node


def new_level():
    """A fresh trace level, above every level that exists so far."""
    return next(_levels)


def recording_paused():
    return getattr(_state, 'paused', False)


class pause_recording:
    """Context manager: operations inside compute plain values and record nothing."""

    def __enter__(self):
        global _special_threads
        self._prev = getattr(_state, 'paused', False)
        _state.paused = True
        _special_threads += 1

    def __exit__(self, *exc):
        global _special_threads
        _state.paused = self._prev
        _special_threads -= 1


def active_recorder():
    """The innermost ``GradientTape`` recording on this thread, or None."""
    stack = getattr(_state, 'recorders', None)
    return stack[-1] if stack else None


def push_recorder(rec):
    global _special_threads
    stack = getattr(_state, 'recorders', None)
    if stack is None:
        stack = _state.recorders = []
    stack.append(rec)
    _special_threads += 1


def pop_recorder(rec):
    global _special_threads
    stack = _state.recorders
    assert stack and stack[-1] is rec
    stack.pop()
    _special_threads -= 1


def shape_of(x):
    return getattr(x, 'shape', ())


def unbroadcast(g, shape):
    """Sum ``g`` over the axes that broadcasting added to an input of ``shape``.

    Written with ``np.sum``/``np.reshape`` so that it is recorded like any pullback
    when ``g`` is tracked at an outer level.
    """
    gshape = shape_of(g)
    if gshape == shape:
        return g
    extra = len(gshape) - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and gshape[extra + i] != 1)
    if axes:
        g = np.sum(g, axis=axes)
    if shape_of(g) != shape:
        g = np.reshape(g, shape)
    return g


class SparseCotangent:
    """A cotangent that is zero outside ``idx`` (the adjoint of ``x[idx]``), kept unmaterialised.

    A pullback may return one for a plain (first-order) cotangent; ``backward`` adds it
    into a buffer it owns, or materialises it, so that several slices of one large
    array cost one buffer instead of one zero-filled array each.  Under nesting,
    pullbacks return a recorded scatter instead.
    """

    __slots__ = ('g', 'idx', 'shape', 'unique')

    def __init__(self, g, idx, shape, unique):
        self.g, self.idx, self.shape, self.unique = g, idx, shape, unique

    def add_into(self, buf):
        if self.unique:
            buf[self.idx] += self.g
        else:
            np.add.at(buf, self.idx, self.g)
        return buf

    def dense(self, dtype=None):
        g = np.asarray(self.g)
        dtype = dtype or (g.dtype if g.dtype.kind == 'f' else np.float64)
        return self.add_into(np.zeros(self.shape, dtype=dtype))


def _accumulate(prev, gi, owned):
    """``prev + gi``, in place into a buffer this backward pass made when that is safe.

    ``owned`` holds the ids of buffers created here and referenced only by the
    cotangent table, so writing into them cannot change anything a caller sees.
    """
    if type(gi) is SparseCotangent:
        if type(prev) is SparseCotangent:
            prev = prev.dense()
            owned.add(id(prev))
        if id(prev) in owned and prev.dtype == np.result_type(prev, gi.g):
            return gi.add_into(prev)
        prev, gi = gi, prev
    if type(prev) is SparseCotangent:          # dense gi: materialise into a new buffer
        buf = prev.dense(np.result_type(prev.g, gi))
        buf += gi
        owned.add(id(buf))
        return buf
    if id(prev) in owned and type(gi) is np.ndarray and prev.dtype == gi.dtype:
        prev += gi
        return prev
    new = prev + gi
    if type(new) is np.ndarray:
        owned.add(id(new))
    return new


def reachable(root):
    """The entries that lead to ``root`` at its level, latest first (for inspection)."""
    seen = {root}
    order = [root]
    for node in order:                  # grows while it is walked: a breadth-first search
        for _, parent in node.parents:
            if parent not in seen:
                seen.add(parent)
                order.append(parent)
    order.sort(key=lambda n: n.seq, reverse=True)
    return order


def backward(root, seed, retain=False, private=False):
    """Propagate ``seed`` from ``root`` back through the tape.

    Returns ``{leaf node: cotangent}`` for the leaves that were reached.  Iterative,
    so a tape of millions of entries needs no deep recursion.  Unless ``retain``,
    every non-leaf entry used is released afterwards: only after success, so that a
    pullback that raises leaves every entry usable for other losses.  ``private``
    promises that nothing else will run back through this graph (``gradient`` and
    ``withgradient`` own theirs): entries are then released as soon as they are used,
    which frees the forward values during the pass (measured: 12% faster on W3 with
    n = 10^5, where a smaller working set keeps NumPy's passes in cache).

    Entries are visited latest first from a heap keyed on their sequence number: an
    entry's parents are all older than it, so each is visited after every entry that
    sends it a cotangent.  This finds the entries that lead to ``root`` as it goes; a
    separate search and sort beforehand cost ~8% of an eager operation.
    """
    cts = {root: seed}
    heap = []               # entries waiting for their turn, as (-seq, node)
    used = None if retain or private else []
    leaves = {}
    owned = set()
    node = root
    try:
        while node is not None:
            g = cts.pop(node)
            if owned:
                owned.discard(id(g))
            if type(g) is SparseCotangent:
                g = g.dense()
            args = node.args
            nxt = None      # the first parent this entry schedules skips the heap (chains)
            if args is None:            # a leaf, or an entry released by an earlier back()
                if node.prim is not None:
                    raise GraphReleasedError(
                        'back() reached a tape entry that an earlier back() released. '
                        'Pass retain_graph=True to the first back() to run it again, '
                        'or recompute the value.')
                leaves[node] = g
            else:
                vjps = node.prim.vjps
                kwargs, ans = node.kwargs, node.ans
                nargs = len(args)
                for pos, parent in node.parents:
                    vjp = vjps[pos]
                    if vjp is identity:
                        gi = g
                    else:
                        # Spelled-out calls for one and two arguments: a call with *args
                        # costs twice as much, ~2% of an eager operation.
                        if kwargs:
                            gi = vjp(g, ans, *args, **kwargs)
                        elif nargs == 1:
                            gi = vjp(g, ans, args[0])
                        elif nargs == 2:
                            gi = vjp(g, ans, args[0], args[1])
                        else:
                            gi = vjp(g, ans, *args)
                        if gi is None:
                            continue
                    if kwargs is not SAME_SHAPE:
                        pshape = parent.ans.shape
                        if getattr(gi, 'shape', ()) != pshape:
                            gi = unbroadcast(gi, pshape)
                    prev = cts.get(parent)
                    if prev is not None:
                        cts[parent] = _accumulate(prev, gi, owned)
                        continue
                    cts[parent] = gi
                    if nxt is None:
                        nxt = parent
                    else:
                        heappush(heap, (-parent.seq, parent))
            if private:
                node.args = None
                node.parents = ()
            elif used is not None:
                used.append(node)
            if nxt is None:
                node = heappop(heap)[1] if heap else None
            elif heap and -heap[0][0] > nxt.seq:
                node = heappushpop(heap, (-nxt.seq, nxt))[1]
            else:
                node = nxt
    except Exception as e:
        if node.prim is not None and not isinstance(e, GraphReleasedError):
            e.add_note(f'(raised by the pullback of {node.prim.name} during back)')
        raise
    if used is not None:
        # Only after success (not inside the loop): a pullback that raises must not
        # leave entries recorded after it released, other losses may still use them.
        for node in used:
            node.args = None        # release what the pullbacks saved (leaves hold None)
            node.parents = ()       # and the entries behind it: a kept loss keeps no graph
    return leaves
