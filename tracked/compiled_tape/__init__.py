"""Recorded and compiled tapes (ReverseDiff style): record once, replay, compile with numba.

- record.py    the recorder: instructions (Instr, Ref, instr_text) and guards from a traced run
- guards.py    TapeGuardError and guard checks
- program.py   live instructions, deduplicated; the NumPy replay
- base.py      the tapes' shared machinery: recording, compile state, the general call path
- tapes.py     GradientTape, JacobianTape, HessianTape, compile
- signature.py what a call must match: leaf specs, argument and out= checks
- calls.py     a compiled GradientTape's generated gradient/withgradient
- tiers.py     tiered execution: NumPy replay while a background process compiles
- firstrun.py  a compiled program's first run, compared with the NumPy replay
- trees.py     flattening argument trees
- backend.py   AutoCompiled, the backend of gradient(f, tr.AutoCompiled(), ...)
- captures.py  what f reads besides its arguments: AutoCompiled's keys and tape inputs
The compiler (docs/dev/compiler.md walks one instruction through it):
- compiled.py  CompiledProgram: plan, arenas, entry; the general compiled call
- plan.py      the walk over the instructions: storages, steps, fallbacks and why
- buffers.py   where values live: Storage, Memory (arenas, inputs, outputs), Layout, views
- fusion.py    which instructions fuse (by Primitive.kernel), their scalar form, groups
- patterns.py  views, reductions, matmul/BLAS: one step each, or a reason to decline
- chains.py    scatter chains: stencil adjoints accumulated into one buffer
- loops.py     the fused loop kernel generated from a Loop of operand storages
- codegen.py   Kernel (one C signature), Step, the constant table; reduce, matmul, fill, guard
- vm.py        the tables T, C, P and the entry (per argument types) calling kernels by address
- cache.py     generated modules on disk, compiled once per machine, checked, bounded
- entries.py   one cache entry: its files, their hashes; the compiling process's side
- library.py   the kernels of reference MLPs, compiled ahead of use (python -m ...library)
"""
from .guards import TapeGuardError
from .tapes import GradientTape, JacobianTape, HessianTape, compile
from .backend import AutoCompiled

__all__ = ['GradientTape', 'JacobianTape', 'HessianTape', 'TapeGuardError', 'compile',
           'AutoCompiled']
