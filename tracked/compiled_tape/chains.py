"""Scatter chains: the adjoint of basic slices of one array, accumulated in one buffer.

``add(scatter_add(g1, idx1), scatter_add(g2, idx2))`` (the adjoint of several basic
slices of one array, as in a stencil) becomes one zero-filled buffer that each g
is accumulated into, inside the fused loop that computes g when there is one: no
zero-filled array per slice and no pass per add.  A chain is a tree of such adds
over scatter-adds (``kernel`` 'scatter_add') with basic indices; every member
shares the buffer, which is the storage of the chain's last instruction.
"""
import numpy as np

from .buffers import dtype_code, probe_view
from .codegen import Step, fill_kernel
from .fusion import ADD
from .loops import loop_kernel, map_loop
from .record import Ref

__all__ = ['ScatterChains', 'scatter_parts', 'basic_index']


def basic_index(idx):
    """Whether index ``idx`` is basic (ints, slices, None, Ellipsis): positions never repeat."""
    return all(type(p) in (int, slice) or p is None or p is Ellipsis or isinstance(p, np.integer)
               for p in (idx if type(idx) is tuple else (idx,)))


def scatter_parts(ins, instrs):
    """``(g, idx)`` of a scatter-add of ``g`` at a basic index ``idx`` with kernel
    dtypes (a chain member); for any other instruction, a string saying why not."""
    if ins.prim is None or ins.prim.kernel != 'scatter_add':
        return 'not a scatter-add'
    if dtype_code(ins.dtype) is None:
        return f'{ins.dtype}: no kernel dtype'
    if len(ins.args) != 3 or set(ins.kwargs) - {'unique'}:
        return 'arguments other than (g, index, shape, unique=)'
    g, idx, _ = ins.args
    if type(idx) is Ref or (type(idx) is tuple and any(type(p) is Ref for p in idx)):
        return 'its index is a recorded value'
    if not basic_index(idx):
        return 'an index with arrays: positions may repeat'
    if type(g) is Ref and dtype_code(instrs[g.i].dtype) is None:
        return f'operand %{g.i} is {instrs[g.i].dtype}: no kernel dtype'
    return g, idx


class ScatterChains:
    """The scatter chains of a program and their planning (see the module docstring).

    ``planner`` (plan.Planner) provides the storages, the steps and the open fusion
    group; found chains are planned as the planner's walk reaches their members.
    """

    def __init__(self, planner):
        self.P = planner
        instrs = planner.instrs
        self.chain = {}                      # member instruction -> chain id
        self.nodes: list[list[int]] = []     # chain id -> member instructions
        self.parts = {}                      # scatter member -> (g, idx)
        for ins in instrs:
            parts = scatter_parts(ins, instrs)
            if type(parts) is tuple:
                self.parts[ins.i] = parts
                self.chain[ins.i] = len(self.nodes)
                self.nodes.append([ins.i])
            elif self._joins(ins):
                p, q = (a.i for a in ins.args)
                a, b = self.chain[p], self.chain[q]
                self.nodes[a].extend(self.nodes[b] + [ins.i])
                for j in self.nodes[b]:
                    self.chain[j] = a
                self.nodes[b] = []
                self.chain[ins.i] = a
        self.end = {cid: max(nodes) for cid, nodes in enumerate(self.nodes) if nodes}
        self.dest = {}                       # chain id -> the buffer
        self.filled = set()                  # chains whose buffer is zeroed already

    def _joins(self, ins):
        """Whether ``ins`` adds two chains read by nothing else, of its shape and dtype."""
        if ins.prim is None or ins.prim.kernel != ADD or ins.kwargs or len(ins.args) != 2 or \
                not all(type(a) is Ref for a in ins.args):
            return False
        P = self.P
        p, q = (a.i for a in ins.args)
        if p == q or p not in self.chain or q not in self.chain:
            return False
        if P.users[p] != {ins.i} or P.users[q] != {ins.i} or p in P.external \
                or q in P.external:
            return False
        return all(P.instrs[j].shape == ins.shape and P.instrs[j].dtype == ins.dtype
                   for j in (p, q))

    def __contains__(self, i):
        return i in self.chain

    def storage(self, cid):
        """The buffer of chain ``cid`` (every member's storage)."""
        dest = self.dest.get(cid)
        if dest is None:
            dest = self.dest[cid] = self.P.mem.alloc(self.end[cid])
            for j in self.nodes[cid]:
                self.P.mem.storages[j] = dest
        return dest

    def fill(self, cid):
        """Zero chain ``cid``'s buffer (once, before the first accumulation)."""
        if cid in self.filled:
            return
        self.filled.add(cid)
        dest = self.storage(cid)
        self.P.steps.append(Step('fill', fill_kernel(dtype_code(dest.dtype)), [dest.slot],
                                 [self.P.constants.add(0.0), dest.off, dest.size], []))

    def plan(self, ins):
        """A member: an add has no value of its own; a scatter accumulates its g."""
        P = self.P
        cid = self.chain[ins.i]
        self.storage(cid)
        if ins.i not in self.parts:          # an add joining two chains
            if ins.i == self.end[cid] and P.group is not None and cid in P.group.chains:
                P.close()                    # the sum is read after this: finish it
            self.fill(cid)
            return
        g, idx = self.parts[ins.i]
        shape = np.zeros(ins.shape, dtype=np.int8)[idx].shape
        region = probe_view(lambda z, i: z[i], (None, idx), {}, self.storage(cid), shape)
        grp = P.group
        if type(g) is Ref and grp is not None and g.i in grp.members and \
                g.i not in grp.pending and P.instrs[g.i].shape == grp.shape and \
                region.shape == grp.shape:
            grp.scatters.append((g.i, region))      # added in the loop computing g
            grp.members.add(ins.i)
            grp.chains.add(cid)
        else:
            if type(g) is Ref:
                P.close_if_computing(g.i)
            self.fill(cid)
            if region.size:
                src = P.mem.storages[g.i] if type(g) is Ref else P.mem.const(g)
                kernel, slots, params = loop_kernel(map_loop(ADD, [region, src], region),
                                                    P.constants)
                P.steps.append(Step('ew', kernel, slots, params, []))
        if ins.i == self.end[cid]:
            if P.group is not None and cid in P.group.chains:
                P.close()
            self.fill(cid)
