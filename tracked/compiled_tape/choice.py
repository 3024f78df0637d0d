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
copied there).  A unit clearly faster in NumPy (by ``MARGIN`` and ``MIN_GAIN``) is
planned again as fallbacks, and the new plan is kept if it answers faster on the whole
(``better``).  Last, the program is raced against the NumPy replay the tape starts
with, and the tape keeps replaying if that answers faster by ``WHOLE_MARGIN``
(``replay_faster``: a program whose NumPy steps and their boundaries cost more than
its kernels save).

Both whole-program comparisons time what a caller pays: the tape's public calls
(``withgradient`` by default and with ``out=``, ``withjacobian``, ``hessian``) on
the recorded values, by a copy of the tape answering with either program
(``Tape.timed_calls``).  The paths differ by more than the program: a compiled
``GradientTape`` answers through generated calls that check no leaf in Python, the
replay through the general path and NumPy's allocations; timing ``prog.run``
against the replay missed that.  The rounds interleave, taking turns at going
first, and the median of their paired ratios decides: one measurement, or a best-of,
flipped the choice on a busy machine.  A race runs until a sign test says on which
side of the margin the ratios lie, or until the budget is spent.  Rounds in which one
side waited for the GIL (another thread of the process held it: a compiled call gives
it up while its kernels run) do not decide; the race runs again, and with no answer
within the budget the kernels stay.  ``TRACKED_CHOICE_DEBUG=1`` prints each race's
timings on stderr.

The choice is kept on the tape and pickled with it: a worker that unpickles the tape
plans the same program and rounds alike, and nothing is timed twice.
``TRACKED_NUMPY_CHOICE=0`` in the environment turns the measurement off (every unit a
kernel: reproducible plans, and no NumPy call's temporary buffers).
"""
import ctypes
import functools
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
# the whole program: the NumPy replay is kept when its public calls take at most this
# fraction of the compiled ones'.  A near-tie keeps the kernels: they allocate nothing
# with out= and release the GIL, which a timing does not see.  Measured on a loaded
# 2-core machine (compiled / replay, the races' median ratios): S1 1.015-1.10 in 20
# races, all replay; W2 at batch 1 024 1.00-1.04 and at batch 128 0.86-1.03, near-ties
WHOLE_MARGIN = 0.99
ROUNDS = 5               # timings per unit; the minimum counts
MIN_ROUNDS = 5           # whole-program races (_race): rounds at least ...
MAX_ROUNDS = 2001        # ... and at most (the budget ends a near-tie first)
SIGN_Z = 2.2             # ... ended by a sign test this many deviations apart (5 of 5)
WAITED = 0.5             # ... spoiled when one side waited this fraction more (GIL)
PAUSE = 0.02             # ... then run again after this many seconds
BUDGET = 0.5             # seconds of measuring at most (then: the kernels stay) ...
RUNS_BUDGET = 25         # ... plus this many times one run of the program
RETURN_COST = 2e-6       # the VM's return to Python and resumption, per fallback

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
        if numpy < kern - max(MIN_GAIN, (1 - MARGIN) * kern):
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
    """Whether ``again`` (planned with units in NumPy) answers the tape's public calls on
    its recorded values faster than ``prog`` (all kernels), both loaded, on the whole:
    a unit's timing misses what its fallbacks cost around it (operands read from
    memory, the general call path instead of the generated one), which at W2's batch
    16 outweighed the gains."""
    olds, news = _calls(tape, prog, again)
    race = _race(olds, news, 1.0, 'kernels / units in NumPy')
    return race is not None and race[2] > 1.0   # units past MARGIN: any whole gain counts


def replay_faster(tape, prog):
    """Why ``tape``'s NumPy replay answers its public calls on the recorded values faster
    than ``prog`` (loaded, after the choice of its units) does, by ``WHOLE_MARGIN``; None
    when it does not (the usual case) or the measurement is off.  A compiled tape is then
    never slower than the replay it starts with: the sparse Jacobians of
    benchmarks/sparse.py, whose ``np.pad`` runs in NumPy between kernels, were."""
    if os.environ.get('TRACKED_NUMPY_CHOICE') == '0':
        return None
    kerns, replays = _calls(tape, prog, None)
    race = _race(kerns, replays, 1 / WHOLE_MARGIN, 'compiled / replay')
    if race is None:                   # never timed without waiting: the kernels stay
        return None
    kern, numpy, ratio = race
    if ratio > 1 / WHOLE_MARGIN:
        return (f'the NumPy replay measured faster on the whole ({numpy * 1e6:.0f} µs, '
                f'{kern * 1e6:.0f} µs compiled, per call)')
    return None


def _calls(tape, *progs):
    """For each of ``progs`` (None: the NumPy replay) the calls to time: the tape's public
    calls answered by it (``Tape.timed_calls``), or, where the recorded values make no
    arguments, the program's run on them."""
    calls = [tape.timed_calls(p) for p in progs]
    if all(c is not None for c in calls):
        return calls
    leaves = [np.array(x, order='C') if isinstance(x, np.ndarray) else x
              for x in recorded_leaves(tape)]
    outs = tape.new_outs()
    return [[functools.partial(tape.replay_into if p is None else p.run, leaves, outs)]
            for p in progs]


def _race(first, second, ratio, label=''):
    """``(a, b, r)``: the median seconds of a round of ``first``'s calls (a) and of
    ``second``'s (b), and the median of the rounds' ratios a / b (r), timed in
    interleaved rounds taking turns at going first; None when every attempt within
    the budget was spoiled by waiting (below).

    Each round's ratio compares two timings a moment apart, so the machine's drift
    cancels, and the median ignores the rounds a busy machine spoils.  The rounds go
    on (``MIN_ROUNDS`` at least) until a sign test says on which side of ``ratio``
    that median lies (``SIGN_Z``), or until ``MAX_ROUNDS`` or the budget: a clear
    race stops after a few rounds, a near-tie takes the budget.

    A round also takes this thread's CPU time: when one side's median round spent
    ``WAITED`` more of its time not running than the other's, its calls waited for the
    GIL, which another thread of this process held (native_ops's build, another tape's
    planning, a caller's thread).  A compiled call releases the GIL while its kernels
    run and then waits out the other thread's switch interval (5 ms) to take it back:
    W1's 36 µs calls timed 5 ms each during native_ops's build, against the replay's
    0.5 ms (which rarely releases it), and the tape kept the replay.  Such a race is run
    again after ``PAUSE``, within the budget; waiting alike on both sides (BLAS
    threads, other processes) cancels in the ratios."""
    start = time.perf_counter()
    warm = []
    for fn in first + second:          # warm: generated code, first allocations
        fn()
        warm.append(time.perf_counter())
    now = time.perf_counter()
    deadline = now + BUDGET + RUNS_BUDGET * (now - start) / len(first + second)
    while True:
        a, b, wa, wb = _rounds(first, second, ratio, deadline)
        # the fractions of their rounds the sides waited: alike (BLAS threads, other
        # processes), they cancel in the ratios; on one side only, that side's calls
        # waited for the GIL
        waited = abs(np.median(wa) / np.median(a) - np.median(wb) / np.median(b)) > WAITED
        ratios = np.array(a) / np.array(b)
        if os.environ.get('TRACKED_CHOICE_DEBUG'):
            _report(label, start, warm, a, b, wa, wb, ratios, ratio)
        if not waited:
            return float(np.median(a)), float(np.median(b)), float(np.median(ratios))
        if time.perf_counter() + PAUSE > deadline:
            return None
        time.sleep(PAUSE)


def _rounds(first, second, ratio, deadline):
    """One attempt of ``_race``: the rounds' seconds of ``first`` and ``second``, and
    how long each round waited (its seconds less this thread's CPU seconds)."""
    a: list[float] = []
    b: list[float] = []
    wa: list[float] = []
    wb: list[float] = []
    above = 0                          # rounds whose ratio is above ``ratio``
    for r in range(MAX_ROUNDS):
        if r >= MIN_ROUNDS and (abs(2 * above - r) >= SIGN_Z * r ** 0.5
                                or time.perf_counter() > deadline):
            break
        for calls, times, waits in ((first, a, wa), (second, b, wb))[::1 if r % 2 else -1]:
            c = time.thread_time()     # (outside the timing: it is a system call)
            t = time.perf_counter()
            for fn in calls:
                fn()
            t = time.perf_counter() - t
            times.append(t)
            waits.append(t - (time.thread_time() - c))
        above += a[-1] > ratio * b[-1]
    return a, b, wa, wb


def _report(label, start, warm, a, b, wa, wb, ratios, ratio):
    """``TRACKED_CHOICE_DEBUG=1``: an attempt's timings on stderr (µs)."""
    import sys

    def us(ts):
        return ' '.join(f'{t * 1e6:.0f}' for t in ts)
    print(f'tracked choice race ({label}): {len(a)} rounds, '
          f'{(time.perf_counter() - start) * 1e3:.1f} ms since its start; medians '
          f'{np.median(a) * 1e6:.1f} / {np.median(b) * 1e6:.1f} µs (waiting '
          f'{np.median(wa) * 1e6:.1f} / {np.median(wb) * 1e6:.1f}), median ratio '
          f'{np.median(ratios):.3f} (threshold {ratio:.3f}); warm-up calls '
          f'{us(np.diff([start] + warm))}; rounds: {us(a[:12])} / {us(b[:12])}',
          file=sys.stderr, flush=True)
