"""The VM: a plan's steps as tables, and the generated numba function that runs them.

``T`` (int64) is ``[number of steps, (kernel id, parameter start, guard) per step,
then every step's array slots and integer parameters]``; ``C`` (float64) holds the
constants.  The VM's parameters are ``T``, ``C``, one arena per kernel dtype, the
array inputs, the output arrays, the scalar inputs and ``start``; it gathers the
arrays of each dtype into a tuple indexed by slot, then loops over the steps from
``start``, calling kernel ``kid`` with its arrays and ``T``'s position of its
parameters.  It returns -1 when done, the step's index at a step that runs in
Python (kernel id 0: a fallback, or a guard checked in Python), and ``-2 - guard``
when a guard kernel fails; the runtime resumes it at ``start = step + 1``.
"""
import hashlib

import numpy as np

from . import cache
from .buffers import KERNEL_DTYPES

__all__ = ['VM']


class VM:
    """The tables and generated VM of one plan (see the module docstring).

    ``fn`` is the numba function; ``leaves``, ``outs`` and ``scalars`` are the leaf
    positions, output arrays and scalar leaf positions it takes, in order, after
    ``T``, ``C`` and the arenas of ``codes``; ``py_steps`` the steps run in Python.
    """

    def __init__(self, steps, constants, layout):
        kernels = {}                         # name -> (kernel id, Kernel)
        rows, params = [], []
        self.py_steps = {}                   # step index -> Step
        for s, step in enumerate(steps):
            if step.kernel is None:
                rows.append((0, 0, step.guard))
                self.py_steps[s] = step
                continue
            kid = kernels.setdefault(step.kernel.name, (len(kernels) + 1, step.kernel))[0]
            rows.append((kid, len(params), step.guard))
            params.extend(step.slots)
            params.extend(int(v) for v in step.params)
        self.kernels = [k for _, k in sorted(kernels.values(), key=lambda t: t[0])]
        base = 1 + 3 * len(rows)
        head = [len(rows)]
        for kid, p, guard in rows:
            head.extend((kid, p + base, guard))
        self.T = np.array(head + params + [0], dtype=np.int64)
        self.C = np.array(constants + [0.0], dtype=np.float64)
        used = {c for k in self.kernels for c in k.arrays}
        used |= {KERNEL_DTYPES[dt] for _, dt, _ in layout.scalar_inputs if dt in KERNEL_DTYPES}
        self.codes = [c for c in KERNEL_DTYPES.values() if c in used]
        self.source = self._source(layout)
        self.name = 'vm_' + hashlib.sha1(self.source.encode()).hexdigest()[:16]
        for k in self.kernels:               # written to the cache first: the VM imports them
            cache.load(k.name, cache.kernel_module(k))
        self.fn = cache.load(self.name, self.source).vm

    def _source(self, layout):
        """The VM's module source; sets ``leaves``, ``outs`` and ``scalars``."""
        self.leaves, self.outs, self.scalars = [], [], []
        # per dtype, the arrays by slot: arena, inputs (leaf order), outputs (slot order)
        tuples = {c: ['a' + c.lower()] for c in self.codes}
        params, prologue = [], []
        for dt, code in KERNEL_DTYPES.items():
            if code in self.codes:
                for pos in layout.leaf_slots.get(dt, ()):
                    params.append(f'x{pos}')
                    self.leaves.append(pos)
                    tuples[code].append(f'x{pos}.reshape(x{pos}.size)')
        for k in sorted(layout.out_slots):
            code = KERNEL_DTYPES.get(layout.out_slots[k][0])
            if code in self.codes:
                params.append(f'out{k}')
                self.outs.append(k)
                tuples[code].append(f'out{k}.reshape(out{k}.size)')
        for pos, dt, off in layout.scalar_inputs:
            code = KERNEL_DTYPES.get(dt)
            if code is not None:
                params.append(f'x{pos}')
                self.scalars.append(pos)
                prologue.append(f'    if start == 0:\n        a{code.lower()}[{off}] = x{pos}')
        L = [cache.HEADER]
        L.extend(f'from {k.name} import {k.name}' for k in self.kernels)
        L.append('')
        L.append(cache.JIT.rstrip('\n'))
        arenas = ''.join(f'a{c.lower()}, ' for c in self.codes)
        L.append(f'def vm(T, C, {arenas}' + ''.join(p + ', ' for p in params) + 'start):')
        L.extend(f'    {code} = ({", ".join(items)},)' for code, items in tuples.items())
        L.extend(prologue)
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
        return '\n'.join(L) + '\n'
