"""Fused elementwise loops: a ``Loop`` description becomes one numba kernel.

A ``Loop`` knows nothing of instructions: it reads operand storages (memory
regions or scalar constants), computes scalar operations from templates, and
writes results to storages -- stored, added into regions (the adjoint of basic
slices), or summed over the loop.  fusion.py describes a fused run of recorded
instructions this way; the planner describes single copies and accumulations the
same way.

The loop is flat (one index ``i``) when every array it touches is contiguous or a
broadcast scalar, else a nest of ``ndim`` loops with per-operand strides.  Only
the *structure* enters the source (templates, operand kinds and dtypes, which
results are written where); sizes, offsets and strides are read from ``T`` and
float constants from ``C``, so one kernel serves every loop of the same structure.
"""
from typing import Any

import numpy as np

from .buffers import dtype_code
from .codegen import Kernel

__all__ = ['Loop', 'loop_kernel', 'map_loop', 'carry_clusters', 'MAX_CARRY']

MAX_CARRY = 8            # widest stencil (elements) whose adjoint is carried in registers


class Loop:
    """One fused loop over ``shape``.

    ``operands``: the storages it reads, in order.  ``ops``: ``(template, args)``
    scalar operations in order, each arg ``('x', k)`` (operand ``k``) or ``('t', j)``
    (the result of op ``j``).  ``stores``: ``(j, storage)``, op ``j``'s result written
    there.  ``scatters``: ``(j, region)``, added into ``region``.  ``sums``: ``(j, 'sum'
    or 'mean', storage)``, op ``j`` reduced over the whole loop into a scalar.
    """

    __slots__ = ('shape', 'operands', 'ops', 'stores', 'scatters', 'sums')

    def __init__(self, shape, operands=(), ops=(), stores=(), scatters=(), sums=()):
        self.shape = tuple(shape)
        self.operands = list(operands)
        self.ops = list(ops)
        self.stores = list(stores)
        self.scatters = list(scatters)
        self.sums = list(sums)


def map_loop(template, operands, dst):
    """The loop ``dst = template(*operands)`` over ``dst``'s shape: a copy, a cast, an
    accumulation ``dst = dst + g``."""
    return Loop(dst.shape, operands, [(template, [('x', k) for k in range(len(operands))])],
                [(0, dst)])


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

def _idx(name, ndim, strided):
    """Index expression into array parameter ``name`` inside the loop nest."""
    # An unsigned index: numba then skips the negative-index wraparound test, which
    # otherwise blocks vectorisation (7x slower loops measured with signed offsets).
    if not strided:
        return f'U(o{name} + i)'
    return f'U(o{name} + ' + ' + '.join(f'i{d} * s{name}_{d}' for d in range(ndim)) + ')' \
        if ndim else f'U(o{name})'


def _fits(s, shape):
    """Whether ``s`` can be read or written with the flat index of a loop over ``shape``."""
    return s.shape == shape and s.contiguous()


def loop_kernel(loop, constants):
    """``(Kernel, slots, params)`` for ``loop``: the kernel, the slot of each of its
    array parameters, and its integer parameters in ``T`` (constants go to
    ``constants``, a ``codegen.Constants``)."""
    shape = loop.shape
    ndim = len(shape)
    arrays: list[Any] = []
    slots: list[Any] = []
    params: list[str] = []
    lines_pre: list[str] = []
    lines_loop: list[str] = []
    lines_post: list[str] = []
    operands = []         # (array parameter k, storage)
    tokens = []           # per loop operand: its name or literal in the scalar code

    def array(s):
        k = len(arrays)
        arrays.append(dtype_code(s.dtype))
        slots.append(s.slot)
        operands.append((k, s))
        return k

    for n, s in enumerate(loop.operands):
        if s.kind != 'const':
            tokens.append(f'x{array(s)}')
        elif isinstance(s.value, (bool, np.bool_)):
            tokens.append('True' if s.value else 'False')
        elif isinstance(s.value, (int, np.integer)):
            tokens.append(f'np.int64({int(s.value)})')
        else:
            tokens.append(f'c{n}')
            read = f'C[T[p + {len(params)}]]'
            lines_pre.append(f'c{n} = ' + (f'np.float32({read})' if s.dtype == np.float32
                                            else read))
            params.append(constants.add(s.value))

    # the loop form: flat unless something is strided (or broadcast along some axes)
    strided = ndim > 0 and not all(
        [s.broadcast_scalar() or _fits(s, shape) for _, s in operands]
        + [_fits(s, shape) for _, s in loop.stores]
        + [_fits(r, shape) for _, r in loop.scatters])
    pre_loads, loop_loads = [], []      # a broadcast scalar is read once, before the loop
    for k, s in operands:
        if s.broadcast_scalar():
            pre_loads.append(f'x{k} = a{k}[U(o{k})]')
        else:
            loop_loads.append(f'x{k} = a{k}[{_idx(k, ndim, strided)}]')

    # the scalar code
    def tok(a):
        return tokens[a[1]] if a[0] == 'x' else f't{a[1]}'
    for j, (template, args) in enumerate(loop.ops):
        lines_loop.append(f't{j} = ' + template.format(*[tok(a) for a in args]))
    for j, s in loop.stores:
        k = array(s)
        lines_loop.append(f'a{k}[{_idx(k, ndim, strided)}] = t{j}')
    _accumulate(loop, shape, strided, operands, array, lines_pre, lines_loop, lines_post)
    accs = []
    radd = False
    for j, op, s in loop.sums:
        k = array(s)
        if s.dtype.kind == 'f':
            lines_pre.append(f'r{k} = 0.0')
            lines_loop.append(f'r{k} = RADD(r{k}, t{j})')
            radd = True
        else:
            lines_pre.append(f'r{k} = 0')
            lines_loop.append(f'r{k} += t{j}')
        accs.append((k, op))

    head = _header(shape, strided, operands, accs, params)
    for k, op in accs:
        lines_post.append(f'a{k}[U(o{k})] = r{k} / cnt{k}' if op == 'mean' else
                          f'a{k}[U(o{k})] = r{k}')
    lines = head + lines_pre + pre_loads + _nest(loop_loads + lines_loop, ndim, strided)
    lines += lines_post
    # Elementwise arithmetic is not reassociated (values match the eager tape exactly);
    # float sums are, through RADD, so that loops with a sum can vectorise.
    return Kernel(lines, arrays, helpers=_RADD if radd else ''), slots, params


def _header(shape, strided, operands, accs, params):
    """Lines reading the loop's integer parameters from ``T`` (appended to ``params``):
    the size(s), each array's offset (and strides in a loop nest), each mean's count."""
    ndim = len(shape)
    head = []
    if strided:
        for d in range(ndim):
            head.append(f'n{d} = T[p + {len(params)}]')
            params.append(shape[d])
    else:
        head.append(f'n = T[p + {len(params)}]')
        params.append(int(np.prod(shape, dtype=np.int64)))
    acc_arrays = {k for k, _ in accs}
    for k, s in operands:
        head.append(f'o{k} = T[p + {len(params)}]')
        params.append(s.off)
        if strided and not s.broadcast_scalar() and k not in acc_arrays:
            st = s.strides_for(shape)
            for d in range(ndim):
                head.append(f's{k}_{d} = T[p + {len(params)}]')
                params.append(st[d])
    for k, op in accs:
        if op == 'mean':
            head.append(f'cnt{k} = T[p + {len(params)}]')
            params.append(max(int(np.prod(shape, dtype=np.int64)), 1))
    return head


def _nest(inner, ndim, strided):
    """``inner`` (the loop body) inside the loop form: none for 0-d, a flat loop, or a
    nest of ``ndim`` loops."""
    if ndim == 0:
        return [ln.replace(' + i)]', ')]') for ln in inner]
    if strided:
        return ['    ' * d + f'for i{d} in range(n{d}):' for d in range(ndim)] + \
            ['    ' * ndim + ln for ln in inner]
    return ['for i in range(n):'] + ['    ' + ln for ln in inner]


# A float add that may be reassociated: the accumulation of a fused sum, so that LLVM
# can vectorise the loop (the rest of the kernel keeps exact IEEE order; the fastmath
# flag stays on this one instruction when it is inlined).
_RADD = """

@njit(cache=True, error_model='numpy', nogil=True, fastmath={'reassoc'})
def RADD(a, b):
    return a + b
"""


# --------------------------------------------------------------------------
# Accumulation into regions (scatter chains)
# --------------------------------------------------------------------------

def _accumulate(loop, shape, strided, operands, array, lines_pre, lines_loop, lines_post):
    """The code adding ``loop.scatters`` into their regions."""
    ndim = len(shape)
    same: dict[Any, Any] = {}  # accumulations into one region: summed first, one update
    for j, region in loop.scatters:
        key = (region.slot, region.off, region.strides_for(shape), region.dtype)
        same.setdefault(key, (region, []))[1].append(f't{j}')
    for cluster in carry_clusters(list(same.values()), shape, strided, operands):
        region = cluster[0][0]
        k = array(region)
        if len(cluster) == 1:
            lines_loop.append(f'a{k}[{_idx(k, ndim, strided)}] += ' + ' + '.join(cluster[0][1]))
            continue
        # Shifted regions of one buffer (the adjoint of a stencil: x[1:], x[:-1], ...):
        # element o + i takes the delta-d terms of iteration i - d, carried in registers
        # w1..wW, so each element is updated once and no iteration reads what the one
        # before wrote.  Width 1 then vectorises (W3 n=1e5: a call went from ~175 to
        # ~53 µs, against updates of a[o + i] and a[o + 1 + i] through memory); wider
        # windows are chained recurrences that LLVM leaves scalar (still ~8% faster).
        by_delta = {r.off - region.off: terms for r, terms in cluster}
        width = max(by_delta)
        lines_pre.extend(f'w{k}_{j} = 0.0' for j in range(1, width + 1))
        lines_loop.append(f'a{k}[U(o{k} + i)] += w{k}_1 + (' + ' + '.join(by_delta[0]) + ')')
        for j in range(1, width + 1):
            parts = ([f'w{k}_{j + 1}'] if j < width else []) + (
                ['(' + ' + '.join(by_delta[j]) + ')'] if j in by_delta else [])
            lines_loop.append(f'w{k}_{j} = ' + ' + '.join(parts))
        lines_post.append('if n > 0:')
        lines_post.extend(f'    a{k}[U(o{k} + n - 1 + {j})] += w{k}_{j}'
                          for j in range(1, width + 1))


def carry_clusters(regions, shape, strided, operands):
    """Split accumulation regions ``[(storage, terms)]`` into lists updated together.

    In a flat loop, float regions of one buffer whose offsets are a few elements apart
    and whose union is contiguous form one cluster (updated through carried registers);
    every other region is a cluster of its own.
    """
    n = int(np.prod(shape, dtype=np.int64))
    if strided or not shape or n == 0:
        return [[r] for r in regions]
    out: list[Any] = []
    pool: dict[Any, Any] = {}
    for r in regions:
        s = r[0]
        if s.dtype.kind == 'f':
            pool.setdefault((s.slot, s.dtype), []).append(r)
        else:
            out.append([r])
    for (slot, dtype), rs in pool.items():
        rs.sort(key=lambda r: r[0].off)
        runs = [[rs[0]]]
        for r in rs[1:]:
            first, last = runs[-1][0][0].off, runs[-1][-1][0].off
            if r[0].off - last <= n and r[0].off - first <= MAX_CARRY:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            lo, hi = run[0][0].off, run[-1][0].off + n
            if len(run) > 1 and any(                 # the buffer is also read or written
                    s.kind == 'mem' and s.slot == slot and s.dtype == dtype and
                    s.span()[0] < hi and s.span()[1] >= lo for _, s in operands):
                out.extend([r] for r in run)
            else:
                out.append(run)
    return out
