"""Compiled tapes (tracked/compiled_tape/compiled.py, codegen.py): numba replays against
the eager results.  Compiling costs seconds, so a few small tapes are compiled once per
module and reused; they share kernels (and numba's disk cache) between them."""
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape.patterns import have_blas

rng = np.random.default_rng(1)
# numba reaches BLAS through SciPy (the test extra); without it (the floors' CI run)
# large products run in NumPy, which allocates
needs_blas = pytest.mark.skipif(not have_blas(), reason="numba's BLAS helpers need SciPy")


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _all_compiled(ctape):
    """Every instruction has a kernel (but large products without SciPy)."""
    reasons = {f.reason for f in ctape.fallbacks}
    assert not reasons or (not have_blas() and all('pip install scipy' in r for r in reasons)), \
        ctape.fallbacks


def mlp_loss(m, x, y):
    h = np.tanh(x @ m['W'].T + m['b'])
    return np.mean((h @ m['V'].T - y) ** 2) + 0.1 * np.sum(np.where(h > 0, h, 0.0))


def make_model(r):
    return {'W': r.standard_normal((32, 3)), 'b': r.standard_normal(32),
            'V': r.standard_normal((1, 32))}


def branchy(x, c):
    # a guard (bool of a reduction), a mask, an index from argmax (a fallback), a slice
    y = np.sin(x) * c if np.sum(x) > 0 else np.cos(x) * c
    return np.sum(y[1:] * y[:-1]) + x[np.argmax(x)] + np.sum(x[x > 0.5] ** 2)


@pytest.fixture(scope='module')
def mlp():
    m = make_model(np.random.default_rng(0))
    x, y = rng.standard_normal((64, 3)), rng.standard_normal((64, 1))
    tape = tr.GradientTape(mlp_loss, m, x, y, wrt=(0,))
    return tape, tr.compile(tape, background=False), (m, x, y)


@pytest.fixture(scope='module')
def branch():
    x = np.array([0.3, 0.9, -0.2, 0.7])
    tape = tr.GradientTape(branchy, x, 2.0, wrt=(0,))
    return tape, tr.compile(tape, background=False)


def test_compiled_gradient_matches_eager_on_new_inputs(mlp):
    tape, ctape, _ = mlp
    for seed in range(3):
        r = np.random.default_rng(seed + 5)
        args = (make_model(r), r.standard_normal((64, 3)), r.standard_normal((64, 1)))
        val, (g, gx, gy) = ctape.withgradient(*args)
        ev, (eg, _, _) = tr.withgradient(mlp_loss, *args)
        _close(val, ev)
        assert gx is None and gy is None
        for k in eg:
            _close(g[k], eg[k])
        _close(ctape(*args), ev)
    _all_compiled(ctape)
    assert tape.compiled is None                     # compile returns a new tape


@needs_blas
def test_out_writes_in_place_and_allocates_nothing(mlp):
    _, ctape, (m, x, y) = mlp
    g = ctape.gradient(m, x, y)
    m2 = make_model(np.random.default_rng(9))
    ctape.gradient(m2, x, y, out=g)
    eg = tr.gradient(mlp_loss, m2, x, y)[0]
    for k in eg:
        _close(g[0][k], eg[k])
    for _ in range(3):
        ctape.gradient(m2, x, y, out=g)              # warm every path
    tracemalloc.start()
    try:
        for _ in range(5):
            ctape.gradient(m2, x, y, out=g)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(200):
            ctape.gradient(m2, x, y, out=g)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The intermediates here are 64 x 32 floats (16 KiB each): none may be allocated.  What
    # remains is numba's argument boxing and a few small Python objects per call.
    assert peak - base < 6000, f'a call with out= allocated {peak - base} bytes'
    assert current - base < 256, 'calls with out= keep memory'


def test_compiled_guards_fallbacks_masks_and_indices(branch):
    tape, ctape = branch
    why = {f.instr.name: f.reason for f in ctape.fallbacks}
    assert why['np.argmax'] == 'no kernel form for np.argmax'    # listed, compiled around
    assert why['operator.getitem'] == 'its index or shape is a recorded value'   # x[argmax]
    assert 'np.argmax(%0)   # no kernel form for np.argmax' in repr(ctape.fallbacks)
    for x in (np.array([0.1, 0.6, 0.4, 0.9]), np.array([0.8, 0.2, -0.3, 0.55])):
        val, (g, _) = ctape.withgradient(x, 2.0)
        ev, (eg, _) = tr.withgradient(branchy, x, 2.0)
        _close(val, ev)
        _close(g, eg)
    with pytest.raises(tr.TapeGuardError, match='truth value'):
        ctape.gradient(np.array([-1.0, -0.6, -0.4, 0.9]), 2.0)     # the other branch
    with pytest.raises(tr.TapeGuardError, match='number of True entries'):
        ctape.gradient(np.array([0.6, 0.6, 0.6, 0.9]), 2.0)        # mask count changes
    with pytest.raises(ValueError, match='recorded with 2.0|shape'):
        ctape.gradient(np.ones(3), 2.0)


def test_reversediff_branch_case_compiled():
    tape = tr.compile(tr.GradientTape(lambda x: 0.0 * x if x < 0 else x, -1.3), background=False)
    assert tape.gradient(-0.7) == (0.0,)
    with pytest.raises(tr.TapeGuardError):
        tape.gradient(1.34)


def test_retrace_recompiles_on_another_path():
    tape = tr.compile(tr.GradientTape(lambda x: 0.0 * x if x < 0 else x, -1.3,
                                      on_guard='retrace'), background=False)
    assert tape.gradient(1.34) == (1.0,)
    assert tape.compiled is not None


def test_compiled_custom_rule_is_recomputed():
    @tr.rule
    def cube(x):
        return x ** 3, lambda dy: (dy * 3 * x ** 2,)
    tape = tr.compile(tr.GradientTape(lambda x: np.sum(cube(x)), np.array([1.0, 2.0])),
                      background=False)
    _close(tape.gradient(np.array([3.0, -1.0]))[0], [27.0, 3.0])


def test_compiled_hessian_and_jacobian_tapes():
    W = rng.standard_normal((3, 3))
    f = lambda x: np.sum(np.tanh(W @ x)) + 0.5 * np.sum(x ** 2)
    h = tr.compile(tr.HessianTape(f, rng.standard_normal(3)), background=False)
    x2 = rng.standard_normal(3)
    _close(h.hessian(x2), tr.hessian(f, x2))
    H = np.empty((3, 3))
    assert h.hessian(x2, out=H) is H
    j = tr.compile(tr.JacobianTape(lambda x: np.tanh(W @ x), x2), background=False)
    x3 = rng.standard_normal(3)
    _close(j.jacobian(x3)[0], tr.jacobian(lambda x: np.tanh(W @ x), x3)[0])


def test_auto_compiled_backend_caches_by_signature_and_follows_branches():
    ad = tr.AutoCompiled()
    f = lambda x: 0.0 * x if x < 0 else x * 3.0
    assert tr.gradient(f, ad, -1.3) == (0.0,)
    assert tr.gradient(f, ad, 2.0) == (3.0,)        # guard fails: the other path is recorded
    assert tr.gradient(f, ad, -2.0) == (0.0,)
    assert len(ad.tapes) == 1 and len(next(iter(ad.tapes.values()))) == 2
    val, g = tr.withgradient(lambda x, y: x / y, ad, 1, 2)
    assert val == 0.5 and g == (0.5, -0.25)


_SUBPROCESS = r'''
import sys
import numpy as np, tracked as tr
from tracked.compiled_tape import cache, entries
tape = tr.compile(tr.GradientTape(lambda x: np.sum(np.exp(x) * 1.5 - x), np.ones(4)),
                  background=False)
assert np.allclose(tape.gradient(np.zeros(4))[0], 0.5)
# a native kernel (native.py) compiled here is in cache.built_here; a numba module
# compiled here missed numba's cache
missed = [n.startswith('n_') and n in cache.built_here or
          not n.startswith('n_') and entries.missed(sys.modules[n])
          for n, _ in tape.compiled.sources()]
native = sum(n.startswith('n_') for n, _ in tape.compiled.sources())
print(len(missed) - sum(missed), sum(missed), native)
'''


def test_second_process_loads_the_compiled_code_from_disk(tmp_path):
    env = dict(os.environ, TRACKED_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, '-c', _SUBPROCESS], env=env, capture_output=True,
                           text=True) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first = [int(v) for v in runs[0].stdout.split()]
    second = [int(v) for v in runs[1].stdout.split()]
    assert first[1] > 0 and first[2] >= 1            # compiled the first time, natively
    assert second[1] == 0 and second[0] >= 1         # loaded from disk, compiled nothing


def test_the_disk_cache_honours_xdg_cache_home(monkeypatch, tmp_path):
    from tracked.compiled_tape import cache
    monkeypatch.delenv('TRACKED_CACHE_DIR', raising=False)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
    assert cache.cache_dir().startswith(str(tmp_path / 'tracked'))
    monkeypatch.setenv('TRACKED_CACHE_DIR', str(tmp_path / 'mine'))
    assert cache.cache_dir().startswith(str(tmp_path / 'mine'))
    monkeypatch.delenv('TRACKED_CACHE_DIR')
    monkeypatch.delenv('XDG_CACHE_HOME')
    # the default, named without making it (the user's own cache: not the tests')
    assert cache.root() == os.path.join(os.path.expanduser('~'), '.cache', 'tracked')


def test_float32_tapes_run_float32_kernels():
    r = np.random.default_rng(3)
    f = lambda w, x: np.sum(np.tanh(x @ w.T) * 0.5) + np.mean(w ** 2)   # noqa: E731
    w, x = (r.standard_normal(s).astype(np.float32) for s in ((8, 3), (16, 3)))
    ctape = tr.compile(tr.GradientTape(f, w, x, wrt=(0,)), background=False)
    _all_compiled(ctape)
    sources = [k.source for k in ctape.compiled.kernels]
    assert any('np.float32' in s for s in sources)           # float32 arrays and rounding
    assert not any('np.float64)' in s for s in sources)      # no float64 array at all
    w2 = r.standard_normal((8, 3)).astype(np.float32)
    val, (g, gx) = ctape.withgradient(w2, x)
    ev, (eg, _) = tr.withgradient(f, w2, x)
    assert gx is None and g.dtype == np.float32 and np.asarray(val).dtype == np.float32
    np.testing.assert_allclose(val, ev, rtol=1e-5)
    np.testing.assert_allclose(g, eg, rtol=1e-5, atol=1e-6)


def test_generated_calls_check_what_the_general_path_checks():
    f = lambda w, n, s: np.sum(w[:n] ** 2) * s                       # noqa: E731
    ctape = tr.compile(tr.GradientTape(f, np.ones(4), 2, 1.5, wrt=(0,)), background=False)
    assert 'withgradient' in ctape.__dict__                          # generated
    val, (g, _, _) = ctape.withgradient(np.arange(4.0), 2, 3.0)
    assert val == 3.0 and np.array_equal(g, [0.0, 6.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='recorded with 2'):
        ctape.gradient(np.arange(4.0), 3, 3.0)                       # a constant of the tape
    with pytest.raises(ValueError, match='shape'):
        ctape.gradient(np.arange(5.0), 2, 3.0)
    with pytest.raises(ValueError, match='dtype'):
        ctape.gradient(np.arange(4, dtype=np.float32), 2, 3.0)
    x = np.arange(8.0)[::2]                                          # not contiguous: copied
    assert np.array_equal(ctape.gradient(x, 2, 1.0)[0], [0.0, 4.0, 0.0, 0.0])
    x.flags.writeable = False
    assert np.array_equal(ctape.gradient(x, 2, 1.0)[0], [0.0, 4.0, 0.0, 0.0])


def test_generated_calls_of_array_arguments_refuse_other_signatures():
    f = lambda w, X: np.sum(np.tanh(X @ w))                          # noqa: E731
    w, X = np.ones(3), np.arange(6.0).reshape(2, 3) / 10
    ctape = tr.compile(tr.GradientTape(f, w, X, wrt=(0,)), background=False)
    assert 'withgradient' in ctape.__dict__
    eg = tr.gradient(f, w, X)[0]
    _close(ctape.gradient(w, X)[0], eg)
    for bad, what in (((np.ones(4), X), 'shape'), ((w.astype(np.float32), X), 'dtype'),
                      ((w, X[:, :2]), 'shape'), ((w,), '2 arguments')):
        with pytest.raises(ValueError, match=what):
            ctape.gradient(*bad)
    Xr = X.copy()
    Xr.flags.writeable = False
    _close(ctape.gradient(w, Xr)[0], eg)                              # read-only: copied
    _close(ctape.gradient(w, np.asfortranarray(X))[0], eg)            # not C: copied


@needs_blas
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_products_through_blas_in_every_layout(dtype):
    r = np.random.default_rng(4)
    args = [r.standard_normal(s).astype(dtype) for s in ((20, 16), (16, 18), (16,), (20,))]

    def f(A, B, v, u):
        return (np.sum(np.sin(A @ B)) + np.sum(np.cos(A @ v)) + np.sum((u @ A) ** 2)
                + np.sum(np.tanh(B.T @ A.T)))
    ctape = tr.compile(tr.GradientTape(f, *args), background=False)
    sources = ''.join(k.source for k in ctape.compiled.kernels)
    assert ctape.fallbacks == [] and 'blas_gemm(' in sources and 'blas_gemv(' in sources
    new = [r.standard_normal(a.shape).astype(dtype) for a in args]
    val, grads = ctape.withgradient(*new)
    ev, egrads = tr.withgradient(f, *new)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(val, ev, **tol)
    for g, eg in zip(grads, egrads):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, eg, **tol)


def test_without_scipy_large_products_run_in_numpy():
    # numba reaches BLAS through SciPy, an optional dependency: without it, a large
    # product is left to NumPy (said in fallbacks) instead of failing inside the kernel
    code = """if True:
        import sys
        sys.modules['scipy'] = None          # as if SciPy were not installed
        import numpy as np
        import tracked as tr
        f = lambda A, B, v: np.sum(np.tanh(A @ B)) + np.sum(np.sin(A[:2, :2] @ v))
        r = np.random.default_rng(0)
        args = r.standard_normal((20, 16)), r.standard_normal((16, 18)), r.standard_normal(2)
        ct = tr.compile(tr.GradientTape(f, *args), background=False)
        new = [a + 0.5 for a in args]
        val, g = ct.withgradient(*new)
        ev, eg = tr.withgradient(f, *new)
        assert np.allclose(val, ev, rtol=1e-12) and all(
            np.allclose(a, b, rtol=1e-10) for a, b in zip(g, eg))
        reasons = {f.reason for f in ct.fallbacks}
        assert len(reasons) == 1 and 'pip install scipy' in reasons.pop(), ct.fallbacks
        assert len(ct.fallbacks) == 3        # A @ B and its two pullback products
        print('ok')
    """
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=600)
    assert out.stdout.strip() == 'ok', out.stderr


def test_generated_calls_write_into_whichever_out_is_given():
    f = lambda w, X: np.sum(np.tanh(X @ w))                          # noqa: E731
    w, X = np.ones(3), np.arange(6.0).reshape(2, 3) / 10
    ctape = tr.compile(tr.GradientTape(f, w, X, wrt=(0,)), background=False)
    a, b = ctape.gradient(w, X), ctape.gradient(2 * w, X)
    for scale in (3.0, 4.0, 5.0):
        for out in (a, b, a):
            assert ctape.withgradient(scale * w, X, out=out).grad is out
            _close(out[0], tr.gradient(f, scale * w, X)[0])
    with pytest.raises(ValueError, match='out= for argument 0'):
        ctape.gradient(w, X, out=(np.ones(4), None))


# --------------------------------------------------------------------------
# Integer inputs and out= arrays that are inputs (issue 24)
# --------------------------------------------------------------------------

def labels_loss(m, x, y):
    return tr.logitcrossentropy(m(x), y)


def labelled(seed=0):
    r = np.random.default_rng(seed)
    model = tr.Chain(tr.Dense(4, 5, tr.tanh, rng=1), tr.Dense(5, 3, rng=2))
    return model, r.standard_normal((8, 4)), np.arange(8) % 3


def _same_grads(g, e):
    for a, b in zip(tr.tree_util.leaves(g), tr.tree_util.leaves(e)):
        _close(a, b)


def test_integer_labels_in_wrt_compile_as_integer_inputs():
    # compile raised "ValueError: 5 is not in list": the labels, differentiated as float64
    # (as tr.gradient does), were recorded as float64 and given as int64.  They get no
    # gradient, so the tape records them as given: integers, read as f reads them
    model, x, y = labelled()
    ct = tr.compile(tr.GradientTape(labels_loss, model, x, y), background=False)
    assert 5 not in ct.diff and not any(i.name == 'np.round' for i in ct.instructions)
    y2 = (y + 1) % 3
    g, e = ct.gradient(model, x, y2), tr.gradient(labels_loss, model, x, y2)
    _same_grads(g[0], e[0])
    assert g[2] is None and e[2] is None
    assert not ct.fallbacks and 'gradient' in ct.__dict__     # generated calls, no fallback


@pytest.mark.parametrize('dtype', [np.int64, np.int32, np.uint8])
def test_integer_arrays_get_the_gradient_tr_gradient_gives(dtype):
    f = lambda w, a: np.sum(w ** 2 * a) + np.sum(np.sin(a * w))        # noqa: E731
    a = np.array([1, 2, 3], dtype)
    ct = tr.compile(tr.GradientTape(f, np.ones(3), a), background=False)
    w2, a2 = np.array([0.5, -1.0, 2.0]), np.array([3, 0, 1], dtype)
    for got, want in zip(ct.gradient(w2, a2), tr.gradient(f, w2, a2)):
        _close(got, want)
    # int32 and uint8 have no kernels: converted in NumPy, and said so
    assert [f.reason for f in ct.fallbacks] == ([] if dtype == np.int64 else
                                                [f'{np.dtype(dtype)} input converted to '
                                                 f'float64 in NumPy: no kernel dtype'])
    jt = tr.compile(tr.JacobianTape(np.cumsum, a), background=False)
    np.testing.assert_array_equal(jt.jacobian(a2)[0], tr.jacobian(np.cumsum, a2)[0])


def test_integer_labels_compile_in_the_background_and_under_train():
    # both silently replayed in NumPy for ever: the background compilation failed
    model, x, y = labelled()
    ct = tr.compile(tr.GradientTape(labels_loss, model, x, y))
    ct.gradient(model, x, y)
    assert ct.wait(300), ct.compile_error
    ad = tr.AutoCompiled()
    tr.train(labels_loss, model, [(x[i::2], y[i::2]) for i in range(2)] * 2,
             tr.setup(tr.Adam(0.01), model), adtype=ad, progress=False)
    assert ad.wait(300) and all(t.compiled is not None for _, ts in ad.tapes.values() for t in ts)


def test_out_sharing_memory_with_an_input_is_refused_on_every_path():
    # the compiled tape gave an x-gradient off by 1.58 (its kernels read x after writing
    # into it); the NumPy replay was right by luck of its order
    f = lambda W, x: np.sum(np.tanh(W @ x) * x)                            # noqa: E731
    W, x = rng.standard_normal((3, 3)), rng.standard_normal(3)
    for tape in (tr.GradientTape(f, W, x), tr.compile(tr.GradientTape(f, W, x),
                                                      background=False)):
        W1, x1 = W.copy(), x.copy()
        want = tape.gradient(W1, x1)
        for out in ((W1, x1), (np.zeros((3, 3)), x1[:])):        # the issue's; a view
            with pytest.raises(ValueError, match='shares memory with an input'):
                tape.gradient(W1, x1, out=out)
            assert np.array_equal(W1, W) and np.array_equal(x1, x)   # nothing written
        g = tape.gradient(W1, x1)                     # then an input that is a known out=
        tape.gradient(W1, x1, out=g)
        with pytest.raises(ValueError, match='shares memory with an input'):
            tape.gradient(g[0], x1, out=g)
        for a, b in zip(tape.gradient(W1, x1, out=g), want):
            np.testing.assert_array_equal(a, b)
    same = tr.GradientTape(lambda a, b: np.sum(a * b), np.ones(2), np.ones(2))
    g = np.zeros(2)
    with pytest.raises(ValueError, match='two gradients overlapping'):
        same.gradient(np.ones(2), np.ones(2), out=(g, g))
    ht = tr.compile(tr.HessianTape(lambda v: np.sum(v ** 3), np.ones(4)), background=False)
    H = np.zeros((4, 4))
    with pytest.raises(ValueError, match='shares memory with an input'):
        ht.hessian(H[0], out=H)
