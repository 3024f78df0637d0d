"""A/B: eager gradients and compiled tapes of this checkout against another revision, in
one process.

    python benchmarks/ab.py REV [W1 W3 W4a W4b] [--rounds N] [--cold N]

``REV``'s ``tracked`` package is extracted (``git archive``) to a temporary folder
and imported under another name beside this checkout's, so both compile the same
workloads and are timed in interleaved rounds (``common.interleaved_us``): the
machine's drift hits both alike.  Each row gives the median µs per call of a
compiled tape called with ``out=`` and with the default (allocating) call, for A
(``REV``) and B (this checkout), and B / A; the ``eager`` row times ``tr.withgradient``
of the same function (the eager tape).  ``--cold N`` also times N first
compiles of W1 per side in fresh processes with empty disk caches, alternating
(until the compiled kernels are in use, for a side that compiles in the background).
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMBA_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)          # this checkout's tracked, not an installed one

from common import fix_malloc, interleaved_us  # noqa: E402

MALLOC_FIXED = fix_malloc()

import numpy as np  # noqa: E402

import compiled as W  # noqa: E402  (the workloads of benchmarks/compiled.py)


def extract(rev, dest):
    """``rev``'s tracked package, unpacked under ``dest``; returns its folder."""
    archive = subprocess.run(['git', '-C', ROOT, 'archive', rev, 'tracked'], check=True,
                             capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', dest], input=archive, check=True)
    return os.path.join(dest, 'tracked')


def import_as(name, folder):
    """Import the package in ``folder`` as ``name`` (its imports are relative)."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, '__init__.py'), submodule_search_locations=[folder])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def workloads(wanted):
    """{name: (function, args, wrt)} of the compiled workloads asked for."""
    rng = np.random.default_rng(0)
    out = {}
    if 'W1' in wanted:
        out['W1'] = (W.w1_f, (rng.standard_normal(10),), None)
    if 'W3' in wanted:
        out['W3 n=100'] = (W.w3_f, (rng.standard_normal(100),), None)
        out['W3 n=1e5'] = (W.w3_f, (rng.standard_normal(100_000),), None)
    if 'W4A' in wanted:
        out['W4a'] = (W.w4a_f, W.w4a_init(rng), (0,))
    if 'W4B' in wanted:
        out['W4b'] = (W.w4b_f, (rng.standard_normal(100) * 0.1, rng.standard_normal((50, 100)),
                                np.sign(rng.standard_normal(50))), (0,))
    return out


def calls(tr, f, args, wrt):
    """(call with out=, default call) of ``f``'s compiled tape under package ``tr``."""
    ctape = tr.compile(tr.GradientTape(f, *args, wrt=wrt))
    getattr(ctape, 'wait', lambda: None)()       # compiling in the background (issue 15 on)
    g = ctape.gradient(*args)
    return (lambda: ctape.withgradient(*args, out=g)), (lambda: ctape.withgradient(*args))


def eager(tr, f, args, wrt):
    """``tr.withgradient`` of ``f`` on the eager tape (in the arguments ``wrt``)."""
    if wrt is None:
        return lambda: tr.withgradient(f, *args)
    fixed = list(args)

    def g(*xs):
        full = list(fixed)
        for i, x in zip(wrt, xs):
            full[i] = x
        return f(*full)
    return lambda: tr.withgradient(g, *[args[i] for i in wrt])


_COLD = r'''
import sys, time
sys.path.insert(0, {bench!r})
sys.path.insert(0, {pkg!r})
import numpy as np
import numba  # noqa: F401  (import time is not compile time)
import tracked as tr
assert tr.__file__.startswith({pkg!r}), tr.__file__
from compiled import w1_f
tape = tr.GradientTape(w1_f, np.random.default_rng(0).standard_normal(10))
t0 = time.perf_counter()
ct = tr.compile(tape)
getattr(ct, 'wait', lambda: None)()
print(time.perf_counter() - t0)
'''


def cold(pkg_parent, n):
    """``n`` first compiles of W1 with ``pkg_parent``'s tracked, each with an empty cache."""
    out = []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, TRACKED_CACHE_DIR=d)
            r = subprocess.run([sys.executable, '-c', _COLD.format(bench=HERE, pkg=pkg_parent)],
                               env=env, capture_output=True, text=True, check=True, cwd=d)
            out.append(float(r.stdout.strip().splitlines()[-1]))
    return out


def main(argv):
    rev = argv[0]
    rounds = int(argv[argv.index('--rounds') + 1]) if '--rounds' in argv else 9
    n_cold = int(argv[argv.index('--cold') + 1]) if '--cold' in argv else 0
    names = [a.upper() for a in argv[1:] if a.startswith(('W', 'w'))] or ['W1', 'W3', 'W4A',
                                                                             'W4B']
    import tracked as b
    with tempfile.TemporaryDirectory() as tmp:
        a = import_as('tracked_ab', extract(rev, tmp))
        print(f'A = {rev}, B = {os.path.dirname(b.__file__)}; malloc fixed: {MALLOC_FIXED}; '
              f'{rounds} interleaved rounds')
        print(f'{"workload":<10} {"call":<8} {"A µs":>9} {"B µs":>9} {"B/A":>6}')
        for name, (f, args, wrt) in workloads(names).items():
            a_out, a_def = calls(a, f, args, wrt)
            b_out, b_def = calls(b, f, args, wrt)
            t = interleaved_us({'A out': a_out, 'B out': b_out, 'A def': a_def, 'B def': b_def,
                                'A eager': eager(a, f, args, wrt),
                                'B eager': eager(b, f, args, wrt)}, rounds=rounds)
            for call in ('out', 'def', 'eager'):
                ta, tb = t[f'A {call}'], t[f'B {call}']
                print(f'{name:<10} {call:<8} {ta:>9.2f} {tb:>9.2f} {tb / ta:>6.3f}', flush=True)
        if n_cold:
            ta, tb = [], []
            for _ in range(n_cold):
                ta += cold(tmp, 1)
                tb += cold(os.path.dirname(os.path.dirname(b.__file__)), 1)
            print(f'W1 cold compile (s): A median {np.median(ta):.2f} {np.round(ta, 2).tolist()}, '
                  f'B median {np.median(tb):.2f} {np.round(tb, 2).tolist()}')


if __name__ == '__main__':
    main(sys.argv[1:])
