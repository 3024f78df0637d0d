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
import contextlib
import ctypes
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import native_backward, tape
from .native_ir import ARRAY_DESCR, DESCR_KIND, TUPLE_ITEMS, Method, Module, slot_offset

__all__ = ['available', 'start', 'wait', 'quiet', 'install', 'uninstall', 'installed',
           'python_method', 'slot_offset', 'OPERATORS']

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
# what an entry keeps for an argument it does not keep
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
    # returned (it took 10 ms longer sharing the GIL with it), and not while a compiled
    # tape times its kernels (``quiet``)
    time.sleep(START_DELAY)
    try:
        with _quiet:
            if available():
                install()
    except Exception:       # the Python methods stay: slower, never wrong
        pass
    finally:
        _settled.set()


_settled = threading.Event()
_quiet = threading.Lock()       # held by the build, and by ``quiet``'s callers


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A block during which no build of the native methods runs: one running is waited
    for, one due waits until the block ends.  compiled_tape's choice between kernels and
    NumPy times them inside it: timed while this build runs, the kernels pay for its
    share of the GIL and of llvmlite's one LLVM call at a time, and the replay can win a
    race it should lose.  (Waiting for the build instead, a warm start took 0.22-0.26 s
    to compiled speed; holding it off, the build's 0.15 s come after.)

    >>> from tracked import native_ops
    >>> with native_ops.quiet():
    ...     pass
    """
    with _quiet:
        yield


def wait(timeout: float = 5.0) -> None:
    """Return once a build started by ``start`` has ended (at once if none started).

    >>> from tracked import native_ops
    >>> native_ops.wait(timeout=0.0)
    """
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
        from .compiled_tape import pyentry
        addresses = _build(python)
        sweep = pyentry.builtin(addresses.pop(SWEEP)[0], 'sweep')
        descrs = {name: _descriptor(Tracked, name, addr, flags)
                  for name, (addr, flags) in addresses.items()}
        _state['python'] = python
        for name, d in descrs.items():
            setattr(Tracked, name, d)
        tape.native_sweep = sweep


def python_method(name: str) -> Any:
    """boxes.py's Python function for method ``name`` of ``Tracked`` (installed or not)."""
    from .boxes import Tracked
    return _state['python'][name] if installed() else Tracked.__dict__[name]


def uninstall() -> None:
    """Put ``Tracked``'s Python methods back (tests compare both)."""
    with _lock:
        python = _state.pop('python', None)
        tape.native_sweep = None
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


def _build(python: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{method name: (address, flags)} of the native methods, falling back to ``python``'s."""
    from .compiled_tape import native
    ir, names = _module_ir(python)
    obj = native.build(ir, optimise=False)
    addrs = native.addresses(obj, list(names.values()))
    flags = {name: METH_FASTCALL | (METH_KEYWORDS if name == '__array_ufunc__' else 0)
             for name in names}
    return {name: (addrs[fn], flags[name]) for name, fn in names.items()}


SWEEP = 'sweep'     # _build's name for native_backward's function (not a method)


def _numpy_call() -> str:
    """The ``'__call__'`` string NumPy passes to ``__array_ufunc__`` (not interned)."""
    seen = []

    class Probe:
        def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> None:
            seen.append(method)
    np.negative(Probe())
    return seen[0]


def _binop(mod: Module, fname: str, uf: np.ufunc, pos: int, fallback: Any) -> Any:
    """``Tracked.__op__`` (``pos`` 0) or ``__rop__`` (1) of ufunc ``uf``: boxes.py's
    ``_binop`` for a real scalar operand."""
    fn = Method(mod, fname, [mod.p8, mod.pp, mod.i64], fallback)
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


def _both(fn: Method, uf: np.ufunc, pos: int, box: Any, other: Any) -> None:
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
    keep_ans, saver, kept_obj = (fn.field(plan, TUPLE_ITEMS + 8 * k) for k in range(3))
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
    kind = b.load(b.gep(fn.field(ans, ARRAY_DESCR), [i64(DESCR_KIND)]))
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


def _ufunc(mod: Module, fname: str, binops: dict[Any, Any], fallback: Any) -> None:
    """``Tracked.__array_ufunc__``: boxes.py's fast path for a unary ufunc, and a binary
    one of a box and a real scalar sent to the operator's method, as boxes.py sends it."""
    i64 = mod.i64
    fn = Method(mod, fname, [mod.p8, mod.pp, i64, mod.p8], fallback)
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
    mod = Module()
    names, binops = {}, {}
    for j, (name, (uf, pos)) in enumerate(OPERATORS.items()):
        names[name] = f'tracked_binop{j}'
        binops[uf, pos] = _binop(mod, names[name], uf, pos, python[name])
    names['__array_ufunc__'] = 'tracked_ufunc'
    _ufunc(mod, names['__array_ufunc__'], binops, python['__array_ufunc__'])
    names[SWEEP] = native_backward.sweep_ir(mod)
    _state['keep'] = mod.kept_objects
    return str(mod.m), names
