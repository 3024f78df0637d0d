"""What the mutation check costs: eager W1 and W3 with and without it.

    python benchmarks/mutation_check.py                  # interleaved timing (A/B)
    python benchmarks/mutation_check.py --callgrind      # instructions per call

Tape entries that save a leaf's value or a constant array make it read-only while
they live (``tracked/tape.py``, "Arrays saved by entries"); "off" replaces that step
(``tape.protect``, which every path that protects calls) with nothing.  Timing
interleaves the two in rounds (``common.interleaved_us``), but a loaded machine swamps
a difference of a few per cent; ``--callgrind`` counts instructions instead, which load
does not change: each variant runs in ``valgrind --tool=callgrind``, which counts only
the measured calls (a helper compiled with gcc from valgrind's ``callgrind.h`` toggles
the collection around them).  Slow: a few minutes per run.
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))    # this checkout's tracked, not an installed one

import numpy as np  # noqa: E402

import tracked as tr  # noqa: E402
from tracked import tape  # noqa: E402
from common import fix_malloc, interleaved_us  # noqa: E402
from eager import W1_OPS, w1_f, w3_f  # noqa: E402

PROTECT = tape.protect
WORKLOADS = ('W1', 'W3 n=100', 'W3 n=1e5')
CALLS = {'W1': 20, 'W3 n=100': 200, 'W3 n=1e5': 10}      # measured calls, for callgrind


def workload(name):
    """``name``'s eager gradient call, on the benchmark plan's inputs."""
    rng = np.random.default_rng(0)
    if name == 'W1':
        x1 = rng.standard_normal(10)

        def call():
            x = tr.param(x1)
            tr.back(w1_f(x))
            return x.grad
        return call
    x3 = rng.standard_normal(100 if name == 'W3 n=100' else 100_000)
    return lambda: tr.withgradient(w3_f, x3)


def switched(protect, call):
    def run():
        tape.protect = PROTECT if protect else _nothing
        return call()
    return run


def _nothing(*args):
    pass


def timing(rounds):
    fix_malloc()
    for name in WORKLOADS:
        call = workload(name)
        us = interleaved_us({'on': switched(True, call), 'off': switched(False, call)},
                            rounds=rounds)
        per = W1_OPS if name == 'W1' else 1
        print(f'  {name:10} with {us["on"] / per:9.2f} µs, without {us["off"] / per:9.2f} µs'
              f'{" per op" if per > 1 else ""}: {us["on"] / us["off"] - 1:+.1%}')


TOGGLE = '#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n'


def count(name, protect, calls, helper):
    """Instructions callgrind counts in ``calls`` calls of workload ``name``."""
    cmd = ['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null',
           '--collect-atstart=no', sys.executable, __file__, '--child', name,
           'on' if protect else 'off', str(calls), helper]
    err = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONHASHSEED='0')).stderr
    return int(re.search(r'Collected : (\d+)', err).group(1))


def callgrind(names, calls):
    with tempfile.TemporaryDirectory() as tmp:
        helper = os.path.join(tmp, 'toggle.so')
        with open(os.path.join(tmp, 'toggle.c'), 'w') as fh:
            fh.write(TOGGLE)
        subprocess.run(['gcc', '-shared', '-fPIC', '-O1', '-o', helper, fh.name], check=True)
        for name in names:
            per = {protect: count(name, protect, calls[name], helper) / calls[name]
                   for protect in (True, False)}
            ops = W1_OPS if name == 'W1' else 1
            print(f'  {name:10} with {per[True] / ops:12,.0f}, without {per[False] / ops:12,.0f} '
                  f'instructions per {"op" if ops > 1 else "call"}: '
                  f'{per[True] / per[False] - 1:+.2%}')


def child(name, protect, calls, helper):
    call = switched(protect == 'on', workload(name))
    for _ in range(5):
        call()
    toggle = ctypes.CDLL(helper).toggle
    toggle()
    for _ in range(int(calls)):
        call()
    toggle()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--callgrind', action='store_true')
    p.add_argument('--rounds', type=int, default=9, help='interleaved timing rounds')
    p.add_argument('--only', nargs='*', default=list(WORKLOADS), help='workloads')
    p.add_argument('--child', nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(*args.child)
    if args.callgrind:
        callgrind(args.only, CALLS)
    else:
        timing(args.rounds)


if __name__ == '__main__':
    main()
