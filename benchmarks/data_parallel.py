"""tracked.distributed against one process: the overhead of a step, and the speed-up.

    python benchmarks/data_parallel.py                          # a LocalCluster of 2 workers
    python benchmarks/data_parallel.py --scheduler tcp://HOST:PORT   # a running cluster

Two figures, each the median over interleaved rounds (``common.interleaved_us``):

- overhead: a small model (a 2-16-2 classifier, 400 records in 2 shards), one
  gradient with ``tr.withgradient`` on all the records and ``td.withgradient`` on the
  shards, and one ``td.train`` step, without and with ``timeout=``; the difference is
  the cost of going through Dask.
- speed-up: a mixture of 6 Gaussians' negative log-likelihood on N records (``--records``,
  default 200,000) in 8 shards, one process against the workers.

Every process runs with one thread per library and ``common.fix_malloc``, the client
and the workers alike.  The machine's load average is printed: on a shared machine
whose cores are busy, Linux divides the CPU between sessions (autogroup), so workers
started in this session (a LocalCluster) share its one share; workers started in their
own sessions get theirs, as separate machines would::

    export PYTHONPATH=$PWD               # the workers import this checkout
    setsid dask scheduler --scheduler-file /tmp/s.json &
    setsid dask worker --scheduler-file /tmp/s.json --nthreads 1 --no-nanny &   # twice
    python benchmarks/data_parallel.py --scheduler tcp://HOST:8786
"""
import argparse
import os
import sys

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))    # this checkout's tracked, not an installed one

from common import fix_malloc, interleaved_us  # noqa: E402

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


def overhead(client, rounds):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 2))
    y = (x[:, 0] > 0).astype(int)
    model = tr.Chain(tr.Dense(2, 16, tr.relu, rng=1), tr.Dense(16, 2, rng=2))
    shards = td.place(client, [(x[i::2], y[i::2]) for i in range(2)])
    state = tr.setup(tr.Descent(1e-6), model)
    us = interleaved_us({
        'one process': lambda: tr.withgradient(lambda m: classify(m, x, y), model),
        'td.withgradient': lambda: td.withgradient(client, classify, model, shards,
                                                   reduce='mean'),
        'td.train, one step': lambda: td.train(client, classify, model, shards, state,
                                               reduce='mean', progress=False),
        'the same, timeout=': lambda: td.train(client, classify, model, shards, state,
                                               reduce='mean', progress=False, timeout=60),
    }, rounds=rounds, min_time=0.3)
    print('overhead of a step, a 2-16-2 classifier on 400 records in 2 shards:')
    for label, t in us.items():
        print(f'  {label:<20} {t / 1e3:8.2f} ms')


def speedup(client, n, rounds):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    model = {'logits': np.zeros(6), 'mu': np.linspace(-3, 3, 6), 'log_sigma': np.zeros(6)}
    shards = td.place(client, [(x[i::8],) for i in range(8)])
    us = interleaved_us({
        'one process': lambda: tr.withgradient(lambda m: nll(m, x), model),
        'workers': lambda: td.withgradient(client, nll, model, shards, reduce='mean'),
    }, rounds=rounds, min_time=1.0, warmup=1)
    one, two = us['one process'], us['workers']
    print(f'one gradient of a 6-Gaussian mixture on {n:,} records in 8 shards:')
    print(f'  one process {one / 1e3:8.1f} ms, {len(client.nthreads())} workers '
          f'{two / 1e3:8.1f} ms: speed-up {one / two:.2f}x')


def _worker_setup(here):
    """``fix_malloc`` in a worker (sent by value: the workers need not see benchmarks/)."""
    sys.path.insert(0, here)
    from common import fix_malloc
    return fix_malloc()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--scheduler', help='address of a running scheduler')
    parser.add_argument('--workers', type=int, default=2, help='LocalCluster workers')
    parser.add_argument('--records', type=int, default=200_000)
    parser.add_argument('--rounds', type=int, default=7)
    args = parser.parse_args(argv)
    print(f'malloc thresholds fixed: {fix_malloc()}; one thread per library')
    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        # glibc's own thresholds in the workers too (Dask sets MALLOC_TRIM_THRESHOLD_)
        dask.config.set({'distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_': None})
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                               dashboard_address=':0')
        client = Client(cluster)
    client.run(_worker_setup, HERE)
    try:
        overhead(client, args.rounds)
        speedup(client, args.records, args.rounds)
        print('load average (1, 5, 15 min):', ' '.join(f'{v:.1f}' for v in os.getloadavg()),
              f'on {os.cpu_count()} cores')
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


if __name__ == '__main__':
    main(sys.argv[1:])
