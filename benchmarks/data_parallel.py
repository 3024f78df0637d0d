"""tracked.distributed's training against one process: the overhead of a step, where two
workers overtake one process, the speed-up, and the constants of the scaling model.

    python benchmarks/data_parallel.py                      # 2 workers in their own sessions
    python benchmarks/data_parallel.py --local              # a LocalCluster in this session
    python benchmarks/data_parallel.py --scheduler tcp://HOST:PORT   # a running cluster
    python benchmarks/data_parallel.py --scaling            # fit on 1, 2, 4 workers

Every figure is a time per step of ``td.train`` (replicas on the workers) against
``tr.train`` on all the records in one process, the median over interleaved rounds;
a step of ``td.train`` is timed as the difference between a run of 2 s steps and
one of s steps, over s, so the replicas' start-up is left out (and printed):

- overhead: a 2-16-2 classifier on 400 records in 2 shards: the time of a step on
  the workers less that of one process;
- crossover: a mixture of 6 Gaussians' negative log-likelihood on more and more
  records in 2 shards (one per worker); where 2 workers overtake one process
  (interpolated in log-log);
- speed-up at ``--records`` (1.2 million).

Every process runs with one thread per library and ``common.fix_malloc``.  On a shared
machine whose cores are busy, Linux divides the CPU between sessions (autogroup), so
workers started in this session (``--local``) share its one share; by default the
scheduler and the workers are started here with ``setsid`` (each in its own session),
as separate machines would be.  ``--scaling`` times steps of the mixture on 2 000,
50 000 and 200 000 records with 1, 2 and 4 workers (one shard each; 3 rounds, few
steps: about a minute), fits the scaling model of docs/guide/scaling.md to them by
least squares (of the relative error), measures the compute per record of the models
the page predicts for, and writes it all to benchmarks/scaling.json, which the page
and notebook 6 read.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)    # this checkout's tracked, not an installed one

from common import fix_malloc  # noqa: E402

# benchmarks/sparse.py would shadow the sparse package that dask.array imports
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import dask  # noqa: E402
import numpy as np  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

import tracked as tr  # noqa: E402
import tracked.distributed as td  # noqa: E402


def classify(m, x, y):
    return tr.logitcrossentropy(m(x), y)


def nll(model, x):
    logw = tr.logsoftmax(model['logits'])
    z = (x[:, None] - model['mu']) * np.exp(-model['log_sigma'])
    logp = logw - model['log_sigma'] - 0.5 * z ** 2
    return 0.5 * np.log(2 * np.pi) - np.mean(tr.logsumexp(logp, axis=1))


def mixture():
    return {'logits': np.zeros(6), 'mu': np.linspace(-3, 3, 6), 'log_sigma': np.zeros(6)}


def step_ms(client, loss, model_fn, data, nshards, steps, rounds):
    """``(one process, workers, the workers' start-up)`` in ms per step, medians over
    interleaved rounds."""
    x = data
    args = x if isinstance(x, tuple) else (x,)
    shards = td.place(client, [tuple(a[i::nshards] for a in args) for i in range(nshards)])
    one, two, setup = [], [], []

    def local(s):
        model = model_fn()
        state = tr.setup(tr.Descent(1e-6), model)
        t = time.perf_counter()
        tr.train(loss, model, [args] * s, state, progress=False)
        return time.perf_counter() - t

    def workers(s):
        model = model_fn()
        state = tr.setup(tr.Descent(1e-6), model)
        t = time.perf_counter()
        td.train(client, loss, model, shards, state, steps=s, reduce='mean', progress=False)
        return time.perf_counter() - t
    workers(2)                                          # warm up: imports, first replicas
    local(2)
    for _ in range(rounds):
        a, b = local(steps), local(2 * steps)
        one.append((b - a) / steps)
        c, d = workers(steps), workers(2 * steps)
        two.append((d - c) / steps)
        setup.append(c - steps * two[-1])
    med = lambda v: 1e3 * float(np.median(v))           # noqa: E731
    return med(one), med(two), med(setup)


def overhead(client, rounds):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 2))
    y = (x[:, 0] > 0).astype(int)
    model = lambda: tr.Chain(tr.Dense(2, 16, tr.relu, rng=1), tr.Dense(16, 2, rng=2))  # noqa: E731
    one, two, setup = step_ms(client, classify, model, (x, y), 2, 100, rounds)
    print('a step of a 2-16-2 classifier on 400 records in 2 shards:')
    print(f'  one process {one:6.2f} ms, {len(client.nthreads())} workers {two:6.2f} ms: '
          f'overhead {two - one:5.2f} ms per step (start-up of the replicas {setup:.0f} ms)')
    return two - one


SHARDS = 2          # one per worker, as DistributedDataParallel splits a batch


def crossover(client, sizes, rounds):
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        x = rng.standard_normal(n)
        steps = max(5, min(100, int(3e6 / n)))
        one, two, _ = step_ms(client, nll, mixture, x, SHARDS, steps, rounds)
        rows.append((n, one, two))
        print(f'  {n:>9,} records: one process {one:8.2f} ms, workers {two:8.2f} ms, '
              f'speed-up {one / two:.2f}x')
    return rows


def overtake(rows):
    """The record count where the workers' time crosses one process's (log-log)."""
    for (n0, a0, b0), (n1, a1, b1) in zip(rows, rows[1:]):
        r0, r1 = np.log(a0 / b0), np.log(a1 / b1)
        if r0 <= 0 < r1:
            return float(np.exp(np.log(n0) + (np.log(n1) - np.log(n0)) * -r0 / (r1 - r0)))
    return rows[0][0] if np.log(rows[0][1] / rows[0][2]) > 0 else None


def fit(points, cores):
    """The constants of T(N, n) = c n / min(N, cores) + N l + F, none negative, by least
    squares of the relative error over the workers' step times ``points``
    [(N, n, seconds)]: ``(c, l, F, residuals in seconds)``.  Relative: the times span
    30x, and plain least squares let the largest (the noisiest on a busy machine) set l
    and F alone."""
    from scipy.optimize import nnls
    # (cores None: each point's first entry is already the cores its workers get, and
    # its last the number of workers)
    A = np.array([[p[1] / (p[0] if cores is None else min(p[0], cores)),
                   p[-1] if cores is None else p[0], 1.0] for p in points])
    b = np.array([p[2] for p in points])
    (c, lat, F), _ = nnls(A / b[:, None], np.ones(len(b)))
    return float(c), float(lat), float(F), (b - A @ np.array([c, lat, F])).tolist()


def fit_shared(points, cores):
    """The same fit with the cores the workers get on a machine shared with ``L`` busy
    sessions (Linux gives each session an equal share: N workers in sessions of their
    own get ``min(N, cores N / (N + L))``), ``L`` chosen on a grid of tenths:
    ``(L, c, l, F, residuals)``."""
    best = None
    for L in np.arange(0.0, 8.01, 0.1):
        share = lambda N: min(N, cores * N / (N + L))         # noqa: E731
        c, lat, F, res = fit([(share(N), n, t, N) for N, n, t in points], None)
        err = float(np.sum((np.array(res) / [t for *_, t in points]) ** 2))
        if best is None or err < best[0]:
            best = (err, float(L), c, lat, F, res)
    return best[1:]


def predict(c_n, B, N, lat, F, beta=10e9 / 8):
    """The time of a step on N machines of ``c_n`` seconds of compute in one process, for
    ``B`` bytes of gradient on a link of ``beta`` bytes/s: c n / N + N (l + 2B/beta) + F."""
    return c_n / N + N * (lat + 2 * B / beta) + F


def per_record_s(model, n, d_in, d_out, rounds=5):
    """Seconds per record of a gradient of a classifier ``model`` in one process."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d_in))
    y = tr.onehot(rng.integers(0, d_out, n), d_out)
    times = []
    for _ in range(rounds + 1):
        t = time.perf_counter()
        tr.withgradient(lambda m: classify(m, x, y), model)
        times.append(time.perf_counter() - t)
    return float(np.median(times[1:])) / n


SCALING_SIZES = (2_000, 50_000, 200_000)


def scaling(args):
    """Step times on 1, 2 and 4 workers (one shard each), the fit, and the compute of the
    models the page predicts for; written to benchmarks/scaling.json."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal(max(SCALING_SIZES))
    points, measured = [], {}
    started = time.time()
    for workers in (1, 2, 4):
        client, close = connect(args, workers)
        try:
            print(f'{workers} worker(s):')
            rows = []
            for n in SCALING_SIZES:
                steps = max(6, min(30, int(1.2e6 / n)))
                one, many, _ = step_ms(client, nll, mixture, data[:n], workers, steps,
                                       args.rounds)
                rows.append([n, one, many])
                points.append((workers, n, many / 1e3))
                print(f'  {n:>9,} records: one process {one:8.2f} ms, {workers} worker(s) '
                      f'{many:8.2f} ms')
            measured[str(workers)] = rows
        finally:
            close()
    cores = os.cpu_count()
    c, lat, F, residuals = fit(points, cores)
    c_one = float(np.median([one / n for rows in measured.values()
                             for n, one, _ in rows if n >= 50_000])) / 1e3
    models = {
        'demo MLP 64-32-10': (tr.Chain(tr.Dense(64, 32, tr.relu, rng=1),
                                       tr.Dense(32, 10, rng=2)), 20_000, 64, 10, 1_000_000),
        'MLP 784-1024-256-10': (tr.Chain(tr.Dense(784, 1024, tr.relu, rng=1),
                                         tr.Dense(1024, 256, tr.relu, rng=2),
                                         tr.Dense(256, 10, rng=3)), 1_000, 784, 10, 60_000),
    }
    L, c2, lat2, F2, residuals2 = fit_shared(points, cores)
    predictions = {}
    for name, (model, n, d_in, d_out, records) in models.items():
        params = sum(a.size for a in tr.tree_util.flatten(model)[0] if hasattr(a, 'size'))
        per = per_record_s(model, n, d_in, d_out)
        c_n = per * records
        predictions[name] = {
            'parameters': int(params), 'records': records, 'per_record_s': per,
            'one_process_s': c_n,
            'speedup': {str(N): c_n / predict(c_n, 8 * params, N, lat, F)
                        for N in (2, 4, 8, 16, 32, 64)}}
        print(f'{name} ({params:,} parameters) on {records:,} records: one process '
              f'{1e3 * c_n:.0f} ms; predicted speed-up on 10 Gb/s: ' + ', '.join(
                  f'N={N} {v:.1f}x' for N, v in predictions[name]['speedup'].items()))
    load = os.getloadavg()
    out = {'model': 'T(N, n) = c n / min(N, cores) + N l + F',
           'c_per_record_s': c, 'per_replica_s': lat, 'fixed_s': F, 'cores': cores,
           'c_one_process_per_record_s': c_one,
           'residuals_ms': {f'{N} workers, {n} records': 1e3 * r
                            for (N, n, _), r in zip(points, residuals)},
           'shared_machine_fit': {
               'model': 'T(N, n) = c n / min(N, cores N / (N + L)) + N l + F',
               'busy_sessions_L': L, 'c_per_record_s': c2, 'per_replica_s': lat2,
               'fixed_s': F2, 'residuals_ms': [1e3 * r for r in residuals2]},
           'measured_ms': measured, 'sizes': list(SCALING_SIZES),
           'predictions_10Gbps': predictions,
           'load_average': [round(v, 2) for v in load],
           'seconds': round(time.time() - started), 'rounds': args.rounds,
           'date': time.strftime('%Y-%m-%d')}
    print(f'fitted: c = {1e6 * c:.3f} us per record (one process: {1e6 * c_one:.3f}), '
          f'l = {1e3 * lat:.2f} ms per replica, F = {1e3 * F:.2f} ms; residuals (ms): ' +
          ', '.join(f'{1e3 * r:+.1f}' for r in residuals))
    print(f'with the cores a shared machine gives: L = {L:.1f} busy sessions, c = '
          f'{1e6 * c2:.3f} us, l = {1e3 * lat2:.2f} ms, F = {1e3 * F2:.2f} ms; residuals (ms): ' +
          ', '.join(f'{1e3 * r:+.1f}' for r in residuals2))
    print('load average (1, 5, 15 min):', ' '.join(f'{v:.1f}' for v in load),
          f'on {cores} cores; {out["seconds"]} s')
    with open(os.path.join(HERE, 'scaling.json'), 'w') as f:
        json.dump(out, f, indent=1)
        f.write('\n')


def start_own_sessions(workers):
    """A scheduler and ``workers`` single-threaded workers, each in a session of its own
    (``setsid``), importing this checkout; returns (address, processes)."""
    tmp = tempfile.mkdtemp()
    file = os.path.join(tmp, 'scheduler.json')
    env = dict(os.environ, PYTHONPATH=ROOT, MALLOC_TRIM_THRESHOLD_='1000000000',
               MALLOC_MMAP_THRESHOLD_='1000000000')
    procs = [subprocess.Popen([sys.executable, '-m', 'distributed.cli.dask_scheduler',
                                              '--scheduler-file', file, '--port', '0',
                                              '--dashboard-address', ':0'],
                              env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    while not os.path.exists(file):
        time.sleep(0.1)
    time.sleep(0.3)
    for _ in range(workers):
        procs.append(subprocess.Popen(
            [sys.executable, '-m', 'distributed.cli.dask_worker', '--scheduler-file', file,
                            '--nthreads', '1', '--no-nanny', '--dashboard-address', ':0'],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
    return file, procs


def connect(args, workers):
    """``(client, close)`` for the cluster ``args`` ask for."""
    if args.scheduler:
        client = Client(args.scheduler)
        return client, client.close
    if args.local:
        dask.config.set({'distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_': None})
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=':0')
        client = Client(cluster)
        return client, lambda: (client.close(), cluster.close())
    file, procs = start_own_sessions(workers)
    client = Client(scheduler_file=file)
    client.wait_for_workers(workers, timeout=60)

    def close():
        client.close()
        for p in procs[::-1]:
            p.terminate()
            p.wait()
    return client, close


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--scheduler', help='address of a running scheduler')
    parser.add_argument('--local', action='store_true', help='a LocalCluster in this session')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--records', type=int, default=1_200_000)
    parser.add_argument('--rounds', type=int, default=None,
                        help='interleaved rounds (5; 3 with --scaling)')
    parser.add_argument('--scaling', action='store_true',
                        help='fit the scaling model on 1, 2 and 4 workers')
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.scaling else 5
    print(f'malloc thresholds fixed: {fix_malloc()}; one thread per library')
    sizes = [2_000, 5_000, 10_000, 20_000, 50_000, 200_000]
    if args.scaling:
        scaling(args)
        return
    client, close = connect(args, args.workers)
    try:
        over = overhead(client, args.rounds)
        print(f'a step of a 6-Gaussian mixture in {SHARDS} shards, one process against '
              f'{len(client.nthreads())} workers:')
        rows = crossover(client, sizes + [args.records], args.rounds)
        at = overtake(rows[:-1])
        print(f'summary: overhead {over:.2f} ms per step; workers overtake one process at '
              f'{at:,.0f} records' if at else 'summary: no crossover in the sizes tried',
              f'; speed-up at {args.records:,} records {rows[-1][1] / rows[-1][2]:.2f}x')
        print('load average (1, 5, 15 min):', ' '.join(f'{v:.1f}' for v in os.getloadavg()),
              f'on {os.cpu_count()} cores')
    finally:
        close()


if __name__ == '__main__':
    main(sys.argv[1:])
