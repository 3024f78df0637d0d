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
as separate machines would be.  ``--scaling`` fits the scaling model of
docs/guide/scaling.md on 1, 2 and 4 workers and writes its constants to
benchmarks/scaling.json, which the page and notebook 6 read.
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


def fit(rows_by_n, one_rows):
    """The constants of T(N, n) = c n / min(N, cores) + F + N l, by least squares:
    c from one process, F and l from the workers' times less their compute."""
    c = float(np.median([one / n for n, one, _ in one_rows if n >= 100_000])) / 1e3   # s
    cores = os.cpu_count()
    A, b = [], []
    for workers, rows in rows_by_n.items():
        for n, _, t in rows:
            A.append([1.0, workers])
            b.append(t / 1e3 - c * n / min(workers, cores))
    (F, lat), *_ = np.linalg.lstsq(np.array(A), np.array(b), rcond=None)
    return {'c_per_record_s': c, 'fixed_s': float(F), 'per_replica_s': float(lat),
            'cores': cores}


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
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--scaling', action='store_true',
                        help='fit the scaling model on 1, 2 and 4 workers')
    args = parser.parse_args(argv)
    print(f'malloc thresholds fixed: {fix_malloc()}; one thread per library')
    sizes = [2_000, 5_000, 10_000, 20_000, 50_000, 200_000]
    if args.scaling:
        by_n, ones = {}, []
        for workers in (1, 2, 4):
            client, close = connect(args, workers)
            try:
                print(f'{workers} worker(s):')
                rows = crossover(client, [1_000, 100_000, 300_000], args.rounds)
                by_n[workers] = rows
                ones += rows
            finally:
                close()
        consts = fit(by_n, ones)
        consts['measured'] = {str(k): v for k, v in by_n.items()}
        print('fitted:', json.dumps({k: v for k, v in consts.items() if k != 'measured'}))
        with open(os.path.join(HERE, 'scaling.json'), 'w') as f:
            json.dump(consts, f, indent=1)
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
