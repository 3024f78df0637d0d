"""A compiled program: planned once, then run on new inputs by the generated VM.

``CompiledProgram(program, leaf_specs, out_specs, placements)`` plans the program
(plan.py), allocates the arenas the plan's layout asks for, builds the VM's tables
(vm.py) and keeps only what running needs: the frozen ``Layout``, the arenas, the
entry and its tables; ``load()`` then imports the kernels.  A call hands the entry
the caller's arrays; Python runs the steps the entry returns for (fallbacks,
guards it cannot check) and the outputs without a kernel dtype.  Every intermediate
lives in the arenas; output arrays are passed in (``out=``) or allocated by the
caller; a call allocates no array.
"""
from typing import Any

import numpy as np

from .buffers import KERNEL_DTYPES
from .guards import guard_error
from .plan import Planner
from .record import Ref
from .vm import START, VM

__all__ = ['CompiledProgram']


class CompiledProgram:
    """The program as numba kernels run by a generated VM (see the module docstring).

    ``fallbacks`` lists the instructions run in NumPy (``plan.Fallback``: the
    instruction and why); ``kernels``, ``vm`` (the entry), ``T``, ``C`` and ``P`` are the
    generated code and its tables.  Planning is cheap; ``load`` imports the kernels
    (compiling what the disk cache lacks) before the first ``run``.
    """

    def __init__(self, program, leaf_specs, out_specs, placements):
        self.program = program
        self.placements = placements
        plan = Planner(program, leaf_specs, out_specs, placements).run()
        self.layout = layout = plan.layout
        self.fallbacks = plan.fallbacks
        # arenas of every dtype: the kernel ones go to the VM, the others serve fallbacks
        self.arenas = {dt: np.zeros(max(n, 1), dtype=dt) for dt, n in layout.arena_sizes.items()}
        for dt in KERNEL_DTYPES:
            self.arenas.setdefault(dt, np.zeros(1, dtype=dt))
        for dt, off, vals in layout.arena_init:
            self.arenas[dt][off:off + vals.size] = vals
        self._vm = vm = VM(plan.steps, plan.constants, layout, leaf_specs, out_specs)
        self.kernels, self.T, self.C, self.P = vm.kernels, vm.T, vm.C, vm.P
        self.vm: Any = None                  # the entry (a numba dispatcher), once loaded
        self.entry_name = vm.entry_name
        # what the generated calls (calls.py) read: the steps run in Python, the
        # positions of the leaves and outputs the entry takes (in its argument order),
        # scalar inputs written into the arena, scalar outputs read from it
        self.py_steps = vm.py_steps
        self.leaf_positions, self.out_indices = vm.leaves, vm.outs
        self.scalar_inputs = [(self.arenas[dt], off, pos) for pos, dt, off in layout.scalar_inputs]
        # one argument list per compiled tape, refilled on each call
        self._args = [self.T] + [None] * (len(self.leaf_positions) + len(self.out_indices))
        self._slot_owner = {}                # (dtype, slot >= 1) -> ('leaf', pos) | ('out', k)
        for dt, positions in layout.leaf_slots.items():
            for n, pos in enumerate(positions, start=1):
                self._slot_owner[dt, n] = ('leaf', pos)
        for k, (dt, slot) in layout.out_slots.items():
            self._slot_owner[dt, slot] = ('out', k)
        self._py_values = {}                 # values without storage, set by fallbacks
        self.scalar_outputs = {}             # output -> (arena, offset): read without a view
        for oi, o in enumerate(program.outputs):
            s = layout.storages[o.i] if type(o) is Ref else None
            if s is not None and s.slot == 0 and s.shape == ():
                self.scalar_outputs[oi] = (self.arenas[s.dtype], s.off)
        self._all_scalar = all(oi in self.scalar_outputs for oi in range(len(program.outputs))
                               if oi not in placements)

    def sources(self):
        """``[(module name, source)]`` of the kernels this program needs."""
        return self._vm.sources()

    def load(self, compile=True):
        """Load the kernels and the entry (compiling those the disk cache lacks; with
        ``compile=False`` raising cache.CacheMiss instead) and bind the tables."""
        if self.vm is None:
            self._vm.bind(self.arenas, compile)
            self.vm = self._vm.fn
        return self

    # -- calls ----------------------------------------------------------------------
    def run(self, leaves, outs):
        """Run on checked ``leaves``, writing placed outputs into ``outs``."""
        args = self._args
        j = 1
        for pos in self.leaf_positions:
            x = leaves[pos]
            if not (x.flags.c_contiguous and x.flags.writeable):
                x = np.array(x, order='C')    # the entry takes writeable C arrays only
            args[j] = x
            j += 1
        for k in self.out_indices:
            args[j] = outs[k]
            j += 1
        for arena, off, pos in self.scalar_inputs:
            arena[off] = leaves[pos]
        try:
            r = self.vm(*args)
            if r != -1 or self.layout.copies:
                self._continue(r, args, leaves, outs)
        finally:
            self.T[START] = 0
            for i in range(1, j):
                args[i] = None     # do not keep the caller's arrays alive

    def _continue(self, r, args, leaves, outs):
        """Run the Python steps the VM stopped at and resume it; then the Python copies."""
        while r != -1:
            if r < 0:
                g = self.program.guards[-r - 2]
                raise guard_error(g, self._value(g.i, leaves, outs),
                                  self.program.instrs[g.i].name)
            self._python_step(self.py_steps[r], leaves, outs)
            self.T[START] = r + 1
            r = self.vm(*args)
        for oi, o in self.layout.copies:
            k, off = self.placements[oi]
            v = self._value(o.i, leaves, outs) if type(o) is Ref else o
            n = int(np.size(v))
            outs[k].reshape(-1)[off:off + n] = np.ravel(v)

    def getter(self, leaves, outs):
        """A function giving output ``oi`` of the run just made."""
        if self._all_scalar:
            return self._scalar_get
        return lambda oi: self.output(oi, leaves, outs)

    def _scalar_get(self, oi):
        a, off = self.scalar_outputs[oi]
        return a[off]

    def output(self, oi, leaves, outs):
        """The value of program output ``oi`` after a run (a fresh scalar or array)."""
        fast = self.scalar_outputs.get(oi)
        if fast is not None:
            return fast[0][fast[1]]
        o = self.program.outputs[oi]
        if type(o) is not Ref:
            return o
        v = self._value(o.i, leaves, outs)
        if isinstance(v, np.ndarray):
            return v[()] if v.ndim == 0 else v.copy()
        return v

    # -- values in memory ---------------------------------------------------------------
    def _base(self, s, leaves, outs):
        """The flat array behind storage ``s``'s slot."""
        if s.slot == 0:
            return self.arenas[s.dtype]
        kind, n = self._slot_owner[s.dtype, s.slot]
        if kind == 'leaf':
            return np.ascontiguousarray(leaves[n]).reshape(-1)
        return outs[n].reshape(-1)

    def _value(self, i, leaves, outs):
        """Instruction ``i``'s value after the steps run so far (a view into memory)."""
        s = self.layout.storages[i]
        if s is None:
            return self._py_values.get(i)
        base = self._base(s, leaves, outs)
        if s.shape == ():
            return base[s.off]
        return np.lib.stride_tricks.as_strided(base[s.off:] if s.off >= 0 else base, s.shape,
                                               tuple(x * base.itemsize for x in s.strides))

    def _python_step(self, step, leaves, outs):
        """A fallback (the instruction in NumPy, its value into memory) or a guard."""
        i = step.instrs[0]
        ins = self.program.instrs[i]
        if step.kind == 'fallback':
            args = []
            for a in ins.args:
                if type(a) is Ref:
                    args.append(self._value(a.i, leaves, outs))
                elif type(a) in (tuple, list):
                    args.append(type(a)(self._value(b.i, leaves, outs) if type(b) is Ref else b
                                        for b in a))
                else:
                    args.append(a)
            v = ins.fn(*args, **ins.kwargs)
            s = self.layout.storages[i]
            if s is None:
                self._py_values[i] = v
            elif s.shape == ():
                self._base(s, leaves, outs)[s.off] = v
            else:
                self._value(i, leaves, outs)[...] = v
            return
        g = self.program.guards[step.guard]
        v = self._value(i, leaves, outs)
        if not g.holds(v):
            raise guard_error(g, v, ins.name)
