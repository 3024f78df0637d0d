"""A compiled program: storage plan, VM steps, generated modules, and the call path.

``CompiledProgram(program, leaf_specs, out_specs, placements)`` plans where every
value lives (buffers.py), groups instructions into kernel steps (codegen.py),
writes and imports the kernels and a VM that runs the steps (cache.py), and runs
them on new inputs.  Every intermediate lives in arenas allocated once; output
arrays are passed in (``out=``) or allocated by the caller; a call allocates no
array.
"""
import hashlib

import numpy as np

from . import cache
from .buffers import Storage, KERNEL_DTYPES, probe_view, c_strides
from .codegen import (EWGroup, Step, _Ctx, ew_kernel, ew_supported, reduce_kernel,
                      matmul_kernel, fill_kernel, guard_kernel, MAX_FUSED, MAX_NDIM,
                      BLAS_MIN_FLOPS, _code)
from .guards import guard_error
from .record import Ref, Instr

__all__ = ['CompiledProgram']

_REDUCE = {'np.sum': 'sum', 'np.mean': 'mean', 'np.max': 'max', 'np.amax': 'max',
           'np.min': 'min', 'np.amin': 'min'}
_GUARD_KERNEL_KINDS = ('bool', 'float', 'int', 'index')


def _reduce_axes(ins):
    """(axes tuple, keepdims) of a reduction instruction, or None if it has other options."""
    args, kw = ins.args, ins.kwargs
    if len(args) > 2 or set(kw) - {'axis', 'keepdims'}:
        return None
    axis = args[1] if len(args) == 2 else kw.get('axis')
    keep = bool(kw.get('keepdims', False))
    if type(axis) is Ref:
        return None
    return axis, keep


class _Planner:
    def __init__(self, program, leaf_specs, out_specs, placements):
        self.prog = program
        self.instrs = program.instrs
        n = len(self.instrs)
        self.st = [None] * n
        self.ctx = _Ctx()
        self.steps = []
        self.arena = {}                      # dtype -> size
        self.arena_init = []                 # (dtype, off, flat values)
        self.in_slots = {}                   # dtype -> [leaf pos]
        self.scalar_inputs = []              # (leaf pos, dtype, off)
        self.out_slot_of = {}                # out slot k -> (dtype, slot number)
        self.fallbacks = []
        self.users = [set() for _ in range(n)]
        for ins in self.instrs:
            for j in ins.refs():
                self.users[j].add(ins.i)
        self.external = set()                # used by outputs or guards
        for o in program.outputs:
            if type(o) is Ref:
                self.external.add(o.i)
        for g in program.guards:
            self.external.add(g.i)
        self.consts = {}
        self.group = None
        # slots: arena 0, then inputs, then outputs, per dtype
        used = sorted({ins.pos for ins in self.instrs if ins.kind == 'input'})
        for pos in used:
            shape, dtype = leaf_specs[pos]
            dtype = np.dtype(dtype)
            if shape == ():
                continue
            self.in_slots.setdefault(dtype, []).append(pos)
        self.out_specs = out_specs
        n_out = {}
        for k, (shape, dtype) in enumerate(out_specs):
            dtype = np.dtype(dtype)
            n_out.setdefault(dtype, 0)
            self.out_slot_of[k] = (dtype, 1 + len(self.in_slots.get(dtype, ())) + n_out[dtype])
            n_out[dtype] += 1
        self.placements = placements        # output index -> (out slot, element offset)
        self.place_of = {}                  # instr -> output index (first one)
        for oi, (k, off) in placements.items():
            o = program.outputs[oi]
            if type(o) is Ref and o.i not in self.place_of:
                self.place_of[o.i] = oi
        self.placed_by = {}                 # output index -> satisfied in place

    # -- storage ---------------------------------------------------------------
    def alloc(self, i):
        if self.st[i] is not None:
            return self.st[i]
        ins = self.instrs[i]
        oi = self.place_of.get(i)
        if oi is not None:
            k, off = self.placements[oi]
            dtype, slot = self.out_slot_of[k]
            if dtype == ins.dtype:
                self.st[i] = Storage('mem', dtype, slot, off, ins.shape)
                self.placed_by[oi] = True
                return self.st[i]
        self.st[i] = self.arena_region(ins.dtype, ins.shape)
        return self.st[i]

    def arena_region(self, dtype, shape):
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        off = self.arena.get(dtype, 0)
        self.arena[dtype] = off + max(size, 1)
        return Storage('mem', dtype, 0, off, shape)

    def const_storage(self, v, scalar_ok=True):
        key = id(v)
        hit = self.consts.get(key)
        if hit is not None and hit[0] is v and (scalar_ok or hit[1].kind != 'const'):
            return hit[1]
        a = np.asarray(v)
        if a.dtype.kind == 'b':
            pass
        if scalar_ok and (a.ndim == 0 or (a.size > 0 and np.all(a == a.reshape(-1)[0])
                                          and not np.isnan(a.reshape(-1)[0]) if a.dtype.kind == 'f'
                                          else a.ndim == 0)):
            s = Storage('const', a.dtype, shape=a.shape, strides=(0,) * a.ndim,
                        value=a.reshape(-1)[0] if a.size else a[()])
        else:
            s = self.arena_region(a.dtype, a.shape)
            self.arena_init.append((a.dtype, s.off, np.ascontiguousarray(a).reshape(-1)))
        self.consts[key] = (v, s)
        return s

    def input_storage(self, ins):
        shape, dtype = ins.shape, np.dtype(ins.dtype)
        if shape == ():
            s = self.arena_region(dtype, ())
            self.scalar_inputs.append((ins.pos, dtype, s.off))
            return s
        slot = 1 + self.in_slots[dtype].index(ins.pos)
        return Storage('mem', dtype, slot, 0, shape)

    # -- groups -----------------------------------------------------------------
    def close(self):
        g = self.group
        if g is None:
            return
        self.group = None
        members = g.members
        stored = set()
        for ins in g.instrs:
            i = ins.i
            if self.st[i] is not None or i in self.external or any(
                    u not in members for u in self.users[i]):
                stored.add(i)
                self.alloc(i)
        for rins, _, _ in g.reductions:
            self.alloc(rins.i)
        # chunks: at most MAX_FUSED instructions per kernel; values crossing chunks stored
        chunks = [g.instrs[k:k + MAX_FUSED] for k in range(0, len(g.instrs), MAX_FUSED)]
        if len(chunks) > 1:
            where = {}
            for c, chunk in enumerate(chunks):
                for ins in chunk:
                    where[ins.i] = c
            for c, chunk in enumerate(chunks):
                for ins in chunk:
                    for j in ins.refs():
                        if where.get(j, c) != c and j not in stored:
                            stored.add(j)
                            self.alloc(j)
        for cid in sorted(g.chains):
            self.chain_fill(cid)
        for chunk in chunks:
            sub = EWGroup(g.shape)
            sub.instrs = chunk
            ids = {ins.i for ins in chunk}
            sub.reductions = [r for r in g.reductions if r[1] in ids]
            sub.scatters = [sc for sc in g.scatters if sc[0] in ids]
            self.emit_ew(sub, stored)
        for ins in g.instrs:
            self.emit_guards(ins.i)
        for rins, _, _ in g.reductions:
            self.emit_guards(rins.i)

    def emit_ew(self, group, stored):
        st = self.st
        consts = self.const_storage

        class _View:                      # storages seen by ew_kernel (constants resolved)
            def __getitem__(_, i):
                return st[i]
        fixed = []
        for ins in group.instrs:
            args = []
            for a in ins.args:
                if type(a) is not Ref and isinstance(a, np.ndarray) and a.ndim > 0:
                    s = consts(a)
                    fake = len(st) + len(self.extra)
                    self.extra.append(s)
                    args.append(Ref(fake))
                else:
                    args.append(a)
            fixed.append(Instr(ins.i, ins.kind, ins.fn, ins.prim, ins.name, tuple(args),
                               ins.kwargs, ins.value))
        group.instrs = fixed

        class _All:
            def __getitem__(_, i):
                return st[i] if i < len(st) else self.extra[i - len(st)]
        kernel, slots, params = ew_kernel(group, _All(), stored & {i.i for i in fixed},
                                          lambda i: st[i], self.ctx)
        self.steps.append(Step('ew', kernel, slots, params, [i.i for i in fixed]))

    def emit_guards(self, i):
        for g_idx, g in enumerate(self.prog.guards):
            if g.i != i:
                continue
            s = self.st[i]
            code = _code(s.dtype) if s is not None else None
            if s is not None and s.kind == 'mem' and code is not None and \
                    g.kind in _GUARD_KERNEL_KINDS and s.size == 1 and \
                    isinstance(g.recorded, (bool, int, float)):
                k = guard_kernel('bool' if g.kind == 'bool' else 'eq', code)
                self.steps.append(Step('guard', k, [s.slot],
                                       [0, s.off, self.ctx.const(float(g.recorded))], [i], g_idx))
            elif s is not None and s.kind == 'mem' and g.kind == 'mask-count' and \
                    s.dtype == np.bool_ and s.contiguous():
                k = guard_kernel('mask-count', 'B')
                self.steps.append(Step('guard', k, [s.slot], [s.size, s.off, g.recorded], [i],
                                       g_idx))
            else:
                self.steps.append(Step('pyguard', None, (), (), [i], g_idx))

    def emit_reduce(self, ins, op, full=False):
        x = ins.args[0]
        xs = self.st[x.i] if type(x) is Ref else self.const_storage(x, scalar_ok=False)
        if xs.kind == 'const':
            xs = self.const_storage(np.broadcast_to(xs.value, xs.shape).copy(), scalar_ok=False)
        parsed = _reduce_axes(ins)
        nd = len(xs.shape)
        axis, keep = parsed
        if axis is None:
            axes = tuple(range(nd))
        else:
            axes = tuple(a % nd for a in (axis if isinstance(axis, tuple) else (axis,)))
        out = self.alloc(ins.i)
        # output strides per input axis (0 on reduced axes), output contiguous
        kept = [d for d in range(nd) if d not in axes]
        kept_shape = [xs.shape[d] for d in kept]
        cs = c_strides(tuple(kept_shape))
        ostr = [0] * nd
        for d, s in zip(kept, cs):
            ostr[d] = s if xs.shape[d] != 1 else 0
        cnt = int(np.prod([xs.shape[d] for d in axes], dtype=np.int64)) if axes else 1
        k = reduce_kernel(op, nd, xs.dtype, ins.dtype)
        params = list(xs.shape) + [xs.off] + list(xs.strides) + [out.off] + ostr + \
            [out.size, max(cnt, 1)]
        self.steps.append(Step('reduce', k, [xs.slot, out.slot], params, [ins.i]))

    # -- the walk ----------------------------------------------------------------
    # -- scatter chains -------------------------------------------------------------
    # ``add(scatter_add(g1, idx1), scatter_add(g2, idx2))`` (the adjoint of several basic
    # slices of one array, as in a stencil) becomes one zero-filled buffer that each g
    # is accumulated into, inside the fused loop that computes g when there is one: no
    # zero-filled array per slice and no pass per add.
    def _basic_scatter(self, ins):
        if ins.name != 'scatter_add' or _code(ins.dtype) is None:
            return None
        args = list(ins.args)
        kw = dict(ins.kwargs)
        if len(args) == 4:
            kw['unique'] = args.pop()
        if len(args) != 3 or set(kw) - {'unique'} or kw.get('unique') is False:
            return None
        g, idx, shape = args
        for part in (idx if type(idx) is tuple else (idx,)):
            if not (type(part) in (int, slice) or part is None or part is Ellipsis or
                    isinstance(part, np.integer)):
                return None
        if type(g) is Ref and _code(self.instrs[g.i].dtype) is None:
            return None
        return g, idx

    def find_chains(self):
        self.chain = {}                      # instr -> chain id
        self.chain_nodes = []                # chain id -> [instrs]
        for ins in self.instrs:
            if self._basic_scatter(ins) is not None:
                self.chain[ins.i] = len(self.chain_nodes)
                self.chain_nodes.append([ins.i])
                continue
            if ins.name != 'np.add' or ins.kwargs or len(ins.args) != 2 or \
                    not all(type(a) is Ref for a in ins.args):
                continue
            p, q = (a.i for a in ins.args)
            if p == q or p not in self.chain or q not in self.chain:
                continue
            if self.users[p] != {ins.i} or self.users[q] != {ins.i} or p in self.external \
                    or q in self.external:
                continue
            if self.instrs[p].shape != ins.shape or self.instrs[q].shape != ins.shape or \
                    self.instrs[p].dtype != ins.dtype or self.instrs[q].dtype != ins.dtype:
                continue
            a, b = self.chain[p], self.chain[q]
            self.chain_nodes[a].extend(self.chain_nodes[b] + [ins.i])
            for j in self.chain_nodes[b]:
                self.chain[j] = a
            self.chain_nodes[b] = []
            self.chain[ins.i] = a
        self.chain_end = {}
        for cid, nodes in enumerate(self.chain_nodes):
            if nodes:
                self.chain_end[cid] = max(nodes)
        self.chain_dest = {}
        self.chain_filled = set()

    def chain_storage(self, cid):
        dest = self.chain_dest.get(cid)
        if dest is None:
            end = self.chain_end[cid]
            dest = self.chain_dest[cid] = self.alloc(end)
            for j in self.chain_nodes[cid]:
                self.st[j] = dest
        return dest

    def chain_fill(self, cid):
        if cid in self.chain_filled:
            return
        self.chain_filled.add(cid)
        dest = self.chain_storage(cid)
        self.steps.append(Step('fill', fill_kernel(_code(dest.dtype)), [dest.slot],
                               [self.ctx.const(0.0), dest.off, dest.size], []))

    def chain_region(self, ins, idx):
        dest = self.chain_storage(self.chain[ins.i])
        shape = np.zeros(ins.shape, dtype=np.int8)[idx].shape
        return probe_view(lambda z, i: z[i], (None, idx), {}, dest, shape)

    def plan_chain(self, ins):
        """A scatter or add of a chain: no value of its own; accumulate g."""
        cid = self.chain[ins.i]
        self.chain_storage(cid)
        if ins.name == 'np.add':
            if ins.i == self.chain_end[cid] and self.group is not None and \
                    cid in self.group.chains:
                self.close()                 # the sum is read after this: finish it
            self.chain_fill(cid)
            return
        g, idx = self._basic_scatter(ins)
        region = self.chain_region(ins, idx)
        grp = self.group
        if type(g) is Ref and grp is not None and g.i in grp.members and \
                g.i not in grp.pending and self.instrs[g.i].shape == grp.shape and \
                region.shape == grp.shape:
            grp.scatters.append((g.i, region))
            grp.members.add(ins.i)
            grp.chains.add(cid)
        else:
            if type(g) is Ref and grp is not None and g.i in grp.members:
                self.users[g.i].add(-1)
                self.close()
            self.chain_fill(cid)
            if region.size:
                self.emit_accumulate(g, region)
        if ins.i == self.chain_end[cid]:
            if self.group is not None and cid in self.group.chains:
                self.close()
            self.chain_fill(cid)

    def emit_accumulate(self, g, region):
        st = self.st
        fake = len(st) + len(self.extra)
        self.extra.append(region)
        if type(g) is not Ref:
            self.extra.append(self.const_storage(g))
            g = Ref(len(st) + len(self.extra) - 1)
        acc = Instr(len(st) + len(self.extra) + 3 * 10 ** 6, 'op', None, None, 'np.add',
                    (Ref(fake), g), {}, np.zeros(region.shape, dtype=region.dtype))
        grp = EWGroup(region.shape)
        grp.instrs = [acc]

        class _All:
            def __getitem__(_, i):
                return st[i] if i < len(st) else self.extra[i - len(st)]
        kernel, slots, params = ew_kernel(grp, _All(), {acc.i}, lambda i: region, self.ctx)
        self.steps.append(Step('ew', kernel, slots, params, []))

    def run(self):
        self.extra = []
        self.find_chains()
        for ins in self.instrs:
            i = ins.i
            if ins.kind == 'input':
                self.st[i] = self.input_storage(ins)
                continue
            if i in self.chain:
                self.plan_chain(ins)
                self.emit_guards(i)
                continue
            if not isinstance(ins.value, (np.ndarray, np.generic)):
                self.close()
                self.fallback(ins)
                continue
            if self.try_view(ins):
                continue
            if ew_supported(ins, _Dtypes(self.instrs)):
                if self.add_ew(ins):
                    continue
            op = _REDUCE.get(ins.name)
            if op is not None and self.try_reduce(ins, op):
                continue
            if ins.name == 'np.matmul' and self.try_matmul(ins):
                continue
            if ins.name == 'scatter_add' and self.try_scatter(ins):
                continue
            self.close()
            self.fallback(ins)
        self.close()
        self.finish_outputs()

    def add_ew(self, ins):
        g = self.group
        refs = ins.refs()
        if g is not None and (ins.shape != g.shape or len(g.instrs) >= 4 * MAX_FUSED * 64
                              or any(j in g.pending for j in refs)):
            self.close()
            g = None
        for j in refs:
            if j not in (g.members if g else ()) and self.st[j] is None:
                return False
        if g is None:
            g = self.group = EWGroup(ins.shape)
        g.instrs.append(ins)
        g.members.add(ins.i)
        if any(gd.i == ins.i for gd in self.prog.guards):
            self.close()
        return True

    def try_view(self, ins):
        prim = ins.prim
        viewish = (getattr(prim, 'view', False) or ins.name in ('operator.getitem', 'np.copy')
                   or (ins.name == 'astype' and ins.dtype == _dtype_of(ins.args[0], self.instrs)))
        if not viewish or not ins.args or type(ins.args[0]) is not Ref:
            return False
        if any(type(a) is Ref for a in ins.args[1:]) or any(
                type(a) in (tuple, list) and any(type(b) is Ref for b in a) for a in ins.args[1:]):
            return False
        p = ins.args[0].i
        g = self.group
        if g is not None and p in g.members:
            if p in g.pending:
                self.close()
            else:
                self.users[p].add(-1)      # read outside the loop: store it
                self.close()
        parent = self.st[p]
        if parent is None:
            return False
        if ins.name == 'astype' or ins.name == 'np.copy':
            if ins.name == 'np.copy':
                return False
            self.st[ins.i] = parent
            return True
        s = probe_view(ins.fn, ins.args, ins.kwargs, parent, ins.shape)
        if s is None:
            return False
        self.st[ins.i] = s
        self.emit_guards(ins.i)
        return True

    def try_reduce(self, ins, op):
        parsed = _reduce_axes(ins)
        x = ins.args[0]
        if parsed is None or type(x) is not Ref:
            return False
        xd = self.instrs[x.i].dtype
        if _code(xd) is None or _code(ins.dtype) is None or len(self.instrs[x.i].shape) > MAX_NDIM:
            return False
        if op in ('max', 'min') and xd.kind != 'f':
            return False
        axis, keep = parsed
        g = self.group
        full = ins.shape == () and (axis is None or len(self.instrs[x.i].shape) <= 1)
        if full and op in ('sum', 'mean') and g is not None and x.i in g.members and \
                x.i not in g.pending and self.instrs[x.i].shape == g.shape:
            g.reductions.append((ins, x.i, op))
            g.members.add(ins.i)
            g.pending.add(ins.i)
            return True
        if g is not None and x.i in g.members:
            self.close()
        if self.st[x.i] is None:
            return False
        self.close()
        self.emit_reduce(ins, op)
        self.emit_guards(ins.i)
        return True

    def try_matmul(self, ins):
        if ins.kwargs or len(ins.args) != 2 or ins.dtype != np.float64:
            return False
        sts = []
        for a in ins.args:
            if type(a) is Ref:
                if self.instrs[a.i].dtype != np.float64 or len(self.instrs[a.i].shape) not in (1, 2):
                    return False
                g = self.group
                if g is not None and a.i in g.members:
                    self.close()
                s = self.st[a.i]
                if s is None:
                    return False
            else:
                a = np.asarray(a)
                if a.dtype != np.float64 or a.ndim not in (1, 2):
                    return False
                s = self.const_storage(a, scalar_ok=False)
            sts.append(s)
        self.close()
        A, B = sts
        if len(A.shape) == 2:
            m, k = A.shape
            sa0, sa1 = A.strides
        else:
            m, k = 1, A.shape[0]
            sa0, sa1 = 0, A.strides[0]
        if len(B.shape) == 2:
            _, n = B.shape
            sb0, sb1 = B.strides
        else:
            k2, n = B.shape[0], 1
            sb0, sb1 = B.strides[0], 0
        out = self.alloc(ins.i)
        if n == 1:
            variant = 'mvc' if (sa1 == 1 or k == 1) and (sb0 == 1 or k == 1) else 'mv'
        elif (sa1 == 1 or k == 1) and (sb0 == 1 or k == 1):
            variant = 'dotc'
        elif sb1 == 1:
            variant = 'loopc'
        else:
            variant = 'loop'
        if len(A.shape) == 2 and len(B.shape) == 2 and m * n * k >= BLAS_MIN_FLOPS:
            fa = _blas_flag(A)
            fb = _blas_flag(B)
            if fa and fb:
                variant = 'blas' + fa + fb
        kern = matmul_kernel(variant)
        params = [m, k, n, A.off, sa0, sa1, B.off, sb0, sb1, out.off]
        self.steps.append(Step('matmul', kern, [A.slot, B.slot, out.slot], params, [ins.i]))
        self.emit_guards(ins.i)
        return True

    def try_scatter(self, ins):
        args = list(ins.args)
        kw = dict(ins.kwargs)
        if len(args) == 4:
            kw['unique'] = args.pop()
        if len(args) != 3 or set(kw) - {'unique'}:
            return False
        g, idx, shape = args
        parts = idx if type(idx) is tuple else (idx,)
        for p in parts:
            if not (type(p) in (int, slice) or p is None or p is Ellipsis or
                    isinstance(p, np.integer)):
                return False
        if _code(ins.dtype) is None:
            return False
        if type(g) is Ref:
            gs = self.st[g.i]
            grp = self.group
            if grp is not None and g.i in grp.members:
                self.users[g.i].add(-1)
                self.close()
                gs = self.st[g.i]
            if gs is None or _code(gs.dtype) is None:
                return False
        self.close()
        out = self.alloc(ins.i)
        region = probe_view(lambda z, i: z[i], (None, idx), {}, out,
                            np.zeros(shape, dtype=np.int8)[idx].shape)
        if region is None:
            return False
        self.steps.append(Step('fill', fill_kernel(_code(out.dtype)), [out.slot],
                               [self.ctx.const(0.0), out.off, out.size], [ins.i]))
        if region.size:
            copy = Instr(len(self.st) + len(self.extra) + 10 ** 6, 'op', None, None, 'np.copy',
                         (g,), {}, None)
            copy.value = np.zeros(region.shape, dtype=ins.dtype)
            grp = EWGroup(region.shape)
            grp.instrs = [copy]
            st = self.st
            extra_key = copy.i

            def out_storage(i, region=region):
                return region

            class _All:
                def __getitem__(_, i):
                    return st[i] if i < len(st) else self.extra[i - len(st)]
            gi = g
            if type(g) is not Ref:
                s = self.const_storage(g)
                self.extra.append(s)
                gi = Ref(len(st) + len(self.extra) - 1)
                copy.args = (gi,)
            kernel, slots, params = ew_kernel(grp, _All(), {extra_key}, out_storage, self.ctx)
            self.steps.append(Step('ew', kernel, slots, params, [ins.i]))
        self.emit_guards(ins.i)
        return True

    def fallback(self, ins):
        for j in ins.refs():
            if self.st[j] is None and isinstance(self.instrs[j].value, (np.ndarray, np.generic)):
                self.alloc(j)
        if isinstance(ins.value, (np.ndarray, np.generic)):
            self.alloc(ins.i)
        self.fallbacks.append(ins.i)
        self.steps.append(Step('fallback', None, (), (), [ins.i]))
        self.emit_guards(ins.i)

    def finish_outputs(self):
        """Copy outputs that are not computed in place (views, inputs, repeats)."""
        self.copies = []          # (output index, source storage) done in Python: constants
        done = set()
        for oi, (k, off) in self.placements.items():
            o = self.prog.outputs[oi]
            dtype, slot = self.out_slot_of[k]
            if type(o) is not Ref:
                self.copies.append((oi, o))
                continue
            s = self.st[o.i]
            if s is not None and s.kind == 'mem' and s.slot == slot and s.off == off and \
                    s.dtype == dtype and o.i not in done and self.placed_by.get(oi):
                done.add(o.i)
                continue
            dst = Storage('mem', dtype, slot, off, self.instrs[o.i].shape)
            if s is None or _code(s.dtype) is None or _code(dtype) is None:
                self.copies.append((oi, o))
                continue
            copy = Instr(len(self.st) + len(self.extra) + 2 * 10 ** 6 + oi, 'op', None, None,
                         'np.copy' if s.dtype == dtype else 'astype', (o,), {},
                         np.zeros(dst.shape, dtype))
            grp = EWGroup(dst.shape)
            grp.instrs = [copy]
            st = self.st

            class _All:
                def __getitem__(_, i):
                    return st[i] if i < len(st) else self.extra[i - len(st)]
            kernel, slots, params = ew_kernel(grp, _All(), {copy.i}, lambda i, d=dst: d,
                                              self.ctx)
            self.steps.append(Step('ew', kernel, slots, params, []))


class _Dtypes:
    """``storages``-like access for ``ew_supported``: dtype and shape of each instruction."""

    def __init__(self, instrs):
        self.instrs = instrs

    def __getitem__(self, i):
        ins = self.instrs[i]
        return Storage('mem', ins.dtype, 0, 0, ins.shape) if ins.dtype is not None else None


def _dtype_of(a, instrs):
    return instrs[a.i].dtype if type(a) is Ref else np.asarray(a).dtype


def _blas_flag(s):
    """'N' for a C-contiguous 2-d storage, 'T' for the transpose of one, else ''."""
    r, c = s.shape
    if s.strides == (c, 1):
        return 'N'
    if s.strides == (1, r):
        return 'T'
    return ''


# --------------------------------------------------------------------------
# The compiled program
# --------------------------------------------------------------------------

class CompiledProgram:
    """The program as numba kernels run by a generated VM (see the module docstring)."""

    def __init__(self, program, leaf_specs, out_specs, placements):
        self.program = program
        self.leaf_specs = leaf_specs
        self.out_specs = out_specs
        self.placements = placements
        P = _Planner(program, leaf_specs, out_specs, placements)
        P.run()
        self.planner = P
        self.st = P.st
        self.fallbacks = [program.instrs[i] for i in P.fallbacks]
        self.py_steps = {}
        # arenas (every dtype: kernel ones go to the VM, the others serve fallbacks)
        self.arenas = {dt: np.zeros(max(n, 1), dtype=dt) for dt, n in P.arena.items()}
        for dt in KERNEL_DTYPES:
            self.arenas.setdefault(dt, np.zeros(1, dtype=dt))
        for dt, off, vals in P.arena_init:
            self.arenas[dt][off:off + vals.size] = vals
        # one int64 table: [number of steps, (kernel id, parameter start, guard) per step,
        # then every step's array slots and parameters]
        kernels = {}
        rows, T = [], []
        for s, step in enumerate(P.steps):
            if step.kernel is None:
                rows.append((0, 0, step.guard))
                self.py_steps[s] = step
                continue
            kid = kernels.setdefault(step.kernel.name, (len(kernels) + 1, step.kernel))[0]
            rows.append((kid, len(T), step.guard))
            T.extend(step.slots)
            T.extend(int(v) for v in step.params)
        self.kernels = [k for _, k in sorted(kernels.values(), key=lambda t: t[0])]
        base = 1 + 3 * len(rows)
        head = [len(rows)]
        for kid, p, guard in rows:
            head.extend((kid, p + base, guard))
        self.T = np.array(head + T + [0], dtype=np.int64)
        self.C = np.array(P.ctx.C + [0.0], dtype=np.float64)
        used = {c for k in self.kernels for c in k.arrays}
        used |= {KERNEL_DTYPES[np.dtype(dt)] for _, dt, _ in P.scalar_inputs
                 if np.dtype(dt) in KERNEL_DTYPES}
        self.codes = [c for c in KERNEL_DTYPES.values() if c in used]
        self._vm_inputs()
        self._build()
        self._prefix = (self.T, self.C) + tuple(
            self.arenas[dt] for dt, c in KERNEL_DTYPES.items() if c in self.codes)
        self._nprefix = len(self._prefix)
        self._args = list(self._prefix) + [None] * (
            len(self.vm_leaves) + len(self.vm_outs) + len(self.vm_scalars) + 1)
        self._scalar_out = {}
        for oi, o in enumerate(program.outputs):
            s = self.st[o.i] if type(o) is Ref else None
            if s is not None and s.kind == 'mem' and s.slot == 0 and s.shape == ():
                self._scalar_out[oi] = (self.arenas[s.dtype], s.off)
        self._all_scalar = all(oi in self._scalar_out for oi in range(len(program.outputs))
                               if oi not in placements)

    # -- the VM -------------------------------------------------------------------
    def _vm_inputs(self):
        P = self.planner
        self.vm_leaves = []                 # leaf positions passed as arrays, in VM order
        self.vm_scalars = []                # (leaf pos, arena name, off)
        self.vm_outs = []                   # out slots passed, in VM order
        tuples = {c: ['a' + c.lower()] for c in KERNEL_DTYPES.values()}
        lines = []
        params = []
        for dt, code in KERNEL_DTYPES.items():
            if code not in self.codes:
                continue
            for pos in P.in_slots.get(dt, ()):
                name = f'x{pos}'
                params.append(name)
                self.vm_leaves.append(pos)
                tuples[code].append(f'{name}.reshape({name}.size)')
        for k in sorted(P.out_slot_of):
            dt, slot = P.out_slot_of[k]
            code = KERNEL_DTYPES.get(dt)
            if code is None or code not in self.codes:
                continue
            name = f'out{k}'
            params.append(name)
            self.vm_outs.append(k)
            tuples[code].append(f'{name}.reshape({name}.size)')
        # slots must match: arena, inputs (leaf order), outputs (slot order)
        for pos, dt, off in P.scalar_inputs:
            code = KERNEL_DTYPES.get(np.dtype(dt))
            if code is None:
                continue
            name = f'x{pos}'
            params.append(name)
            self.vm_scalars.append(pos)
            lines.append(f'    if start == 0:\n        a{code.lower()}[{off}] = {name}')
        self.vm_params = params
        self.vm_tuples = tuples
        self.vm_prologue = lines

    def _build(self):
        mods = {}
        for k in self.kernels:
            name = k.name
            mods[name] = cache.load(name, cache.kernel_module(k))
        L = [cache.HEADER]
        for k in self.kernels:
            L.append(f'from {k.name} import {k.name}')
        L.append('')
        L.append(cache.JIT.rstrip('\n'))
        arenas = ''.join(f'a{c.lower()}, ' for c in self.codes)
        L.append(f'def vm(T, C, {arenas}' + ''.join(p + ', ' for p in self.vm_params) + 'start):')
        for code, items in self.vm_tuples.items():
            if code in self.codes:
                L.append(f'    {code} = ({", ".join(items)},)')
        L.extend(self.vm_prologue)
        L.append('    for s in range(start, T[0]):')
        L.append('        kid = T[1 + 3 * s]')
        L.append('        p = T[2 + 3 * s]')
        L.append('        if kid == 0:')
        L.append('            return s')
        for n, k in enumerate(self.kernels, start=1):
            argl = ', '.join(f'{code}[T[p + {j}]]' for j, code in enumerate(k.arrays))
            call = f'{k.name}({argl}, T, p + {len(k.arrays)}, C)'
            L.append(f'        elif kid == {n}:')
            if k.returns:
                L.append(f'            if not {call}:')
                L.append('                return -2 - T[3 + 3 * s]')
            else:
                L.append(f'            {call}')
        L.append('    return -1')
        src = '\n'.join(L) + '\n'
        self.vm_source = src
        name = 'vm_' + hashlib.sha1(src.encode()).hexdigest()[:16]
        self.vm = cache.load(name, src).vm
        self.vm_name = name

    # -- calls ----------------------------------------------------------------------
    def run(self, leaves, outs):
        """Run on checked ``leaves``, writing placed outputs into ``outs``."""
        args = self._args          # one list per compiled tape, refilled: no allocation
        j = self._nprefix
        for pos in self.vm_leaves:
            x = leaves[pos]
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            args[j] = x
            j += 1
        for k in self.vm_outs:
            args[j] = outs[k]
            j += 1
        for pos in self.vm_scalars:
            args[j] = leaves[pos]
            j += 1
        args[j] = 0
        try:
            r = self.vm(*args)
            if r != -1 or self.planner.copies:
                self._continue(r, args, leaves, outs)
        finally:
            for i in range(self._nprefix, j):
                args[i] = None     # do not keep the caller's arrays alive

    def _continue(self, r, args, leaves, outs):
        vm = self.vm
        while True:
            if r == -1:
                break
            if r >= 0:
                self._python_step(r, leaves, outs)
                args[-1] = r + 1
                r = vm(*args)
                continue
            g = self.program.guards[-r - 2]
            raise guard_error(g, self._value(g.i, leaves, outs), self.program.instrs[g.i].name)
        for oi, o in self.planner.copies:
            k, off = self.placements[oi]
            v = self._value(o.i, leaves, outs) if type(o) is Ref else o
            flat = outs[k].reshape(-1)
            n = int(np.size(v))
            flat[off:off + n] = np.ravel(v)
        return None

    def getter(self, leaves, outs):
        """A function giving output ``oi`` of the run just made."""
        if self._all_scalar:
            return self._scalar_get
        return lambda oi: self.output(oi, leaves, outs)

    def _scalar_get(self, oi):
        a, off = self._scalar_out[oi]
        return a[off]

    def output(self, oi, leaves, outs):
        """The value of program output ``oi`` after a run (a fresh scalar or array)."""
        fast = self._scalar_out.get(oi)
        if fast is not None:
            return fast[0][fast[1]]
        o = self.program.outputs[oi]
        if type(o) is not Ref:
            return o
        v = self._value(o.i, leaves, outs)
        if isinstance(v, np.ndarray):
            return v[()] if v.ndim == 0 else v.copy()
        return v

    def _base(self, s, leaves, outs):
        if s.slot == 0:
            return self.arenas[s.dtype]
        P = self.planner
        ins = P.in_slots.get(s.dtype, [])
        if s.slot <= len(ins):
            return np.ascontiguousarray(leaves[ins[s.slot - 1]]).reshape(-1)
        for k, (dt, slot) in P.out_slot_of.items():
            if dt == s.dtype and slot == s.slot:
                return outs[k].reshape(-1)
        raise AssertionError('unknown slot')

    def _value(self, i, leaves, outs):
        s = self.st[i]
        if s is None:
            return self._pyvals.get(i) if hasattr(self, '_pyvals') else None
        if s.kind == 'const':
            return np.broadcast_to(np.asarray(s.value, dtype=s.dtype), s.shape)
        base = self._base(s, leaves, outs)
        if s.shape == ():
            return base[s.off]
        return np.lib.stride_tricks.as_strided(base[s.off:] if s.off >= 0 else base, s.shape,
                                               tuple(x * base.itemsize for x in s.strides))

    def _python_step(self, r, leaves, outs):
        step = self.py_steps[r]
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
            s = self.st[i]
            if s is None:
                if not hasattr(self, '_pyvals'):
                    self._pyvals = {}
                self._pyvals[i] = v
            else:
                dst = self._value(i, leaves, outs)
                if s.shape == ():
                    self._base(s, leaves, outs)[s.off] = v
                else:
                    dst[...] = v
            return
        g = self.program.guards[step.guard]
        v = self._value(i, leaves, outs)
        if not g.holds(v):
            raise guard_error(g, v, ins.name)
