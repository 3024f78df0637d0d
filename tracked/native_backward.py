"""The backward pass's loop over tape entries as a CPython function written in LLVM IR.

``tape.backward`` visits each entry once: it calls the entry's pullbacks and adds their
cotangents into its parents'.  The pullbacks are NumPy calls; the bookkeeping around
them (the checks, the table of cotangents, the heap of entries waiting, releasing what
the entry saved) cost ~1.5-2 µs of Python per entry, a third of W2's gap to its
hand-written gradient (benchmarks/eager.py).  ``sweep`` does that bookkeeping for the
common entries in C and calls the same Python pieces for the rest (the pullbacks, and
tape.py's ``_in_place``, ``_accumulate``, ``_fit``, ``_widen``: ``tape.sweep_parts``), so
that every decision about a cotangent's value stays in tape.py::

    sweep(node, g, cts, heap, leaves, owned, lazies, given, used, private, where)

takes ``backward``'s state, visits the entries from ``node`` (cotangent ``g``) on, and
returns ``(node, g)`` at the first entry it leaves to Python, before touching it, or
None when no entry is left.  It leaves to Python: a cotangent not made yet
(``_Negated``) or sparse, an entry whose cotangent may be lazy (in ``lazies``), one
whose saved values were dropped or released, a partial inlined for a cotangent that
may be complex, the projection onto real parents of a complex output, the ``-g``
folding of a large ``a - b``, and anything of a shape it does not know.  If a pullback
raises, the entry goes into ``where[0]`` (``backward`` names its primitive in the error).

It is built with native_ops's methods (one module, the same conditions) and installed
as ``tape.native_sweep``; tests/test_native_backward.py checks that passes give what the
Python loop gives, and the suite runs with it in place.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ['sweep_ir', 'API']

# CPython functions the sweep calls beyond native_ops's (its _API's notation)
API = {
    'PyDict_DelItem': ('I', 'pp'), 'PySet_Contains': ('I', 'pp'), 'PySet_Add': ('I', 'pp'),
    'PySet_Discard': ('I', 'pp'), 'PySet_Size': ('i', 'p'), 'PyLong_FromVoidPtr': ('p', 'p'),
    'PyNumber_Multiply': ('p', 'pp'), 'PyNumber_Negative': ('p', 'p'),
    'PyList_Append': ('I', 'pp'), 'PyList_SetItem': ('I', 'pip'), 'PyList_Size': ('i', 'p'),
    'PyList_GetItem': ('p', 'pi'), 'PyDict_Size': ('i', 'p'), 'PyErr_SetString': ('v', 'pp'),
}
# the references the function holds, each in a stack slot (NULL when empty), so that
# the one failure exit drops whatever is held
_SLOTS = ('node', 'g', 'prim', 'args', 'kwargs', 'ans', 'parents', 'nxt', 'nxt_g', 'gi',
          'tmp')
MAX_ARGS = 14           # an entry with more saved arguments goes to Python


class _Sweep:
    """The IR of ``sweep``: builder helpers over native_ops's ``Method``."""

    def __init__(self, mod: Any, name: str) -> None:
        from .native_ir import Method
        from . import tape
        self.mod, self.ir, self.i64 = mod, mod.ir, mod.i64
        self.parts = tape.sweep_parts()
        mod.declare(API)
        self.fn = fn = Method(mod, name, [mod.p8, mod.pp, mod.i64], None)
        self.b = b = fn.b
        # every alloca in the entry block: one made in the loop would grow the stack
        self.slot = {n: b.alloca(mod.p8, name=n) for n in _SLOTS}
        self.stack = b.alloca(mod.p8, size=mod.i64(MAX_ARGS + 2), name='stack')
        self.count = b.alloca(mod.i64, name='count')
        self.flag = b.alloca(mod.ir.IntType(1), name='flag')
        self.lazy = b.alloca(mod.ir.IntType(1), name='lazy')
        for s in self.slot.values():
            b.store(mod.NULL, s)
        self.none = mod.obj(None)
        # sweep's arguments after (node, g): backward's state
        argv = fn.f.args[1]
        (self.cts, self.heap, self.leaves, self.owned, self.lazies, self.given, self.used,
         self.private, self.where) = (b.load(b.gep(argv, [mod.i64(k)])) for k in range(2, 11))
        self.fail = fn.block('fail')
        self.refuse = fn.block('refuse')

    # -- references in slots ----------------------------------------------------------------
    def load(self, n: str) -> Any:
        return self.b.load(self.slot[n])

    def take(self, n: str, v: Any) -> None:
        """Slot ``n`` (empty) holds ``v``, a reference it now owns."""
        self.b.store(v, self.slot[n])

    def hold(self, n: str, v: Any) -> None:
        """Slot ``n`` (empty) holds a new reference to borrowed ``v``."""
        self.fn.call('Py_IncRef', v)
        self.b.store(v, self.slot[n])

    def drop(self, n: str) -> None:
        self.fn.call('Py_DecRef', self.load(n))       # (Py_DecRef is Py_XDECREF)
        self.b.store(self.mod.NULL, self.slot[n])

    def move(self, n: str) -> Any:
        """Slot ``n``'s reference, the slot left empty."""
        v = self.load(n)
        self.b.store(self.mod.NULL, self.slot[n])
        return v

    # -- control ------------------------------------------------------------------------------
    def check(self, v: Any) -> Any:
        """``v``; a NULL (the call raised) goes to the failure exit."""
        ok = self.fn.block('ok')
        self.b.cbranch(self.fn.is_(v, self.mod.NULL), self.fail, ok)
        self.b.position_at_end(ok)
        return v

    def check_int(self, v: Any) -> Any:
        ok = self.fn.block('ok')
        self.b.cbranch(self.b.icmp_signed('<', v, self.mod.i32(0)), self.fail, ok)
        self.b.position_at_end(ok)
        return v

    def refuse_unless(self, cond: Any, label: str) -> None:
        """Go on where ``cond`` holds, else hand the entry to Python untouched."""
        ok = self.fn.block(label)
        self.b.cbranch(cond, ok, self.refuse)
        self.b.position_at_end(ok)

    def is_none(self, v: Any) -> Any:
        return self.fn.is_(v, self.none)

    def of_type(self, v: Any, *types: type) -> Any:
        return self.fn.any_of(self.fn.typ(v), list(types))

    # -- reading objects ----------------------------------------------------------------------
    def item(self, t: Any, k: Any) -> Any:
        """Item ``k`` (an i64) of tuple ``t``, borrowed."""
        from .native_ir import TUPLE_ITEMS
        b, i64 = self.b, self.i64
        return b.load(b.bitcast(b.gep(t, [b.add(i64(TUPLE_ITEMS), b.mul(k, i64(8)))]),
                                self.mod.pp))

    def length(self, t: Any) -> Any:
        """``len`` of tuple ``t``."""
        from .native_ir import TUPLE_SIZE
        b = self.b
        return b.load(b.bitcast(b.gep(t, [self.i64(TUPLE_SIZE)]), self.i64.as_pointer()))

    def dims(self, a: Any) -> tuple[Any, Any]:
        """``(ndim, pointer to the dimensions)`` of ndarray ``a``."""
        from .native_ir import ARRAY_DIMS, ARRAY_NDIM
        b, i64 = self.b, self.i64
        nd = b.zext(b.load(b.bitcast(b.gep(a, [i64(ARRAY_NDIM)]), self.mod.i32.as_pointer())),
                    i64)
        return nd, b.bitcast(self.fn.field(a, ARRAY_DIMS), i64.as_pointer())

    def is_big(self, a: Any) -> Any:
        """Whether ``a`` is an ndarray of ``tape._IN_PLACE`` elements or more (an i1)."""
        b, i64, fn = self.b, self.i64, self.fn
        b.store(self.ir.Constant(self.ir.IntType(1), 0), self.flag)
        with b.if_then(self.of_type(a, np.ndarray)):
            nd, dims = self.dims(a)
            b.store(i64(1), self.count)
            fn.loop(nd, lambda k: b.store(b.mul(b.load(self.count), b.load(b.gep(dims, [k]))),
                                          self.count))
            big = b.icmp_signed('>=', b.load(self.count), i64(self.parts['in_place_size']))
            b.store(big, self.flag)
        return b.load(self.flag)

    def shape_is(self, v: Any, shape: Any, lead: int = 0) -> Any:
        """Whether ``v`` has the shape of tuple ``shape`` after ``lead`` leading axes (an
        i1; no where ``v`` is not an ndarray, float64 or float, or ``shape`` not a tuple
        of ints)."""
        b, i64, fn = self.b, self.i64, self.fn
        b.store(self.ir.Constant(self.ir.IntType(1), 0), self.flag)
        with b.if_then(fn.is_(fn.typ(shape), self.mod.obj(tuple))):
            with b.if_else(self.of_type(v, np.ndarray)) as (array, other):
                with array:
                    nd, dims = self.dims(v)
                    n = self.length(shape)
                    b.store(b.icmp_signed('==', nd, b.add(n, i64(lead))), self.flag)
                    with b.if_then(b.load(self.flag)):
                        def dim(k: Any) -> None:
                            d = self.item(shape, k)
                            same = b.and_(self.of_type(d, int), b.icmp_signed(
                                '==', fn.call('PyLong_AsLongLong', d),
                                b.load(b.gep(dims, [b.add(k, i64(lead))]))))
                            b.store(b.and_(b.load(self.flag), same), self.flag)
                        fn.loop(n, dim)
                with other:
                    if not lead:
                        b.store(b.and_(self.of_type(v, float, np.float64),
                                       b.icmp_signed('==', self.length(shape), i64(0))),
                                self.flag)
        return b.load(self.flag)

    # -- calls ----------------------------------------------------------------------------
    def call(self, f: Any, args: list[Any], kwargs: Any = None) -> Any:
        """``f(*args, **kwargs)``: a new reference, or NULL (raised)."""
        b = self.b
        for k, a in enumerate(args):
            b.store(a, b.gep(self.stack, [self.i64(k)]))
        return self.fn.call('PyObject_VectorcallDict', f, self.stack, self.i64(len(args)),
                            self.mod.NULL if kwargs is None else kwargs)

    def own(self, a: Any) -> None:
        """``owned.add(id(a))``."""
        self.take('tmp', self.check(self.fn.call('PyLong_FromVoidPtr', a)))
        self.check_int(self.fn.call('PySet_Add', self.owned, self.load('tmp')))
        self.drop('tmp')

    def heap_entry(self, n: Any) -> None:
        """``(-n.seq, n)`` into the ``tmp`` slot."""
        fn = self.fn
        self.take('tmp', self.check(fn.call('PyNumber_Negative',
                                            fn.field(n, self.mod.node['seq']))))
        pair = fn.call('PyTuple_Pack', self.i64(2), self.load('tmp'), n)
        self.drop('tmp')
        self.take('tmp', self.check(pair))

    def fit(self, parent: Any) -> None:
        """The ``gi`` slot's cotangent for ``parent``'s shape: ``tape._fit``, with its two
        commonest cases here (a 0-d cotangent, lazy; a bias's, summed over the first
        axis as ``unbroadcast`` sums it)."""
        fn, b, i64, mod = self.fn, self.b, self.i64, self.mod
        gi, shape = self.load('gi'), fn.field(parent, mod.node['shape'])
        done = fn.block('fitdone')
        general = fn.block('fitcall')
        differs = fn.block('fitdiffers')
        b.cbranch(self.shape_is(gi, shape), done, differs)
        b.position_at_end(differs)
        b.cbranch(fn.is_(fn.typ(shape), mod.obj(tuple)), known := fn.block('fitshape'), general)
        b.position_at_end(known)
        is_array = self.of_type(gi, np.ndarray)
        b.store(self.of_type(gi, float, np.float64), self.flag)
        with b.if_then(is_array):
            b.store(b.icmp_signed('==', self.dims(gi)[0], i64(0)), self.flag)
        lazy = fn.block('fitlazy')
        b.cbranch(b.load(self.flag), lazy, bias_test := fn.block('fitbiastest'))
        b.position_at_end(lazy)         # a 0-d cotangent broadcasts to any shape
        self.check_int(fn.call('PySet_Add', self.lazies, parent))
        b.branch(done)
        b.position_at_end(bias_test)
        is_bias = self.shape_is(gi, shape, lead=1)
        bias = fn.block('fitbias')
        b.cbranch(is_bias, bias, general)
        b.position_at_end(bias)         # only a leading axis added
        with b.if_then(b.icmp_signed('>', fn.call('PySet_Size', self.owned), i64(0))):
            self.take('tmp', self.check(fn.call('PyLong_FromVoidPtr', gi)))
            self.check_int(fn.call('PySet_Discard', self.owned, self.load('tmp')))
            self.drop('tmp')
        zero = mod.obj(0)
        summed = self.call(mod.obj(self.parts['add_reduce']), [gi, zero])
        self.drop('gi')
        self.take('gi', self.check(summed))
        b.branch(done)
        b.position_at_end(general)
        fitted = self.call(mod.obj(self.parts['fit']), [gi, parent, self.owned, self.lazies])
        self.drop('gi')
        self.take('gi', self.check(fitted))
        b.branch(done)
        b.position_at_end(done)

    def hand_out(self, g: Any) -> None:
        """A leaf's gradient ``g`` (the ``g`` slot): an array already handed out (one
        array for two leaves, or the seed) is copied; ``given`` records it."""
        fn, b = self.fn, self.b
        with b.if_then(self.of_type(g, np.ndarray)):
            self.take('tmp', self.check(fn.call('PyLong_FromVoidPtr', g)))
            handed = self.check_int(fn.call('PySet_Contains', self.given, self.load('tmp')))
            with b.if_then(b.icmp_signed('>', handed, self.mod.i32(0))):
                copy = self.check(self.call(self.mod.obj(np.ndarray.copy), [g]))
                self.drop('g')
                self.take('g', copy)
                self.drop('tmp')
                self.take('tmp', self.check(fn.call('PyLong_FromVoidPtr', copy)))
            self.check_int(fn.call('PySet_Add', self.given, self.load('tmp')))
            self.drop('tmp')

    def pop_cotangent(self) -> None:
        """``g = cts.pop(node)`` into the ``g`` slot (empty)."""
        fn, b = self.fn, self.b
        node = self.load('node')
        got = fn.call('PyDict_GetItem', self.cts, node)
        with b.if_then(fn.is_(got, self.mod.NULL), likely=False):
            fn.call('PyErr_SetString', self.mod.obj(RuntimeError), self.mod.cstring(
                'tracked: an entry left the heap without a cotangent'))
            b.branch(self.fail)
            b.position_at_end(fn.block('unreached'))
        self.hold('g', got)
        self.check_int(fn.call('PyDict_DelItem', self.cts, node))


def sweep_ir(mod: Any, name: str = 'tracked_sweep') -> str:
    """Add ``sweep`` to native_ir's ``Module`` ``mod``; its function's name.

    >>> from tracked import native_backward, native_ir
    >>> mod = native_ir.Module()
    >>> native_backward.sweep_ir(mod)
    'tracked_sweep'
    >>> mod.m.get_global('tracked_sweep').type.pointee.return_type == mod.p8
    True
    """
    from . import tape
    from .native_ir import ARRAY_DESCR, DESCR_KIND
    from .registry import identity, negate_into
    s = _Sweep(mod, name)
    fn, b, i64, ir = s.fn, s.b, s.i64, mod.ir
    i1 = ir.IntType(1)
    _, argv, _ = fn.f.args
    node_at, prim_at = mod.node, mod.prim
    private, where = s.private, s.where
    true = mod.obj(True)
    top, after_entry, done = fn.block('top'), fn.block('afterentry'), fn.block('done')
    s.hold('node', b.load(argv))
    s.hold('g', b.load(b.gep(argv, [i64(1)])))
    b.branch(top)

    # -- an entry (or leaf): what this function does not take goes back untouched ------
    b.position_at_end(top)
    node, g = s.load('node'), s.load('g')
    gt = fn.typ(g)
    s.refuse_unless(b.not_(s.of_type(g, s.parts['negated'], tape.SparseCotangent)), 'dense')
    prim = fn.field(node, node_at['prim'])
    args = fn.field(node, node_at['args'])
    s.refuse_unless(b.and_(b.icmp_unsigned('!=', prim, mod.NULL),
                           b.icmp_unsigned('!=', args, mod.NULL)), 'set')
    # a lazy cotangent: in ``lazies`` and smaller than its entry (widened below)
    b.store(ir.Constant(i1, 0), s.lazy)
    with b.if_then(b.icmp_signed('>', fn.call('PySet_Size', s.lazies), i64(0))):
        listed = s.check_int(fn.call('PySet_Contains', s.lazies, node))
        with b.if_then(b.icmp_signed('>', listed, mod.i32(0))):
            # (a tracked cotangent's shape is Python's to read)
            s.refuse_unless(s.of_type(g, np.ndarray, float, np.float64), 'lazykind')
            b.store(b.not_(s.shape_is(g, fn.field(node, node_at['shape']))), s.lazy)
    is_lazy = b.load(s.lazy)
    is_leaf = b.and_(s.is_none(prim), s.is_none(args))
    leaf = fn.branch_if(is_leaf, 'leaf')
    s.refuse_unless(b.and_(fn.is_(fn.typ(prim), mod.obj(mod.Primitive)),
                           fn.is_(fn.typ(args), mod.obj(tuple))), 'entry')
    vjps, inline, consume, fresh = (fn.field(prim, prim_at[n])
                                    for n in ('vjps', 'inline', 'consume', 'fresh'))
    kwargs = fn.field(node, node_at['kwargs'])
    ans = fn.field(node, node_at['ans'])
    same_obj = fn.field(node, node_at['same_shape'])
    parents = fn.field(node, node_at['parents'])
    s.refuse_unless(s.of_type(vjps, tuple), 'vjps')
    for table in (inline, consume, fresh):
        s.refuse_unless(b.or_(s.is_none(table), s.of_type(table, tuple)), 'table')
    # (the -g folding test below reads the cotangent before it is widened)
    s.refuse_unless(b.not_(b.and_(is_lazy, b.not_(s.is_none(consume)))), 'lazyconsume')
    s.refuse_unless(b.or_(s.is_none(kwargs), s.of_type(kwargs, dict)), 'kwargs')
    s.refuse_unless(b.and_(b.icmp_unsigned('!=', ans, mod.NULL), s.of_type(parents, tuple)),
                    'fields')
    s.refuse_unless(b.icmp_signed('<=', s.length(args), i64(MAX_ARGS)), 'few')
    s.refuse_unless(fn.any_of(same_obj, [True, False]), 'sameknown')
    same = fn.is_(same_obj, true)
    with b.if_then(b.not_(same)):
        real = fn.field(node, node_at['real_parents'])
        s.refuse_unless(s.is_none(real), 'real')
    # the cotangent's kind where an inlined partial multiplies it: a real one only
    b.store(s.of_type(g, float, np.float64), s.flag)
    with b.if_then(fn.is_(gt, mod.obj(np.ndarray))):
        kind = b.load(b.gep(fn.field(g, ARRAY_DESCR), [i64(DESCR_KIND)]))
        b.store(b.icmp_unsigned('!=', kind, mod.i8(ord('c'))), s.flag)
    g_real = b.load(s.flag)
    g_big = s.is_big(g)
    nparents = s.length(parents)

    def vet(k: Any) -> None:
        pair = s.item(parents, k)
        s.refuse_unless(b.and_(s.of_type(pair, tuple),
                               b.icmp_signed('==', s.length(pair), i64(2))), 'pair')
        pos_obj = s.item(pair, i64(0))
        s.refuse_unless(b.and_(s.of_type(pos_obj, int),
                               s.of_type(s.item(pair, i64(1)), mod.Node)), 'pairtypes')
        pos = fn.call('PyLong_AsLongLong', pos_obj)
        s.refuse_unless(b.and_(b.icmp_signed('>=', pos, i64(0)),
                               b.icmp_signed('<', pos, s.length(vjps))), 'posin')
        for table in (inline, consume, fresh):
            with b.if_then(b.not_(s.is_none(table))):
                s.refuse_unless(b.icmp_signed('<', pos, s.length(table)), 'tablein')
        with b.if_then(b.not_(s.is_none(inline))):
            s.refuse_unless(b.or_(s.is_none(s.item(inline, pos)), g_real), 'realinline')
        # backward's -g folding into a large a - b's consumer
        with b.if_then(b.and_(same, b.not_(s.is_none(consume)))):
            s.refuse_unless(b.or_(b.not_(fn.is_(s.item(consume, pos), mod.obj(negate_into))),
                                  b.not_(g_big)), 'nofold')
    fn.loop(nparents, vet)

    # -- taken: from here the entry is this function's ------------------------------------
    def discard_mine(g: Any) -> Any:
        """``owned.discard(id(g))`` where it is there: whether it was (an i1)."""
        b.store(ir.Constant(i1, 0), s.flag)
        with b.if_then(b.icmp_signed('>', fn.call('PySet_Size', s.owned), i64(0))):
            s.take('tmp', s.check(fn.call('PyLong_FromVoidPtr', g)))
            inside = s.check_int(fn.call('PySet_Contains', s.owned, s.load('tmp')))
            with b.if_then(b.icmp_signed('>', inside, mod.i32(0))):
                s.check_int(fn.call('PySet_Discard', s.owned, s.load('tmp')))
                b.store(ir.Constant(i1, 1), s.flag)
            s.drop('tmp')
        return b.load(s.flag)
    mine = b.and_(discard_mine(g), b.and_(b.icmp_signed('==', nparents, i64(1)), g_big))
    b.store(mine, s.flag)
    with b.if_then(is_lazy):
        wide = s.check(s.call(mod.obj(s.parts['widen']), [node, g, s.lazies]))
        with b.if_then(b.not_(fn.is_(wide, g))):      # broadcast: a view, not ours
            b.store(ir.Constant(i1, 0), s.flag)
        s.drop('g')
        s.take('g', wide)
    mine = b.load(s.flag)
    g = s.load('g')
    for n, v in (('prim', prim), ('args', args), ('kwargs', kwargs), ('ans', ans),
                 ('parents', parents)):
        s.hold(n, v)
    nargs = s.length(args)
    b.store(s.is_none(kwargs), s.flag)          # no keyword arguments saved (an i1)
    with b.if_then(b.not_(s.is_none(kwargs))):
        b.store(b.icmp_signed('==', fn.call('PyDict_Size', kwargs), i64(0)), s.flag)
    kw_free = b.load(s.flag)

    def visit(k: Any) -> None:
        pair = s.item(parents, k)
        pos_obj, parent = s.item(pair, i64(0)), s.item(pair, i64(1))
        pos = fn.call('PyLong_AsLongLong', pos_obj)
        vjp = s.item(vjps, pos)
        have, ordinary, next_parent = fn.block('have'), fn.block('ordinary'), \
            fn.block('nextparent')
        # g is this pass's buffer: tape._in_place may compute the cotangent in it
        placing = fn.block('placing')
        b.cbranch(mine, placing, ordinary)
        b.position_at_end(placing)
        s.take('gi', s.check(s.call(mod.obj(s.parts['in_place']),
                                    [prim, pos_obj, g, ans, args, kwargs, true])))
        placed, unplaced = fn.block('placed'), fn.block('unplaced')
        b.cbranch(s.is_none(s.load('gi')), unplaced, placed)
        b.position_at_end(unplaced)
        s.drop('gi')
        b.branch(ordinary)
        b.position_at_end(placed)
        with b.if_then(s.of_type(s.load('gi'), np.ndarray)):
            s.own(s.load('gi'))
        b.branch(have)
        # the pullback: the identity, an inlined partial, or the function
        b.position_at_end(ordinary)
        ident, pull, inlined = fn.block('identity'), fn.block('pull'), fn.block('inlined')
        not_ident = fn.block('notidentity')
        b.cbranch(fn.is_(vjp, mod.obj(identity)), ident, not_ident)
        b.position_at_end(not_ident)
        has_table = fn.block('hastable')
        b.cbranch(s.is_none(inline), pull, has_table)
        b.position_at_end(has_table)
        b.cbranch(b.and_(kw_free, b.not_(s.is_none(s.item(inline, pos)))), inlined, pull)

        b.position_at_end(ident)
        s.hold('gi', g)
        b.branch(have)

        b.position_at_end(inlined)      # g * d(ans, *args)
        b.store(ans, s.stack)
        fn.loop(nargs, lambda j: b.store(s.item(args, j), b.gep(s.stack, [b.add(j, i64(1))])))
        s.take('tmp', s.check(fn.call('PyObject_VectorcallDict', s.item(inline, pos), s.stack,
                                      b.add(nargs, i64(1)), mod.NULL)))
        product = fn.call('PyNumber_Multiply', g, s.load('tmp'))
        s.drop('tmp')
        s.take('gi', s.check(product))
        b.branch(have)

        b.position_at_end(pull)         # vjp(g, ans, *args, **kwargs)
        b.store(g, s.stack)
        b.store(ans, b.gep(s.stack, [i64(1)]))
        fn.loop(nargs, lambda j: b.store(s.item(args, j), b.gep(s.stack, [b.add(j, i64(2))])))
        keywords = b.select(s.is_none(kwargs), mod.NULL, kwargs)
        s.take('gi', s.check(fn.call('PyObject_VectorcallDict', vjp, s.stack,
                                     b.add(nargs, i64(2)), keywords)))
        got = fn.block('got')
        nothing = fn.block('nothing')
        b.cbranch(s.is_none(s.load('gi')), nothing, got)
        b.position_at_end(nothing)
        s.drop('gi')
        b.branch(next_parent)
        b.position_at_end(got)
        with b.if_then(b.not_(s.is_none(fresh))):
            with b.if_then(fn.is_(s.item(fresh, pos), true)):
                with b.if_then(s.is_big(s.load('gi'))):
                    s.own(s.load('gi'))
        b.branch(have)

        # gi in hand: summed to its parent's shape, then into the table
        b.position_at_end(have)
        with b.if_then(b.not_(same)):
            s.fit(parent)
        again, other = fn.block('again'), fn.block('other')
        b.cbranch(fn.is_(parent, s.load('nxt')), again, other)

        b.position_at_end(again)        # x * x: the same entry twice
        total = s.call(mod.obj(s.parts['accumulate']), [s.load('nxt_g'), s.load('gi'), s.owned])
        s.drop('gi')
        s.take('gi', s.check(total))
        s.drop('nxt_g')
        s.take('nxt_g', s.move('gi'))
        b.branch(next_parent)

        b.position_at_end(other)
        prev = fn.call('PyDict_GetItem', s.cts, parent)
        summed, fresh_parent = fn.block('summed'), fn.block('freshparent')
        b.cbranch(b.icmp_unsigned('!=', prev, mod.NULL), summed, fresh_parent)
        b.position_at_end(summed)
        s.hold('tmp', prev)
        total = s.call(mod.obj(s.parts['accumulate']), [prev, s.load('gi'), s.owned])
        s.drop('tmp')
        s.drop('gi')
        s.take('gi', s.check(total))
        s.check_int(fn.call('PyDict_SetItem', s.cts, parent, s.load('gi')))
        s.drop('gi')
        b.branch(next_parent)

        b.position_at_end(fresh_parent)
        chain, waits = fn.block('chain'), fn.block('waits')
        b.cbranch(fn.is_(s.load('nxt'), mod.NULL), chain, waits)
        b.position_at_end(chain)        # the first parent skips the heap
        s.hold('nxt', parent)
        s.take('nxt_g', s.move('gi'))
        b.branch(next_parent)
        b.position_at_end(waits)
        s.check_int(fn.call('PyDict_SetItem', s.cts, parent, s.load('gi')))
        s.drop('gi')
        s.heap_entry(parent)
        pushed = s.check(s.call(mod.obj(tape.heappush), [s.heap, s.load('tmp')]))
        fn.call('Py_DecRef', pushed)
        s.drop('tmp')
        b.branch(next_parent)
        b.position_at_end(next_parent)
    fn.loop(nparents, visit)
    # released as it goes (private), or listed for release after success (used)
    with b.if_else(fn.is_(private, true)) as (release, keep):
        with release:
            for field, empty in (('args', s.none), ('parents', mod.obj(()))):
                old = fn.field(node, node_at[field])
                fn.put(node, node_at[field], empty)
                fn.call('Py_DecRef', old)
        with keep:
            with b.if_then(b.not_(s.is_none(s.used))):
                s.check_int(fn.call('PyList_Append', s.used, node))
    for n in ('prim', 'args', 'kwargs', 'ans', 'parents'):
        s.drop(n)
    b.branch(after_entry)

    # -- a leaf: its gradient, an array of its own --------------------------------------
    b.position_at_end(leaf)
    g = s.load('g')
    discard_mine(g)
    with b.if_else(is_lazy) as (widen, plain):
        with widen:                 # a writable array of the leaf's shape
            full = s.check(s.call(mod.obj(s.parts['full']), [g, fn.field(node, node_at['shape'])]))
            s.drop('g')
            s.take('g', full)
        with plain:
            s.hand_out(g)
    s.check_int(fn.call('PyDict_SetItem', s.leaves, s.load('node'), s.load('g')))
    b.branch(after_entry)

    # -- the next entry: the chain's parent, or the heap's latest --------------------------
    b.position_at_end(after_entry)
    s.drop('node')
    s.drop('g')
    nxt = s.load('nxt')
    waiting = b.icmp_signed('>', fn.call('PyList_Size', s.heap), i64(0))
    chain, from_heap = fn.block('follow'), fn.block('fromheap')
    b.cbranch(fn.is_(nxt, mod.NULL), from_heap, chain)
    b.position_at_end(from_heap)
    popping = fn.block('pop')
    b.cbranch(waiting, popping, done)
    b.position_at_end(popping)
    s.take('tmp', s.check(s.call(mod.obj(tape.heappop), [s.heap])))
    s.hold('node', s.item(s.load('tmp'), i64(1)))
    s.drop('tmp')
    s.pop_cotangent()
    b.branch(top)

    b.position_at_end(chain)
    b.store(ir.Constant(i1, 0), s.flag)
    with b.if_then(waiting):         # -heap[0][0] > nxt.seq: a later entry waits there
        head = s.item(fn.call('PyList_GetItem', s.heap, i64(0)), i64(0))
        later = b.icmp_signed('<', fn.call('PyLong_AsLongLong', head),
                              b.neg(fn.call('PyLong_AsLongLong', fn.field(nxt, node_at['seq']))))
        b.store(later, s.flag)
    swap, follow = fn.block('swap'), fn.block('followchain')
    b.cbranch(b.load(s.flag), swap, follow)
    b.position_at_end(swap)
    s.check_int(fn.call('PyDict_SetItem', s.cts, nxt, s.load('nxt_g')))
    s.drop('nxt_g')
    s.heap_entry(nxt)
    s.drop('nxt')
    swapped = s.check(s.call(mod.obj(tape.heappushpop), [s.heap, s.load('tmp')]))
    s.drop('tmp')
    s.take('tmp', swapped)
    s.hold('node', s.item(swapped, i64(1)))
    s.drop('tmp')
    s.pop_cotangent()
    b.branch(top)
    b.position_at_end(follow)
    s.take('node', s.move('nxt'))
    s.take('g', s.move('nxt_g'))
    b.branch(top)

    # -- the exits ----------------------------------------------------------------------
    b.position_at_end(done)
    fn.call('Py_IncRef', s.none)
    b.ret(s.none)
    b.position_at_end(s.refuse)
    pair = fn.call('PyTuple_Pack', i64(2), s.load('node'), s.load('g'))
    s.drop('node')
    s.drop('g')
    b.ret(pair)
    b.position_at_end(s.fail)
    with b.if_then(b.icmp_unsigned('!=', s.load('node'), mod.NULL)):
        fn.call('Py_IncRef', s.load('node'))
        fn.call('PyList_SetItem', where, i64(0), s.load('node'))
    for n in _SLOTS:
        s.drop(n)
    b.ret(mod.NULL)
    b.position_at_end(fn.slow)      # (Method's Python fallback: the sweep has none)
    b.unreachable()
    return name
