"""Planning: one walk over a program's instructions gives storages and VM steps.

``Planner(program, leaf_specs, out_specs, placements).run()`` returns a ``Plan``.
Each instruction, in recording order, becomes exactly one of:

- an input: its slot (buffers.Memory); an integer array the tape differentiates
  (float64 on the tape) is converted from its slot into the arena;
- a member of a scatter chain (chains.py);
- a view: a storage and no step (patterns.try_view);
- a member of the open ``FusionGroup`` (fusion.py), computed in a loop when the
  group closes -- at a change of shape, before an instruction that reads one of
  its values from memory, or at a guard;
- a pattern's step: a reduction or a product (patterns.py);
- a *fallback*: a step that runs the instruction in NumPy, with the reason.

Guards become steps right after the value they check is computed.  Outputs not
computed in place are copied into the output arrays at the end.
"""
from typing import NamedTuple

import numpy as np

from .buffers import Layout, Memory, Storage, dtype_code
from .chains import ScatterChains
from .codegen import Constants, Step, guard_kernel
from .guards import Guard
from .fusion import COPY, FusionGroup, astype_template, fusion_obstacle, is_fusible
from .loops import loop_kernel, map_loop
from .patterns import PATTERNS, is_viewish, try_view
from .record import Ref, instr_text

__all__ = ['Planner', 'Plan', 'Fallback']

MAX_FUSED = 24           # instructions per fused kernel: compile time, and kernel reuse
_GUARD_KERNEL_KINDS = ('bool', 'float', 'int', 'index')


class Fallback:
    """An instruction a compiled tape runs in NumPy (``instr``), and why (``reason``)."""

    __slots__ = ('instr', 'reason')

    def __init__(self, instr, reason):
        self.instr = instr
        self.reason = reason

    def __str__(self):
        return f'{instr_text(self.instr)}   # {self.reason}'

    def __repr__(self):
        return f'<fallback {self}>'


class Plan(NamedTuple):
    """A planned program: VM steps, the float constants, the layout, the fallbacks, and
    the units a measurement may move to NumPy (``(step indices, instruction indices)``:
    a fused group's loops, or one reduction or product; choice.py)."""

    steps: list
    constants: list
    layout: Layout
    fallbacks: list
    units: list


def _non_array(value):
    """The fallback reason for an instruction whose value is not an array."""
    if isinstance(value, (tuple, list)):
        return f'{type(value).__name__}-valued result'
    return f'{type(value).__name__} result: not an array'


class Planner:
    """The walk of one program (see the module docstring); ``run`` gives its Plan.

    Patterns and scatter chains work through it: ``instrs``, ``mem`` (the storages),
    ``constants``, ``steps``, the open ``group``, ``close`` and ``close_if_computing``;
    chains also read ``users`` and ``external``.
    """

    def __init__(self, program, leaf_specs, out_specs, placements, numpy=None):
        self.program = program
        # instruction -> why it runs in NumPy although a kernel could (choice.py)
        self.numpy: dict[int, str] = numpy or {}
        self.units: list[tuple[list[int], list[int]]] = []
        self.instrs = instrs = program.instrs
        self.mem = Memory(program, leaf_specs, out_specs, placements)
        self.constants = Constants()
        self.steps = []
        self.fallbacks = []
        self.group = None                    # the open FusionGroup
        self.users: list[set[int]] = [set() for _ in instrs]  # instructions reading each value
        for ins in instrs:
            for j in ins.refs():
                self.users[j].add(ins.i)
        # values read by outputs or guards: always stored
        self.external = {o.i for o in program.outputs if type(o) is Ref}
        self.external.update(g.i for g in program.guards)
        self.guards_at: dict[int, list[tuple[int, Guard]]] = {}  # instruction -> guards
        for k, g in enumerate(program.guards):
            self.guards_at.setdefault(g.i, []).append((k, g))
        self.chains = ScatterChains(self)

    def run(self):
        """Plan every instruction; the ``Plan``."""
        for ins in self.instrs:
            self.plan(ins)
        self.close()
        copies = self.finish_outputs()
        return Plan(self.steps, self.constants.values, self.mem.layout(copies), self.fallbacks,
                    self.units)

    def plan(self, ins):
        """Storage and steps for one instruction (see the module docstring)."""
        if ins.kind == 'input':
            given = self.mem.input(ins)
            if given is not None:
                self.convert(given, ins)
            return
        if ins.i in self.chains:
            self.chains.plan(ins)
            self.emit_guards(ins.i)
            return
        if not isinstance(ins.value, (np.ndarray, np.generic)):
            self.close()
            self.fallback(ins, _non_array(ins.value))
            return
        if ins.i in self.numpy:
            self.close()
            self.fallback(ins, self.numpy[ins.i], chosen=True)
            return
        kernel = ins.prim.kernel
        reason = f'no kernel form for {ins.name}'
        if is_viewish(ins, self.instrs):
            result = try_view(self, ins)
            if type(result) is list:
                self.emit_guards(ins.i)
                return
            reason = result
        if is_fusible(kernel):
            reason = fusion_obstacle(ins, self.instrs)
            if reason is None:
                if self.fuse(ins):
                    return
                reason = 'an operand is not in memory'
        pattern = PATTERNS.get(kernel)
        if pattern is not None:
            result = pattern(self, ins)
            if type(result) is list:
                if result and all(st.kind in ('reduce', 'matmul') for st in result):
                    n = len(self.steps)
                    self.units.append((list(range(n, n + len(result))), [ins.i]))
                self.steps.extend(result)
                if self.group is None or ins.i not in self.group.members:
                    self.emit_guards(ins.i)  # an open group's members: when it closes
                return
            reason = result
        self.close()
        self.fallback(ins, reason)

    # -- fusion groups -------------------------------------------------------------
    def fuse(self, ins):
        """Add fusible ``ins`` to the open group (or a new one); False if an operand
        is neither in memory nor computed by the group."""
        g = self.group
        refs = ins.refs()
        if g is not None and (ins.shape != g.shape or len(g.instrs) >= 4 * MAX_FUSED * 64
                              or any(j in g.pending for j in refs)):
            self.close()
            g = None
        for j in refs:
            if j not in (g.members if g else ()) and self.mem.storages[j] is None:
                return False
        if g is None:
            g = self.group = FusionGroup(ins.shape)
        g.instrs.append(ins)
        g.members.add(ins.i)
        if ins.i in self.guards_at:
            self.close()                     # a guard reads it now
        return True

    def close_if_computing(self, i):
        """Close the open group if it computes ``i``: the caller reads ``i`` from memory."""
        if self.group is not None and i in self.group.members:
            self.close()

    def close(self):
        """Close the open group: store the values read elsewhere and emit its loops,
        at most ``MAX_FUSED`` instructions each (values crossing loops are stored)."""
        g = self.group
        if g is None:
            return
        self.group = None
        mem = self.mem
        stored = set()
        for ins in g.instrs:
            i = ins.i
            if mem.storages[i] is not None or i in self.external or any(
                    u not in g.members for u in self.users[i]):
                stored.add(i)
                mem.alloc(i)
        for rins, _, _ in g.reductions:
            mem.alloc(rins.i)
        chunks = [g.instrs[k:k + MAX_FUSED] for k in range(0, len(g.instrs), MAX_FUSED)]
        if len(chunks) > 1:
            where = {ins.i: c for c, chunk in enumerate(chunks) for ins in chunk}
            for c, chunk in enumerate(chunks):
                for ins in chunk:
                    for j in ins.refs():
                        if where.get(j, c) != c and j not in stored:
                            stored.add(j)
                            mem.alloc(j)
        for cid in sorted(g.chains):
            self.chains.fill(cid)
        if not g.scatters and not g.chains:      # a scatter chain's loop stays a loop
            n = len(self.steps)
            self.units.append((list(range(n, n + len(chunks))), [ins.i for ins in g.instrs]
                               + [rins.i for rins, _, _ in g.reductions]))
        for chunk in chunks:
            kernel, slots, params = loop_kernel(g.loop(chunk, stored, mem), self.constants)
            self.steps.append(Step('ew', kernel, slots, params, [ins.i for ins in chunk]))
        for ins in g.instrs:
            self.emit_guards(ins.i)
        for rins, _, _ in g.reductions:
            self.emit_guards(rins.i)

    def convert(self, given, ins):
        """Copy input ``ins`` as the caller gives it (an integer array, storage ``given``)
        into its float64 storage: a cast kernel, or NumPy for an integer dtype without
        kernels."""
        dst = self.mem.storages[ins.i]
        if dtype_code(given.dtype) is None:
            self.fallbacks.append(Fallback(ins, f'{given.dtype} input converted to '
                                                f'{dst.dtype} in NumPy: no kernel dtype'))
            self.steps.append(Step('convert', None, (), (), [ins.i]))
            return
        kernel, slots, params = loop_kernel(map_loop(astype_template(dst.dtype), [given], dst),
                                            self.constants)
        self.steps.append(Step('ew', kernel, slots, params, [ins.i]))

    # -- guards, fallbacks, outputs ----------------------------------------------------
    def emit_guards(self, i):
        """Steps checking the guards on instruction ``i``: a kernel for a scalar value
        or a mask count in memory, else a check in Python."""
        s = self.mem.storages[i]
        for k, g in self.guards_at.get(i, ()):
            code = dtype_code(s.dtype) if s is not None else None
            if code is not None and g.kind in _GUARD_KERNEL_KINDS and s.size == 1 and \
                    isinstance(g.recorded, (bool, int, float)):
                kernel = guard_kernel('bool' if g.kind == 'bool' else 'eq', code)
                step = Step('guard', kernel, [s.slot],
                            [0, s.off, self.constants.add(float(g.recorded))], [i], k)
            elif code == 'B' and g.kind == 'mask-count' and s.contiguous():
                step = Step('guard', guard_kernel('mask-count', 'B'), [s.slot],
                            [s.size, s.off, g.recorded], [i], k)
            else:
                step = Step('pyguard', None, (), (), [i], k)
            self.steps.append(step)

    def fallback(self, ins, reason, chosen=False):
        """Run ``ins`` in NumPy: its operands and result go to memory.  ``chosen``: a
        kernel could run it, NumPy was measured faster (not listed in ``fallbacks``)."""
        for j in ins.refs():
            if self.mem.storages[j] is None and \
                    isinstance(self.instrs[j].value, (np.ndarray, np.generic)):
                self.mem.alloc(j)
        if isinstance(ins.value, (np.ndarray, np.generic)):
            self.mem.alloc(ins.i)
        if not chosen:
            self.fallbacks.append(Fallback(ins, reason))
        self.steps.append(Step('fallback', None, (), (), [ins.i]))
        self.emit_guards(ins.i)

    def finish_outputs(self):
        """Copy placed outputs not computed in place (views, inputs, repeats) into their
        output arrays; returns those the runtime writes in Python (constants, and
        values without a kernel dtype) as ``(program output, Ref or constant)``."""
        copies = []
        done = set()
        for oi, (k, off) in self.mem.placements.items():
            o = self.program.outputs[oi]
            dtype, slot = self.mem.out_slots[k]
            if type(o) is not Ref:
                copies.append((oi, o))
                continue
            s = self.mem.storages[o.i]
            if s is not None and s.slot == slot and s.off == off and s.dtype == dtype and \
                    o.i not in done and oi in self.mem.placed:
                done.add(o.i)
                continue
            if s is None or dtype_code(s.dtype) is None or dtype_code(dtype) is None:
                copies.append((oi, o))
                continue
            dst = Storage('mem', dtype, slot, off, self.instrs[o.i].shape)
            template = COPY if s.dtype == dtype else astype_template(dtype)
            kernel, slots, params = loop_kernel(map_loop(template, [s], dst), self.constants)
            self.steps.append(Step('ew', kernel, slots, params, []))
        return copies
