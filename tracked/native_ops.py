"""The eager fast paths of boxes.py as CPython methods written in LLVM IR.

An eager operation on a tracked value costs its NumPy call plus the recording: the
operator's Python method, a box and a tape entry filled slot by slot.  In Python that
recording cost ~0.65 µs, nearly twice NumPy's own call on a small array (W1 of
benchmarks/eager.py: 4.9x the NumPy forward, fwd+bwd).  The commonest cases -- a binary
operator with a Python or NumPy real scalar (``x * 1.01``, ``np.float64(2) - x``) or
between two tracked values (``a - b``), a unary ufunc (``np.sin(x)``, ``-x``) -- are
written here as ``METH_FASTCALL`` C functions
of CPython's API, built by compiled_tape/native.py and installed as method descriptors
(``PyDescr_NewMethod``) in place of ``Tracked``'s operators and ``__array_ufunc__``: the
same box and entry, made at C speed (W1: 3.6-3.8x).

A native method records only where boxes.py's fast paths record on their own
(``TrackedArray``/``TrackedReal`` operands holding an ndarray or a float64, at one
level, no thread recording a tape or paused, the primitive's plans made and keeping
whole operands or nothing, no leaf's value saved, which boxes.py makes read-only) and
otherwise calls boxes.py's Python method, which stays the reference:
tests/test_native_ops.py checks that both make the same box and entry, and the suite
runs with the native methods in place.  Object pointers and slot offsets are read in
this process and written into the IR as constants, so it is built per process and never
cached: ~25 ms of Python making the IR and ~30 ms in LLVM (unoptimised: the methods
call CPython's API), in a background thread started by the first backward pass
(``start``).

``$TRACKED_NATIVE=0`` keeps the Python methods (as it keeps numba for compiled tapes);
so does a CPython whose object layout ``pyentry.available`` does not know.
"""
from __future__ import annotations

import _thread
import ctypes
import threading
import time
from typing import Any

import numpy as np

__all__ = ['available', 'start', 'wait', 'install', 'uninstall', 'installed', 'python_method',
           'slot_offset', 'OPERATORS']

# operator name -> (ufunc, position of the tracked operand)
OPERATORS = {
    '__add__': (np.add, 0), '__radd__': (np.add, 1),
    '__sub__': (np.subtract, 0), '__rsub__': (np.subtract, 1),
    '__mul__': (np.multiply, 0), '__rmul__': (np.multiply, 1),
    '__truediv__': (np.true_divide, 0), '__rtruediv__': (np.true_divide, 1),
    '__pow__': (np.power, 0), '__rpow__': (np.power, 1),
}
METH_FASTCALL, METH_KEYWORDS = 0x80, 0x2
START_DELAY = 0.2           # seconds from the first backward pass to the build
_state: dict[str, Any] = {}
# what an entry keeps for no keyword arguments, and for an argument it does not keep
_NO_KWARGS: dict[str, Any] = {}
_NONE1 = (None,)
_lock = threading.Lock()


def installed() -> bool:
    """Whether the native methods are in place."""
    return 'python' in _state


def start() -> None:
    """Build and install the native methods in a background thread, once per process
    (called by the first backward pass; nothing when ``$TRACKED_NATIVE=0``)."""
    if 'started' in _state:
        return
    _state['started'] = True
    # available() imports native.py and reads sysconfig (20 ms): in the thread.  (Not
    # threading.Thread: its start() waits until the new thread runs.)
    try:
        _thread.start_new_thread(_install_quietly, ())
    except RuntimeError:            # no new threads (the interpreter is exiting)
        pass


def available() -> bool:
    """Whether this process builds the native methods: native code on (``native.enabled``)
    and an object layout they know (``pyentry.available``)."""
    from .compiled_tape import native, pyentry
    return native.enabled() and pyentry.available() and np.dtype(np.intp).itemsize == 8


def _install_quietly() -> None:
    # The IR is made in Python: after the gradient that started this thread has
    # returned (it took 10 ms longer sharing the GIL with it)
    time.sleep(START_DELAY)
    try:
        if available():
            install()
    except Exception:       # the Python methods stay: slower, never wrong
        pass
    finally:
        _settled.set()


_settled = threading.Event()


def wait(timeout: float = 5.0) -> None:
    """Return once a build started by ``start`` has ended (at once if none started).
    compiled_tape's choice between kernels and NumPy waits here before timing them:
    timed while this build runs, the kernels pay for its share of the GIL and of
    llvmlite's one LLVM call at a time, and the replay can win a race it should lose."""
    if 'started' in _state:
        _settled.wait(timeout)


def install() -> None:
    """Build the native methods and put them in place of ``Tracked``'s (idempotent)."""
    if not available():
        raise RuntimeError('tracked\'s native methods need CPython on Linux (or '
                           'TRACKED_NATIVE=1) with a known object layout; the Python '
                           'methods serve elsewhere')
    with _lock:
        if installed():
            return
        from .boxes import Tracked
        python = {name: Tracked.__dict__[name] for name in (*OPERATORS, '__array_ufunc__')}
        addresses = _build(python)
        descrs = {name: _descriptor(Tracked, name, addr, flags)
                  for name, (addr, flags) in addresses.items()}
        _state['python'] = python
        for name, d in descrs.items():
            setattr(Tracked, name, d)


def python_method(name: str) -> Any:
    """boxes.py's Python function for method ``name`` of ``Tracked`` (installed or not)."""
    from .boxes import Tracked
    return _state['python'][name] if installed() else Tracked.__dict__[name]


def uninstall() -> None:
    """Put ``Tracked``'s Python methods back (tests compare both)."""
    with _lock:
        python = _state.pop('python', None)
        if python is not None:
            from .boxes import Tracked
            for name, fn in python.items():
                setattr(Tracked, name, fn)


class _MethodDef(ctypes.Structure):
    _fields_ = [('ml_name', ctypes.c_char_p), ('ml_meth', ctypes.c_void_p),
                ('ml_flags', ctypes.c_int), ('ml_doc', ctypes.c_char_p)]


_defs: list[Any] = []           # alive as long as the process: descriptors point at them


def _descriptor(cls: type, name: str, address: int, flags: int) -> Any:
    d = _MethodDef(name.encode(), address, flags, None)
    _defs.append(d)
    new = ctypes.pythonapi.PyDescr_NewMethod
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.py_object, ctypes.c_void_p]
    return new(cls, ctypes.addressof(d))


def slot_offset(cls: type, name: str) -> int:
    """The offset of ``__slots__`` member ``name`` in instances of ``cls``, read from its
    member descriptor (``PyMemberDescrObject.d_member->offset``) and checked by writing
    through it."""
    descr = cls.__dict__[name]
    if type(descr).__name__ != 'member_descriptor':
        raise TypeError(f'{cls.__name__}.{name} is not a slot')
    member = ctypes.c_void_p.from_address(id(descr) + 5 * 8).value
    if member is None or ctypes.c_char_p.from_address(member).value != name.encode():
        raise RuntimeError(f'unknown member descriptor layout for {cls.__name__}.{name}')
    return ctypes.c_ssize_t.from_address(member + 16).value


def _build(python: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{method name: (address, flags)} of the native methods, falling back to ``python``'s."""
    from .compiled_tape import native
    ir, names = _module_ir(python)
    obj = native.build(ir, optimise=False)
    addrs = native.addresses(obj, list(names.values()))
    flags = {name: METH_FASTCALL | (METH_KEYWORDS if name == '__array_ufunc__' else 0)
             for name in names}
    return {name: (addrs[fn], flags[name]) for name, fn in names.items()}


def _numpy_call() -> str:
    """The ``'__call__'`` string NumPy passes to ``__array_ufunc__`` (not interned)."""
    seen = []

    class Probe:
        def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> None:
            seen.append(method)
    np.negative(Probe())
    return seen[0]


# -- the IR ---------------------------------------------------------------------------

# CPython functions the methods call: (return, arguments); p an object, P an array of
# them, i an int64, I an int, v nothing, * more arguments
_API = {
    'PyDict_GetItem': ('p', 'pp'), 'PyObject_VectorcallDict': ('p', 'pPip'),
    'PyType_GenericAlloc': ('p', 'pi'), 'PyTuple_Pack': ('p', 'i*'), 'PyIter_Next': ('p', 'p'),
    'Py_IncRef': ('v', 'p'), 'Py_DecRef': ('v', 'p'), 'PyLong_AsLongLong': ('i', 'p'),
    'PyObject_GetAttr': ('p', 'pp'), 'PyDict_New': ('p', ''), 'PyDict_SetItem': ('I', 'ppp'),
    'PyUnicode_Compare': ('I', 'pp'),
}
_TUPLE_ITEMS = 24           # PyTupleObject: ob_refcnt, ob_type, ob_size, then the items
_TUPLE_SIZE = 16
_ARRAY_NDIM = 24            # PyArrayObject: ob_refcnt, ob_type, data, nd (an int),
_ARRAY_DIMS = 32            # ... the dimensions' pointer, strides, base, descr
_ARRAY_DESCR = 56
_DESCR_KIND = 24            # PyArray_Descr: ob_refcnt, ob_type, typeobj, then kind (a char)
_OB_TYPE = 8


class _Module:
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
        kinds = {'p': self.p8, 'P': self.pp, 'i': self.i64, 'I': self.i32, 'v': ir.VoidType()}
        self.api = {name: ir.Function(self.m, ir.FunctionType(
            kinds[ret], [kinds[a] for a in args.rstrip('*')], var_arg=args.endswith('*')),
            name=name) for name, (ret, args) in _API.items()}
        self.kept_objects: list[Any] = []
        self.NULL = ir.Constant(self.p8, None)
        self.box = {n: slot_offset(Boxed, n) for n in ('_node', '_value')}
        self.node = {n: slot_offset(tape.Node, n) for n in (
            'prim', 'args', 'kwargs', 'ans', 'shape', 'parents', 'seq', 'level', 'same_shape',
            'real_parents')}
        self.prim = {n: slot_offset(Primitive, n) for n in ('fn', 'fast', 'view', 'saves',
                                                             'elementwise')}
        self.boxes = (TrackedArray, TrackedReal)
        self.Node, self.Primitive, self.ANS, self.RULES, self.tape = \
            tape.Node, Primitive, ANS, RULES, tape

    def obj(self, o: Any) -> Any:
        """A constant pointer to ``o`` (kept alive with the methods)."""
        self.kept_objects.append(o)
        return self.ir.Constant(self.i64, id(o)).inttoptr(self.p8)


class _Method:
    """One method's function: IR builder helpers, and its Python fallback (``slow``)."""

    def __init__(self, mod: _Module, name: str, argtys: list[Any], fallback: Any):
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
        return self.field(o, _OB_TYPE)

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
        return self.call('PyLong_AsLongLong', self.field(fast, _TUPLE_ITEMS + 8 * slot))

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
        nd_array = b.zext(b.load(b.bitcast(b.gep(val, [mod.i64(_ARRAY_NDIM)]),
                                           mod.i32.as_pointer())), mod.i64)
        dims_array = b.bitcast(self.field(val, _ARRAY_DIMS), mod.i64.as_pointer())
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
        nd_array = b.zext(b.load(b.bitcast(b.gep(ans, [mod.i64(_ARRAY_NDIM)]),
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
        self.put(n, at['kwargs'], mod.obj(_NO_KWARGS))
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
        count = b.load(b.bitcast(b.gep(kwnames, [i64(_TUPLE_SIZE)]), i64.as_pointer()))

        def add(k: Any) -> None:
            key = b.load(b.bitcast(b.gep(kwnames, [b.add(i64(_TUPLE_ITEMS),
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


def _binop(mod: _Module, fname: str, uf: np.ufunc, pos: int, fallback: Any) -> Any:
    """``Tracked.__op__`` (``pos`` 0) or ``__rop__`` (1) of ufunc ``uf``: boxes.py's
    ``_binop`` for a real scalar operand."""
    fn = _Method(mod, fname, [mod.p8, mod.pp, mod.i64], fallback)
    box, args, nargs = fn.f.args
    b = fn.b
    fn.unless(b.icmp_signed('==', nargs, mod.i64(1)), 'one')
    other = b.load(args)
    tracked = fn.branch_if(fn.any_of(fn.typ(other), list(mod.boxes)), 'tracked')
    fn.unless(fn.any_of(fn.typ(other), [float, int, np.float64]), 'scalar')
    node, v, prim, fast = fn.prologue(box, mod.obj(uf))
    kept = fn.kept(fast, pos + 1)
    kept_bit = b.and_(kept, mod.i64(1 << pos))
    fn.unprotected(node, kept_bit)
    ans = fn.forward(prim, [v, other] if pos == 0 else [other, v])

    def pack() -> Any:              # the tracked operand's value only if a pullback reads it
        saved = b.select(b.icmp_unsigned('!=', kept_bit, mod.i64(0)), v, mod.obj(None))
        return fn.call('PyTuple_Pack', mod.i64(2), *((saved, other) if pos == 0 else
                                                     (other, saved)))
    fn.record(node, prim, ans, fn.keeps_ans(kept), pack, [(pos, node)])
    b.position_at_end(tracked)
    _both(fn, uf, pos, box, other)
    fn.python(box, args, nargs)
    return fn.f


def _both(fn: _Method, uf: np.ufunc, pos: int, box: Any, other: Any) -> None:
    """The rest of ``_binop`` for a tracked ``other``: boxes.py's path for two tracked
    operands at one level (``dispatch.record``'s entry), where the entry keeps both
    operands or neither and no leaf's value (which boxes.py makes read-only)."""
    mod, b = fn.mod, fn.b
    i64 = mod.i64
    node, v, prim, _ = fn.prologue(box, mod.obj(uf), plans=False)
    onode, ov = fn.field(other, mod.box['_node']), fn.field(other, mod.box['_value'])
    fn.unless(b.and_(b.icmp_unsigned('!=', onode, mod.NULL),
                     b.icmp_unsigned('!=', ov, mod.NULL)), 'oset')
    fn.unless(fn.is_(fn.typ(onode), mod.obj(mod.Node)), 'oentry')
    fn.unless(fn.any_of(fn.typ(ov), [np.ndarray, np.float64]), 'oplain')
    # one level (the same int object: other levels go to Python)
    fn.unless(fn.is_(fn.field(onode, mod.node['level']), fn.field(node, mod.node['level'])),
              'level')
    saves = fn.field(prim, mod.prim['saves'])
    fn.unless(fn.is_(fn.typ(saves), mod.obj(dict)), 'saves')
    plan = fn.call('PyDict_GetItem', saves, mod.obj(mod.KEY_BOTH))
    fn.unless(b.icmp_unsigned('!=', plan, mod.NULL), 'planned')
    keep_ans, saver, kept_obj = (fn.field(plan, _TUPLE_ITEMS + 8 * k) for k in range(3))
    keep_all = fn.is_(saver, mod.obj(None))
    kept = fn.call('PyLong_AsLongLong', kept_obj)
    fn.unless(b.or_(keep_all, b.icmp_signed('==', kept, i64(0))), 'plainsaver')
    for entry, val in ((node, v), (onode, ov)):     # kept values: none a leaf's
        unsaved = fn.branch_if(b.or_(b.not_(keep_all), b.not_(fn.is_(fn.typ(val), mod.obj(
            np.ndarray)))), 'unsaved')
        entry_prim = fn.field(entry, mod.node['prim'])
        fn.unless(b.icmp_unsigned('!=', entry_prim, mod.obj(None)), 'computed')
        fn.unless(fn.is_(fn.field(entry_prim, mod.prim['view']), mod.obj(False)), 'noview')
        b.branch(unsaved)
        b.position_at_end(unsaved)
    operands = [v, ov] if pos == 0 else [ov, v]
    same = b.and_(fn.is_(fn.field(prim, mod.prim['elementwise']), mod.obj(True)),
                  fn.same_shape(v, ov))
    ans = fn.forward(prim, operands)
    # a complex or object result: boxes.py records it otherwise (and computes it again)
    at = fn.typ(ans)
    real = fn.branch_if(fn.is_(at, mod.obj(np.float64)), 'real')
    other_result = fn.block('otherresult')
    array = fn.block('arrayresult')
    b.cbranch(fn.is_(at, mod.obj(np.ndarray)), array, other_result)
    b.position_at_end(array)
    kind = b.load(b.gep(fn.field(ans, _ARRAY_DESCR), [i64(_DESCR_KIND)]))
    b.cbranch(b.or_(b.icmp_unsigned('==', kind, mod.i8(ord('c'))),
                    b.icmp_unsigned('==', kind, mod.i8(ord('O')))), other_result, real)
    b.position_at_end(other_result)
    fn.call('Py_DecRef', ans)
    b.branch(fn.slow)
    b.position_at_end(real)

    def pack() -> Any:              # both operands, or (None, None)
        with b.if_else(keep_all) as (both_kept, none_kept):
            with both_kept:
                kept_pair = fn.call('PyTuple_Pack', i64(2), *operands)
                kept_block = b.block
            with none_kept:
                nones = fn.call('PyTuple_Pack', i64(2), mod.obj(None), mod.obj(None))
                nones_block = b.block
        out = b.phi(mod.p8)
        out.add_incoming(kept_pair, kept_block)
        out.add_incoming(nones, nones_block)
        return out
    parents = [(0, node), (1, onode)] if pos == 0 else [(0, onode), (1, node)]
    fn.record(node, prim, ans, fn.is_(keep_ans, mod.obj(True)), pack, parents,
              shape=lambda: fn.call('PyObject_GetAttr', ans, mod.obj('shape')),
              same=b.select(same, mod.obj(True), mod.obj(False)))


def _ufunc(mod: _Module, fname: str, binops: dict[Any, Any], fallback: Any) -> None:
    """``Tracked.__array_ufunc__``: boxes.py's fast path for a unary ufunc, and a binary
    one of a box and a real scalar sent to the operator's method, as boxes.py sends it."""
    i64 = mod.i64
    fn = _Method(mod, fname, [mod.p8, mod.pp, i64, mod.p8], fallback)
    box, args, nargsf, kwnames = fn.f.args
    b = fn.b
    nargs = b.and_(nargsf, i64((1 << 63) - 1))      # without PY_VECTORCALL_ARGUMENTS_OFFSET
    fn.unless(b.icmp_signed('>=', nargs, i64(3)), 'inputs')     # (ufunc, method, *inputs)
    fn.unless(fn.is_(kwnames, mod.NULL), 'nokw')
    method = b.load(b.gep(args, [i64(1)]))
    is_call = fn.branch_if(fn.any_of(method, ['__call__', _numpy_call()]), 'call')
    # NumPy's '__call__' need not be Python's (interned) one
    fn.unless(fn.is_(fn.typ(method), mod.obj(str)), 'str')
    equal = fn.call('PyUnicode_Compare', method, mod.obj('__call__'))
    fn.unless(b.icmp_signed('==', equal, mod.i32(0)), 'equal')
    b.branch(is_call)
    b.position_at_end(is_call)
    ufunc = b.load(args)
    unary = fn.branch_if(b.icmp_signed('==', nargs, i64(3)), 'unary')
    fn.unless(b.icmp_signed('==', nargs, i64(4)), 'binary')
    fn.unless(fn.any_of(fn.typ(box), list(mod.boxes)), 'boxed')
    first, second = b.gep(args, [i64(2)]), b.gep(args, [i64(3)])
    for uf in (np.add, np.subtract, np.multiply, np.true_divide):   # boxes._UFUNC_OPERATORS's
        this = fn.branch_if(fn.is_(ufunc, mod.obj(uf)), 'ufunc')
        after = b.block
        b.position_at_end(this)
        at1 = fn.branch_if(b.icmp_unsigned('!=', b.load(first), box), 'at1')
        b.ret(b.call(binops[uf, 0], [box, second, i64(1)]))
        b.position_at_end(at1)
        fn.unless(fn.is_(b.load(second), box), 'second')
        b.ret(b.call(binops[uf, 1], [box, first, i64(1)]))
        b.position_at_end(after)
    b.branch(fn.slow)
    b.position_at_end(unary)
    node, v, prim, fast = fn.prologue(box, ufunc)
    kept = fn.kept(fast, 0)
    kept_bit = b.and_(kept, i64(1))
    fn.unprotected(node, kept_bit)
    ans = fn.forward(prim, [v])

    def pack() -> Any:              # (v,) if the pullback reads it, else (None,)
        with b.if_else(b.icmp_unsigned('!=', kept_bit, i64(0))) as (saved, dropped):
            with saved:
                one = fn.call('PyTuple_Pack', i64(1), v)
                saved_block = b.block
            with dropped:
                fn.call('Py_IncRef', mod.obj(_NONE1))
                dropped_block = b.block
        out = b.phi(mod.p8)
        out.add_incoming(one, saved_block)
        out.add_incoming(mod.obj(_NONE1), dropped_block)
        return out
    fn.record(node, prim, ans, fn.keeps_ans(kept), pack, [(0, node)], unary=True)
    fn.python(box, args, nargs, kwnames)


def _module_ir(python: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """LLVM IR of every native method, and {method name: function name}; each falls back
    to ``python``'s function of its name."""
    mod = _Module()
    names, binops = {}, {}
    for j, (name, (uf, pos)) in enumerate(OPERATORS.items()):
        names[name] = f'tracked_binop{j}'
        binops[uf, pos] = _binop(mod, names[name], uf, pos, python[name])
    names['__array_ufunc__'] = 'tracked_ufunc'
    _ufunc(mod, names['__array_ufunc__'], binops, python['__array_ufunc__'])
    _state['keep'] = mod.kept_objects
    return str(mod.m), names
