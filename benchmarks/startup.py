"""Start-up of compiled tapes, in fresh processes: how soon the first gradient arrives and
how soon the compiled kernels take over, with an empty disk cache and with a warm one.

For W1, the demo's MLP (64-32-10, batch 100, ``python -m tracked``), W4a and W4b:

- eager: the first ``tr.withgradient`` of the process;
- tiered (``tr.compile(tape)``): the first gradient after ``tr.compile``, and the time
  until the compiled kernels are in use (``tape.wait()``), with an empty cache
  (``TRACKED_CACHE_DIR`` a new folder) and again with the cache it left;
- foreground (``tr.compile(tape, background=False)``): the compile, cold and warm;
- the MLP with another width (48) and batch size (50) in the warm cache: what it compiles.

Recording is timed apart (it comes before ``tr.compile``).  Each figure is one
process; the CPU seconds (this process's and its compiling process's) are less
sensitive to a busy machine than the wall time.  Run the benchmark several times
and quote medians.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

FIRST_RUNS = 5
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_SCRIPT = r'''
import json, resource, sys, time
sys.path.insert(0, {bench!r})
sys.path.insert(0, {root!r})
import numpy as np
import numba  # noqa: F401  (import time is not start-up)
import tracked as tr
from startup import workload
f, args, wrt = workload({name!r}, {hidden}, {batch})
mode = {mode!r}
out = {{}}
if mode == 'eager':
    k = len(wrt)
    t0 = time.perf_counter()
    tr.withgradient(lambda *d: f(*d, *args[k:]), *args[:k])
    out['first'] = time.perf_counter() - t0
else:
    t0 = time.perf_counter()
    tape = tr.GradientTape(f, *args, wrt=wrt)
    out['record'] = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    ct = tr.compile(tape, background=(mode != 'foreground'))
    ct.withgradient(*args)
    out['first'] = time.perf_counter() - t0
    if mode == 'first':
        print(json.dumps(out))
        sys.exit(0)
    ok = ct.wait()
    out['ready'] = time.perf_counter() - t0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    out['cpu'] = time.process_time() - c0 + kids.ru_utime + kids.ru_stime
    assert ok, ct.compile_error
    t = ct._tiering
    out['worker'] = t is not None and t.proc is not None
    # (None: the choice kept the NumPy replay, measured faster)
    out['kernels'] = len(ct.compiled.kernels) if ct.compiled is not None else None
print(json.dumps(out))
'''


def workload(name, hidden=32, batch=100):
    """``(f, args, wrt)`` of a start-up workload (wrt: the differentiated leading args)."""
    import numpy as np
    import compiled as W
    rng = np.random.default_rng(0)
    if name == 'W1':
        return W.w1_f, (rng.standard_normal(10),), (0,)
    if name == 'W4a':
        return W.w4a_f, W.w4a_init(rng), (0,)
    if name == 'W4b':
        return W.w4b_f, W.w4b_data(rng), (0,)
    from tracked.__main__ import batches, load_digits, loss, make_model
    x, y, _, _ = load_digits(0)
    xb, yb = batches(x, y, batch, 1, 0)[0]
    return loss, (make_model(64, hidden, 10, 0), xb, yb), (0,)


def measure(name, mode, cache, hidden=32, batch=100):
    """One fresh process: the figures of ``mode`` ('eager', 'first': tiered up to the
    first gradient, 'tiered', 'foreground')."""
    code = _SCRIPT.format(bench=HERE, root=ROOT, name=name, hidden=hidden, batch=batch,
                          mode=mode)
    env = dict(os.environ, TRACKED_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _ms(s):
    return f'{s * 1e3:.1f} ms' if s < 1 else f'{s:.2f} s'


def run(report, wanted):
    names = [n for n in ('W1', 'MLP', 'W4a', 'W4b') if not wanted or n.upper() in wanted
             or 'STARTUP' in wanted]
    for name in names:
        # the first gradients: medians over FIRST_RUNS processes, alternating (a single
        # process is often descheduled for 5-10 ms on a busy machine)
        firsts = {'eager': [], 'first': []}
        with tempfile.TemporaryDirectory() as d:
            for _ in range(FIRST_RUNS):
                for mode in firsts:
                    firsts[mode].append(measure(name, mode, d)['first'])
        eager = {'first': float(np.median(firsts['eager']))}
        first = float(np.median(firsts['first']))
        with tempfile.TemporaryDirectory() as d:
            cold = measure(name, 'tiered', d)
            warm = measure(name, 'tiered', d)
            other = ([measure('MLP', 'tiered', d, hidden=48),
                      measure('MLP', 'tiered', d, batch=50)] if name == 'MLP' else [])
        with tempfile.TemporaryDirectory() as d:
            fg_cold = measure(name, 'foreground', d)
            fg_warm = measure(name, 'foreground', d)
        print(f'{name:<5} start-up: eager first gradient {_ms(eager["first"])}; record '
              f'{_ms(cold["record"])}, then tr.compile + first gradient {_ms(first)} (medians of '
              f'{FIRST_RUNS}); '
              + (f'compiled kernels ({cold["kernels"]}) in use' if cold['kernels'] is not None
                 else 'the NumPy replay kept (measured faster)')
              + f' after {_ms(cold["ready"])} '
              f'({cold["cpu"]:.2f} s CPU) with an empty cache, {_ms(warm["ready"])} '
              f'({warm["cpu"]:.2f} s CPU) warm; compiling in the foreground '
              f'{_ms(fg_cold["ready"])} ({fg_cold["cpu"]:.2f} s CPU) cold, '
              f'{_ms(fg_warm["ready"])} ({fg_warm["cpu"]:.2f} s CPU) warm', flush=True)
        for label, o in zip(('width 48', 'batch 50'), other):
            print(f'      {label} in the warm cache: compiled kernels in use after '
                  f'{_ms(o["ready"])} ({o["cpu"]:.2f} s CPU), '
                  f'{"a compiling process ran" if o["worker"] else "nothing compiled"}',
                  flush=True)


if __name__ == '__main__':          # python benchmarks/startup.py: run.py's start-up lines
    sys.path.insert(0, HERE)
    import run
    run.main(['STARTUP'] + sys.argv[1:])
