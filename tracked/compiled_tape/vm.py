"""The VM: a plan's steps as tables, run by a generated entry per argument types.

Kernels are functions of one C signature (codegen.Kernel; built by LLVM directly,
native.py, or numba ``cfunc``s), so the VM calls each through its address and is not
compiled per tape: one entry serves every tape whose arguments have the same types
(the number of arrays, their dtypes and dimensions), and a new tape, layer width or
batch size compiles only the kernels it does not share with tapes seen before.  (A VM
with one branch per kernel, as before, took 3.3 s of the 9-11 s cold compile of the
demo's MLP: numba typed each call site and LLVM optimised every kernel again inlined
into it.)

``T`` (int64) is ``[number of steps, address of C, where the shapes start, where P
starts, the step to start at, the addresses of numba's gemm and gemv helpers, the
number of array inputs; (kernel address, parameter start, guard) per step;
every step's array indices in P and its integer parameters; the shapes of the
entry's arrays; P; the end addresses of the entry's arrays]``.  ``C`` (float64)
holds the constants; ``P`` the addresses of the arrays: one arena per kernel dtype
(fixed), then the array inputs and the output arrays of the call, written by the
entry.  The entry (a CPython builtin in LLVM IR, pyentry.py; numba's where that is
not available or ``TRACKED_NATIVE=0``: ``entry_source``) takes ``T`` and the arrays;
it returns -3 if a shape differs from the recorded one,
``ALIASED`` if an output array overlaps an input array (the kernels would read
what they already wrote), -1 when done, the step's index at a step run in Python
(address 0: a fallback, or a guard checked in Python), and ``-2 - guard`` when a
guard kernel fails; the runtime resumes it from the next step by setting
``T[START]``.  Since the entry writes into ``T``, each concurrent call needs its
own copy (compiled.Frame); the template ``VM.T`` holds no arena address.
"""
import hashlib
from typing import Any

import numpy as np

from . import cache
from .buffers import KERNEL_DTYPES
from .codegen import T_GEMM, T_GEMV, Kernel

__all__ = ['VM', 'entry_source', 'run_kernel', 'blas_helpers', 'HEAD', 'START', 'ALIASED']

HEAD = 8                 # T's header: steps, address of C, shapes at, P at, START, BLAS x2, inputs
START = 4                # T[START]: the step the entry starts at (0, or where it resumes)
N_INPUTS = 7             # T[N_INPUTS]: how many of the entry's arrays are inputs
ALIASED = -(1 << 62)     # the entry's answer when an output overlaps an input (no guard's)


class VM:
    """The tables of one plan, bound to its kernels' addresses (module docstring).

    ``kernels`` are the distinct kernels, ``leaves`` and ``outs`` the leaf positions
    and output arrays the entry takes, in order, after ``T`` and ``P`` (``types``:
    their dtypes and dimensions); ``py_steps`` the steps run in Python.
    ``bind(compile=True)`` loads the kernels and the entry (compiling what the disk
    cache lacks) and writes their addresses into ``T``; ``fn`` is then the entry.  ``P``
    (where the arenas' addresses go, in a copy of ``T`` per frame) starts at ``T[3]``.
    """

    def __init__(self, steps, constants, layout, leaf_specs, out_specs):
        kernels: dict[str, Kernel] = {}      # name -> Kernel
        for step in steps:
            if step.kernel is not None:
                kernels.setdefault(step.kernel.name, step.kernel)
        self.kernels = list(kernels.values())
        self.py_steps = {s: step for s, step in enumerate(steps) if step.kernel is None}
        # P: the arenas, then the array inputs (leaf order within each dtype), then outputs
        index = {(dt, 0): n for n, dt in enumerate(KERNEL_DTYPES)}
        self.leaves, self.outs = [], []
        for dt in KERNEL_DTYPES:
            for slot, pos in enumerate(layout.leaf_slots.get(dt, ()), start=1):
                index[dt, slot] = len(index)
                self.leaves.append(pos)
        for k in sorted(layout.out_slots):
            dt, slot = layout.out_slots[k]
            if dt in KERNEL_DTYPES:
                index[dt, slot] = len(index)
                self.outs.append(k)
        self.n_fixed = len(KERNEL_DTYPES)
        rows: list[Any] = []
        params: list[Any] = []
        codes = {c: dt for dt, c in KERNEL_DTYPES.items()}
        for step in steps:
            if step.kernel is None:
                rows.append((None, 0, step.guard))
                continue
            rows.append((step.kernel.name, len(params), step.guard))
            params.extend(index[codes[c], slot] for c, slot in zip(step.kernel.arrays, step.slots))
            params.extend(int(v) for v in step.params)
        # the entry's arrays: their (dtype, shape), checked by its signature and from T
        arrays = [leaf_specs[pos] for pos in self.leaves] + [out_specs[k] for k in self.outs]
        self.types = [(np.dtype(dt).str, len(shape)) for shape, dt in arrays]
        shapes = [n for shape, _ in arrays for n in shape]
        base = HEAD + 3 * len(rows)
        self._rows = [(name, p + base, guard) for name, p, guard in rows]
        at_shapes = base + len(params)
        at_p = at_shapes + len(shapes)
        self.T = np.array([len(rows), 0, at_shapes, at_p, 0, 0, 0, len(self.leaves)]
                          + [0] * (3 * len(rows)) + params + shapes
                          + [0] * (len(index) + len(arrays)) + [0], dtype=np.int64)
        self.C = np.array(list(constants) + [0.0], dtype=np.float64)
        from . import native, pyentry  # noqa: I001
        # the entry: a builtin function in LLVM IR (pyentry.py), else numba's
        self.native_entry = native.enabled() and pyentry.available()
        if self.native_entry:
            consts = (self.n_fixed, HEAD, START, N_INPUTS, ALIASED)
            self.entry_name = pyentry.entry_name(self.types, *consts)
            self.entry_source: Any = native.Deferred(
                lambda: pyentry.entry_ir(self.types, *consts))
        else:
            self.entry_name, self.entry_source = entry_source(self.types, self.n_fixed)
        self.fn = None
        from .native import LARGE
        sizes = [int(np.prod(s.shape)) for s in layout.storages if s is not None]
        self.quick = max(sizes, default=0) < LARGE     # native kernels built quickly

    def sources(self):
        """``[(cache name, source)]`` of the kernels (LLVM IR for a native one, numba's
        module otherwise) and the entry."""
        return [_source(k, self.quick) for k in self.kernels] + \
            [(self.entry_name, self.entry_source)]

    def bind(self, compile=True):
        """Load the kernels (from the disk cache or, unless ``compile`` is False,
        compiling them: LLVM for native ones, numba for the others) and write their
        addresses into ``T``."""
        addr = {}
        for k in self.kernels:
            name, source = _source(k, self.quick)
            if name != k.name:
                addr[k.name] = cache.load_native(name, source, compile)
            else:
                addr[k.name] = getattr(cache.load(name, source, compile), name).address
        if self.native_entry:
            from .pyentry import builtin
            self.fn = builtin(cache.load_native(self.entry_name, self.entry_source, compile))
        else:
            self.fn = cache.load(self.entry_name, self.entry_source, compile).vm
        T = self.T
        T[1] = self.C.ctypes.data
        T[T_GEMM], T[T_GEMV] = blas_helpers()
        for s, (name, p, guard) in enumerate(self._rows):
            T[HEAD + 3 * s] = addr[name] if name is not None else 0
            T[HEAD + 1 + 3 * s] = p
            T[HEAD + 2 + 3 * s] = guard


_native: dict[Any, Any] = {}     # (kernel name, native on, quick) -> (cache name, source)


def _source(kernel, quick=False):
    """``(cache name, source)`` of ``kernel``: its native form (native.py; ``quick``:
    built without unrolling) when the translation accepts it and ``$TRACKED_NATIVE`` is
    not '0', else numba's module."""
    from . import native
    on = native.enabled()
    got = _native.get((kernel.name, on, quick))
    if got is None:
        if on:
            name = native.kernel_name(kernel, quick)
            if cache.has(name):          # built before: not translated again
                got = (name, native.Deferred(lambda: native.translate(kernel, quick)[1]))
            else:
                try:
                    got = native.translate(kernel, quick)
                except native.Unsupported:
                    pass
        if got is None:
            got = (kernel.name, cache.kernel_module(kernel))
        _native[kernel.name, on, quick] = got
    return got


# --------------------------------------------------------------------------
# The entry: one per argument types, compiled once per machine
# --------------------------------------------------------------------------

_CALL = '''
from llvmlite import ir
from numba.extending import intrinsic


@intrinsic
def call_kernel(typingctx, fn, P, T, p, C):
    """Call the kernel at address ``fn`` with the data of ``P`` and ``T``."""
    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(i64, [ptr.as_pointer(), i64.as_pointer(), i64,
                                     ir.DoubleType().as_pointer()])
        Pa = context.make_array(signature.args[1])(context, builder, args[1])
        Ta = context.make_array(signature.args[2])(context, builder, args[2])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(f, [builder.bitcast(Pa.data, ptr.as_pointer()), Ta.data, args[3],
                                builder.inttoptr(args[4], ir.DoubleType().as_pointer())])
    return types.int64(types.int64, P, T, types.int64, types.int64), codegen

'''


_NUMBA_TYPES = {'<f8': 'float64', '<f4': 'float32', '<i8': 'int64', '|b1': 'boolean'}


def entry_source(types, n_fixed):
    """``(module name, source)`` of the entry for arrays of ``types`` ([(dtype string,
    ndim)], C-contiguous) after ``T``: compiled for exactly those types, so
    that numba refuses any other (a TypeError, which the caller's general path
    explains) and never compiles for one silently.  It checks the shapes against
    ``T`` (-3 if one differs), writes the arrays' addresses into ``P`` (a part of
    ``T``) and their ends after it, refuses outputs overlapping inputs (``ALIASED``)
    and runs the steps from ``T[START]``."""
    n = len(types)
    xs = [f'x{j}' for j in range(n)]
    arr = [f"types.Array(types.{_NUMBA_TYPES[dt]}, {nd}, 'C')" for dt, nd in types]
    sig = "types.int64(types.Array(types.int64, 1, 'C'), " + ', '.join(arr) + ')'
    L = [cache.HEADER, _CALL,
         f"@njit({sig}, cache=True, error_model='numpy', nogil=True)",
         'def vm(T' + ''.join(', ' + x for x in xs) + '):']
    dims = []
    q = 0
    for j, (_, nd) in enumerate(types):
        for d in range(nd):
            dims.append(f'x{j}.shape[{d}] != T[q + {q}]')
            q += 1
    L.append('    q = T[2]')
    if dims:
        L.append('    if ' + ' or '.join(dims) + ':')
        L.append('        return -3')
    L.append('    P = T[T[3]:]')
    for j in range(n):
        L += [f'    P[{n_fixed + j}] = x{j}.ctypes.data',
              f'    P[{n_fixed + n + j}] = x{j}.ctypes.data + x{j}.nbytes']
    L += [f'    for o in range({n_fixed} + T[{N_INPUTS}], {n_fixed + n}):',
          f'        for i in range({n_fixed}, {n_fixed} + T[{N_INPUTS}]):',
          f'            if P[o] < P[i + {n}] and P[i] < P[o + {n}]:',
          f'                return {ALIASED}']
    L += [f'    for s in range(T[{START}], T[0]):',
          f'        q = {HEAD} + 3 * s',
          '        f = T[q]',
          '        if f == 0:',
          '            return s',
          '        if call_kernel(f, P, T, T[q + 1], T[1]) == 0:',
          '            return -2 - T[q + 2]',
          '    return -1']
    source = '\n'.join(L) + '\n'
    return 'vm_' + hashlib.sha1(source.encode()).hexdigest()[:16], source


def blas_helpers():
    """The addresses of numba's BLAS helpers ``numba_xxgemm`` and ``numba_xxgemv``."""
    from numba import _helperlib
    helpers = _helperlib.c_helpers  # type: ignore[attr-defined]  # not in numba's .pyi
    return helpers['xxgemm'], helpers['xxgemv']


def run_kernel(kernel, arrays, params, constants=()):
    """Run ``kernel`` once on ``arrays`` (one per array parameter) with its integer
    ``params`` and float ``constants``; returns what it returns (0: a guard failed).
    Native or numba's, as a tape would (``$TRACKED_NATIVE``).  For tests and debugging:
    a tape's calls go through the entry.

    >>> from tracked.compiled_tape.codegen import fill_kernel
    >>> a = np.zeros(4)
    >>> run_kernel(fill_kernel('F'), [a], [0, 1, 2], [7.0]), a
    (1, array([0., 7., 7., 0.]))
    """
    import ctypes
    name, source = _source(kernel)
    addr = (cache.load_native(name, source) if name != kernel.name
            else getattr(cache.load(name, source), name).address)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_void_p)(addr)
    P = np.array([a.ctypes.data for a in arrays], dtype=np.int64)
    head = [0] * HEAD
    head[T_GEMM], head[T_GEMV] = blas_helpers()
    T = np.array(head + list(range(len(arrays))) + [int(v) for v in params] + [0],
                 dtype=np.int64)
    C = np.array(list(constants) + [0.0], dtype=np.float64)
    return fn(P.ctypes.data, T.ctypes.data, HEAD, C.ctypes.data)
