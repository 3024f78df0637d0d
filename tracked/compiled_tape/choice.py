"""Numba or NumPy, measured: which units of a compiled program run faster as NumPy calls.

numba's scalar ``tanh``/``exp``/``log`` loops are several times slower per element
than NumPy's vectorised ufuncs, so on large arrays a fused loop can lose to the NumPy
calls it replaces, while on small arrays and chains of cheap operations it wins by far
(no temporaries, no call overhead).  Where the line lies depends on the machine, the
operations and the sizes, so it is measured, not guessed: once a compiled program has
run on the recorded values (firstrun.py), each *unit* of its plan -- a fused group's
loops, or one reduction or product kernel (plan.Plan.units) -- is timed against its
instructions in NumPy on the same values, plus what running them as fallbacks costs
(the VM returns to Python; a result not written into its buffer by ``out=`` is
copied there).  A unit clearly
faster in NumPy (by ``MARGIN`` and ``MIN_GAIN``) is planned again as fallbacks, and
the new plan is kept if it runs the whole program faster (``better``).

The choice is kept on the tape and pickled with it: a worker that unpickles the tape
plans the same program and rounds alike, and nothing is timed twice.
``TRACKED_NUMPY_CHOICE=0`` in the environment turns the measurement off (every unit a
kernel: reproducible plans, and no NumPy call's temporary buffers).
"""
import ctypes
import os
import time

import numpy as np

from .compiled import INTO
from .firstrun import recorded_leaves
from .record import Ref
from .vm import HEAD

__all__ = ['choose', 'better', 'replay_faster', 'numpy_seconds', 'MARGIN', 'MIN_GAIN',
           'WHOLE_MARGIN']

MARGIN = 0.95            # NumPy must take at most this fraction of the kernels' time
MIN_GAIN = 3e-6          # ... and save at least this many seconds per call
# the whole program: the NumPy replay is kept when it runs in at most this fraction of
# the compiled time (and MIN_GAIN less): W2 at batch 1 024, all BLAS, ran compiled at
# 1.03-1.04x its replay with 0.95 (its products reach BLAS through SciPy's build)
WHOLE_MARGIN = 0.98
ROUNDS = 5               # timings per unit; the minimum counts
BUDGET = 0.5             # seconds of measuring at most (then: the kernels stay) ...
RUNS_BUDGET = 25         # ... plus this many times one run of the program
RETURN_COST = 2e-6       # the VM's return to Python and resumption, per fallback
GENERAL_PATH = 10e-6     # a call's general path over its generated code (calls.py)

_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p)


def choose(tape, prog):
    """``{instruction: reason}`` for the instructions of ``prog``'s units measured faster
    in NumPy on ``tape``'s recorded values (empty: the kernels win everywhere); ``prog``
    is a loaded ``CompiledProgram`` of ``tape``."""
    if not prog.units or os.environ.get('TRACKED_NUMPY_CHOICE') == '0':
        return {}
    leaves = [np.array(x, order='C') if isinstance(x, np.ndarray) else x
              for x in recorded_leaves(tape)]
    outs = tape.new_outs()
    start = time.perf_counter()
    prog.run(leaves, outs)       # its free frame now points at leaves and outs
    deadline = time.perf_counter() + BUDGET + RUNS_BUDGET * (time.perf_counter() - start)
    T = prog.pool[-1].T
    tp, cp = T.ctypes.data, int(T[1])
    pp = tp + 8 * int(T[3])
    timed = []                   # (the kernels' seconds, unit)
    for steps, members in prog.units:
        calls = [(_KERNEL(int(T[HEAD + 3 * s])), int(T[HEAD + 1 + 3 * s])) for s in steps]
        kern = _best(lambda: [fn(pp, tp, p, cp) for fn, p in calls])
        if kern >= MIN_GAIN + RETURN_COST:   # else NumPy cannot win by MIN_GAIN
            timed.append((kern, members))
    env = _replay_env(prog.program, tape.inputs_of(leaves))
    choice: dict[int, str] = {}
    instrs = prog.program.instrs
    # the costliest units first: past the deadline, the rest keep their kernels
    for kern, members in sorted(timed, key=lambda t: -t[0]):
        if time.perf_counter() > deadline:
            break
        numpy = numpy_seconds([instrs[i] for i in members], env)
        if numpy < kern - max(MIN_GAIN, (1 - WHOLE_MARGIN) * kern):
            why = (f'NumPy measured faster here ({numpy * 1e6:.0f} µs for the '
                   f'{len(members)} operations, {kern * 1e6:.0f} µs in numba)')
            choice.update((i, why) for i in members)
    return choice


def numpy_seconds(instrs, env):
    """What running ``instrs`` as fallbacks costs on the values of ``env``: each call,
    the VM's return, and copying a result not written with ``out=`` into its buffer."""
    return sum(_best(_numpy_call(ins, env)) + RETURN_COST
               + (0.0 if ins.fn in INTO else _best(_copy_of(env[ins.i]))) for ins in instrs)


def _best(fn, rounds=ROUNDS):
    """The least of ``rounds`` timings of ``fn()``, in seconds."""
    best = float('inf')
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _numpy_call(ins, env):
    """``ins`` on its recorded operands, as a fallback runs it."""
    fn, kwargs = ins.fn, ins.kwargs
    args = [env[a.i] if type(a) is Ref else
            type(a)(env[b.i] if type(b) is Ref else b for b in a) if type(a) in (tuple, list)
            else a for a in ins.args]
    return lambda: fn(*args, **kwargs)


def _copy_of(v):
    """Copying ``v`` into a buffer of its own (a fallback stores its result)."""
    dst = np.empty_like(v)
    return lambda: np.copyto(dst, v)


def _replay_env(program, leaves):
    """Every instruction's value in the NumPy replay on ``leaves``."""
    env = [None] * len(program.instrs)
    for ins in program.instrs:
        if ins.kind == 'input':
            env[ins.i] = leaves[ins.pos]
        else:
            env[ins.i] = _numpy_call(ins, env)()
    return env


def better(tape, prog, again):
    """Whether ``again`` (planned with units in NumPy) runs ``tape``'s recorded values
    faster than ``prog`` (all kernels), both loaded, on the whole: a unit's timing misses
    what its fallbacks cost around it (operands read from memory, the general call path
    instead of the generated one: ``GENERAL_PATH``), which at W2's batch 16 outweighed
    the gains."""
    extra = GENERAL_PATH if again.py_steps and not prog.py_steps else 0.0
    old, new = _race(tape, prog.run, again.run)
    return new + extra < old           # units past MARGIN: any whole gain counts


def replay_faster(tape, prog):
    """Why ``tape``'s NumPy replay runs its recorded values faster than ``prog`` (loaded,
    after the choice of its units) on the whole, by ``WHOLE_MARGIN`` and ``MIN_GAIN``; None
    when it does not (the usual case) or the measurement is off.  A compiled tape is then
    never slower than the replay it starts with: the sparse Jacobians of
    benchmarks/sparse.py, whose ``np.pad`` runs in NumPy between kernels, were."""
    if os.environ.get('TRACKED_NUMPY_CHOICE') == '0':
        return None
    kern, numpy = _race(tape, prog.run, tape.replay_into)
    if numpy < kern - max(MIN_GAIN, (1 - WHOLE_MARGIN) * kern):
        return (f'the NumPy replay measured faster on the whole ({numpy * 1e6:.0f} µs, '
                f'{kern * 1e6:.0f} µs compiled)')
    return None


def _race(tape, first, second):
    """The best seconds of ``first(leaves, outs)`` and of ``second(leaves, outs)`` on
    ``tape``'s recorded values, timed in interleaved rounds (both see the machine alike)."""
    leaves = [np.array(x, order='C') if isinstance(x, np.ndarray) else x
              for x in recorded_leaves(tape)]
    outs = tape.new_outs()
    a = b = float('inf')
    for _ in range(ROUNDS):
        a = min(a, _best(lambda: first(leaves, outs), 1))
        b = min(b, _best(lambda: second(leaves, outs), 1))
    return a, b
