"""Writing CPython functions in LLVM IR: the builder helpers of native_ops.py's methods
and native_backward.py's sweep.

They call CPython's API (declared in ``Module``, resolved by compiled_tape/native.py) and
read objects at the offsets of this process's layouts: a tuple's items, an ndarray's
dimensions and dtype, a class's ``__slots__`` (``slot_offset``, read from its member
descriptors).  Object pointers are written into the IR as constants (``Module.obj``), so
what is built here serves this process only.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ['Module', 'Method', 'slot_offset', 'NO_KWARGS', 'TUPLE_ITEMS', 'TUPLE_SIZE',
           'ARRAY_NDIM', 'ARRAY_DIMS', 'ARRAY_DESCR', 'DESCR_KIND', 'OB_TYPE']

# what an entry keeps for no keyword arguments (boxes.py's, for the same entries)
NO_KWARGS: dict[str, Any] = {}


def slot_offset(cls: type, name: str) -> int:
    """The offset of ``__slots__`` member ``name`` in instances of ``cls``, read from its
    member descriptor (``PyMemberDescrObject.d_member->offset``) and checked by writing
    through it.

    >>> from tracked import native_ir, tape
    >>> native_ir.slot_offset(tape.Node, 'prim') >= 16     # after the object's header
    True
    """
    descr = cls.__dict__[name]
    if type(descr).__name__ != 'member_descriptor':
        raise TypeError(f'{cls.__name__}.{name} is not a slot')
    member = ctypes.c_void_p.from_address(id(descr) + 5 * 8).value
    if member is None or ctypes.c_char_p.from_address(member).value != name.encode():
        raise RuntimeError(f'unknown member descriptor layout for {cls.__name__}.{name}')
    return ctypes.c_ssize_t.from_address(member + 16).value


# CPython functions the methods call: (return, arguments); p an object, P an array of
# them, i an int64, I an int, v nothing, * more arguments
_API = {
    'PyDict_GetItem': ('p', 'pp'), 'PyObject_VectorcallDict': ('p', 'pPip'),
    'PyType_GenericAlloc': ('p', 'pi'), 'PyTuple_Pack': ('p', 'i*'), 'PyIter_Next': ('p', 'p'),
    'Py_IncRef': ('v', 'p'), 'Py_DecRef': ('v', 'p'), 'PyLong_AsLongLong': ('i', 'p'),
    'PyObject_GetAttr': ('p', 'pp'), 'PyDict_New': ('p', ''), 'PyDict_SetItem': ('I', 'ppp'),
    'PyUnicode_Compare': ('I', 'pp'),
}
TUPLE_ITEMS = 24           # PyTupleObject: ob_refcnt, ob_type, ob_size, then the items
TUPLE_SIZE = 16
ARRAY_NDIM = 24            # PyArrayObject: ob_refcnt, ob_type, data, nd (an int),
ARRAY_DIMS = 32            # ... the dimensions' pointer, strides, base, descr
ARRAY_DESCR = 56
DESCR_KIND = 24            # PyArray_Descr: ob_refcnt, ob_type, typeobj, then kind (a char)
OB_TYPE = 8


class Module:
    """The LLVM module of the methods: CPython's functions declared, the objects and slot
    offsets the methods read (this process's: the IR is built for it alone)."""

    def __init__(self) -> None:
        from llvmlite import ir

        from . import tape
        from .boxes import Boxed, TrackedArray, TrackedReal
        from .registry import ANS, RULES, Primitive, plan_key
        self.ir = ir
        self.KEY_BOTH = plan_key(((0, None), (1, None)), 2)
        self.i8, self.i32, self.i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        self.p8 = ir.IntType(8).as_pointer()
        self.pp = self.p8.as_pointer()
        self.m = ir.Module(name='native_ops')
        self.api: dict[str, Any] = {}
        self.declare(_API)
        self.kept_objects: list[Any] = []
        self.NULL = ir.Constant(self.p8, None)
        self.box = {n: slot_offset(Boxed, n) for n in ('_node', '_value')}
        self.node = {n: slot_offset(tape.Node, n) for n in (
            'prim', 'args', 'kwargs', 'ans', 'shape', 'parents', 'seq', 'level', 'same_shape',
            'real_parents')}
        self.prim = {n: slot_offset(Primitive, n) for n in (
            'fn', 'fast', 'view', 'saves', 'elementwise', 'vjps', 'inline', 'consume', 'fresh')}
        self.boxes = (TrackedArray, TrackedReal)
        self.Node, self.Primitive, self.ANS, self.RULES, self.tape = \
            tape.Node, Primitive, ANS, RULES, tape

    def declare(self, api: dict[str, tuple[str, str]]) -> None:
        """Declare more of CPython's functions (``_API``'s notation)."""
        ir = self.ir
        kinds = {'p': self.p8, 'P': self.pp, 'i': self.i64, 'I': self.i32, 'v': ir.VoidType()}
        for name, (ret, args) in api.items():
            if name not in self.api:
                self.api[name] = ir.Function(self.m, ir.FunctionType(
                    kinds[ret], [kinds[a] for a in args.rstrip('*')],
                    var_arg=args.endswith('*')), name=name)

    def cstring(self, text: str) -> Any:
        """A pointer to a constant NUL-terminated copy of ``text``."""
        ir = self.ir
        data = bytearray(text.encode() + b'\0')
        g = ir.GlobalVariable(self.m, ir.ArrayType(self.i8, len(data)),
                              name=f'text{len(self.m.globals)}')
        g.global_constant = True
        g.initializer = ir.Constant(ir.ArrayType(self.i8, len(data)), data)
        return g.bitcast(self.p8)

    def obj(self, o: Any) -> Any:
        """A constant pointer to ``o`` (kept alive with the methods)."""
        self.kept_objects.append(o)
        return self.ir.Constant(self.i64, id(o)).inttoptr(self.p8)


class Method:
    """One method's function: IR builder helpers, and its Python fallback (``slow``)."""

    def __init__(self, mod: Module, name: str, argtys: list[Any], fallback: Any):
        ir = mod.ir
        self.mod, self.fallback = mod, fallback
        self.f = ir.Function(mod.m, ir.FunctionType(mod.p8, argtys), name=name)
        self.b = ir.IRBuilder(self.f.append_basic_block('entry'))
        self.slow = self.f.append_basic_block('python')

    def block(self, name: str) -> Any:
        return self.f.append_basic_block(name)

    def call(self, name: str, *args: Any) -> Any:
        return self.b.call(self.mod.api[name], list(args))

    def field(self, o: Any, off: int) -> Any:
        b = self.b
        return b.load(b.bitcast(b.gep(o, [self.mod.i64(off)]), self.mod.pp))

    def put(self, o: Any, off: int, v: Any, new: bool = False) -> None:
        """Store ``v`` at ``o + off``: a reference of its own, or ``new`` (already owned)."""
        if not new:
            self.call('Py_IncRef', v)
        b = self.b
        b.store(v, b.bitcast(b.gep(o, [self.mod.i64(off)]), self.mod.pp))

    def typ(self, o: Any) -> Any:
        return self.field(o, OB_TYPE)

    def is_(self, a: Any, c: Any) -> Any:
        return self.b.icmp_unsigned('==', a, c)

    def any_of(self, v: Any, options: list[Any]) -> Any:
        out = self.is_(v, self.mod.obj(options[0]))
        for o in options[1:]:
            out = self.b.or_(out, self.is_(v, self.mod.obj(o)))
        return out

    def unless(self, cond: Any, name: str) -> None:
        """Go on when ``cond`` holds, else to the Python method."""
        ok = self.block(name)
        self.b.cbranch(cond, ok, self.slow)
        self.b.position_at_end(ok)

    def branch_if(self, cond: Any, name: str) -> Any:
        """Go on where ``cond`` fails; the block it branches to where it holds."""
        yes, no = self.block(name), self.block('not_' + name)
        self.b.cbranch(cond, yes, no)
        self.b.position_at_end(no)
        return yes

    def raise_if_null(self, v: Any, *drop: Any) -> Any:
        """``v``; where it is NULL (a call raised), drop ``drop`` and return NULL."""
        b = self.b
        failed = self.branch_if(self.is_(v, self.mod.NULL), 'raised')
        after = b.block
        b.position_at_end(failed)
        for d in drop:
            self.call('Py_DecRef', d)
        b.ret(self.mod.NULL)
        b.position_at_end(after)
        return v

    def prologue(self, box: Any, ufunc: Any, plans: bool = True) -> tuple[Any, Any, Any, Any]:
        """What boxes.py's fast path checks before calling NumPy: ``box`` a TrackedArray
        or TrackedReal holding an ndarray or float64, no special thread, a ``Primitive``
        for ``ufunc`` with its plans made (unless not ``plans``).  ``(entry, value,
        primitive, plans)``."""
        mod, b = self.mod, self.b
        self.unless(self.any_of(self.typ(box), list(mod.boxes)), 'box')
        special = self.call('PyDict_GetItem', mod.obj(mod.tape.__dict__),
                            mod.obj('special_threads'))
        self.unless(self.is_(special, mod.obj(0)), 'alone')
        node, v = self.field(box, mod.box['_node']), self.field(box, mod.box['_value'])
        self.unless(b.and_(b.icmp_unsigned('!=', node, mod.NULL),
                           b.icmp_unsigned('!=', v, mod.NULL)), 'set')
        self.unless(self.is_(self.typ(node), mod.obj(mod.Node)), 'entry')
        self.unless(self.any_of(self.typ(v), [np.ndarray, np.float64]), 'plain')
        for f in ('shape', 'level'):
            self.unless(b.icmp_unsigned('!=', self.field(node, mod.node[f]), mod.NULL), f)
        prim = self.call('PyDict_GetItem', mod.obj(mod.RULES), ufunc)
        self.unless(b.icmp_unsigned('!=', prim, mod.NULL), 'rule')
        self.unless(self.is_(self.typ(prim), mod.obj(mod.Primitive)), 'primitive')
        if not plans:           # (the two-tracked path reads Primitive.saves)
            return node, v, prim, None
        fast = self.field(prim, mod.prim['fast'])
        self.unless(self.is_(self.typ(fast), mod.obj(tuple)), 'plans')
        return node, v, prim, fast

    def kept(self, fast: Any, slot: int) -> Any:
        """``Primitive.fast[slot]``: which values the entry keeps."""
        return self.call('PyLong_AsLongLong', self.field(fast, TUPLE_ITEMS + 8 * slot))

    def unprotected(self, node: Any, kept_bit: Any) -> None:
        """To Python when the entry saves its parent's value and that is a leaf's (or a
        view of it): boxes.py makes it read-only (``protect_saved``)."""
        mod, b = self.mod, self.b
        done = self.branch_if(b.icmp_unsigned('==', kept_bit, mod.i64(0)), 'unsaved')
        parent_prim = self.field(node, mod.node['prim'])
        self.unless(b.icmp_unsigned('!=', parent_prim, mod.obj(None)), 'computed')
        self.unless(self.is_(self.field(parent_prim, mod.prim['view']), mod.obj(False)),
                    'noview')
        b.branch(done)
        b.position_at_end(done)

    def dims(self, val: Any) -> tuple[Any, Any]:
        """``(ndim, pointer to the dimensions)`` of ``val``, an ndarray or a float64."""
        mod, b = self.mod, self.b
        array = self.branch_if(self.is_(self.typ(val), mod.obj(np.ndarray)), 'dims')
        scalar = b.block
        done = self.block('dimsdone')
        b.branch(done)
        b.position_at_end(array)
        nd_array = b.zext(b.load(b.bitcast(b.gep(val, [mod.i64(ARRAY_NDIM)]),
                                           mod.i32.as_pointer())), mod.i64)
        dims_array = b.bitcast(self.field(val, ARRAY_DIMS), mod.i64.as_pointer())
        b.branch(done)
        b.position_at_end(done)
        nd = b.phi(mod.i64)
        nd.add_incoming(nd_array, array)
        nd.add_incoming(mod.i64(0), scalar)
        dims = b.phi(mod.i64.as_pointer())
        dims.add_incoming(dims_array, array)
        dims.add_incoming(mod.ir.Constant(mod.i64.as_pointer(), None), scalar)
        return nd, dims

    def same_shape(self, x: Any, y: Any) -> Any:
        """Whether ndarrays or float64s ``x`` and ``y`` have one shape (an i1)."""
        mod, b = self.mod, self.b
        (nx, dx), (ny, dy) = self.dims(x), self.dims(y)
        start = b.block
        loop, body, done = self.block('dim'), self.block('dim1'), self.block('shaped')
        b.cbranch(b.icmp_signed('==', nx, ny), loop, done)
        b.position_at_end(loop)
        k = b.phi(mod.i64)
        k.add_incoming(mod.i64(0), start)
        more = b.icmp_signed('<', k, nx)
        b.cbranch(more, body, done)
        b.position_at_end(body)
        equal = b.icmp_signed('==', b.load(b.gep(dx, [k])), b.load(b.gep(dy, [k])))
        k.add_incoming(b.add(k, mod.i64(1)), body)
        b.cbranch(equal, loop, done)
        b.position_at_end(done)
        out = b.phi(mod.ir.IntType(1))
        out.add_incoming(mod.ir.Constant(mod.ir.IntType(1), 0), start)
        out.add_incoming(mod.ir.Constant(mod.ir.IntType(1), 1), loop)
        out.add_incoming(mod.ir.Constant(mod.ir.IntType(1), 0), body)
        return out

    def forward(self, prim: Any, operands: list[Any]) -> Any:
        """``prim.fn(*operands)``: a new reference (or NULL returned: it raised)."""
        mod, b = self.mod, self.b
        stack = b.alloca(mod.p8, size=mod.i64(len(operands)))
        for k, o in enumerate(operands):
            b.store(o, b.gep(stack, [mod.i64(k)]))
        ans = self.call('PyObject_VectorcallDict', self.field(prim, mod.prim['fn']), stack,
                        mod.i64(len(operands)), mod.NULL)
        return self.raise_if_null(ans)

    def ndim(self, ans: Any) -> Any:
        """``ans.ndim`` (dropping ``ans`` and returning NULL if reading it raises)."""
        mod, b = self.mod, self.b
        t = self.typ(ans)
        array = self.branch_if(self.is_(t, mod.obj(np.ndarray)), 'array')
        other = b.block
        done = self.branch_if(self.is_(t, mod.obj(np.float64)), 'scalar')
        attr = self.raise_if_null(self.call('PyObject_GetAttr', ans, mod.obj('ndim')), ans)
        nd_attr = self.call('PyLong_AsLongLong', attr)
        self.call('Py_DecRef', attr)
        read = b.block
        b.branch(done)
        b.position_at_end(array)
        nd_array = b.zext(b.load(b.bitcast(b.gep(ans, [mod.i64(ARRAY_NDIM)]),
                                           mod.i32.as_pointer())), mod.i64)
        b.branch(done)
        b.position_at_end(done)
        nd = b.phi(mod.i64)
        nd.add_incoming(nd_array, array)
        nd.add_incoming(mod.i64(0), other)
        nd.add_incoming(nd_attr, read)
        return nd

    def record(self, node: Any, prim: Any, ans: Any, keeps_ans: Any, pack: Any,
               parents: list[tuple[int, Any]], shape: Any = None, same: Any = None,
               unary: bool = False) -> None:
        """Return ``ans`` (owned) boxed with a new entry at ``node``'s level: boxes.py's
        fields, the arguments kept made by ``pack()``, ``parents`` as (position, entry)
        pairs, the shape ``shape()`` (a new reference; None: ``node``'s), ``same`` the
        same_shape object (None: True)."""
        mod, b = self.mod, self.b
        nd = self.ndim(ans)
        cls = b.select(b.icmp_signed('==', nd, mod.i64(0)), mod.obj(mod.boxes[1]),
                       mod.obj(mod.boxes[0]))
        t = self.raise_if_null(self.call('PyType_GenericAlloc', cls, mod.i64(0)), ans)
        self.put(t, mod.box['_value'], ans, new=True)
        # from here, dropping the box drops everything made
        n = self.raise_if_null(self.call('PyType_GenericAlloc', mod.obj(mod.Node),
                                         mod.i64(0)), t)
        self.put(t, mod.box['_node'], n, new=True)
        at = mod.node
        self.put(n, at['prim'], prim)
        self.put(n, at['args'], self.raise_if_null(pack(), t), new=True)
        self.put(n, at['kwargs'], mod.obj(NO_KWARGS))
        self.put(n, at['ans'], b.select(keeps_ans, ans, mod.obj(None)))
        if shape is None:
            self.put(n, at['shape'], self.field(node, at['shape']))
        else:
            self.put(n, at['shape'], self.raise_if_null(shape(), t), new=True)
        pairs: list[Any] = []
        for p, entry in parents:
            pairs.append(self.raise_if_null(
                self.call('PyTuple_Pack', mod.i64(2), mod.obj(p), entry), t, *pairs))
        both = self.call('PyTuple_Pack', mod.i64(len(pairs)), *pairs)
        for pair in pairs:
            self.call('Py_DecRef', pair)
        self.put(n, at['parents'], self.raise_if_null(both, t), new=True)
        self.put(n, at['level'], self.field(node, at['level']))
        seq = self.call('PyIter_Next', mod.obj(mod.tape.sequence))
        self.put(n, at['seq'], self.raise_if_null(seq, t), new=True)
        self.put(n, at['same_shape'], mod.obj(True) if same is None else same)
        if not unary:               # (boxes.py's unary path leaves it unset)
            self.put(n, at['real_parents'], mod.obj(None))
        b.ret(t)

    def keeps_ans(self, kept: Any) -> Any:
        """Whether ``Primitive.fast``'s bits ``kept`` keep the output."""
        mod = self.mod
        return self.b.icmp_unsigned('!=', self.b.and_(kept, mod.i64(mod.ANS)), mod.i64(0))

    def python(self, box: Any, args: Any, nargs: Any, kwnames: Any = None) -> None:
        """The slow block: boxes.py's method, with the same arguments."""
        mod, b = self.mod, self.b
        i64 = mod.i64
        b.position_at_end(self.slow)
        stack = b.alloca(mod.p8, size=b.add(nargs, i64(1)))
        b.store(box, stack)
        self.loop(nargs, lambda k: b.store(b.load(b.gep(args, [k])),
                                           b.gep(stack, [b.add(k, i64(1))])))
        kwargs = mod.NULL if kwnames is None else self.keywords(args, nargs, kwnames)
        out = self.call('PyObject_VectorcallDict', mod.obj(self.fallback), stack,
                        b.add(nargs, i64(1)), kwargs)
        if kwnames is not None:
            with b.if_then(b.icmp_unsigned('!=', kwargs, mod.NULL)):
                self.call('Py_DecRef', kwargs)
        b.ret(out)

    def keywords(self, args: Any, nargs: Any, kwnames: Any) -> Any:
        """A new dict of a vectorcall's keyword arguments (NULL when none)."""
        mod, b = self.mod, self.b
        i64 = mod.i64
        start = b.block
        some, done = self.block('kw'), self.block('kwdone')
        b.cbranch(self.is_(kwnames, mod.NULL), done, some)
        b.position_at_end(some)
        d = self.call('PyDict_New')
        count = b.load(b.bitcast(b.gep(kwnames, [i64(TUPLE_SIZE)]), i64.as_pointer()))

        def add(k: Any) -> None:
            key = b.load(b.bitcast(b.gep(kwnames, [b.add(i64(TUPLE_ITEMS),
                                                         b.mul(k, i64(8)))]), mod.pp))
            self.call('PyDict_SetItem', d, key, b.load(b.gep(args, [b.add(nargs, k)])))
        self.loop(count, add)
        filled = b.block
        b.branch(done)
        b.position_at_end(done)
        out = b.phi(mod.p8)
        out.add_incoming(mod.NULL, start)
        out.add_incoming(d, filled)
        return out

    def loop(self, count: Any, body: Any) -> None:
        """``body(k)`` for k in range(``count``) (i64s); the builder then stands after
        the loop."""
        mod, b = self.mod, self.b
        entry, head, step, done = b.block, self.block('loop'), self.block('step'), \
            self.block('looped')
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(mod.i64)
        k.add_incoming(mod.i64(0), entry)
        b.cbranch(b.icmp_signed('<', k, count), step, done)
        b.position_at_end(step)
        body(k)
        k.add_incoming(b.add(k, mod.i64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)
