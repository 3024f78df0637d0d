"""A compiled program: planned once, then run on new inputs by the generated VM.

``CompiledProgram(program, leaf_specs, out_specs, placements)`` plans the program
(plan.py), builds the VM's tables (vm.py) and keeps only what running needs: the
frozen ``Layout``, the entry and its tables; ``load()`` then imports the kernels.
A call hands the entry the caller's arrays; Python runs the steps the entry
returns for (fallbacks, guards it cannot check) and the outputs without a kernel
dtype.  Every intermediate lives in the arenas of a ``Frame``; output arrays are
passed in (``out=``) or allocated by the caller; a call allocates no array.

Threads: a call writes its intermediates into the arenas and its arrays' addresses
into ``T``, and the entry runs without the GIL, so two calls at once need two
frames.  Each call takes one from the program's pool and gives it back (a list's
pop and append: 30 ns, atomic); the pool grows to the largest number of calls ever
under way at once.  Rejected: one lock around the call (170 ns taken and released
here, and it serialises the threads) and a frame per thread (a ``threading.local``
read costs 70 ns, and each thread that ever called would keep its frame).
"""
from typing import Any

import numpy as np

from ..rules.products import matmul_forward
from .buffers import KERNEL_DTYPES
from .guards import guard_error
from .plan import Planner
from .record import Ref
from .signature import aliased_out_error
from .vm import ALIASED, START, VM

__all__ = ['CompiledProgram', 'Frame', 'INTO']


def _aligned(n, dtype):
    """``n`` zeros of ``dtype`` starting at a 64-byte boundary: every frame's arenas are
    aligned alike, so that a vectorised loop that peels for alignment splits its sums
    alike in every frame (a call's result must not depend on the frame it got)."""
    dtype = np.dtype(dtype)
    raw = np.zeros(n * dtype.itemsize + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + n * dtype.itemsize].view(dtype)


# NumPy functions a fallback runs with ``out=`` its buffer: the ufuncs of one output
# measured faster than a fused loop (choice.py), and products (not np.dot: its out= must be
# C-contiguous).
INTO = frozenset([matmul_forward, np.matmul, np.tanh, np.exp, np.log, np.sin, np.cos, np.tan,
                  np.sqrt, np.arctan, np.arcsin, np.arccos, np.sinh, np.cosh, np.arctanh,
                  np.arcsinh, np.arccosh, np.expm1, np.log1p, np.log2, np.log10, np.exp2,
                  np.power,
                  np.add, np.subtract, np.multiply, np.divide, np.negative, np.square,
                  np.absolute, np.maximum, np.minimum, np.logaddexp, np.arctan2, np.hypot])


class Frame:
    """The memory one call writes: ``arenas`` (dtype -> array: every intermediate; ``a``:
    the kernel dtypes' ones, in ``KERNEL_DTYPES`` order), ``T`` (the table, into which
    the entry writes the call's array addresses and from which it resumes), ``args``
    (the entry's argument list) and ``py_values`` (fallbacks' values kept in Python)."""

    __slots__ = ('T', 'arenas', 'a', 'args', 'py_values')

    def __init__(self, T, arenas, n_args):
        self.T = T
        self.arenas = arenas
        self.a = tuple(arenas[dt] for dt in KERNEL_DTYPES)
        self.args = [T] + [None] * n_args
        self.py_values = {}


class CompiledProgram:
    """The program as numba kernels run by a generated VM (see the module docstring).

    ``fallbacks`` lists the instructions run in NumPy for want of a kernel
    (``plan.Fallback``: the instruction and why), ``numpy`` those measured faster there
    (choice.py; ``units``: what may move); ``kernels``, ``vm`` (the entry), ``T`` (the
    template of each frame's table) and ``C`` are the generated code and its tables;
    ``pool`` the frames no call is using.  Planning is cheap; ``load`` imports the
    kernels (compiling what the disk cache lacks) before the first ``run``.
    """

    def __init__(self, program, leaf_specs, out_specs, placements, numpy=None):
        self.program = program
        self.placements = placements
        plan = Planner(program, leaf_specs, out_specs, placements, numpy).run()
        self.layout = layout = plan.layout
        self.fallbacks = plan.fallbacks
        self.numpy = dict(numpy or {})       # instructions measured faster in NumPy
        self.units = plan.units              # what choice.py may move to NumPy
        self._vm = vm = VM(plan.steps, plan.constants, layout, leaf_specs, out_specs)
        self.kernels, self.T, self.C = vm.kernels, vm.T, vm.C
        self.vm: Any = None                  # the entry (a numba dispatcher), once loaded
        self.entry_name = vm.entry_name
        # what the generated calls (calls.py) read: the steps run in Python, the
        # positions of the leaves and outputs the entry takes (in its argument order),
        # scalar inputs written into a frame's arena, scalar outputs read from it
        self.py_steps = vm.py_steps
        self.leaf_positions, self.out_indices = vm.leaves, vm.outs
        self.scalar_inputs = layout.scalar_inputs          # (leaf position, dtype, offset)
        self.pool: list[Frame] = []          # frames no call is using (module docstring)
        self.unplaced = [oi for oi in range(len(program.outputs)) if oi not in placements]
        self._slot_owner = {}                # (dtype, slot >= 1) -> ('leaf', pos) | ('out', k)
        for dt, positions in layout.leaf_slots.items():
            for n, pos in enumerate(positions, start=1):
                self._slot_owner[dt, n] = ('leaf', pos)
        for k, (dt, slot) in layout.out_slots.items():
            self._slot_owner[dt, slot] = ('out', k)
        self.scalar_outputs = {}             # output -> (dtype, offset): read without a view
        for oi, o in enumerate(program.outputs):
            s = layout.storages[o.i] if type(o) is Ref else None
            if s is not None and s.slot == 0 and s.shape == ():
                self.scalar_outputs[oi] = (s.dtype, s.off)

    def sources(self):
        """``[(module name, source)]`` of the kernels this program needs."""
        return self._vm.sources()

    def load(self, compile=True):
        """Load the kernels and the entry (compiling those the disk cache lacks; with
        ``compile=False`` raising cache.CacheMiss instead), bind the tables and make the
        first frame."""
        if self.vm is None:
            self._vm.bind(compile)
            self.pool.append(self.new_frame())
            self.vm = self._vm.fn
        return self

    def new_frame(self):
        """A ``Frame`` for one more call at once: arenas of every dtype (the kernel ones
        go to the VM, the others serve fallbacks) and a copy of ``T`` pointing at them."""
        layout = self.layout
        arenas = {dt: _aligned(max(n, 1), dt) for dt, n in layout.arena_sizes.items()}
        for dt in KERNEL_DTYPES:
            arenas.setdefault(dt, _aligned(1, dt))
        for dt, off, vals in layout.arena_init:
            arenas[dt][off:off + vals.size] = vals
        T = self.T.copy()
        P = T[T[3]:]
        for n, dt in enumerate(KERNEL_DTYPES):
            P[n] = arenas[dt].ctypes.data
        return Frame(T, arenas, len(self.leaf_positions) + len(self.out_indices))

    # -- calls ----------------------------------------------------------------------
    def run(self, leaves, outs):
        """Run on checked ``leaves``, writing placed outputs into ``outs``; returns the
        other outputs (a list by program output, None at placed ones), read before the
        frame goes back to the pool."""
        pool = self.pool
        try:
            f = pool.pop()
        except IndexError:
            f = self.new_frame()
        args = f.args
        try:
            j = 1
            for pos in self.leaf_positions:
                x = leaves[pos]
                flags = x.flags
                if not (flags.c_contiguous and flags.writeable and flags.aligned):
                    x = np.array(x, order='C')    # the entry takes writeable aligned C arrays
                args[j] = x
                j += 1
            for k in self.out_indices:
                args[j] = outs[k]
                j += 1
            for pos, dt, off in self.scalar_inputs:
                f.arenas[dt][off] = leaves[pos]
            r = self.vm(*args)
            if r != -1 or self.layout.copies:
                self._continue(f, r, leaves, outs)
            vals: list[Any] = [None] * len(self.program.outputs)
            for oi in self.unplaced:
                vals[oi] = self.output(f, oi, leaves, outs)
            return vals
        finally:
            f.T[START] = 0
            for i in range(1, len(args)):
                args[i] = None     # do not keep the caller's arrays alive
            f.py_values.clear()
            pool.append(f)

    def _continue(self, f, r, leaves, outs):
        """Run the Python steps the VM stopped at and resume it; then the Python copies."""
        while r != -1:
            if r == ALIASED:
                raise aliased_out_error()
            if r < 0:
                g = self.program.guards[-r - 2]
                raise guard_error(g, self._value(f, g.i, leaves, outs),
                                  self.program.instrs[g.i].name)
            self._python_step(f, self.py_steps[r], leaves, outs)
            f.T[START] = r + 1
            r = self.vm(*f.args)
        for oi, o in self.layout.copies:
            k, off = self.placements[oi]
            v = self._value(f, o.i, leaves, outs) if type(o) is Ref else o
            n = int(np.size(v))
            outs[k].reshape(-1)[off:off + n] = np.ravel(v)

    def output(self, f, oi, leaves, outs):
        """The value of program output ``oi`` after a run in frame ``f`` (a fresh scalar
        or array)."""
        fast = self.scalar_outputs.get(oi)
        if fast is not None:
            return f.arenas[fast[0]][fast[1]]
        o = self.program.outputs[oi]
        if type(o) is not Ref:
            return o
        v = self._value(f, o.i, leaves, outs)
        if isinstance(v, np.ndarray):
            return v[()] if v.ndim == 0 else v.copy()
        return v

    # -- values in memory ---------------------------------------------------------------
    def _base(self, f, s, leaves, outs):
        """The flat array behind storage ``s``'s slot."""
        if s.slot == 0:
            return f.arenas[s.dtype]
        kind, n = self._slot_owner[s.dtype, s.slot]
        if kind == 'leaf':
            return np.ascontiguousarray(leaves[n]).reshape(-1)
        return outs[n].reshape(-1)

    def _value(self, f, i, leaves, outs):
        """Instruction ``i``'s value after the steps run so far (a view into memory)."""
        s = self.layout.storages[i]
        if s is None:
            return f.py_values.get(i)
        base = self._base(f, s, leaves, outs)
        if s.shape == ():
            return base[s.off]
        if s.off >= 0 and s.contiguous():     # a slice: ~10x quicker than as_strided
            return base[s.off:s.off + s.size].reshape(s.shape)
        return np.lib.stride_tricks.as_strided(base[s.off:] if s.off >= 0 else base, s.shape,
                                               tuple(x * base.itemsize for x in s.strides))

    def _python_step(self, f, step, leaves, outs):
        """A fallback (the instruction in NumPy, its value into memory), an input
        converted in NumPy (plan.Planner.convert) or a guard."""
        i = step.instrs[0]
        ins = self.program.instrs[i]
        if step.kind == 'convert':
            self._value(f, i, leaves, outs)[...] = leaves[ins.pos]
            return
        if step.kind == 'fallback':
            args = []
            for a in ins.args:
                if type(a) is Ref:
                    args.append(self._value(f, a.i, leaves, outs))
                elif type(a) in (tuple, list):
                    args.append(type(a)(self._value(f, b.i, leaves, outs) if type(b) is Ref
                                        else b for b in a))
                else:
                    args.append(a)
            s = self.layout.storages[i]
            if s is not None and s.shape != () and ins.fn in INTO and s.dtype == ins.dtype \
                    and 'where' not in ins.kwargs:
                # written straight into its buffer: no temporary, no copy (NumPy buffers
                # an output overlapping an operand)
                ins.fn(*args, out=self._value(f, i, leaves, outs), **ins.kwargs)
                return
            v = ins.fn(*args, **ins.kwargs)
            if s is None:
                f.py_values[i] = v
            elif s.shape == ():
                self._base(f, s, leaves, outs)[s.off] = v
            else:
                self._value(f, i, leaves, outs)[...] = v
            return
        g = self.program.guards[step.guard]
        v = self._value(f, i, leaves, outs)
        if not g.holds(v):
            raise guard_error(g, v, ins.name)
