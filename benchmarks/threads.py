"""Threads sharing one compiled tape or one AutoCompiled: wrong gradients, crashes, calls/s.

    python benchmarks/threads.py [compiled] [auto] [--seconds 30] [--threads 8]

Each scenario runs in a child process (a crash is reported, not suffered).  The
child computes every thread's gradient single-threaded first, then starts the
threads, each calling on its own parameters for ``--seconds`` and comparing every
gradient with its reference bit for bit.  It prints a line of counts every second,
so that a child killed by a signal still reports what it saw before.

- compiled: ``tr.compile(tr.GradientTape(loss, W, x, y, wrt=(0,)), background=False)``,
  ``loss = sum((tanh(x @ W) - y) ** 2)``; each thread calls ``ct.gradient(W_k, x, y)``.
- auto: one ``tr.AutoCompiled()``, an MLP 4->16->3 (``tr.Chain`` of ``tr.Dense``) with
  a logit cross-entropy on one-hot labels; each thread calls
  ``tr.withgradient(loss, ad, model_k, x, y)``.

The printed line per scenario: wrong/total gradients, the largest relative error of
a wrong one, total calls per second over all threads, and how the child ended.
"""
import json
import os
import subprocess
import sys
import threading
import time

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # this checkout's tracked

import numpy as np  # noqa: E402


def compiled_scenario(n_threads, rng):
    """(call(k), reference(k)) for threads sharing one foreground-compiled tape."""
    import tracked as tr

    def loss(W, x, y):
        return np.sum((np.tanh(x @ W) - y) ** 2)
    x, y = rng.standard_normal((16, 8)), rng.standard_normal((16, 4))
    Ws = [rng.standard_normal((8, 4)) for _ in range(n_threads)]
    ct = tr.compile(tr.GradientTape(loss, Ws[0], x, y, wrt=(0,)), background=False)

    def call(k):
        return [ct.gradient(Ws[k], x, y)[0]]
    return call


def auto_scenario(n_threads, rng):
    """call(k) for threads sharing one AutoCompiled (compiled before the threads start)."""
    import tracked as tr

    def loss(m, x, y):
        return tr.logitcrossentropy(m(x), y)
    x = rng.standard_normal((32, 4))
    y = tr.onehot(np.arange(32) % 3, 3)
    models = [tr.Chain(tr.Dense(4, 16, tr.tanh, rng=10 + k), tr.Dense(16, 3, rng=50 + k))
              for k in range(n_threads)]
    ad = tr.AutoCompiled()
    for _ in range(3):                 # eager, then recorded: compiling in the background
        tr.withgradient(loss, ad, models[0], x, y)
    ad.wait()

    def call(k):
        g = tr.withgradient(loss, ad, models[k], x, y).grad[0]
        return [lay.weight for lay in g.layers] + [lay.bias for lay in g.layers]
    return call


SCENARIOS = {'compiled': compiled_scenario, 'auto': auto_scenario}


def child(name, seconds, n_threads):
    """Run one scenario; print a JSON line of counts every second and at the end."""
    call = SCENARIOS[name](n_threads, np.random.default_rng(0))
    refs = [[g.copy() for g in call(k)] for k in range(n_threads)]
    counts = [[0, 0, 0.0] for _ in range(n_threads)]      # calls, wrong, largest rel. error
    stop = threading.Event()

    def work(k):
        c, ref = counts[k], refs[k]
        while not stop.is_set():
            got = call(k)
            c[0] += 1
            if not all(np.array_equal(a, b) for a, b in zip(got, ref)):
                c[1] += 1
                with np.errstate(all='ignore'):
                    err = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) or 1.0))
                              for a, b in zip(got, ref))
                c[2] = max(c[2], err if err == err else np.inf)

    def report(final=False):
        print(json.dumps({'calls': sum(c[0] for c in counts), 'wrong': sum(c[1] for c in counts),
                          'err': max(c[2] for c in counts), 'time': time.perf_counter() - t0,
                          'final': final}), flush=True)
    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(n_threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    while time.perf_counter() - t0 < seconds:
        time.sleep(1.0)
        report()
    stop.set()
    for t in threads:
        t.join()
    report(final=True)


def run(name, seconds, n_threads):
    """Run scenario ``name`` in a child process; print its summary line."""
    proc = subprocess.Popen([sys.executable, __file__, '--child', name, '--seconds', str(seconds),
                             '--threads', str(n_threads)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    last = None
    for line in out.splitlines():
        if line.startswith('{'):
            last = json.loads(line)
    if proc.returncode == 0 and last is not None and last['final']:
        end = 'finished'
    else:
        tail = ' / '.join(err.strip().splitlines()[-2:])
        end = f'died (exit {proc.returncode}{": " + tail if tail else ""})'
    if last is None:
        print(f'{name:<9} no counts; {end}')
        return
    print(f'{name:<9} {n_threads} threads: wrong {last["wrong"]} of {last["calls"]} gradients, '
          f'largest relative error {last["err"]:.3g}, {last["calls"] / last["time"]:.0f} '
          f'calls/s over {last["time"]:.1f} s; {end}', flush=True)


def main(argv):
    seconds = float(argv[argv.index('--seconds') + 1]) if '--seconds' in argv else 30.0
    n_threads = int(argv[argv.index('--threads') + 1]) if '--threads' in argv else 8
    if '--child' in argv:
        child(argv[argv.index('--child') + 1], seconds, n_threads)
        return
    names = [a for a in argv if a in SCENARIOS] or list(SCENARIOS)
    for name in names:
        run(name, seconds, n_threads)


if __name__ == '__main__':
    main(sys.argv[1:])
