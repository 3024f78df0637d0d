"""Shared benchmark plumbing: timing medians, malloc settings, optional peers.

Every workload module exposes ``run(report)`` and calls ``report(workload, impl, us)``
once per implementation; ``run.py`` prints the table with ratios measured in the same
run (the machine is noisy: absolute times are not comparable between runs).
"""
import ctypes
import importlib
import time

import numpy as np


def fix_malloc():
    """Stop glibc from returning ~1 MB NumPy temporaries to the OS on every call.

    Without this, large temporaries page-fault on each call (a 7x swing measured on
    W3 with n=1e5) depending on which libraries happened to be imported.
    """
    try:
        libc = ctypes.CDLL('libc.so.6')
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    ok = libc.mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024)
    ok &= libc.mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024)
    return bool(ok)


def median_us(fn, min_time=0.3, max_repeats=2000, warmup=3):
    """Median wall time of ``fn()`` in microseconds."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_repeats and (time.perf_counter() - start < min_time or len(times) < 7):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def interleaved_us(fns, rounds=9, min_time=0.04, warmup=3):
    """Median µs per call of each of ``fns`` ({label: fn}), measured in interleaved rounds.

    A round times every function in turn for ``min_time``; a function's figure is the
    median over rounds of its per-round medians.  This machine's speed drifts by up to
    2x over seconds: measured one after the other, a ratio between two functions took
    that drift (W3's ranged 1.24-2.0 across runs); interleaved, both see it alike.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    per_round = {label: [] for label in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            per_round[label].append(median_us(fn, min_time=min_time, warmup=0))
    return {label: float(np.median(v)) for label, v in per_round.items()}


def peer(name):
    """The peer module if installed, else None (peers are optional extras)."""
    try:
        mod = importlib.import_module(name)
    except Exception:
        return None
    if name == 'torch':
        mod.set_num_threads(1)
    if name == 'jax':
        mod.config.update('jax_enable_x64', True)
    return mod
