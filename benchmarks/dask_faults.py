"""tracked.distributed when workers die: the time from the fault to a result or an error.

    python benchmarks/dask_faults.py              # 5 runs of each case
    python benchmarks/dask_faults.py --runs 3

A LocalCluster of 2 worker processes (1 thread each; their nannies restart them)
trains a 3-16-3 classifier on 300 records in 4 shards, 3 Adam steps, and a loss on a
worker (tests/test_distributed_faults.py's ``Fault``) ends worker processes with
SIGKILL or ``os._exit``.  For each case, the median over the runs of the time from the
first death to ``td.train``'s return (recovered) or its error:

- every worker killed at once during the last step, with the eager tape, with a
  recorded ``tape=`` and with the shards as ``client.scatter``'s futures (an error:
  Dask cannot compute scattered data again);
- a shard whose loss ends its worker every time: ``ShardError`` once Dask's
  ``distributed.scheduler.allowed-failures`` (3) + 1 workers died running it.

tracked 0.2.0 waited forever in the eager and the last case (the placed shards' tasks
kept in Dask's ``no-worker`` state) and raised ``FutureCancelledError: ... already
forgotten`` in the other two (the scattered tape, the scattered shards).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))    # this checkout's tracked and its tests

import dask  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

import tracked.distributed as td  # noqa: E402
from tests.test_distributed_faults import Fault, _run, _worker_pids  # noqa: E402

CASES = {      # label: (Fault's arguments, _run's)
    'every worker killed, eager tape':
        (dict(action='kill', call=9), {}),
    'every worker killed, tape=':
        (dict(action='kill', call=9), dict(tape=True)),
    'every worker killed, scattered shards':
        (dict(action='kill', call=9), dict(scatter=True, raises=td.ShardError)),
    'a shard that kills its worker every time':
        (dict(action='exit', call=2, records=60, every=True), dict(raises=td.ShardError)),
}


def seconds(client, fault_kwargs, run_kwargs):
    """From the first death to the end of ``td.train``, in seconds."""
    client.wait_for_workers(2, timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        fault = Fault(tmp, pids=_worker_pids(client), **fault_kwargs)
        _run(client, fault, 3, **run_kwargs)
        end = time.time()
        return end - fault.happened


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=5)
    args = parser.parse_args(argv)
    # as tests/test_distributed_faults.py's cluster does, and why: a nanny kept whatever
    # the timing of the deaths, workers counted by the scheduler
    dask.config.set({'distributed.deploy.lost-worker-timeout': '1h'})
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=':0') as cluster, \
            Client(cluster.scheduler_address) as client:
        print(f'from the first death to the result, median of {args.runs} runs (min-max):')
        for label, (fault_kwargs, run_kwargs) in CASES.items():
            times = [seconds(client, fault_kwargs, run_kwargs) for _ in range(args.runs)]
            outcome = 'error' if 'raises' in run_kwargs else 'recovered'
            print(f'  {label:<42} {outcome:<9} {statistics.median(times):5.2f} s '
                  f'({min(times):.2f}-{max(times):.2f})')
    print('load average (1, 5, 15 min):', ' '.join(f'{v:.1f}' for v in os.getloadavg()),
          f'on {os.cpu_count()} cores')


if __name__ == '__main__':
    main(sys.argv[1:])
