"""Where every value of a compiled tape lives: arenas, inputs, outputs, constants, views.

Each instruction's value gets a ``Storage``: an array *slot* (in the tuple of
arrays of its dtype that the generated code receives: slot 0 is that dtype's arena,
allocated once per compiled tape; then the caller's input arrays; then the gradient
output arrays) with an element offset, a shape and element strides.  Views
(reshape, transpose, basic slicing, broadcast_to, ...) get no memory of their own:
their storage is computed once, at compile time, by running the instruction on a
*probe* array whose entries are their own storage positions, and checking that the
result is affine in its indices.

``Memory`` hands out storages while the planner walks the program; ``Layout`` is
the frozen record of them that a compiled program keeps to run.
"""
from typing import NamedTuple

import numpy as np

from .record import Ref

__all__ = ['Storage', 'KERNEL_DTYPES', 'DTYPE_NAMES', 'dtype_code', 'probe_view', 'c_strides',
           'Memory', 'Layout']

# --------------------------------------------------------------------------
# Storages and views
# --------------------------------------------------------------------------

KERNEL_DTYPES = {np.dtype(np.float64): 'F', np.dtype(np.float32): 'f', np.dtype(np.int64): 'I',
                 np.dtype(np.bool_): 'B'}
DTYPE_NAMES = {'F': 'np.float64', 'f': 'np.float32', 'I': 'np.int64', 'B': 'np.bool_'}


def dtype_code(dtype):
    """The kernels' code for ``dtype`` ('F', 'f', 'I', 'B'), None for a dtype they do not take.

    >>> dtype_code(np.float64), dtype_code(np.float32), dtype_code(np.float16), dtype_code(None)
    ('F', 'f', None, None)
    """
    return None if dtype is None else KERNEL_DTYPES.get(np.dtype(dtype))


def c_strides(shape):
    """Element strides of a C-contiguous array of ``shape``.

    >>> c_strides((2, 3, 4))
    (12, 4, 1)
    """
    out = []
    s = 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


class Storage:
    """A strided region of one array slot (``kind`` 'mem'), or a scalar constant
    (``kind`` 'const', an operand only: every instruction's own storage is 'mem')."""

    __slots__ = ('kind', 'dtype', 'slot', 'off', 'shape', 'strides', 'value')

    def __init__(self, kind, dtype, slot=0, off=0, shape=(), strides=None, value=None):
        self.kind = kind
        self.dtype = np.dtype(dtype)
        self.slot = slot
        self.off = off
        self.shape = tuple(shape)
        self.strides = tuple(strides) if strides is not None else c_strides(shape)
        self.value = value        # const: the scalar

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def contiguous(self):
        """Whether the region is C-contiguous (size-1 axes may have any stride)."""
        return all(st == cs for st, cs, n in zip(self.strides, c_strides(self.shape), self.shape)
                   if n != 1)

    def broadcast_scalar(self):
        """Whether every element reads the same position (a constant, or strides 0)."""
        return self.kind == 'const' or all(st == 0 for st, n in zip(self.strides, self.shape)
                                           if n != 1)

    def strides_for(self, shape):
        """Element strides when read broadcast to ``shape`` (numpy rules)."""
        extra = len(shape) - len(self.shape)
        out = [0] * extra
        for st, n in zip(self.strides, self.shape):
            out.append(0 if n == 1 else st)
        return tuple(out)

    def span(self):
        """(lowest, highest) element index touched."""
        lo = hi = self.off
        for st, n in zip(self.strides, self.shape):
            if n == 0:
                return self.off, self.off - 1
            if st > 0:
                hi += st * (n - 1)
            else:
                lo += st * (n - 1)
        return lo, hi

    def view(self, off, shape, strides):
        """Another region of the same slot."""
        return Storage(self.kind, self.dtype, self.slot, off, shape, strides, self.value)

    def __repr__(self):
        if self.kind == 'const':
            return f'const({self.value!r})'
        return f'{self.kind}[{self.slot}]+{self.off} {self.shape} {self.strides}'


def probe_view(fn, args, kwargs, parent, out_shape):
    """The storage of ``fn(parent, *args[1:])`` if it only rearranges ``parent``'s
    elements affinely (a view, or a copy that a view could replace); else None.

    >>> x = Storage('mem', np.float64, slot=1, shape=(3, 4))
    >>> probe_view(lambda a: a.T[1:], (None,), {}, x, (3, 3))
    mem[1]+1 (3, 3) (1, 4)
    """
    lo, hi = parent.span()
    if lo < 0:
        return None
    base = np.arange(hi + 1, dtype=np.int64)
    probe = np.lib.stride_tricks.as_strided(
        base[parent.off:], parent.shape, tuple(s * 8 for s in parent.strides))
    try:
        res = fn(probe, *args[1:], **kwargs)
    except Exception:
        return None
    res = np.asarray(res)
    if res.shape != tuple(out_shape) or res.dtype != np.int64:
        return None
    if res.size == 0:
        return parent.view(parent.off, out_shape, c_strides(out_shape))
    first = res.reshape(-1)[0]
    strides = []
    for ax, n in enumerate(res.shape):
        if n == 1:
            strides.append(0)
            continue
        idx = [0] * res.ndim
        idx[ax] = 1
        strides.append(int(res[tuple(idx)] - first))
    grid = first + sum(np.arange(n).reshape((-1,) + (1,) * (res.ndim - ax - 1)) * s
                       for ax, (n, s) in enumerate(zip(res.shape, strides))) if res.ndim else first
    if not np.array_equal(res, np.broadcast_to(grid, res.shape)):
        return None
    return parent.view(int(first), out_shape, strides)


# --------------------------------------------------------------------------
# Handing out storages
# --------------------------------------------------------------------------

def _uniform(a):
    """Whether ``a`` is one value: 0-d, or a float array of one value that is not NaN."""
    if a.ndim == 0:
        return True
    if a.dtype.kind != 'f' or a.size == 0:
        return False
    first = a.reshape(-1)[0]
    return not np.isnan(first) and bool(np.all(a == first))


class Layout(NamedTuple):
    """What a compiled program keeps of its memory plan to run (see ``Memory``)."""

    storages: tuple        # per instruction: its Storage, None for values kept in Python
    arena_sizes: dict      # dtype -> elements of that dtype's arena
    arena_init: tuple      # (dtype, offset, flat values): array constants in the arenas
    leaf_slots: dict       # dtype -> leaf positions of the array inputs in slots 1, 2, ...
    out_slots: dict        # output array k -> (dtype, slot)
    scalar_inputs: tuple   # (leaf position, dtype, arena offset): written on entry
    copies: tuple          # (program output, Ref or constant) written into outputs in Python


class Memory:
    """Hands out each value's ``Storage`` while the planner walks a program.

    Slots, per dtype: 0 is the arena (intermediates and array constants), then the
    caller's array inputs in leaf order, then the output arrays.  A scalar input gets
    an arena element that the VM writes on entry.  A program output with a placement
    (an output array and an element offset) of its own dtype is computed in place.
    """

    def __init__(self, program, leaf_specs, out_specs, placements):
        self.instrs = program.instrs
        self.leaf_specs = leaf_specs
        self.storages: list[Storage | None] = [None] * len(self.instrs)  # per instruction
        self.arena = {}                      # dtype -> elements
        self.arena_init = []                 # (dtype, offset, flat values)
        self.leaf_slots: dict[np.dtype, list[int]] = {}  # dtype -> [leaf position]
        self.scalar_inputs = []              # (leaf position, dtype, offset)
        self.out_slots = {}                  # output array k -> (dtype, slot)
        self.consts = {}                     # id(constant) -> (constant, storage)
        self.placements = placements         # program output -> (output array, offset)
        self.place_of: dict[int, int] = {}   # instruction -> program output placed there
        self.placed = set()                  # program outputs computed in place
        for pos in sorted({ins.pos for ins in self.instrs if ins.kind == 'input'}):
            shape, dtype = leaf_specs[pos]
            if shape != ():
                self.leaf_slots.setdefault(np.dtype(dtype), []).append(pos)
        count: dict[np.dtype, int] = {}
        for k, (_, dtype) in enumerate(out_specs):
            dtype = np.dtype(dtype)
            count[dtype] = count.get(dtype, 0) + 1
            self.out_slots[k] = (dtype, len(self.leaf_slots.get(dtype, ())) + count[dtype])
        for oi in placements:
            o = program.outputs[oi]
            if type(o) is Ref and o.i not in self.place_of:
                self.place_of[o.i] = oi

    def alloc(self, i):
        """Instruction ``i``'s storage: its placement when it has one, else arena."""
        if self.storages[i] is not None:
            return self.storages[i]
        ins = self.instrs[i]
        oi = self.place_of.get(i)
        if oi is not None:
            k, off = self.placements[oi]
            dtype, slot = self.out_slots[k]
            if dtype == ins.dtype:
                self.storages[i] = Storage('mem', dtype, slot, off, ins.shape)
                self.placed.add(oi)
                return self.storages[i]
        self.storages[i] = self.arena_region(ins.dtype, ins.shape)
        return self.storages[i]

    def arena_region(self, dtype, shape):
        """A fresh C-contiguous region of ``dtype``'s arena."""
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        off = self.arena.get(dtype, 0)
        self.arena[dtype] = off + max(size, 1)
        return Storage('mem', dtype, 0, off, shape)

    def const(self, v, scalar_ok=True):
        """The storage of constant ``v``: a scalar (when ``scalar_ok`` and ``v`` is one
        value), else an arena region filled once.  Cached by identity."""
        hit = self.consts.get(id(v))
        if hit is not None and hit[0] is v and (scalar_ok or hit[1].kind != 'const'):
            return hit[1]
        a = np.asarray(v)
        if scalar_ok and _uniform(a):
            s = Storage('const', a.dtype, shape=a.shape, strides=(0,) * a.ndim,
                        value=a.reshape(-1)[0])
        else:
            s = self.arena_region(a.dtype, a.shape)
            self.arena_init.append((a.dtype, s.off, np.ascontiguousarray(a).reshape(-1)))
        self.consts[id(v)] = (v, s)
        return s

    def input(self, ins):
        """The storage of input instruction ``ins``: its slot, or an arena scalar.  An
        integer array that the tape differentiates holds float64 on the tape: it gets
        an arena region, and the storage of the leaf as given is returned for the
        planner to convert it from (else None)."""
        shape, dtype = ins.shape, np.dtype(ins.dtype)
        if shape == ():
            s = self.arena_region(dtype, ())
            self.scalar_inputs.append((ins.pos, dtype, s.off))
            self.storages[ins.i] = s
            return None
        given = np.dtype(self.leaf_specs[ins.pos][1])
        s = Storage('mem', given, 1 + self.leaf_slots[given].index(ins.pos), 0, shape)
        if given == dtype:
            self.storages[ins.i] = s
            return None
        self.storages[ins.i] = self.arena_region(dtype, shape)
        return s

    def layout(self, copies):
        """The frozen ``Layout`` (``copies``: outputs the runtime writes in Python)."""
        return Layout(tuple(self.storages), dict(self.arena), tuple(self.arena_init),
                      {dt: tuple(p) for dt, p in self.leaf_slots.items()},
                      dict(self.out_slots), tuple(self.scalar_inputs), tuple(copies))
