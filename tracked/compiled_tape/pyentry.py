"""The VM's entry as a CPython builtin function, generated as LLVM IR: no numba at all.

vm.py's entry was a numba function compiled per argument types: with an empty cache,
numba's first compilation in a process (~0.35 s) plus the entry (~0.15 s), the GIL
held throughout, and numba's dispatcher on every call.  The entry does little: check
each array (an ndarray of the recorded dtype, dimensions and shape, C-contiguous,
aligned and writeable), write the arrays' addresses into ``P``, refuse outputs
overlapping inputs and call the kernels through their addresses.  ``entry_ir``
writes that as a ``METH_FASTCALL`` C function of CPython's API, built by
native.py like a kernel (~10 ms), and ``builtin`` wraps its address in a builtin
function object (``PyCFunction_NewEx``): a call costs what calling ``len`` costs.

Its answers are vm.py's: -1 done, ``s`` at a step run in Python, ``-2 - guard`` at a
failed guard, -3 at another shape, ``ALIASED``; another count, type, dtype, number of
dimensions or memory layout raises ``TypeError`` (as numba's dispatcher did), which the
generated calls (calls.py) send to the general path.  The GIL is released while the
kernels run.  It reads NumPy's and CPython's object layouts (``PyArrayObject``: data at
16, nd at 24, dimensions at 32, descr at 56, flags at 64; ``PyArray_Descr``: type char
at 25, byte order at 26; ``ob_type`` at 8), which NumPy 2 and CPython's default builds
share; ``available()`` is False elsewhere (a debug or free-threaded CPython), and the
numba entry serves.
"""
from __future__ import annotations

import ctypes
import sys
import sysconfig

__all__ = ['available', 'entry_name', 'entry_ir', 'builtin']

_CHARS = {'<f8': 'd', '<f4': 'f', '<i8': 'lq', '|b1': '?'}
_SIZES = {'<f8': 8, '<f4': 4, '<i8': 8, '|b1': 1}
C_CONTIGUOUS, ALIGNED, WRITEABLE = 0x1, 0x100, 0x400
METH_FASTCALL = 0x80


def available():
    """Whether this CPython's object layout is the one the entry reads (a default,
    non-debug, GIL build on a little-endian machine)."""
    return (sys.byteorder == 'little' and not hasattr(sys, 'gettotalrefcount')
            and not sysconfig.get_config_var('Py_GIL_DISABLED')
            and sys.implementation.name == 'cpython')


def entry_name(types, *constants):
    """The cache name of ``entry_ir(types, *constants)``, known without making it."""
    from .native import name_of
    return name_of(f'entry|{types!r}|{constants!r}')


def entry_ir(types, n_fixed, head, start, n_inputs, aliased):
    """The LLVM IR of the entry ``entry_name(...)`` for arrays of ``types`` ([(dtype
    string, ndim)]) after ``T`` (vm.entry_source's contract; ``head``, ``start``,
    ``n_inputs`` and ``aliased`` are vm.py's constants)."""
    from llvmlite import ir
    name = entry_name(types, n_fixed, head, start, n_inputs, aliased)
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    p8 = i8.as_pointer()
    dbl = ir.DoubleType()
    m = ir.Module(name='entry')
    fn = ir.Function(m, ir.FunctionType(p8, [p8, p8.as_pointer(), i64]), name='TRACKED_ENTRY_FN')
    b = ir.IRBuilder(fn.append_basic_block('entry'))
    bad = fn.append_basic_block('typeerror')

    def decl(name, ret, args):
        return ir.Function(m, ir.FunctionType(ret, args), name=name)
    pylong = decl('PyLong_FromLongLong', p8, [i64])
    save = decl('PyEval_SaveThread', p8, [])
    restore = decl('PyEval_RestoreThread', ir.VoidType(), [p8])
    subtype = decl('PyType_IsSubtype', i32, [p8, p8])
    seterr = decl('PyErr_SetString', ir.VoidType(), [p8, p8])
    text = b'tracked: the compiled entry takes other arrays (dtype, dimensions or layout)\0'
    msg = ir.GlobalVariable(m, ir.ArrayType(i8, len(text)), name='message')
    msg.global_constant = True
    msg.linkage = 'private'
    msg.initializer = ir.Constant(ir.ArrayType(i8, len(text)), bytearray(text))

    def field(obj, off, ty):
        return b.load(b.bitcast(b.gep(obj, [i64(off)]), ty.as_pointer()))

    def branch_unless(cond, name):
        ok = fn.append_basic_block(name)
        b.cbranch(cond, ok, bad)
        b.position_at_end(ok)

    self_, args, nargs = fn.args
    n = len(types)
    branch_unless(b.icmp_signed('==', nargs, i64(1 + n)), 'count')
    # builtin() binds (np.ndarray, TypeError) as the function's self: a tuple's items
    # start at 24.  (Not the symbol PyExc_TypeError: numba registers that name for the
    # exception object itself, not the variable holding it.)
    ndarray = field(self_, 24, p8)

    def check(o, chars, nd, j):
        """Branch to ``bad`` unless ``o`` is a writeable, aligned C-contiguous ndarray
        of ``nd`` dimensions (None: any) whose type char is one of ``chars``."""
        typ = field(o, 8, p8)
        sub = fn.append_basic_block(f'sub{j}')
        isarr = fn.append_basic_block(f'array{j}')
        b.cbranch(b.icmp_unsigned('==', typ, ndarray), isarr, sub)
        b.position_at_end(sub)
        b.cbranch(b.icmp_signed('!=', b.call(subtype, [typ, ndarray]), i32(0)), isarr, bad)
        b.position_at_end(isarr)
        need = i32(C_CONTIGUOUS | ALIGNED | WRITEABLE)
        good = b.icmp_signed('==', b.and_(field(o, 64, i32), need), need)
        if nd is not None:
            good = b.and_(good, b.icmp_signed('==', field(o, 24, i32), i32(nd)))
        descr = field(o, 56, p8)
        char = field(descr, 25, i8)
        kind = b.icmp_signed('==', char, i8(ord(chars[0])))
        for c in chars[1:]:
            kind = b.or_(kind, b.icmp_signed('==', char, i8(ord(c))))
        good = b.and_(good, kind)
        good = b.and_(good, b.icmp_signed('!=', field(descr, 26, i8), i8(ord('>'))))
        branch_unless(good, f'checked{j}')

    Tobj = b.load(args)                 # the frame's table: checked like an array
    check(Tobj, 'lq', 1, 'T')
    T = b.bitcast(field(Tobj, 16, p8), i64.as_pointer())

    def t(k):
        return b.load(b.gep(T, [k if not isinstance(k, int) else i64(k)]))

    objs, dims = [], []
    for j, (dt, nd) in enumerate(types):
        o = b.load(b.gep(args, [i64(1 + j)]))
        check(o, _CHARS[dt], nd, j)
        objs.append(o)
        dims.append(b.bitcast(field(o, 32, p8), i64.as_pointer()))
    # shapes against T (from T[2]), then the addresses into P (from T[3])
    q = t(2)
    shaped = ir.Constant(ir.IntType(1), 1)
    k = 0
    sizes = []
    for j, (dt, nd) in enumerate(types):
        size = i64(_SIZES[dt])
        for d in range(nd):
            dim = b.load(b.gep(dims[j], [i64(d)]))
            shaped = b.and_(shaped, b.icmp_signed('==', dim, t(b.add(q, i64(k)))))
            size = b.mul(size, dim)
            k += 1
        sizes.append(size)
    done = fn.append_basic_block('done')
    result = b.alloca(i64)
    other = fn.append_basic_block('othershape')
    shapes_ok = fn.append_basic_block('shapes')
    b.cbranch(shaped, shapes_ok, other)
    b.position_at_end(other)
    b.store(i64(-3), result)
    b.branch(done)
    b.position_at_end(shapes_ok)
    P = b.gep(T, [t(3)])
    for j, o in enumerate(objs):
        data = b.ptrtoint(field(o, 16, p8), i64)
        b.store(data, b.gep(P, [i64(n_fixed + j)]))
        b.store(b.add(data, sizes[j]), b.gep(P, [i64(n_fixed + n + j)]))
    # an output overlapping an input: ALIASED (the kernels would read what they wrote)
    n_in = t(n_inputs)
    overlap = ir.Constant(ir.IntType(1), 0)
    for o_ in range(n):
        for i_ in range(n):
            if o_ == i_:
                continue
            is_pair = b.and_(b.icmp_signed('>=', i64(o_), n_in),
                             b.icmp_signed('<', i64(i_), n_in))
            po, pi = (b.load(b.gep(P, [i64(n_fixed + x)])) for x in (o_, i_))
            eo, ei = (b.load(b.gep(P, [i64(n_fixed + n + x)])) for x in (o_, i_))
            hit = b.and_(b.icmp_signed('<', po, ei), b.icmp_signed('<', pi, eo))
            overlap = b.or_(overlap, b.and_(is_pair, hit))
    alias = fn.append_basic_block('aliased')
    run = fn.append_basic_block('run')
    b.cbranch(overlap, alias, run)
    b.position_at_end(alias)
    b.store(i64(aliased), result)
    b.branch(done)
    # the steps, without the GIL
    b.position_at_end(run)
    state = b.call(save, [])
    b.store(i64(-1), result)
    counter = b.alloca(i64)
    b.store(t(start), counter)
    head_bb = fn.append_basic_block('step')
    body = fn.append_basic_block('call')
    called = fn.append_basic_block('called')
    stop = fn.append_basic_block('stop')
    b.branch(head_bb)
    b.position_at_end(head_bb)
    s = b.load(counter)
    more = fn.append_basic_block('more')
    b.cbranch(b.icmp_signed('<', s, t(0)), more, stop)
    b.position_at_end(more)
    row = b.add(i64(head), b.mul(s, i64(3)))
    f = t(row)
    py = fn.append_basic_block('python')
    b.cbranch(b.icmp_signed('==', f, i64(0)), py, body)
    b.position_at_end(py)
    b.store(s, result)
    b.branch(stop)
    b.position_at_end(body)
    kty = ir.FunctionType(i64, [p8.as_pointer(), i64.as_pointer(), i64, dbl.as_pointer()])
    ok = b.call(b.inttoptr(f, kty.as_pointer()),
                [b.bitcast(P, p8.as_pointer()), T, t(b.add(row, i64(1))),
                 b.inttoptr(t(1), dbl.as_pointer())])
    failed = fn.append_basic_block('guard')
    b.cbranch(b.icmp_signed('==', ok, i64(0)), failed, called)
    b.position_at_end(failed)
    b.store(b.sub(i64(-2), t(b.add(row, i64(2)))), result)
    b.branch(stop)
    b.position_at_end(called)
    b.store(b.add(s, i64(1)), counter)
    b.branch(head_bb)
    b.position_at_end(stop)
    b.call(restore, [state])
    b.branch(done)
    b.position_at_end(done)
    b.ret(b.call(pylong, [b.load(result)]))
    b.position_at_end(bad)
    b.call(seterr, [field(self_, 32, p8), b.bitcast(msg, p8)])
    b.ret(ir.Constant(p8, None))
    return str(m).replace('; ModuleID = "entry"', '').replace('TRACKED_ENTRY_FN', name)


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``: name, C function, flags, docstring."""

    _fields_ = [('ml_name', ctypes.c_char_p), ('ml_meth', ctypes.c_void_p),
                ('ml_flags', ctypes.c_int), ('ml_doc', ctypes.c_char_p)]


_defs: list = []                 # the method definitions, alive as long as the process


def builtin(address, name='vm'):
    """A builtin function object calling the ``METH_FASTCALL`` entry at ``address``,
    with ``(np.ndarray, TypeError)`` as its ``self``: what it checks the arrays' types
    against, and what it raises."""
    import numpy as np
    d = _MethodDef(name.encode(), address, METH_FASTCALL, None)
    _defs.append(d)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    return new(ctypes.addressof(d), (np.ndarray, TypeError), None)
