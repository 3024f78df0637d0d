"""The tape: entries (nodes), trace levels, and the backward pass.

Every operation on a tracked value creates a ``Node`` that records the primitive,
what its pullbacks read of its (unboxed) arguments and output (``Primitive.plan``),
its output's shape and the nodes of its tracked arguments.  The value itself lives
in the box (box.py), so it is freed when the user's code drops it.  Nodes
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

Why one module of ~650 lines: the node, the levels and the backward pass share the
protection of saved arrays and the per-thread state; split, each part would reach into
the others' internals.
"""
import itertools
import threading
import weakref
from heapq import heappop, heappush, heappushpop
from collections.abc import Sequence
from typing import Any

import numpy as np

from .registry import identity, negate_into, plan_key

sequence = itertools.count()      # entries' numbers; next() is atomic under the GIL
_levels = itertools.count(1)      # level 0 is every thread's base tape (``param``)
_state = threading.local()        # per-thread switches: recording paused, active recorder
# How many threads pause recording or record a GradientTape now: while it is 0, every
# operation skips both thread-local lookups with one test (relies on the GIL).
special_threads = 0
# Run (and dropped) by the first backward pass: the package's __init__ puts native_ops.start
# here, so that the native recording methods are built only in processes that differentiate.
on_first_backward: list[Any] = []
# native_backward.py's loop over entries, put here by native_ops.install (None: Python's)
native_sweep: Any = None


class GraphReleasedError(RuntimeError):
    """Raised when ``back`` runs through entries a previous ``back`` released."""


class Node:
    """One tape entry.

    - ``prim``: the ``registry.Primitive`` (None for a leaf);
    - ``args``, ``kwargs``, ``ans``: what the pullbacks read (None where they read
      nothing, a ``registry.Meta`` where they read only a shape); a leaf keeps its
      value in ``ans``; a checkpoint may drop them (``args`` None, ``kwargs`` a
      ``Dropped``, which recomputes them);
    - ``shape``: the output's shape; ``parents``: (argument position, Node) pairs of
      the tracked arguments at this entry's ``level``; ``seq``: the global order;
    - ``same_shape``: True when the pullbacks return exactly their parents' shapes (a
      unary ufunc; a binary one with a scalar operand or operands of one shape), so
      ``backward`` skips the unbroadcast test; the eager fast paths know it for free;
    - ``real_parents``: the positions of real-valued parents of an entry with a
      complex output, whose cotangents ``backward`` projects onto the reals (None
      otherwise; read only when ``same_shape`` is False);
    - ``grad``: a leaf's gradient buffer (None for leaves without one); never set on
      other entries;
    - ``protects``: the arrays this entry made read-only (``protect``); unset unless
      it saved a leaf's value or a constant array.

    Made by ``new_node``, or slot by slot by ``dispatch.record`` and the eager fast
    paths (``tests/test_tape.py`` checks that all build the same entry): a class
    without ``__init__`` is created at C speed, a Python ``__init__`` costs ~5% of an
    operation.
    """

    __slots__ = ('prim', 'args', 'kwargs', 'ans', 'shape', 'parents', 'seq', 'level',
                 'same_shape', 'real_parents', 'grad', 'protects', '__weakref__')
    # The slots' types (annotations only: the slots above hold the values)
    prim: Any                   # registry.Primitive | None
    args: Any                   # tuple | None
    kwargs: Any                 # dict | None
    ans: Any
    shape: Any                  # tuple[int, ...]; None on a multi-output entry
    parents: Sequence[tuple[int, 'Node']]
    seq: int
    level: int
    same_shape: bool
    real_parents: Any           # tuple[int, ...] | None
    grad: Any                   # np.ndarray | None
    protects: list[np.ndarray]

    def __repr__(self):
        name = 'leaf' if self.prim is None else getattr(self.prim, 'name', self.prim)
        return f'<Node #{self.seq} {name} level={self.level} shape={self.shape}>'


def new_node(prim, args, kwargs, ans, parents, level, same_shape=False):
    """A tape entry; ``parents`` is a sequence of (argument position, parent node).

    Saves only what the parents' pullbacks read (see ``Primitive.plan``).
    """
    node = Node()
    node.prim = prim
    node.shape = shape_of(ans)
    if parents:
        key = plan_key(parents, len(args))
        keep_ans, saver, _ = prim.saves.get(key) or prim.plan(key)
        if saver is not None:
            args = saver(args)
        if not keep_ans:
            ans = None
    node.args = args
    node.kwargs = kwargs
    node.ans = ans
    node.parents = parents
    node.level = level
    node.seq = next(sequence)
    node.same_shape = same_shape
    node.real_parents = None
    if prim is None:
        node.grad = None
    return node


def new_level():
    """A fresh trace level, above every level that exists so far."""
    return next(_levels)


# Per thread: ``depth``, how many differentiation calls' ``f`` are running (``vjp`` and
# forward mode count themselves in and out inline: a context manager costs twice as
# much, ~1% of a small gradient call).
thread_state = _state


def differentiating():
    """Whether a differentiation call's ``f`` is running on this thread (Flux's
    ``within_gradient``: layers with a train/test mode read it); see ``thread_state``."""
    return getattr(_state, 'depth', 0) > 0


def recording_paused():
    return getattr(_state, 'paused', False)


class pause_recording:
    """Context manager: operations inside compute plain values and record nothing."""

    def __enter__(self):
        global special_threads
        self._prev = getattr(_state, 'paused', False)
        _state.paused = True
        special_threads += 1

    def __exit__(self, *exc):
        global special_threads
        _state.paused = self._prev
        special_threads -= 1


def active_recorder():
    """The innermost ``GradientTape`` recording on this thread, or None."""
    stack = getattr(_state, 'recorders', None)
    return stack[-1] if stack else None


def push_recorder(rec):
    global special_threads
    stack = getattr(_state, 'recorders', None)
    if stack is None:
        stack = _state.recorders = []
    stack.append(rec)
    special_threads += 1


def pop_recorder(rec):
    global special_threads
    stack = _state.recorders
    assert stack and stack[-1] is rec
    stack.pop()
    special_threads -= 1


def shape_of(x):
    return getattr(x, 'shape', ())


def unbroadcast(g, shape):
    """Sum ``g`` over the axes that broadcasting added to an input of ``shape``.

    The result may be smaller than ``shape`` if it broadcasts to it (a lazy
    cotangent, see ``backward``).  Written with ``np.sum``/``np.reshape`` so that it
    is recorded like any pullback when ``g`` is tracked at an outer level.
    """
    gshape = shape_of(g)
    if gshape == shape or gshape == ():     # a 0-d g broadcasts to any shape: lazy
        return g
    nd = len(gshape)
    extra = nd - len(shape)
    # np.sum on a plain array is add.reduce behind a wrapper that costs ~4x more
    total = _add_reduce if type(g) is np.ndarray else np.sum
    if extra > 0 and gshape[extra:] == shape:     # only leading axes added (a bias)
        return total(g, axis=(0,) if extra == 1 else tuple(range(extra)))
    inner: tuple[int, ...] = ()     # (a loop: a generator costs ~1 µs more here)
    fits = True     # whether g, once summed, broadcasts to shape (else it is reshaped)
    for i in range(max(extra, 0), nd):
        n, k = shape[i - extra], gshape[i]
        if n != k:
            if n == 1:
                inner += (i,)
            elif k != 1:
                fits = False
    if inner:                   # keepdims: axes of g that stay small stay aligned
        g = total(g, axis=inner, keepdims=True)
    if extra > 0:
        g = total(g, axis=tuple(range(extra)))
    if not fits:
        g = np.reshape(g, shape)
    return g


def _keeps_lazy(node):
    """Whether ``node``'s pullbacks may receive a lazy cotangent: elementwise, and no
    parent was broadcast (a broadcast parent's cotangent must be summed, which
    ``unbroadcast`` can only do on the full cotangent)."""
    if not node.prim.elementwise:
        return False
    shape = node.shape
    for _, parent in node.parents:
        if parent.shape != shape:
            return False
    return True


def _widen(node, g, lazies):
    """Lazy cotangent ``g`` (smaller than non-leaf ``node``) as ``node``'s pullbacks
    take it: as it is where they may (``_keeps_lazy``: its parents' cotangents may be
    lazy too), else broadcast to ``node``'s shape."""
    if _keeps_lazy(node):
        for _, parent in node.parents:
            lazies.add(parent)
        return g
    return np.broadcast_to(g, node.shape)


def _full(g, shape):
    """Lazy cotangent ``g`` as a writable array of ``shape`` (recorded when tracked)."""
    if type(g) in _PLAIN:
        out = np.empty(shape, g.dtype)      # np.broadcast_to's Python wrapper costs more
        out[...] = g
        return out
    return np.copy(np.broadcast_to(g, shape))


_PLAIN = frozenset((np.ndarray, np.float64, np.float32, np.float16, np.longdouble))
_F64 = np.dtype(np.float64)
_REAL_SCALARS = frozenset((float, int, np.float64))
_multiply = np.multiply
_negative = np.negative
_add_reduce = np.add.reduce
# Arrays from this many elements are computed in place into cotangent buffers that a
# backward pass owns (``backward``'s ``owned``); below it, a new array costs no more.
_IN_PLACE = 1 << 13


class SparseCotangent:
    """A cotangent that is zero outside ``idx`` (the adjoint of ``x[idx]``), kept unmaterialised.

    A pullback may return one for a plain (first-order) cotangent; ``backward`` adds it
    into a buffer it owns, or materialises it, so that several slices of one large
    array cost one buffer instead of one zero-filled array each.  Under nesting,
    pullbacks return a recorded scatter instead.
    """

    __slots__ = ('pieces', 'shape')

    def __init__(self, g, idx, shape, unique):
        self.pieces = [(g, idx, unique)]     # more join when slices of one array meet
        self.shape = shape

    @property
    def dtype(self):
        dt = np.result_type(*[g for g, _, _ in self.pieces])
        return dt if dt.kind == 'f' else np.dtype(np.float64)

    def add_into(self, buf):
        for g, idx, unique in self.pieces:
            if unique:
                buf[idx] += g
            else:
                np.add.at(buf, idx, g)
        return buf

    def dense(self, dtype=None):
        """A new array holding the sum of the pieces.

        When the first pieces are one slice along the first axis (``x[1:]``, ``x[:-1]``:
        the common case), they are summed straight into it and only the rest is zeroed:
        one pass fewer than zero-filling and adding each (measured: 50 -> 31 µs for
        ``x[:-1]`` twice and ``x[1:]`` with n = 1e5)."""
        dtype = dtype or self.dtype
        pieces = self.pieces
        g0, idx, unique = pieces[0]
        if type(idx) is slice and unique and self.shape and \
                getattr(g0, 'size', 0) >= _IN_PLACE:    # (small: fewer calls win)
            start, stop, step = idx.indices(self.shape[0])
            if step == 1 and start < stop:
                k = 1               # the leading pieces at this same slice
                while k < len(pieces) and type(pieces[k][1]) is slice and pieces[k][1] == idx:
                    k += 1
                buf = np.empty(self.shape, dtype)
                part = buf[start:stop]
                if k == 1:
                    part[...] = g0
                else:               # the additions in the order add_into makes them
                    np.add(g0, pieces[1][0], out=part)
                    for g, _, _ in pieces[2:k]:
                        part += g
                if start:
                    buf[:start] = 0
                if stop < self.shape[0]:
                    buf[stop:] = 0
                for g, i, u in pieces[k:]:
                    if u:
                        buf[i] += g
                    else:
                        np.add.at(buf, i, g)
                return buf
        return self.add_into(np.zeros(self.shape, dtype=dtype))


class Cotangents(tuple):
    """The cotangent of an entry with several outputs: one per output, None where an
    output received none (the pullback of a multi-output primitive gets one)."""

    __slots__ = ()

    @classmethod
    def one(cls, k, g, n):
        """``g`` for output ``k`` of ``n``, None for the others."""
        return cls(g if j == k else None for j in range(n))

    def plus(self, other):
        return Cotangents(b if a is None else a if b is None else a + b
                          for a, b in zip(self, other))


def _in_place(prim, pos, g, ans, args, kwargs, mine=True):
    """The cotangent that ``prim``'s pullback at ``pos`` sends for ``g``, computed in ``g``
    (a float array only this backward pass references, of the entry's only parent):
    ``g`` itself for the identity, ``g * p`` in ``g`` for an inline partial ``p`` (a new
    array when ``p`` cannot be multiplied into it), ``Primitive.consume``'s result; None
    where none applies (the ordinary pullback then runs).  ``mine`` is ``_NEGATE`` for
    the pullback of ``-g`` (``g`` shared, ``_negated``): a new array from the consumer."""
    if mine == _NEGATE:
        return prim.consume[pos](g, ans, *args, negate=True)
    vjp = prim.vjps[pos]
    if vjp is identity:
        return g
    if kwargs or g.dtype is not _F64:
        return None
    consume = prim.consume      # (before inline: tanh has both, consume is cheaper)
    if consume is not None and consume[pos] is not None:
        gi = consume[pos](g, ans, *args)
        if gi is not None:
            return gi
    inline = prim.inline
    if inline is not None and inline[pos] is not None:
        p = inline[pos](ans, *args)
        if type(p) in _REAL_SCALARS or (type(p) is np.ndarray and p.dtype is _F64
                                        and p.shape == g.shape):
            return _multiply(g, p, out=g)
        return g * p            # (a real output's partials are real)
    return None


class _Negated:
    """``-g`` not made yet (``backward``): ``g`` is shared with other cotangents, so it
    is only read.  Always in ``owned`` (only the pass references the wrapper)."""
    __slots__ = ('g',)

    def __init__(self, g):
        self.g = g


_NEGATE = 2     # ``backward``'s ``mine`` for a cotangent to be negated by the consumer


def _negated(node, g):
    """``(g, mine)`` for ``node``, whose cotangent is ``-g`` (``_Negated``): ``g`` itself
    and ``_NEGATE`` when the entry's only pullback takes the sign
    (``Primitive.consume``), else ``-g`` made now, ours."""
    prim = node.prim
    if prim is not None and node.args is not None and len(node.parents) == 1 and \
            not node.kwargs and prim.consume is not None and \
            prim.consume[node.parents[0][0]] is not None:
        return g, _NEGATE
    g = _negative(g)                # (an array: made only for g of ndim >= 1)
    return g, len(node.parents) == 1 and type(g) is np.ndarray


def _fit(gi, parent, owned, lazies):
    """``gi`` summed to ``parent``'s shape where broadcasting made it larger
    (``unbroadcast``); a result still smaller than the parent is lazy (``lazies``)."""
    pshape = parent.shape
    if getattr(gi, 'shape', ()) == pshape:
        return gi
    if owned:               # replaced: it dies here
        owned.discard(id(gi))
    gi = unbroadcast(gi, pshape)
    if shape_of(gi) != pshape:
        lazies.add(parent)
    return gi


def _accumulate(prev, gi, owned):
    """``prev + gi``, in place into a buffer this backward pass made when that is safe.

    ``owned`` holds the ids of buffers created here and referenced only by the
    cotangent table (or about to enter it: ``gi``), so writing into them cannot change
    anything a caller sees.  A buffer the sum replaces leaves the table, and its id
    leaves ``owned``: once it is freed, the id may be another array's (an input's, a
    read-only saved value), which must never be written into.
    """
    if type(prev) is _Negated:      # made now: it is summed
        owned.discard(id(prev))
        prev = _negative(prev.g)
        if type(prev) is np.ndarray:
            owned.add(id(prev))
    if owned and id(gi) in owned:
        if id(prev) not in owned and type(prev) in _PLAIN and \
                gi.dtype == np.result_type(gi, prev) and \
                (type(prev) is not np.ndarray or prev.shape == gi.shape):
            gi += prev          # into gi, which is ours (addition commutes exactly)
            return gi
        owned.discard(id(gi))   # the sum below keeps prev or makes a new buffer
    out = _sum(prev, gi, owned)
    if out is not prev:
        owned.discard(id(prev))
    return out


def _sum(prev, gi, owned):
    if type(gi) is Cotangents:
        return prev.plus(gi)
    if type(gi) is SparseCotangent:
        if type(prev) is SparseCotangent:
            # Both were made by pullbacks of this pass for this entry: join them, and
            # materialise once (or add straight into a leaf's gradient buffer).
            prev.pieces += gi.pieces
            return prev
        if id(prev) in owned and prev.shape == gi.shape and \
                prev.dtype == np.result_type(prev, gi.dtype):
            return gi.add_into(prev)
        prev, gi = gi, prev
    if type(prev) is SparseCotangent:          # dense gi: materialise into a new buffer
        buf = prev.dense(np.result_type(prev.dtype, gi.dtype if hasattr(gi, 'dtype') else gi))
        if type(gi) not in _PLAIN:  # tracked at an outer level: the addition is recorded
            return buf + gi
        buf += gi                   # gi may be lazy (smaller), never larger than buf
        owned.add(id(buf))
        return buf
    if id(prev) in owned and type(gi) is np.ndarray and prev.dtype == gi.dtype \
            and prev.shape == gi.shape:
        prev += gi
        return prev
    new = prev + gi
    if type(new) is np.ndarray:
        owned.add(id(new))
    return new


def sweep_parts():
    """What native_backward.py's loop over entries calls and reads of ``backward``'s
    pieces, by name: every decision about a cotangent's value stays in this module.

    >>> from tracked import tape
    >>> sorted(tape.sweep_parts())[:4]
    ['accumulate', 'add_reduce', 'fit', 'full']
    """
    return {'in_place': _in_place, 'accumulate': _accumulate, 'fit': _fit, 'widen': _widen,
            'full': _full, 'add_reduce': _add_reduce, 'negated': _Negated,
            'in_place_size': _IN_PLACE}


class Dropped:
    """What stands in the ``kwargs`` slot of an entry whose saved values (``args``,
    ``kwargs``, ``ans``) were dropped to save memory (``tr.checkpoint``): ``args`` is
    None, as in a released entry, but the parents stay.  ``recompute(level)`` returns
    ``{entry: (args, kwargs, ans)}`` for its entries at ``level``; a backward pass calls
    it once and keeps the result only while it runs."""

    __slots__ = ()

    def recompute(self, level: int) -> dict[Node, tuple[Any, Any, Any]]:
        raise NotImplementedError


def released(node):
    """Whether non-leaf ``node`` was released by a backward pass (its saved values are
    gone for good, not dropped by a checkpoint: that one keeps its parents)."""
    return node.args is None and (not node.parents or not isinstance(node.kwargs, Dropped))


def saved_again(node, recomputed):
    """``(args, kwargs, ans)`` of ``node``, whose ``args`` are None: recomputed (into
    ``recomputed``, which a backward pass holds while it runs) if a checkpoint dropped
    them, else an error (an earlier ``back`` released it)."""
    if released(node):
        raise GraphReleasedError(
            'back() reached a tape entry that an earlier back() released. '
            'Pass retain_graph=True to the first back() to run it again, '
            'or recompute the value.')
    saved = recomputed.pop(node, None)
    if saved is None:
        recomputed.update(node.kwargs.recompute(node.level))
        saved = recomputed.pop(node)
    return saved


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


def backward(root, seed, retain=False, private=False, sparse=False):
    """Propagate ``seed`` from ``root`` back through the tape.

    Returns ``{leaf node: cotangent}`` for the leaves that were reached.  Iterative,
    so a tape of millions of entries needs no deep recursion.  Unless ``retain``,
    every non-leaf entry used is released afterwards: only after success, so that a
    pullback that raises leaves every entry usable for other losses.  ``private``
    promises that nothing else will run back through this graph (``gradient`` and
    ``withgradient`` own theirs): entries are then released as soon as they are used,
    which frees the forward values during the pass (measured: 12% faster on W3 with
    n = 10^5, where a smaller working set keeps NumPy's passes in cache).  With
    ``sparse``, a leaf's cotangent may be a ``SparseCotangent`` (the caller adds it
    into its buffer: ``back`` saves a zero-filled array and a pass over it).

    A pullback may return a cotangent smaller than its argument that broadcasts to
    it (``np.sum``'s is a 0-d value): these stay small through elementwise entries
    (``Primitive.elementwise``) whose parents all have the output's shape, and are
    expanded for any other entry and at the leaves.  After a sum, ``x * 100`` then
    costs no pass over an array in the backward pass.

    On large arrays (``_IN_PLACE`` elements and more) the pass writes into cotangent
    buffers it owns instead of making new ones: ``owned`` holds the ids of arrays that
    only this pass references (sums it made, ``Primitive.fresh`` results, and what was
    computed in them); the only parent of an entry whose cotangent is such a buffer
    gets it through ``Primitive.consume`` or an inline partial computed in place, and
    a sum may go into whichever operand is owned.  Caller's arrays (the seed, saved
    values) and anything handed out never enter ``owned`` (measured on W3, n = 1e5:
    backward 176 -> 153 µs).

    An entry whose saved values a checkpoint dropped (``Dropped``) gets them
    recomputed when it is reached; they are kept only until it is visited.

    Entries are visited latest first from a heap keyed on their sequence number: an
    entry's parents are all older than it, so each is visited after every entry that
    sends it a cotangent.  This finds the entries that lead to ``root`` as it goes; a
    separate search and sort beforehand cost ~8% of an eager operation.
    """
    while on_first_backward:
        on_first_backward.pop()()
    cts: dict[Node, Any] = {}           # cotangents of entries waiting in the heap
    heap: list[tuple[int, Node]] = []   # entries waiting for their turn, as (-seq, node)
    used: list[Node] | None = None if retain or private else []
    leaves: dict[Node, Any] = {}
    owned: set[int] = set()
    lazies: set[Node] = set()   # entries whose cotangent may be smaller than them (see above)
    recomputed: dict[Node, Any] | None = None   # saved values a checkpoint recomputed
    given = {id(seed)}                  # ids of the arrays handed out (kept alive by them)
    sweep = None if sparse else native_sweep
    where: list[Node | None] = [None]   # the entry whose pullback raised in ``sweep``
    node, g = root, seed
    try:
        while node is not None:
            if sweep is not None:
                # the entries it takes, in C (native_backward.py); back here at one it
                # leaves to this loop, or at the end
                try:
                    step = sweep(node, g, cts, heap, leaves, owned, lazies, given, used,
                                 private, where)
                except Exception:
                    node = where[0] or node
                    raise
                if step is None:
                    break
                node, g = step
            # ``mine``: g is a large buffer of this pass that nothing else references
            # (see ``owned``), and the entry has one parent, whose pullback may then
            # compute in it (``_in_place``)
            mine: bool | int = False
            if owned and id(g) in owned:
                owned.discard(id(g))
                if type(g) is _Negated:     # a - b's -g for b, not made yet
                    g, mine = _negated(node, g.g)
                else:
                    mine = len(node.parents) == 1 and g.size >= _IN_PLACE
            args = node.args
            # the first parent this entry schedules skips the heap (chains)
            nxt: Node | None = None
            nxt_g: Any = None
            if args is None and node.prim is None:      # a leaf
                if type(g) is SparseCotangent:
                    if not sparse:
                        g = g.dense()
                elif lazies and not sparse and node in lazies and \
                        getattr(g, 'shape', ()) != node.shape:
                    g = _full(g, node.shape)
                elif not sparse and type(g) is np.ndarray:
                    # One array for two leaves (identity pullbacks: a + b), or the
                    # seed itself: each gradient returned is an array of its own.
                    if id(g) in given:
                        g = g.copy()
                    given.add(id(g))
                leaves[node] = g
            else:
                if type(g) is SparseCotangent:
                    g = g.dense()
                    mine = len(node.parents) == 1 and g.size >= _IN_PLACE
                elif lazies and node in lazies and getattr(g, 'shape', ()) != node.shape:
                    wide = _widen(node, g, lazies)
                    if wide is not g:
                        g, mine = wide, False
                prim = node.prim
                vjps, inline = prim.vjps, prim.inline
                if args is None:        # dropped by a checkpoint (or released)
                    if recomputed is None:
                        recomputed = {}
                    args, kwargs, ans = saved_again(node, recomputed)
                else:
                    kwargs, ans = node.kwargs, node.ans
                same_shape = node.same_shape
                nargs = len(args)
                for pos, parent in node.parents:
                    vjp = vjps[pos]
                    if mine and (gi := _in_place(prim, pos, g, ans, args, kwargs, mine)) \
                            is not None:
                        if type(gi) is np.ndarray:      # g itself, or a new array
                            owned.add(id(gi))
                    elif vjp is identity:
                        gi = g
                    elif same_shape and prim.consume is not None and \
                            prim.consume[pos] is negate_into and type(g) is np.ndarray and \
                            g.dtype is _F64 and g.size >= _IN_PLACE and g.ndim and \
                            parent is not nxt \
                            and parent not in cts and not kwargs:
                        # -g for a parent whose cotangent this is alone so far: left
                        # unmade, so that an entry taking it (x**2) folds the sign into
                        # its own pullback (one pass fewer); made when anything else
                        # reads it (_negated, _accumulate)
                        gi = _Negated(g)
                        owned.add(id(gi))
                    elif inline is not None and inline[pos] is not None and not kwargs:
                        # A pullback made from a partial derivative (``defpartials``):
                        # its ``g * conj(d(ans, *args))`` spelled out here, saving one
                        # Python call (~3% of an eager operation).
                        d = inline[pos]
                        if nargs == 1:
                            p = d(ans, args[0])
                        elif nargs == 2:
                            p = d(ans, args[0], args[1])
                        else:
                            p = d(ans, *args)
                        # conj(d) only for a complex cotangent (a complex output): the
                        # partials of a real output are real
                        dt = g.dtype
                        gi = g * p if dt is _F64 or dt.kind != 'c' else g * p.conjugate()
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
                        if prim.fresh is not None and prim.fresh[pos] and \
                                type(gi) is np.ndarray and gi.size >= _IN_PLACE:
                            owned.add(id(gi))       # a new array (Primitive.fresh)
                    if not same_shape:
                        if getattr(gi, 'shape', ()) != parent.shape:
                            gi = _fit(gi, parent, owned, lazies)
                        if node.real_parents and pos in node.real_parents:
                            owned.discard(id(gi))
                            gi = np.real(gi)    # a real input's share of a complex cotangent
                    if parent is nxt:           # x * x: the same entry twice
                        nxt_g = _accumulate(nxt_g, gi, owned)
                        continue
                    prev = cts.get(parent)
                    if prev is not None:
                        cts[parent] = _accumulate(prev, gi, owned)
                    elif nxt is None:           # its cotangent stays local (a chain)
                        nxt, nxt_g = parent, gi
                    else:
                        cts[parent] = gi
                        heappush(heap, (-parent.seq, parent))
            if private:
                node.args = None
                node.parents = ()
            elif used is not None:
                used.append(node)
            if nxt is None:
                if heap:
                    node = heappop(heap)[1]
                    g = cts.pop(node)
                else:
                    node = None
            elif heap and -heap[0][0] > nxt.seq:
                cts[nxt] = nxt_g
                node = heappushpop(heap, (-nxt.seq, nxt))[1]
                g = cts.pop(node)
            else:
                node, g = nxt, nxt_g
    except Exception as e:
        if node.prim is not None and not isinstance(e, GraphReleasedError):
            if hasattr(e, 'add_note'):   # Python >= 3.11
                e.add_note(f'(raised by the pullback of {node.prim.name} during back)')
        raise
    if used is not None:
        # Only after success (not inside the loop): a pullback that raises must not
        # leave entries recorded after it released, other losses may still use them.
        for node in used:
            node.args = None        # release what the pullbacks saved (leaves hold None)
            node.parents = ()       # and the entries behind it: a kept loss keeps no graph
    if _finalizers:
        release_protections()
    return leaves


# --------------------------------------------------------------------------
# Arrays saved by entries are read-only while the entries live
# --------------------------------------------------------------------------
# A pullback reads what its entry saved when back() runs.  If the caller changed such
# an array in place in between (tr.data(x)[...] = v, or a captured constant c[:] = 0),
# the gradient would silently be computed with the new values.  PyTorch detects this
# with version counters on its tensors; NumPy arrays have none, so the entries that
# save a leaf's value or a constant array make it read-only until they are released
# (by back(), or when they are dropped): the write then fails at once.  Intermediates
# are protected where a user can reach them, not on every operation (each would pay
# for it): tr.data/.data of a non-leaf makes its value read-only until its entry is
# released, and pullback's outputs stay read-only while its back() lives.  Measured
# (benchmarks/mutation_check.py --callgrind, instructions per call): W1 +0.3%, W3 at
# n=100 +7.2% (~31 000 instructions: the leaf protected by each of its saved slices),
# W3 at n=1e5 +0.8%.

# id(array) -> [array, number of live entries protecting it]
_protected: dict[int, list[Any]] = {}
_finalizers: dict[int, weakref.ref[Any]] = {}   # id(owner) -> its callback unprotects
# The counts are shared by threads (a constant used by several).  Reentrant: a garbage
# collection inside ``protect``'s critical section may run an entry's weakref callback
# (``_release``) on the same thread, which then takes the lock again (a plain Lock
# deadlocked the process there).
_lock = threading.RLock()
_pending: list[np.ndarray] = []     # released views whose base is still protected


def protect(node: 'Node | Owner', arrays: Sequence[Any]) -> None:
    """Make ``arrays`` (saved by ``node``) read-only while ``node`` lives or until it is
    released; an array that was already read-only is left as it is.  Calls for the
    same ``node`` add up."""
    kept = []
    with _lock:
        for a in arrays:
            entry = _protected.get(id(a))
            if entry is not None and entry[0] is a:
                entry[1] += 1
            elif a.flags.writeable:
                try:
                    a.setflags(write=False)     # (half the cost of a.flags.writeable = )
                except ValueError:      # a view of memory NumPy cannot lock: skip it
                    continue
                _protected[id(a)] = [a, 1]
            else:
                continue
            kept.append(a)
    if kept:
        key = id(node)
        ref = _finalizers.get(key)
        if ref is not None and ref() is node:   # already protecting: the list its
            node.protects.extend(kept)          # release reads grows
            return
        node.protects = kept

        def unprotect(_: object) -> None:
            _release(key, kept)
        _finalizers[key] = weakref.ref(node, unprotect)


def unprotect(node: 'Node') -> None:
    """Release what ``node`` protects now (its saved values were dropped)."""
    key = id(node)
    ref = _finalizers.get(key)
    if ref is not None and ref() is node:
        _release(key, node.protects)
        del node.protects


class Owner:
    """An owner for ``protect`` that is not a tape entry (``pullback``'s outputs): the
    arrays stay read-only while it lives."""
    __slots__ = ('args', 'protects', '__weakref__')
    args: tuple[()]
    protects: list[np.ndarray]

    def __init__(self) -> None:
        self.args = ()          # never released by a backward pass (release_protections)


def release_protections():
    """Unprotect what released entries protected (after a ``backward`` released some);
    one pass over the few protecting entries, not a test per released entry."""
    # a copy, taken at once: a weakref callback run by a garbage collection during the
    # walk pops from _finalizers (list(d.items()) raised "changed size during iteration")
    for key, ref in _finalizers.copy().items():
        node = ref()
        if node is not None and released(node):
            _release(key, node.protects)


def _release(key, kept):
    # Popping the key decides which caller releases (the weak reference's callback,
    # or a backward pass in any thread): dict.pop is atomic.
    if _finalizers.pop(key, None) is None:
        return
    with _lock:
        freed = False
        for a in kept:
            entry = _protected.get(id(a))
            if entry is not None and entry[0] is a:
                entry[1] -= 1
                if entry[1] == 0:
                    del _protected[id(a)]
                    try:
                        a.setflags(write=True)
                        freed = True
                    except ValueError:
                        _pending.append(a)
        # A view cannot be made writeable while its base is still read-only (protected
        # by a live entry): it waits here until the base is released, possibly later
        # in this same list (hence the passes until nothing changes).
        while _pending and freed:
            still = []
            for a in _pending:
                try:
                    a.setflags(write=True)
                except ValueError:
                    still.append(a)
            if len(still) == len(_pending):
                break
            _pending[:] = still


def protected(a):
    """Whether a live tape entry holds array ``a`` read-only."""
    entry = _protected.get(id(a))
    return entry is not None and entry[0] is a
