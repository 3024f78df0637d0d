"""Recorded and compiled tapes (ReverseDiff style): record once, replay, compile with numba.

- record.py    the recorder: instructions (Instr, Ref, instr_text) and guards from a traced run
- guards.py    TapeGuardError and guard checks
- program.py   live instructions, deduplicated; the NumPy replay
- tapes.py     GradientTape, JacobianTape, HessianTape, compile
- trees.py     flattening argument trees
- backend.py   AutoCompiled, the backend of gradient(f, tr.AutoCompiled(), ...)
The compiler (docs/dev/compiler.md walks one instruction through it):
- compiled.py  CompiledProgram: plan, arenas, VM; the call path
- plan.py      the walk over the instructions: storages, steps, fallbacks and why
- buffers.py   where values live: Storage, Memory (arenas, inputs, outputs), Layout, views
- fusion.py    which instructions fuse (by Primitive.kernel), their scalar form, groups
- patterns.py  views, reductions, matmul/BLAS: one step each, or a reason to decline
- chains.py    scatter chains: stencil adjoints accumulated into one buffer
- loops.py     the fused loop kernel generated from a Loop of operand storages
- codegen.py   Kernel, Step, the constant table; reduce, matmul, fill, guard kernels
- vm.py        the tables T and C and the generated VM that dispatches the steps
- cache.py     generated modules on disk, compiled once per machine
"""
from .guards import TapeGuardError
from .tapes import GradientTape, JacobianTape, HessianTape, compile
from .backend import AutoCompiled

__all__ = ['GradientTape', 'JacobianTape', 'HessianTape', 'TapeGuardError', 'compile',
           'AutoCompiled']
