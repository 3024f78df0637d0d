"""tracked/duplicated.py: gradients stored with the model (Flux + Enzyme's Duplicated
and Const), with the Flux pages' examples and their printed numbers; eager, nested,
AutoCompiled (written in place: measured with tracemalloc), other backends, and the
optimiser (setup, update, train)."""
import copy
import gc
import tracemalloc

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape.patterns import have_blas
from tracked.compiled_tape.tiers import wait_all
from tracked.__main__ import loss as demo_loss, make_model


def sumsq_loss(m, x):
    return np.sum(m(x) ** 2)                     # Julia's sum(abs2, m(x))


def only(v):
    return v[0]


# --------------------------------------------------------------------------
# The Flux pages' examples
# --------------------------------------------------------------------------

def test_flux_gradient_example():
    model = tr.Chain(tr.Dense(np.array([[3.0]])))
    gm, gx = tr.gradient(sumsq_loss, model, np.array([1]))        # Zygote's way
    assert gm.layers[0].weight.tolist() == [[6.0]] and gm.layers[0].bias.tolist() == [6.0]
    assert gm.layers[0].activation is None and gx.tolist() == [18.0]

    dup = tr.Duplicated(model)                                     # allocates the gradient
    g = tr.gradient(sumsq_loss, dup, tr.Const(np.array([1])))
    assert g[1] is None and g[0] is dup.dval
    assert g[0].layers[0].weight.tolist() == [[6.0]] and g[0].layers[0].bias.tolist() == [6.0]
    assert repr(dup) == ('Duplicated(\n'
                         '  Chain(\n'
                         '    Dense(1 => 1),                      # 2 parameters\n'
                         '  ),\n'
                         '  # norm(∇) ≈ 8.49\n'
                         ')')
    assert np.linalg.norm(tr.destructure(g[0])[0]) == 8.48528137423857

    # a plain argument is an implicit Const; zero=False accumulates
    g = tr.gradient(sumsq_loss, dup, np.array([1]), zero=False)
    assert g[1] is None
    assert g[0].layers[0].weight.tolist() == [[12.0]] and g[0].layers[0].bias.tolist() == [12.0]


def test_flux_withgradient_example():
    def embedding_model():
        return tr.Chain(tr.Embedding(np.array([[1.1], [2.2], [3.3]])),
                        tr.Dense(np.array([[4.4]])), only)
    model = embedding_model()
    assert model(2) == 14.52                        # Julia's model(3), 1-based
    expected = [[[0.0], [0.0], [4.4]], [[3.3]], [1.0]]
    for m in (model, tr.Duplicated(embedding_model())):
        val, (g,) = tr.withgradient(lambda m: m(2), m)
        assert val == 14.52
        assert [g.layers[0].weight.tolist(), g.layers[1].weight.tolist(),
                g.layers[1].bias.tolist()] == expected
        assert g.layers[2] is None
    val, (g,) = tr.withgradient(lambda m: (m(2), 'aux'), tr.Duplicated(embedding_model()))
    assert val == (14.52, 'aux') and g.layers[1].weight.tolist() == [[3.3]]


def test_flux_enzyme_page_example():
    rng = np.random.default_rng(0)
    model = tr.Chain(tr.Dense(28 ** 2, 32, tr.sigmoid, dtype=np.float32, rng=rng),
                     tr.Dense(32, 10, dtype=np.float32, rng=rng), tr.softmax)
    dup = tr.Duplicated(model)
    assert '# norm(∇) ≈ 0.0\n' in repr(dup)
    x1 = rng.standard_normal((1, 28 * 28)).astype(np.float32)        # fake image
    y1 = np.array([[i == 3 for i in range(10)]])                     # fake label

    def f(m, x, y):
        return np.sum((m(x) - y) ** 2)
    grads_f = tr.gradient(f, dup, tr.Const(x1), tr.Const(y1))
    assert grads_f[1:] == (None, None)
    plain = tr.gradient(f, model, x1, y1)[0]
    for got, want in zip(tr.tree_util.leaves(grads_f[0]), tr.tree_util.leaves(plain)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # what is returned is the stored memory, not a copy
    assert np.shares_memory(grads_f[0].layers[0].weight, dup.dval.layers[0].weight)
    state = tr.setup(tr.Adam(), dup)
    before = model.layers[0].weight.copy()
    tr.update(state, dup)
    assert not np.array_equal(model.layers[0].weight, before)


# --------------------------------------------------------------------------
# Semantics
# --------------------------------------------------------------------------

def test_any_order_and_several_duplicated():
    a = tr.Duplicated({'w': np.array([2.0, 3.0])})
    b = tr.Duplicated([np.array([5.0])])
    x = np.array([7.0, 11.0])

    def f(x, a, b):
        return np.sum(a['w'] * x) * b[0][0]
    g = tr.gradient(f, tr.Const(x), a, b)
    assert g[0] is None and g[1] is a.dval and g[2] is b.dval
    np.testing.assert_array_equal(a.dval['w'], [35.0, 55.0])
    np.testing.assert_array_equal(b.dval[0], [14.0 + 33.0])
    g = tr.gradient(f, x, a, tr.Const(b.val))          # plain x: constant too
    assert g[0] is None and g[2] is None


def test_errors():
    with pytest.raises(TypeError, match='no Duplicated argument'):
        tr.gradient(lambda x: x, tr.Const(1.0))
    with pytest.raises(TypeError, match='zero=False'):
        tr.gradient(lambda x: x * x, 1.0, zero=False)
    with pytest.raises(ValueError, match='holds no float arrays'):
        tr.Duplicated({'n': 3, 'name': 'x'})
    with pytest.raises(TypeError, match='plain arrays'):
        tr.Duplicated(tr.fmap(tr.param, {'w': np.ones(2)}))
    with pytest.raises(TypeError):
        tr.Duplicated(tr.Const(np.ones(1)))
    with pytest.raises(ValueError, match='gradient'):
        tr.gradient(lambda m: m['w'], tr.Duplicated({'w': np.ones(2)}))
    twice = tr.Duplicated({'w': np.ones(2)})
    with pytest.raises(ValueError, match='given twice'):
        tr.gradient(lambda a, b: np.sum(a['w'] * b['w']), twice, twice)
    model = {'w': np.ones(2)}
    dup = tr.Duplicated(model)
    model['v'] = np.ones(3)                            # the structure changed
    with pytest.raises(ValueError, match=r'make a new tr.Duplicated\(model\)'):
        tr.gradient(lambda m: np.sum(m['w']), dup)


def test_tied_arrays_share_one_buffer_with_the_total_gradient():
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    model = {'enc': w, 'dec': w, 'b': np.zeros(2)}
    x = np.array([1.0, -1.0])

    def f(m, x):
        return np.sum((m['dec'] @ np.tanh(m['enc'] @ x) + m['b']) ** 2)
    dup = tr.Duplicated(model)
    assert dup.dval['enc'] is dup.dval['dec'] and len(dup.buffers) == 2
    tr.gradient(f, dup, tr.Const(x))
    expected = tr.gradient(f, model, x)[0]
    np.testing.assert_allclose(dup.dval['enc'], expected['enc'], rtol=1e-14)
    tr.gradient(f, tr.AutoCompiled(compile=False), dup, tr.Const(x))
    np.testing.assert_allclose(dup.dval['enc'], expected['enc'], rtol=1e-14)


def test_only_float_arrays_are_differentiated():
    model = {'w': np.array([1.0, 2.0]), 'scale': 3.0, 'idx': np.array([1, 0]), 'name': 'm'}

    def f(m, x):
        return np.sum(m['w'][m['idx']] * x) * m['scale']
    dup = tr.Duplicated(model)
    assert dup.dval == {'w': dup.dval['w'], 'scale': None, 'idx': None, 'name': None}
    x = np.array([5.0, 7.0])
    for backend in ((), (tr.AutoCompiled(compile=False),), (tr.AutoFiniteDifferences(),)):
        g = tr.gradient(f, *backend, dup, tr.Const(x))[0]
        np.testing.assert_allclose(g['w'], [21.0, 15.0], rtol=1e-7)
        assert g['scale'] is None and g['idx'] is None


def test_what_the_loss_does_not_depend_on_is_zero():
    model = {'used': np.ones(2), 'unused': np.ones(3)}
    dup = tr.Duplicated(model)
    dup.dval['unused'][:] = 9.0
    for backend in ((), (tr.AutoCompiled(),)):
        dup.dval['unused'][:] = 9.0
        tr.gradient(lambda m: np.sum(m['used'] ** 2), *backend, dup)
        np.testing.assert_array_equal(dup.dval['unused'], 0.0)
        np.testing.assert_array_equal(dup.dval['used'], 2.0)


def test_nested_inside_the_loss_and_refused_under_an_outer_one():
    model = make_model(4, 5, 3, seed=0)
    x = np.random.default_rng(1).standard_normal((6, 4))

    def penalised(m, x):                        # an input-gradient penalty inside the loss
        gx = tr.gradient(lambda x: np.sum(m(x) ** 2), x)[0]
        return np.sum(m(x) ** 2) + np.sum(gx ** 2)
    expected = tr.destructure(tr.gradient(penalised, model, x)[0])[0]
    for backend in ((), (tr.AutoCompiled(),)):
        dup = tr.Duplicated(model)
        tr.gradient(penalised, *backend, dup, tr.Const(x))
        np.testing.assert_allclose(tr.destructure(dup.dval)[0], expected, rtol=1e-12)
    # inside an outer differentiation the stored gradient would have to be tracked
    dup = tr.Duplicated({'w': np.array([1.0, 2.0])})
    with pytest.raises(TypeError, match='outer differentiation'):
        tr.gradient(lambda s: np.sum(tr.gradient(lambda m, s: np.sum(m['w'] * s), dup,
                                                 tr.Const(s))[0]['w']), 3.0)


# --------------------------------------------------------------------------
# AutoCompiled: written in place
# --------------------------------------------------------------------------

def demo_data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 64))
    return x, tr.nn.onehot(rng.integers(0, 10, n), 10)


def test_autocompiled_writes_into_the_stored_arrays():
    model = make_model(64, 16, 10, seed=0)
    dup = tr.Duplicated(model)
    buffers = [id(b) for b in dup.buffers]
    ad = tr.AutoCompiled()
    for seed in range(3):
        xb, yb = demo_data(seed=seed)
        g = tr.gradient(demo_loss, ad, dup, tr.Const(xb), tr.Const(yb))
        assert g[0] is dup.dval and [id(b) for b in dup.buffers] == buffers
        expected = tr.destructure(tr.gradient(demo_loss, model, xb, yb)[0])[0]
        np.testing.assert_allclose(tr.destructure(dup.dval)[0], expected, rtol=1e-10)
    before = tr.destructure(dup.dval)[0]
    val, g = tr.withgradient(demo_loss, ad, dup, xb, yb, zero=False)
    np.testing.assert_allclose(tr.destructure(dup.dval)[0], 2 * before, rtol=1e-12)
    assert val == pytest.approx(float(demo_loss(model, xb, yb)), rel=1e-12)
    # a compiled tape takes the stored gradient as its out= directly
    ctape = tr.compile(tr.GradientTape(demo_loss, model, xb, yb, wrt=(0,)), background=False)
    assert ctape.gradient(model, xb, yb, out=(dup.dval, None, None))[0] is dup.dval
    np.testing.assert_allclose(tr.destructure(dup.dval)[0], before, rtol=1e-10)


def test_autocompiled_model_with_python_floats_and_integer_arrays():
    model = {'w': np.array([1.0, -2.0, 0.5]), 'scale': 2.0, 'idx': np.array([2, 0])}

    def f(m, x):
        return np.sum(np.tanh(m['w'][m['idx']] * x) * m['scale'])
    dup = tr.Duplicated(model)
    x = np.array([0.3, 0.7])
    # by hand: d/dw[idx[j]] = scale * (1 - tanh(w[idx[j]] x_j)^2) x_j
    expected = np.zeros(3)
    np.add.at(expected, model['idx'], 2.0 * (1 - np.tanh(model['w'][model['idx']] * x) ** 2) * x)
    ad = tr.AutoCompiled()
    for backend in ((), (ad,), (ad,)):
        tr.gradient(f, *backend, dup, tr.Const(x))
        np.testing.assert_allclose(dup.dval['w'], expected, rtol=1e-12)
        assert dup.dval['scale'] is None
    model['scale'] = 4.0                 # a static of the tape: AutoCompiled records again
    tr.gradient(f, ad, dup, tr.Const(x))
    np.testing.assert_allclose(dup.dval['w'], 2 * expected, rtol=1e-12)


def step_peak_bytes(step, batches, ad=None):
    """Median of the most memory each step holds at once beyond what existed before it
    (after ``ad``'s tapes run their compiled kernels)."""
    for xb, yb in batches[:3]:
        step(xb, yb)
    if ad is not None:
        assert ad.wait(600), [t.compile_error for _, ts in ad.tapes.values() for t in ts]
    assert wait_all(600)               # other tests' background compilations allocate too
    peaks = np.zeros(len(batches) - 3, np.int64)
    gc.collect()
    tracemalloc.start()
    try:
        for i, (xb, yb) in enumerate(batches[3:]):
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            step(xb, yb)
            peaks[i] = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return float(np.median(peaks))     # (a rare step that meets a garbage collection aside)


@pytest.mark.skipif(not have_blas(), reason="numba's BLAS helpers need SciPy")
def test_a_compiled_duplicated_training_step_allocates_no_gradient():
    batches = [demo_data(seed=s) for s in range(23)]
    model = make_model(64, 64, 10, seed=0)
    grad_bytes = tr.destructure(model)[0].nbytes            # 38_480
    dup = tr.Duplicated(model)
    state = tr.setup(tr.Adam(0.01), dup)
    ad = tr.AutoCompiled()

    def duplicated_step(xb, yb):
        tr.gradient(demo_loss, ad, dup, tr.Const(xb), tr.Const(yb))
        tr.update(state, dup)
    eager_model = make_model(64, 64, 10, seed=0)
    eager_state = tr.setup(tr.Adam(0.01), eager_model)

    def eager_step(xb, yb):                                  # as tr.train takes a step
        g = tr.gradient(lambda m: demo_loss(m, xb, yb), eager_model)[0]
        tr.update(eager_state, eager_model, g)
    compiled = step_peak_bytes(duplicated_step, batches, ad)
    eager = step_peak_bytes(eager_step, batches)
    assert compiled < grad_bytes / 4 < grad_bytes < eager
    for a, b in zip(tr.destructure(model)[0], tr.destructure(eager_model)[0]):
        assert a == pytest.approx(b, abs=1e-8)             # the same training


# --------------------------------------------------------------------------
# Other backends and the optimiser
# --------------------------------------------------------------------------

def test_finite_differences_backend():
    model = make_model(4, 3, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((5, 4))
    y = tr.nn.onehot(np.arange(5) % 2, 2)
    dup = tr.Duplicated(model)
    tr.gradient(demo_loss, tr.AutoFiniteDifferences(), dup, x, y)
    expected = tr.destructure(tr.gradient(demo_loss, model, x, y)[0])[0]
    np.testing.assert_allclose(tr.destructure(dup.dval)[0], expected, rtol=1e-6, atol=1e-9)
    tr.gradient(demo_loss, tr.AutoTracked(), dup, x, y, zero=False)
    np.testing.assert_allclose(tr.destructure(dup.dval)[0], 2 * expected, rtol=1e-6, atol=1e-9)


def test_setup_update_train_take_a_duplicated():
    model = make_model(8, 6, 3, seed=0)
    dup = tr.Duplicated(model)
    assert repr(tr.setup(tr.Adam(), dup)) == repr(tr.setup(tr.Adam(), model))
    rng = np.random.default_rng(2)
    data = [(rng.standard_normal((10, 8)), tr.nn.onehot(rng.integers(0, 3, 10), 3))
            for _ in range(15)]
    reference = copy.deepcopy(model)
    ref_losses = tr.train(demo_loss, reference, data, tr.setup(tr.Adam(0.05), reference),
                          progress=False)
    for adtype in (None, tr.AutoCompiled()):
        m = make_model(8, 6, 3, seed=0)
        d = tr.Duplicated(m)
        losses = tr.train(demo_loss, d, data, tr.setup(tr.Adam(0.05), d), adtype=adtype,
                          progress=False)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-9)
        np.testing.assert_allclose(tr.destructure(m)[0], tr.destructure(reference)[0],
                                   rtol=1e-9)
    # one update with the stored gradient equals one with an explicit gradient tree
    a, b = make_model(8, 6, 3, seed=1), make_model(8, 6, 3, seed=1)
    da = tr.Duplicated(a)
    tr.gradient(demo_loss, da, *data[0])
    tr.update(tr.setup(tr.Descent(0.1), da), da)
    tr.update(tr.setup(tr.Descent(0.1), b), b, tr.gradient(demo_loss, b, *data[0])[0])
    np.testing.assert_allclose(tr.destructure(a)[0], tr.destructure(b)[0], rtol=1e-14)
    with pytest.raises(TypeError, match='not tape='):
        tr.train(demo_loss, d, data, tr.setup(tr.Adam(), d),
                 tape=tr.GradientTape(demo_loss, m, *data[0], wrt=(0,)), progress=False)
