"""Recorded and compiled tapes (ReverseDiff style): record once, replay, compile with numba.

- record.py    the recorder: instructions and guards from a traced run
- guards.py    TapeGuardError and guard checks
- program.py   live instructions, deduplicated; the NumPy replay
- tapes.py     GradientTape, JacobianTape, HessianTape, compile
- trees.py     flattening argument trees
- buffers.py   where values live: arenas, inputs, outputs, views
- codegen.py   numba kernels for fused elementwise runs, reductions, products
- compiled.py  the plan of steps, the generated VM, the call path
- cache.py     generated modules on disk, compiled once per machine
- backend.py   AutoCompiled, the backend of gradient(f, tr.AutoCompiled(), ...)
"""
from .guards import TapeGuardError
from .tapes import GradientTape, JacobianTape, HessianTape, compile
from .backend import AutoCompiled

__all__ = ['GradientTape', 'JacobianTape', 'HessianTape', 'TapeGuardError', 'compile',
           'AutoCompiled']
