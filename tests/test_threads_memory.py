"""Tape size, memory and threads: long tapes, flat memory in loops, per-thread tapes."""
import gc
import sys
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp
from tracked.compiled_tape.tiers import wait_all


def test_a_long_chain_of_scalar_operations():
    n = 2 * 10 ** 5          # far beyond any recursion limit; a million took 7 s and proved no more
    c = 1.0 + 1e-7
    x = tr.param(1.0)
    assert wait_all(600)     # earlier tests' background compilations allocate meanwhile
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    y = x
    for _ in range(n):
        y = y * c
    assert tr.data(y) == pytest.approx(c ** n, rel=1e-9)
    blocks_full = sys.getallocatedblocks()
    assert blocks_full - blocks_before > n       # the tape really holds every entry
    tr.back(y)                                   # iterative: no RecursionError
    assert x.grad == pytest.approx(c ** n, rel=1e-9)
    del y                                        # dropping it frees the entries
    gc.collect()
    assert sys.getallocatedblocks() - blocks_before < (blocks_full - blocks_before) / 100


def test_dropping_a_long_unused_tape():
    n = 3 * 10 ** 5
    x = tr.param(np.array([1.0, 2.0]))
    x0 = x[0]
    assert wait_all(600)
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    y = x0
    for _ in range(n):
        y = y + 1.0
    blocks_full = sys.getallocatedblocks()
    assert blocks_full - blocks_before > n
    del y
    gc.collect()
    assert sys.getallocatedblocks() - blocks_before < (blocks_full - blocks_before) / 100
    tr.back(np.sum(x * 2.0))
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


def test_long_tape_of_additions_gives_the_count():
    n = 10 ** 5
    x = tr.param(0.5)
    y = x
    for _ in range(n):
        y = y + x                                # x has n + 1 uses
    tr.back(y)
    assert x.grad == n + 1


def _traced_growth(step, warmup=200, iters=2000):
    """Bytes still allocated after ``iters`` calls of ``step`` beyond those after warm-up
    (once earlier tests' background compilations, which allocate too, are done)."""
    assert wait_all(600)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(warmup):
            step()
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(iters):
            step()
        gc.collect()
        end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return end - start


def test_memory_stays_flat_without_back():
    rng = np.random.default_rng(0)
    W = tr.param(rng.standard_normal((4, 3)))
    b = tr.param(np.zeros(4))
    x = rng.standard_normal(3)
    results = []

    def step():
        h = np.tanh(np.sum(W * x, axis=1) + b)
        results[:] = [np.sum(h * h - np.exp(-h) / 2.0)]   # keep only the latest loss
    growth = _traced_growth(step)
    assert growth < 20_000, f'memory grew by {growth} bytes over 2000 iterations'
    assert tr.istracked(results[0])


def test_memory_stays_flat_with_back():
    W = tr.param(np.ones((3, 3)))
    x = np.array([0.1, 0.2, 0.3])

    def step():
        tr.back(np.sum(np.sin(W * x) * 2.0))
    growth = _traced_growth(step)
    assert growth < 20_000, f'memory grew by {growth} bytes over 2000 iterations'
    np.testing.assert_allclose(W.grad, 2200 * 2 * np.cos(x) * x * np.ones((3, 1)), rtol=1e-10)


def test_a_loss_kept_after_back_does_not_keep_its_graph():
    x = tr.param(np.arange(1000.0) / 1000.0)
    h = np.exp(x)
    inner = weakref.ref(h.data)
    loss = np.sum(np.sin(h) * 2.0)
    del h
    gc.collect()
    assert inner() is not None                   # before back, the tape needs it
    tr.back(loss)
    gc.collect()
    assert inner() is None                       # after back, only the loss's own value
    assert tr.data(loss) == pytest.approx(np.sum(np.sin(np.exp(x.data)) * 2.0))
    with pytest.raises(tr.tape.GraphReleasedError):
        tr.back(loss)


def test_memory_stays_flat_when_losses_are_kept():
    W = tr.param(np.ones((20, 20)))
    history = []

    def step():
        loss = np.sum(np.tanh(W * 0.5) * W)
        tr.back(loss)
        history.append(loss)
    growth = _traced_growth(step, warmup=100, iters=1000)
    # each kept loss holds its scalar value and one entry, not the 20x20 intermediates
    assert growth < 1000 * 1000, f'memory grew by {growth} bytes over 1000 kept losses'


def test_memory_stays_flat_with_nested_vjp():
    x0 = np.array([0.5, 1.0])

    def step():
        vjp(lambda x: vjp(lambda z: np.sum(np.sin(z) * z), x)[1](1.0)[0], x0)[1](np.ones(2))
    growth = _traced_growth(step, warmup=100, iters=1000)
    assert growth < 20_000, f'memory grew by {growth} bytes over 1000 iterations'


def _run_threads(work, n=4):
    barrier = threading.Barrier(n)
    errors = []

    def run(k):
        try:
            barrier.wait()
            work(k)
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            errors.append((k, e))
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)                  # switch threads often, inside operations
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors


def test_threads_compute_their_own_gradients():
    iters = 300
    grads = {}

    def work(k):
        rng = np.random.default_rng(k)
        w = tr.param(rng.standard_normal(5))
        s = tr.param(float(k + 1))
        for i in range(iters):
            x = rng.standard_normal(5)
            tr.zero_grad(w)
            tr.zero_grad(s)
            loss = np.sum(np.sin(w * x) * s) + s * s * float(k)
            tr.back(loss)
            wv, sv = w.data, float(s.data)
            np.testing.assert_allclose(w.grad, np.cos(wv * x) * x * sv, rtol=1e-12)
            assert s.grad == pytest.approx(np.sum(np.sin(wv * x)) + 2 * sv * k, rel=1e-12)
        grads[k] = True
    _run_threads(work)
    assert sorted(grads) == [0, 1, 2, 3]


def test_threads_with_nested_differentiation():
    def work(k):
        a = float(k + 1)
        for i in range(1000):
            x0 = 0.01 * i + k

            def df(x):
                return vjp(lambda z: np.sin(z * a) * z, x)[1](1.0)[0]
            y, back = vjp(df, x0)
            assert y == pytest.approx(a * x0 * np.cos(a * x0) + np.sin(a * x0), rel=1e-12)
            d2 = 2 * a * np.cos(a * x0) - a * a * x0 * np.sin(a * x0)
            assert back(1.0)[0] == pytest.approx(d2, rel=1e-9, abs=1e-12)
    _run_threads(work)

