"""Where the time of a small ``td.train`` step goes, and whether the replicas' methods
should run on the worker's event loop (``separate_thread=False``) or in its actor
thread (Dask's default).

    python benchmarks/step_overhead.py                  # 2 workers in their own sessions
    python benchmarks/step_overhead.py --local          # a LocalCluster in this session

The model is data_parallel.py's overhead case (a 2-16-2 classifier on 400 records in
2 shards).  A/B: the two ways alternate in each round, a step's time is that of a run
of 2s steps less one of s steps, over s; medians over the rounds.  Profile: time
stamps around each part of a step, on the client (its own work, the hop to its event
loop's thread, the round trip, the hop back) and on the workers (the handler of the
call, the replica's method), medians per step; and the CPU time of the client and of
each worker per step (a mean: the rest of a step's time is waiting).
"""
import argparse
import os
import sys
import time

import data_parallel as dp      # one thread per library, this checkout, no benchmarks/ on the path

import numpy as np  # noqa: E402

import tracked as tr  # noqa: E402
import tracked.distributed as td  # noqa: E402
from tracked.distributed import replicas as R  # noqa: E402


def classify(m, x, y):           # here: __main__'s functions travel by value
    return tr.logitcrossentropy(m(x), y)


def problem(client):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 2))
    y = (x[:, 0] > 0).astype(int)
    shards = td.place(client, [(x[i::2], y[i::2]) for i in range(2)])

    def model():
        return tr.Chain(tr.Dense(2, 16, tr.relu, rng=1), tr.Dense(16, 2, rng=2))
    return model, shards, (x, y)


def run(client, model_fn, shards, steps):
    model = model_fn()
    state = tr.setup(tr.Descent(1e-6), model)
    t = time.perf_counter()
    td.train(client, classify, model, shards, state, steps=steps, reduce='mean',
             progress=False)
    return time.perf_counter() - t


def ab(client, model_fn, shards, steps, rounds):
    times = {True: [], False: []}
    for mode in (True, False):                   # warm up both
        R.ON_LOOP_BELOW = 0.0 if mode else 0.02
        run(client, model_fn, shards, 5)
    for r in range(rounds):
        for mode in ((True, False) if r % 2 == 0 else (False, True)):
            R.ON_LOOP_BELOW = 0.0 if mode else 0.02
            a, b = run(client, model_fn, shards, steps), run(client, model_fn, shards, 2 * steps)
            times[mode].append(1e3 * (b - a) / steps)
    R.ON_LOOP_BELOW = 0.02
    return times


def _patch_worker(dask_worker):
    """Time the worker's actor_execute handler and the replica's step."""
    import time as _time
    from tracked.distributed import replicas as _R
    log = {'handler': [], 'method': []}
    dask_worker._tracked_profile = log
    handler = dask_worker.handlers['actor_execute']
    if getattr(handler, '_timed', False):
        dask_worker._tracked_profile = handler._log
        handler._log['handler'].clear()
        handler._log['method'].clear()
        return
    step = _R.Replica.step

    async def timed(**kw):
        t = _time.perf_counter()
        r = await handler(**kw)
        log['handler'].append(_time.perf_counter() - t)
        return r
    timed._timed, timed._log = True, log

    def timed_step(self, *a, **k):
        t = _time.perf_counter()
        r = step(self, *a, **k)
        log['method'].append(_time.perf_counter() - t)
        return r
    dask_worker.handlers['actor_execute'] = timed
    _R.Replica.step = timed_step


def _collect(dask_worker):
    return dask_worker._tracked_profile


def profile(client, model_fn, shards, steps):
    client.run(_patch_worker)
    stamps = []
    call_all, call = R._call_all, R.Replicas.call

    async def timed_call_all(*a, **k):
        t0 = time.perf_counter()
        out = await call_all(*a, **k)
        stamps[-1]['loop'] = (t0, time.perf_counter())
        return out

    def timed_call(self, *a, **k):
        stamps.append({'enter': time.perf_counter()})
        out = call(self, *a, **k)
        stamps[-1]['exit'] = time.perf_counter()
        return out
    R._call_all, R.Replicas.call = timed_call_all, timed_call
    cpu0, wcpu0 = time.process_time(), client.run(time.process_time)
    try:
        total = run(client, model_fn, shards, steps)
    finally:
        R._call_all, R.Replicas.call = call_all, call
    cpu, wcpu = time.process_time() - cpu0, client.run(time.process_time)
    s = [x for x in stamps[1:] if 'loop' in x]          # the first makes the replicas
    med = lambda v: 1e3 * float(np.median(v))            # noqa: E731
    gaps = [b['enter'] - a['exit'] for a, b in zip(s, s[1:])]
    out = {
        'step': med([b['enter'] - a['enter'] for a, b in zip(s, s[1:])]),
        'client between calls': med(gaps),
        'hop to the loop': med([x['loop'][0] - x['enter'] for x in s]),
        'round trip (loop)': med([x['loop'][1] - x['loop'][0] for x in s]),
        'hop back': med([x['exit'] - x['loop'][1] for x in s]),
        'run (whole)': 1e3 * total / steps,
    }
    logs = client.run(_collect)
    handler = [t for log in logs.values() for t in log['handler'][1:]]
    method = [t for log in logs.values() for t in log['method'][1:]]
    out['worker handler'] = med(handler)
    out['worker method (compute)'] = med(method)
    out['client CPU (both threads)'] = 1e3 * cpu / steps
    out['CPU of each worker'] = 1e3 * float(np.mean([wcpu[w] - wcpu0[w] for w in wcpu])) / steps
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--scheduler')
    parser.add_argument('--local', action='store_true')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=7)
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--no-ab', action='store_true')
    args = parser.parse_args(argv)
    client, close = dp.connect(args, args.workers)
    try:
        model_fn, shards, (x, y) = problem(client)
        m = model_fn()
        one = np.median([_t(lambda: tr.withgradient(lambda m: classify(m, x, y), m))
                         for _ in range(50)])
        print(f'one process, a gradient on the 400 records: {1e3 * one:.2f} ms')
        if not args.no_ab:
            times = ab(client, model_fn, shards, args.steps, args.rounds)
            for mode, v in times.items():
                print(f'separate_thread={mode!s:5}: {np.median(v):6.2f} ms per step '
                      f'(rounds: {" ".join(f"{t:.2f}" for t in v)})')
        for mode in (True, False):
            R.ON_LOOP_BELOW = 0.0 if mode else 0.02
            prof = profile(client, model_fn, shards, 2 * args.steps)
            print(f'profile, separate_thread={mode}:')
            for k, v in prof.items():
                print(f'  {k:26} {v:6.3f} ms')
        R.ON_LOOP_BELOW = 0.02
        print('load average (1, 5, 15 min):', ' '.join(f'{v:.1f}' for v in os.getloadavg()),
              f'on {os.cpu_count()} cores')
    finally:
        close()


def _t(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


if __name__ == '__main__':
    main(sys.argv[1:])
