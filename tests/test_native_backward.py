"""native_backward.py's sweep: the backward pass's loop in C gives the Python loop's bits.

Every test runs each program twice, with ``tape.native_sweep`` in place and with the
Python loop alone, and asserts identical gradients (the same NumPy calls in the same
order), plus finite differences where the program is new here.  The suite as a whole
runs with the sweep installed (conftest.py).
"""
import gc
import sys
import weakref

import numpy as np
import pytest

import tracked as tr
from tracked import native_ops, tape

pytestmark = pytest.mark.skipif(not native_ops.available(),
                                reason='native code is built on Linux with CPython '
                                       '(TRACKED_NATIVE unset or 1)')

rng = np.random.default_rng(7)
BIG = (96, 100)         # 9 600 elements: above tape._IN_PLACE, buffers owned by the pass


def _mlp(W1, b1, W2, b2, x, y):
    h = np.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    z = z - np.amax(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(logp * y) / x.shape[0]


def _mlp_args(n, d, k):
    x = rng.standard_normal((n, d))
    y = np.eye(k)[rng.integers(0, k, n)]
    return (rng.standard_normal((d, 16)) / 4, np.zeros(16), rng.standard_normal((16, k)) / 4,
            np.zeros(k)), (x, y)


PROGRAMS = {
    'chain': (lambda x: np.sum(np.sin(x) * 1.01 + 0.1), [(5,)]),
    'square': (lambda x: np.sum(x * x), [(4, 3)]),
    'shared': (lambda x: np.sum(np.exp(x) * np.sin(x) + np.exp(x) / (1 + x * x)), [(6,)]),
    'broadcast': (lambda a, b: np.sum(np.tanh(a + b) * (a - b)), [(4, 3), (3,)]),
    'keepdims': (lambda a: np.sum(a / np.sum(a * a, axis=1, keepdims=True)), [(3, 4)]),
    'scalar sum': (lambda a: np.sum(a) * np.sum(a ** 2), [(5,)]),
    'big tanh': (lambda a, b: np.sum(np.tanh(a @ b) ** 2), [(96, 40), (40, 100)]),
    'big minus': (lambda a, b: np.sum((a - b) ** 2 + np.cos(a)), [BIG, BIG]),
    'big bias': (lambda a, b: np.sum(np.exp(-(a + b) ** 2)), [BIG, BIG[1:]]),
    'kwargs': (lambda a: np.sum(np.amax(a, axis=0) * np.mean(a, axis=1, keepdims=True)),
               [(4, 5)]),
    'slices': (lambda a: np.sum(100 * (a[1:] - a[:-1] ** 2) ** 2 + (1 - a[:-1]) ** 2),
               [(20,)]),
    'complex': (lambda a: np.sum(np.abs(np.exp(1j * a) * a) ** 2), [(5,)]),
    'leaf twice': (lambda a, b: np.sum(a + b) + np.sum(a), [(3,), (3,)]),
    'identity out': (lambda a: np.sum(+a), [(4,)]),
}


def _both_paths(fn):
    """``fn()`` with the sweep, then with the Python loop alone."""
    native_ops.install()
    sweep = tape.native_sweep
    assert sweep is not None
    try:
        with_sweep = fn()
        tape.native_sweep = None
        without = fn()
    finally:
        tape.native_sweep = sweep
    return with_sweep, without


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.filterwarnings('error')     # (a complex cotangent cast to a real input's dtype)
@pytest.mark.parametrize('name', PROGRAMS)
def test_the_sweep_gives_the_python_loops_gradients(name):
    f, shapes = PROGRAMS[name]
    args = [rng.standard_normal(s) for s in shapes]
    got, expected = _both_paths(lambda: tr.withgradient(f, *args))
    _same(got, expected)
    # and the gradient itself, against central differences
    check = tr.gradient(f, *args)
    for i, a in enumerate(args):
        if a.size > 200:
            continue
        fd = np.zeros_like(a)
        for j in range(a.size):
            e = np.zeros(a.size)
            e[j] = 1e-6
            up = [b + e.reshape(a.shape) if k == i else b for k, b in enumerate(args)]
            down = [b - e.reshape(a.shape) if k == i else b for k, b in enumerate(args)]
            fd.flat[j] = (f(*up) - f(*down)) / 2e-6
        np.testing.assert_allclose(check[i], fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('n, d', [(2, 6), (64, 150)])
def test_an_mlp_step_is_the_python_loops(n, d):
    params, (x, y) = _mlp_args(n, d, 10)
    got, expected = _both_paths(lambda: tr.withgradient(lambda *p: _mlp(*p, x, y), *params))
    _same(got, expected)


def test_second_derivatives_and_kept_graphs():
    f = PROGRAMS['shared'][0]
    x = rng.standard_normal(6)
    _same(*_both_paths(lambda: tr.hessian(f, x)))

    def kept():
        p = tr.param(x)
        y = f(p)
        tr.back(y, retain_graph=True)
        first = p.grad.copy()
        tr.back(y)
        return first, p.grad
    _same(*_both_paths(kept))
    _same(*_both_paths(lambda: tr.jacobian(lambda a: np.sin(a) * a, x)))


@pytest.mark.parametrize('name', PROGRAMS)
def test_recorded_tapes_record_the_python_loops_instructions(name):
    # a GradientTape records the backward pass run on tracked cotangents: the sweep
    # must send the same operations (a tracked cotangent's shape, say, is Python's)
    f, shapes = PROGRAMS[name]
    args = [rng.standard_normal(s) for s in shapes]
    got, expected = _both_paths(lambda: [repr(i) for i in tr.GradientTape(f, *args).instructions])
    assert got == expected


def test_checkpointed_entries_are_recomputed():
    def f(x):
        return np.sum(tr.checkpoint(lambda a: np.sin(a) * np.exp(a), x) ** 2)
    x = rng.standard_normal(5)
    _same(*_both_paths(lambda: tr.gradient(f, x)))


def test_the_sweep_takes_a_plain_chain_whole():
    """Called on a chain of entries it knows, it visits them all in C."""
    native_ops.install()
    real = tape.native_sweep
    answers = []

    def spy(*a):
        answers.append(real(*a))
        return answers[-1]
    tape.native_sweep = spy
    try:
        g = tr.gradient(lambda x: np.sum(np.sin(x) * 2.0 + x), np.array([0.5, 1.0]))
    finally:
        tape.native_sweep = real
    assert answers == [None]
    np.testing.assert_allclose(g[0], 2 * np.cos([0.5, 1.0]) + 1)


def test_a_raising_pullback_is_named_and_leaks_nothing():
    @tr.rule
    def fragile(x):
        return x * 2, lambda dy: _raise()
    x = np.array([1.0, 2.0, 3.0])
    before = sys.getrefcount(x)
    for _ in range(20):
        with pytest.raises(ValueError, match='broken') as info:
            tr.gradient(lambda a: np.sum(np.sin(fragile(a))), x)
        if sys.version_info >= (3, 11):
            assert any('fragile' in n for n in info.value.__notes__)
    del info
    gc.collect()
    assert sys.getrefcount(x) == before


def _raise():
    raise ValueError('broken pullback')


def test_reference_counts_and_entries_are_released():
    params, (x, y) = _mlp_args(8, 12, 3)
    f = lambda *p: _mlp(*p, x, y)      # noqa: E731
    tr.withgradient(f, *params)
    watched = [*params, x, y, np.tanh, tape._accumulate, tape._fit, tape._in_place]
    before = [sys.getrefcount(w) for w in watched]
    for _ in range(300):
        tr.withgradient(f, *params)
    assert [sys.getrefcount(w) for w in watched] == before
    p = tr.param(params[0])
    out = _mlp(p, *params[1:], x, y)
    entry = weakref.ref(out._node)
    tr.back(out)
    del out
    gc.collect()
    assert entry() is None
    # the arrays the entries saved are writeable again once they are released
    assert all(a.flags.writeable for a in (*params, x, y))


def test_uninstall_takes_the_sweep_away():
    native_ops.install()
    assert tape.native_sweep is not None
    native_ops.uninstall()
    try:
        assert tape.native_sweep is None
        g = tr.gradient(lambda a: np.sum(a * a), np.array([1.0, 2.0]))
        np.testing.assert_array_equal(g[0], [2.0, 4.0])
    finally:
        native_ops.install()
    assert tape.native_sweep is not None
