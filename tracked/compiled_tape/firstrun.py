"""A compiled program's first run, compared with the NumPy replay before a tape uses it.

The cache loads an entry only when its files match their hashes (cache.py), so what
runs is what numba wrote.  This is the last check: the program runs once on the
recorded values, in the kernels and in NumPy, and an output outside rounding refuses
the kernels with a ``CompileError`` (in the background the tape keeps replaying in
NumPy).  The tolerance is loose on purpose, ``eps ** 0.25`` of the output's scale
(1.2e-4 in float64, 0.018 in float32): kernels round differently from NumPy (fused
loops, reassociated sums), while code that is not what was compiled gives garbage,
not rounding.
"""
import numpy as np

from .tiers import CompileError
from .trees import unflatten_args

__all__ = ['check', 'recorded_leaves', 'recorded_args', 'difference']


def recorded_leaves(tape):
    """The leaves ``tape`` was recorded on, as a caller gives them (integers as
    integers; zeros where the program has no input)."""
    full = [None] * len(tape.specs)
    for ins in tape.program.instrs:
        if ins.kind == 'input':
            v, dtype = ins.value, tape.specs[ins.pos][1]
            full[ins.pos] = v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype != dtype \
                else v
    return [np.zeros(*tape.specs[p]) if x is None else x for p, x in enumerate(full)]


def recorded_args(tape):
    """The argument tuple ``tape`` was recorded on, as a caller passes it: arrays of
    their own (C order), Python scalars as the types they were given, constant ints
    as recorded, static parts from the structure."""
    leaves = []
    for p, x in enumerate(recorded_leaves(tape)):
        cls = tape.checks[p][0]
        if p in tape.static:
            x = tape.static[p]
        elif cls is np.ndarray:
            x = np.array(x, order='C')
        else:
            x = cls(x)
        leaves.append(x)
    return unflatten_args(tape.arg_defs, leaves)


def check(tape, prog):
    """Run ``prog`` (a ``CompiledProgram`` of ``tape``, loaded) on the recorded values
    and raise ``CompileError`` if an output differs from the NumPy replay's."""
    leaves = recorded_leaves(tape)
    outs = tape.new_outs()
    unplaced = prog.run(leaves, outs)
    for oi, want in enumerate(tape.program.run(tape.inputs_of(leaves))):
        if oi in tape.placements:
            k, off = tape.placements[oi]
            want = np.ravel(want)
            got = outs[k].reshape(-1)[off:off + want.size]
        else:
            got = unplaced[oi]
        why = difference(got, want)
        if why is not None:
            from . import cache
            names = ', '.join([k.name for k in prog.kernels] + [prog.entry_name])
            raise CompileError(
                f'the compiled kernels of {tape!r} give output {oi} {why} on the recorded '
                f'values: not used (kernels {names} in {cache.cache_dir()}). If clearing '
                f'the cache (python -m tracked.compiled_tape.cache --clear) does not '
                f'help, please report it')


def difference(got, want):
    """How ``got`` differs from ``want`` beyond the kernels' rounding, or None.

    >>> difference(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12])) is None
    True
    >>> difference(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    'with NaN or inf where the NumPy replay has 2.0'
    """
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape:
        return f'of shape {a.shape} where the NumPy replay has {b.shape}'
    if b.dtype.kind not in 'fc':
        return None if np.array_equal(a, b) else f'{a} where the NumPy replay has {b}'
    finite = np.isfinite(b)
    if not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return 'without the NaN or inf of the NumPy replay'
    a, b = a[finite], b[finite]
    if not np.all(np.isfinite(a)):
        return f'with NaN or inf where the NumPy replay has {b[~np.isfinite(a)][0]}'
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    gap = float(np.max(np.abs(a - b), initial=0.0))
    if gap > np.finfo(b.dtype).eps ** 0.25 * scale:
        return f'{gap:.3g} away from the NumPy replay (scale {scale:.3g})'
    return None
