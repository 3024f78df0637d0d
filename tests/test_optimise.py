"""tracked.optimise: each rule against a hand-written reference, the state tree, in-place
updates on plain and tracked models, tied weights, and the training loop."""
import numpy as np
import pytest

import tracked as tr
from tracked import nn
from tracked.optimise import OptLeaf


def quadratic_grad(x):
    return 2 * (x - 3.0)


# --------------------------------------------------------------------------
# Rules against references
# --------------------------------------------------------------------------

def run_rule(rule, steps=5, x0=(1.0, -2.0, 0.5)):
    model = {'w': np.array(x0)}
    state = tr.setup(rule, model)
    history = []
    for _ in range(steps):
        tr.update(state, model, {'w': quadratic_grad(model['w'])})
        history.append(model['w'].copy())
    return history


def test_descent():
    x = np.array([1.0, -2.0, 0.5])
    for got in run_rule(tr.Descent(0.1)):
        x = x - 0.1 * quadratic_grad(x)
        np.testing.assert_allclose(got, x, rtol=1e-15)
    assert tr.Descent().lr == 0.1


def test_momentum():
    x, v = np.array([1.0, -2.0, 0.5]), np.zeros(3)
    for got in run_rule(tr.Momentum(0.05, 0.8)):
        v = 0.8 * v + 0.05 * quadratic_grad(x)
        x = x - v
        np.testing.assert_allclose(got, x, rtol=1e-14)
    assert (tr.Momentum().lr, tr.Momentum().rho) == (0.01, 0.9)


def adam_reference(lr, b1, b2, eps, decay, steps):
    x, m, v = np.array([1.0, -2.0, 0.5]), np.zeros(3), np.zeros(3)
    out = []
    for t in range(1, steps + 1):
        g = quadratic_grad(x)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        x = x - lr * (mhat / (np.sqrt(vhat) + eps) + decay * x)
        out.append(x)
    return out


def test_adam():
    got = run_rule(tr.Adam(0.1, (0.8, 0.99), 1e-3), steps=8)
    for g, r in zip(got, adam_reference(0.1, 0.8, 0.99, 1e-3, 0.0, 8)):
        np.testing.assert_allclose(g, r, rtol=1e-14)
    a = tr.Adam()
    assert (a.lr, a.betas, a.eps) == (0.001, (0.9, 0.999), 1e-8)


def test_adamw():
    got = run_rule(tr.AdamW(0.1, (0.9, 0.999), 0.3), steps=8)
    for g, r in zip(got, adam_reference(0.1, 0.9, 0.999, 1e-8, 0.3, 8)):
        np.testing.assert_allclose(g, r, rtol=1e-14)
    assert tr.AdamW().decay == 0.0
    # decay=0 is Adam
    np.testing.assert_allclose(run_rule(tr.AdamW(0.1))[-1], run_rule(tr.Adam(0.1))[-1])


@pytest.mark.parametrize('rule', [tr.Descent(0.1), tr.Momentum(0.02, 0.9), tr.Adam(0.1),
                                  tr.AdamW(0.1, decay=1e-4)], ids=repr)
def test_rules_converge(rule):
    np.testing.assert_allclose(run_rule(rule, steps=300)[-1], 3.0, atol=0.02)


# --------------------------------------------------------------------------
# The state tree and update
# --------------------------------------------------------------------------

def mlp(seed=0):
    return nn.Chain(nn.Dense(3, 4, nn.tanh, rng=seed), nn.Dense(4, 2, rng=seed + 1))


X = np.random.default_rng(1).standard_normal((6, 3))
Y = nn.onehot(np.array([0, 1, 1, 0, 1, 0]), 2)


def mlp_loss(m, x, y):
    return nn.logitcrossentropy(m(x), y)


def test_setup_mirrors_the_model():
    m = mlp()
    state = tr.setup(tr.Adam(), m)
    assert type(state) is nn.Chain and type(state.layers[0]) is nn.Dense
    leaf = state.layers[0].weight
    assert isinstance(leaf, OptLeaf) and leaf.rule.lr == 0.001
    assert leaf.state[0].shape == (4, 3)
    assert state.layers[0].activation is None
    assert isinstance(state.layers[1].bias, OptLeaf)
    s = tr.setup(tr.Descent(), {'a': np.zeros(2), 'n': 3, 'name': 'x', 'f': np.tanh})
    assert isinstance(s['a'], OptLeaf) and s['n'] is None and s['name'] is None
    with pytest.raises(TypeError, match='optimiser'):
        tr.setup('adam', m)


def test_update_in_place_with_gradient_tree():
    m = mlp()
    w0 = m.layers[0].weight
    before = w0.copy()
    g = tr.gradient(mlp_loss, m, X, Y)[0]
    tr.update(tr.setup(tr.Descent(0.5), m), m, g)
    assert m.layers[0].weight is w0                          # the same array, changed
    np.testing.assert_allclose(w0, before - 0.5 * g.layers[0].weight)


def test_update_skips_none_and_keeps_dtype():
    model = {'w': np.ones(2, dtype=np.float32), 'frozen': np.ones(2), 'scale': 2.0}
    state = tr.setup(tr.Adam(0.1), model)
    tr.update(state, model, {'w': np.array([1.0, -1.0]), 'frozen': None, 'scale': 0.5})
    assert model['w'].dtype == np.float32
    np.testing.assert_allclose(model['w'], [0.9, 1.1], rtol=1e-6)
    np.testing.assert_array_equal(model['frozen'], 1.0)
    assert model['scale'] == 2.0                            # Python numbers are not trained
    tr.update(state, model, {'w': None, 'frozen': None, 'scale': None})
    np.testing.assert_allclose(model['w'], [0.9, 1.1], rtol=1e-6)


def test_tied_weights_share_state_and_step_once():
    shared = np.array([1.0, 2.0])
    model = {'a': shared, 'b': [shared], 'c': np.array([0.0])}
    state = tr.setup(tr.Momentum(0.1, 0.9), model)
    assert state['a'] is state['b'][0]
    g = tr.gradient(lambda m: np.sum(m['a'] * m['b'][0]) + np.sum(m['c']), model)[0]
    np.testing.assert_allclose(g['a'], 2 * shared)            # total gradient in both places
    tr.update(state, model, g)
    np.testing.assert_allclose(model['a'], [0.8, 1.6])        # one step, not two
    assert model['b'][0] is model['a']


def test_update_tracked_model_uses_and_resets_grad():
    m = tr.fmap(tr.param, mlp())
    state = tr.setup(tr.Descent(1.0), m)
    assert state.layers[0].weight.state is None
    tr.back(mlp_loss(m, X, Y))
    g = m.layers[0].weight.grad.copy()
    w = tr.data(m.layers[0].weight).copy()
    tr.update(state, m)
    np.testing.assert_allclose(tr.data(m.layers[0].weight), w - g)
    np.testing.assert_array_equal(m.layers[0].weight.grad, 0.0)
    # a second round uses fresh gradients of the updated model
    loss_before = float(tr.data(mlp_loss(m, X, Y)))
    for _ in range(20):
        tr.back(mlp_loss(m, X, Y))
        tr.update(state, m, tr.grad(m))
    assert float(tr.data(mlp_loss(m, X, Y))) < loss_before


def test_update_errors():
    m = mlp()
    state = tr.setup(tr.Adam(), m)
    grads = tr.gradient(mlp_loss, m, X, Y)
    with pytest.raises(ValueError, match=r'\[0\]'):
        tr.update(state, m, grads)                          # the whole tuple, not grads[0]
    with pytest.raises(ValueError, match='shape'):
        tr.update(tr.setup(tr.Adam(), {'w': np.zeros(2)}), {'w': np.zeros(2)},
                  {'w': np.zeros(3)})
    with pytest.raises(ValueError, match='setup'):
        tr.update(state, {'w': np.zeros(2)}, {'w': np.zeros(2)})


def test_update_while_a_live_entry_saved_a_parameter_is_refused_whole():
    m = tr.fmap(tr.param, mlp())
    state = tr.setup(tr.Descent(1.0), m)
    tr.back(mlp_loss(m, X, Y))
    before = tr.destructure(tr.data(m))[0]
    preds = m(X)                                   # kept, never through back()
    with pytest.raises(ValueError, match=r'saved by a tape entry that is still alive .*'
                                         r'preds = model\(x\)'):
        tr.update(state, m)
    np.testing.assert_array_equal(tr.destructure(tr.data(m))[0], before)   # nothing changed
    del preds
    tr.update(state, m)
    assert not np.array_equal(tr.destructure(tr.data(m))[0], before)
    frozen = np.ones(2)
    frozen.flags.writeable = False
    with pytest.raises(TypeError, match='read-only'):
        tr.update(tr.setup(tr.Descent(1.0), {'w': frozen}), {'w': frozen}, {'w': np.ones(2)})


# --------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------

def regression_data(n_batches=40, batch=16, seed=0):
    rng = np.random.default_rng(seed)
    w_true = np.array([[2.0, -1.0, 0.5]])
    data = []
    for _ in range(n_batches):
        x = rng.standard_normal((batch, 3))
        data.append((x, x @ w_true.T + 0.3))
    return data, w_true


def linear_loss(m, x, y):
    return nn.mse(m(x), y)


def test_train_fits_and_returns_losses():
    data, w_true = regression_data()
    model = nn.Dense(3, 1, rng=0)
    state = tr.setup(tr.Adam(0.1), model)
    losses = []
    for _ in range(5):
        losses += tr.train(linear_loss, model, data, state, progress=False)
    assert len(losses) == 5 * len(data)
    assert all(isinstance(v, float) for v in losses)
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(model.weight, w_true, atol=1e-2)
    np.testing.assert_allclose(model.bias, [0.3], atol=1e-2)


def test_train_matches_manual_loop():
    data, _ = regression_data(10)
    m1, m2 = nn.Dense(3, 1, rng=0), nn.Dense(3, 1, rng=0)
    s1, s2 = tr.setup(tr.Momentum(0.05), m1), tr.setup(tr.Momentum(0.05), m2)
    losses = tr.train(linear_loss, m1, data, s1, progress=False)
    for (x, y), loss in zip(data, losses):
        val, g = tr.withgradient(linear_loss, m2, x, y)
        assert val == pytest.approx(loss, rel=1e-14)
        tr.update(s2, m2, g[0])
    np.testing.assert_allclose(m1.weight, m2.weight, rtol=1e-14)


def test_train_progress_bar_shows_running_loss(capsys):
    data, _ = regression_data(5)
    model = nn.Dense(3, 1, rng=0)
    tr.train(linear_loss, model, data, tr.setup(tr.Descent(0.01), model), desc='fit')
    err = capsys.readouterr().err
    assert 'fit' in err and 'loss=' in err and '5/5' in err
    tr.train(linear_loss, model, data, tr.setup(tr.Descent(0.01), model), progress=False)
    assert capsys.readouterr().err == ''


def test_train_batches_that_are_not_tuples_and_generators():
    xs = [np.full((4, 1), 2.0)] * 30
    model = {'w': np.array([0.0])}
    losses = tr.train(lambda m, x: np.mean((x * m['w'] - 1.0) ** 2), model,
                      (x for x in xs), tr.setup(tr.Adam(0.1), model), progress=False)
    assert len(losses) == 30
    assert abs(model['w'][0] - 0.5) < 0.1


def test_train_aux_output():
    data, _ = regression_data(3)
    model = nn.Dense(3, 1, rng=0)

    def loss(m, x, y):
        yhat = m(x)
        return nn.mse(yhat, y), {'pred': yhat}
    losses = tr.train(loss, model, data, tr.setup(tr.Descent(0.01), model), progress=False)
    assert losses[0] == pytest.approx(float(nn.mse(nn.Dense(3, 1, rng=0)(data[0][0]), data[0][1])))


def test_train_stops_on_nan():
    model = {'w': np.array([1.0])}
    data = [(np.array([1.0]),), (np.array([np.nan]),), (np.array([1.0]),)]
    state = tr.setup(tr.Descent(0.1), model)
    with pytest.raises(FloatingPointError, match='batch 1'):
        tr.train(lambda m, x: np.sum(m['w'] * x), model, data, state, progress=False)
    np.testing.assert_allclose(model['w'], [0.9])           # only the first batch was used


def test_train_with_backends():
    data, w_true = regression_data(30)
    for adtype in (tr.AutoTracked(), tr.AutoCompiled()):
        model = nn.Dense(3, 1, rng=0)
        state = tr.setup(tr.Adam(0.1), model)
        for _ in range(4):
            tr.train(linear_loss, model, data, state, adtype=adtype, progress=False)
        np.testing.assert_allclose(model.weight, w_true, atol=2e-2)


@pytest.mark.parametrize('compiled', [False, True])
def test_train_with_a_tape_matches_eager(compiled):
    data, _ = regression_data(12)
    m_eager, m_tape = mlp_regressor(), mlp_regressor()
    tape = tr.GradientTape(linear_loss, m_tape, *data[0], wrt=(0,))
    if compiled:
        tape = tr.compile(tape, background=False)
    l_eager = tr.train(linear_loss, m_eager, data, tr.setup(tr.Adam(0.05), m_eager),
                       progress=False)
    l_tape = tr.train(linear_loss, m_tape, data, tr.setup(tr.Adam(0.05), m_tape), tape=tape,
                      progress=False)
    np.testing.assert_allclose(l_tape, l_eager, rtol=1e-10)
    np.testing.assert_allclose(m_tape.layers[0].weight, m_eager.layers[0].weight, rtol=1e-10)
    with pytest.raises(TypeError, match='either'):
        tr.train(linear_loss, m_tape, data, tr.setup(tr.Adam(), m_tape), tape=tape,
                 adtype=tr.AutoTracked())


def mlp_regressor():
    return nn.Chain(nn.Dense(3, 8, nn.tanh, rng=3), nn.Dense(8, 1, rng=4))


def test_single_arrays_and_tuples_as_models():
    x = np.array([1.0, 2.0])
    state = tr.setup(tr.Descent(0.5), x)
    assert isinstance(state, OptLeaf)
    tr.update(state, x, np.array([1.0, 1.0]))
    np.testing.assert_array_equal(x, [0.5, 1.5])
    m = (np.ones(2), [np.zeros(1)])
    tr.update(tr.setup(tr.Descent(0.1), m), m, (np.ones(2), [None]))
    np.testing.assert_allclose(m[0], 0.9)
    np.testing.assert_array_equal(m[1][0], 0.0)
    p = tr.param(np.array([1.0, 2.0]))
    state = tr.setup(tr.Descent(0.5), p)
    tr.back(np.sum(p * p))
    tr.update(state, p)
    np.testing.assert_array_equal(tr.data(p), [0.0, 0.0])
    np.testing.assert_array_equal(p.grad, [0.0, 0.0])
    with pytest.raises(TypeError, match='grads is required'):
        tr.update(tr.setup(tr.Descent(), np.ones(2)), np.ones(2))


def test_replaced_arrays_are_found_again():
    m = nn.Dense(np.ones((1, 2)))
    state = tr.setup(tr.Descent(1.0), m)
    tr.update(state, m, tr.gradient(lambda m: np.sum(m.weight), m)[0])
    np.testing.assert_array_equal(m.weight, [[0.0, 0.0]])
    m.weight = np.full((1, 2), 5.0)             # a new array where the old one was
    tr.update(state, m, tr.gradient(lambda m: np.sum(m.weight), m)[0])
    np.testing.assert_array_equal(m.weight, [[4.0, 4.0]])


def test_learning_rate_can_be_changed_through_the_rule():
    rule = tr.Descent(1.0)
    model = {'w': np.array([0.0])}
    state = tr.setup(rule, model)
    tr.update(state, model, {'w': np.array([1.0])})
    rule.lr = 0.5
    tr.update(state, model, {'w': np.array([1.0])})
    np.testing.assert_array_equal(model['w'], [-1.5])


def test_doctests():
    import doctest
    from tracked import optimise
    result = doctest.testmod(optimise, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize('rule', [tr.Adam(0.1), tr.AdamW(0.1, decay=0.1), tr.Momentum(0.1)])
def test_a_state_made_for_another_model_changes_nothing(rule):
    # train stepped the first layer, then failed on the second with a broadcasting error
    model = nn.Chain(nn.Dense(2, 4, rng=1), nn.Dense(4, 2, rng=2))
    state = tr.setup(rule, nn.Chain(nn.Dense(2, 4, rng=1), nn.Dense(4, 3, rng=2)))
    before = tr.fmap(np.copy, model)
    state_before = [np.copy(a) for a in tr.tree_util.leaves(
        [leaf.state for leaf in tr.tree_util.leaves(state, lambda s: isinstance(s, OptLeaf))])]
    x, y = np.ones((3, 2)), np.array([0, 1, 1])
    loss = lambda m, x, y: tr.logitcrossentropy(m(x), y)                  # noqa: E731
    with pytest.raises(ValueError, match=r'optimiser state of shape \(3, 4\)'):
        tr.train(loss, model, [(x, y)], state, progress=False)
    with pytest.raises(ValueError, match=r'optimiser state of shape \(3, 4\)'):
        tr.update(state, model, tr.gradient(loss, model, x, y)[0])
    for a, b in zip(tr.tree_util.leaves(model), tr.tree_util.leaves(before)):
        np.testing.assert_array_equal(a, b)
    state_after = [np.copy(a) for a in tr.tree_util.leaves(
        [leaf.state for leaf in tr.tree_util.leaves(state, lambda s: isinstance(s, OptLeaf))])]
    for a, b in zip(state_after, state_before):
        np.testing.assert_array_equal(a, b)                  # moments and step counts too
