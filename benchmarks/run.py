"""Run the benchmark workloads of shared/BENCHMARKS.md and print ratios from one run.

    python benchmarks/run.py            # every workload
    python benchmarks/run.py W1 W3      # a selection (MLP or STARTUP: start-up only)

Each row: median µs per call, and the ratio to the workload's reference (the first
implementation reported: plain NumPy forward or hand-written gradient, as named).
Compiled tapes are reported with the default call and with ``out=``; start-up lines
(startup.py) give the first gradient and the cold and warm compile times.
"""
import os
import sys

# One thread per library, set before NumPy (and its BLAS) is first imported.
for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS'):
    os.environ.setdefault(_var, '1')
os.environ.setdefault('XLA_FLAGS',
                      '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# this checkout's tracked, not an installed one (an editable install points elsewhere)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import fix_malloc  # noqa: E402

MALLOC_FIXED = fix_malloc()

import importlib  # noqa: E402

MODULES = ['eager', 'hessian', 'forward', 'compiled', 'startup', 'sparse']


def main(argv):
    wanted = {a.upper() for a in argv}
    rows = []

    def report(workload, impl, us, note=''):
        if wanted and workload.split()[0].upper() not in wanted:
            return
        rows.append((workload, impl, us, note))
        ref = next(r for r in rows if r[0] == workload)
        print(f'{workload:<14} {impl:<44} {us:>12.1f} µs   {us / ref[2]:>7.2f}x {ref[1]}'
              f'{"   " + note if note else ""}', flush=True)

    print(f'malloc thresholds fixed: {MALLOC_FIXED}; one thread per library')
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        mod.run(report, wanted)


if __name__ == '__main__':
    main(sys.argv[1:])
