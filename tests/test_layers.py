"""tracked/layers.py: BatchNorm, LayerNorm, Dropout and their modes, against reference
formulas and finite differences; eager, nested (Lux's Jacobian-in-the-loss example),
forward mode, and on recorded and compiled tapes (test mode replayed with the current
running statistics, training mode refused)."""
import numpy as np
import pytest

import tracked as tr

RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3)) * 2 + 1


def bn_reference(x, mean, var, scale, bias, eps=1e-5):
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def test_batchnorm_training_uses_and_tracks_batch_statistics():
    bn = tr.trainmode(tr.BatchNorm(3))
    bn.scale[:] = [1.0, 2.0, 3.0]
    bn.bias[:] = [0.0, -1.0, 1.0]
    y = bn(X)
    mu, var = X.mean(0), X.var(0)
    np.testing.assert_allclose(y, bn_reference(X, mu, var, bn.scale, bn.bias), rtol=1e-13)
    np.testing.assert_allclose(bn.state.mean, 0.1 * mu, rtol=1e-13)
    np.testing.assert_allclose(bn.state.var, 0.9 + 0.1 * X.var(0, ddof=1), rtol=1e-13)
    bn(X)                                                  # a second step of momentum
    np.testing.assert_allclose(bn.state.mean, 0.9 * 0.1 * mu + 0.1 * mu, rtol=1e-13)


def test_batchnorm_test_mode_uses_running_statistics():
    bn = tr.testmode(tr.BatchNorm(3, momentum=0.5))
    bn.state.mean[:] = [1.0, 0.0, -1.0]
    bn.state.var[:] = [4.0, 1.0, 0.25]
    np.testing.assert_allclose(bn(X), bn_reference(X, bn.state.mean, bn.state.var, 1, 0),
                               rtol=1e-13)
    np.testing.assert_array_equal(bn.state.mean, [1.0, 0.0, -1.0])     # not updated


def test_batchnorm_options_and_higher_rank_input():
    bn = tr.BatchNorm(2, tr.relu, affine=False, track_stats=False, eps=1e-3)
    assert bn.scale is None and bn.state is None and tr.nparams(bn) == 0
    x = RNG.standard_normal((4, 5, 2))                 # (batch, positions, features)
    ref = np.maximum((x - x.mean((0, 1))) / np.sqrt(x.var((0, 1)) + 1e-3), 0)
    np.testing.assert_allclose(bn(x), ref, rtol=1e-12)
    assert repr(bn) == 'BatchNorm(relu, affine=False, track_stats=False)'
    with pytest.raises(ValueError, match=r'BatchNorm\(3\) expects input of shape \(\.\.\., 3\)'):
        tr.BatchNorm(3)(np.ones((2, 4)))


def test_automatic_mode_trains_exactly_inside_a_differentiation():
    m = tr.Chain(tr.Dense(3, 3, rng=0), tr.BatchNorm(3))
    bn = m.layers[1]
    m(X)                                                   # evaluation: test mode
    np.testing.assert_array_equal(bn.state.mean, 0.0)
    tr.gradient(lambda m: np.sum(m(X) ** 2), m)            # differentiated: training
    assert np.all(bn.state.mean != 0.0)


def test_automatic_mode_on_the_model_s_plain_input_trains_inside_a_differentiation():
    # Flux's within_gradient: a Dropout (or BatchNorm) first in the model sees the plain
    # data, not a tracked value, yet the call is being differentiated
    x = np.ones((3, 4))
    m = tr.Chain(tr.Dropout(0.5, rng=0), tr.Dense(4, 1, rng=1))
    g, = tr.gradient(lambda m: np.sum(m(x)), m)
    mask = tr.trainmode(tr.Dropout(0.5, rng=0))(x)         # the same draw, by hand
    np.testing.assert_array_equal(g.layers[1].weight, [np.sum(mask, axis=0)])
    assert set(np.unique(mask)) == {0.0, 2.0}
    np.testing.assert_array_equal(m(x), tr.testmode(tr.Chain(*m.layers))(x))   # outside
    tr.trainmode(m, 'auto')
    bn = tr.Chain(tr.BatchNorm(4), tr.Dense(4, 1, rng=1))
    tr.gradient(lambda m: np.sum(m(X @ np.ones((3, 4)))), bn)
    assert np.all(bn.layers[0].state.mean != 0.0)
    ad = tr.AutoCompiled()

    def loss(m):
        return np.sum(m(x))
    tr.gradient(loss, ad, m)                               # eager: trains
    with pytest.raises(TypeError, match=r'Dropout\(0.5\) in training mode draws'):
        tr.gradient(loss, ad, m)                           # a recording: refused, not frozen


def test_state_is_never_tracked_and_gets_no_gradient():
    m = tr.trainmode(tr.Chain(tr.Dense(3, 4, tr.tanh, rng=0), tr.BatchNorm(4),
                              tr.Dense(4, 1, rng=1)))
    bn = m.layers[1]

    def inner(m, x):                                       # a gradient inside the loss
        gx = tr.gradient(lambda x: np.sum(m(x)), x)[0]
        return np.sum(m(x) ** 2) + np.sum(gx ** 2)
    g = tr.gradient(inner, m, X)[0]
    assert type(bn.state.mean) is np.ndarray and type(bn.state.var) is np.ndarray
    assert g.layers[1].state is None
    assert g.layers[1].scale.shape == (4,)
    H = tr.hessian(lambda v: inner(tr.destructure(m)[1](v), X), tr.destructure(m)[0])
    assert H.shape == (29, 29) and type(bn.state.mean) is np.ndarray
    _, tangent = tr.jvp(lambda x: np.sum(m(x) ** 2), (X,), (np.ones_like(X),))
    assert type(bn.state.var) is np.ndarray and np.isfinite(tangent)


@pytest.mark.parametrize('mode', ['train', 'test'])
def test_batchnorm_gradcheck(mode):
    bn = tr.BatchNorm(3)
    bn.scale[:] = [1.5, -0.5, 2.0]
    bn.state.mean[:] = [0.5, 1.0, -0.2]
    bn.state.var[:] = [2.0, 0.5, 1.5]
    (tr.trainmode if mode == 'train' else tr.testmode)(bn)
    w = RNG.standard_normal(X.shape)
    assert tr.gradcheck(lambda x, s, b: np.sum(np.sin(w * (
        tr.BatchNorm.__call__(_with(bn, s, b), x)))), X, bn.scale, bn.bias)


def _with(bn, scale, bias):
    """A BatchNorm sharing ``bn``'s state and mode, with other parameters."""
    new = tr.BatchNorm(3)
    new.__dict__.update(bn.__dict__)
    new.scale, new.bias = scale, bias
    return new


def test_layernorm():
    ln = tr.LayerNorm(3)
    ln.scale[:] = [1.0, 2.0, 0.5]
    ref = (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(X), ref * ln.scale, rtol=1e-13)
    assert tr.gradcheck(lambda x, s: np.sum(np.sin(_ln(s)(x))), X, ln.scale)
    ln2 = tr.LayerNorm((2, 3), affine=False)
    x = RNG.standard_normal((4, 2, 3))
    ref = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln2(x), ref, rtol=1e-12)
    assert repr(ln2) == 'LayerNorm((2, 3), affine=False)' and tr.nparams(ln2) == 0
    with pytest.raises(ValueError, match=r'expects input of shape \(\.\.\., 2, 3\)'):
        ln2(np.ones((2, 3, 2)))


def _ln(scale):
    ln = tr.LayerNorm(3)
    ln.scale = scale
    return ln


def test_dropout():
    d = tr.Dropout(0.25, rng=1)
    x = np.ones((200, 50))
    np.testing.assert_array_equal(d(x), x)                 # automatic: not differentiated
    tr.trainmode(d)
    y = d(x)
    assert set(np.unique(y)) == {0.0, 4 / 3}
    assert abs(np.mean(y == 0) - 0.25) < 0.01
    g, = tr.gradient(lambda x: np.sum(tr.Dropout(0.25, rng=7)(x)), x)
    assert set(np.unique(g)) == {0.0, 4 / 3}               # training inside gradient
    np.testing.assert_array_equal(tr.Dropout(0.25, rng=7)(tr.param(x)).data, g)
    assert d(x.astype(np.float32)).dtype == np.float32
    np.testing.assert_array_equal(tr.trainmode(tr.Dropout(1.0))(x), 0.0)
    np.testing.assert_array_equal(tr.trainmode(tr.Dropout(0.0))(x), x)
    np.testing.assert_array_equal(tr.testmode(d)(x), x)
    with pytest.raises(ValueError, match='probability'):
        tr.Dropout(1.5)


def test_trainmode_testmode_switch_every_layer():
    inner = tr.Chain(tr.Dropout(0.1), tr.BatchNorm(2))
    m = {'net': tr.Chain(tr.Dense(2, 2), inner), 'extra': [tr.Dropout(0.2)]}
    assert tr.testmode(m) is m
    layers = [inner.layers[0], inner.layers[1], m['extra'][0]]
    assert all(layer.active is False for layer in layers)
    tr.trainmode(m)
    assert all(layer.active is True for layer in layers)
    tr.trainmode(m, 'auto')
    assert all(layer.active is None for layer in layers)
    tr.testmode(m, False)
    assert all(layer.active is True for layer in layers)
    dup = tr.Duplicated(m)
    tr.testmode(dup)
    assert all(layer.active is False for layer in layers)
    with pytest.raises(ValueError, match="True, False or 'auto'"):
        tr.trainmode(m, 'yes')


def lux_model():
    rng = np.random.default_rng(0)
    return tr.trainmode(tr.Chain(tr.Dense(2, 4, tr.tanh, rng=rng), tr.BatchNorm(4),
                                 tr.Dense(4, 2, rng=rng)))


def lux_loss(model, x, y):
    """Lux's nested-AD example: a fit plus the squared norm of the model's Jacobian
    with respect to its (whole batch of) input."""
    fit = np.sum((model(x) - y) ** 2)
    J = tr.jacobian(model, x)[0]
    return fit + np.sum(J ** 2)


def test_lux_jacobian_in_the_loss_against_finite_differences():
    model = lux_model()
    x = np.random.default_rng(0).random((10, 2))
    y = np.random.default_rng(11).random((10, 2))
    gm, gx, _ = tr.gradient(lux_loss, model, x, y)
    flat, re = tr.destructure(model)
    fd_ps = tr.gradient(lambda v: lux_loss(re(v), x, y), tr.AutoFiniteDifferences(), flat)[0]
    fd_x = tr.gradient(lambda x: lux_loss(model, x, y), tr.AutoFiniteDifferences(), x)[0]
    g_flat = tr.destructure(gm)[0]
    assert np.max(np.abs(g_flat - fd_ps)) < 1e-6 * np.max(np.abs(g_flat))
    assert np.max(np.abs(gx - fd_x)) < 1e-6 * np.max(np.abs(gx))
    assert np.max(np.abs(g_flat)) > 1.0                 # a real gradient, not zeros
    # forward-mode inner Jacobian: the same gradient
    fwd = tr.gradient(lambda m, x: np.sum((m(x) - y) ** 2) + np.sum(
        tr.jacobian(m, x, mode='forward')[0] ** 2), model, x)
    np.testing.assert_allclose(tr.destructure(fwd[0])[0], g_flat, rtol=1e-10)
    np.testing.assert_allclose(fwd[1], gx, rtol=1e-10)
    # and stored with the model
    dup = tr.Duplicated(model)
    tr.gradient(lux_loss, dup, tr.Const(x), tr.Const(y))
    np.testing.assert_allclose(tr.destructure(dup.dval)[0], g_flat, rtol=1e-12)


def test_forward_mode_through_batchnorm():
    model = lux_model()
    x = RNG.standard_normal((5, 2))
    v = RNG.standard_normal((5, 2))
    _, t = tr.jvp(lambda x: model(x), (x,), (v,))
    eps = 1e-6
    fd = (model(x + eps * v) - model(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(tr.jacobian(model, x, mode='forward')[0],
                               tr.jacobian(model, x, mode='reverse')[0], atol=1e-12)


def test_test_mode_on_tapes_reads_the_current_statistics():
    model = lux_model()
    x = RNG.standard_normal((10, 2))
    y = RNG.standard_normal((10, 2))

    def loss(m, x, y):
        return np.sum((m(x) - y) ** 2)
    for _ in range(3):
        tr.gradient(loss, model, x, y)                     # training: statistics move
    tr.testmode(model)
    tape = tr.GradientTape(loss, model, x, y, wrt=(0,))
    ctape = tr.compile(tape, background=False)
    ad = tr.AutoCompiled()
    for step in range(2):
        expected = tr.destructure(tr.gradient(loss, model, x, y)[0])[0]
        for got in (tape.gradient(model, x, y)[0], ctape.gradient(model, x, y)[0],
                    tr.gradient(loss, ad, model, x, y)[0]):
            np.testing.assert_allclose(tr.destructure(got)[0], expected, rtol=1e-12)
        tr.trainmode(model)
        tr.gradient(loss, model, x * 3 + 1, y)             # the statistics change again
        tr.testmode(model)


def test_training_mode_on_a_tape_is_refused():
    model = lux_model()
    x = RNG.standard_normal((10, 2))

    def loss(m, x):
        return np.sum(m(x) ** 2)
    with pytest.raises(TypeError, match=r'BatchNorm\(4, active=True\) in training mode updates '
                                        r'its running statistics'):
        tr.GradientTape(loss, model, x)
    ad = tr.AutoCompiled()
    tr.gradient(loss, ad, model, x)          # a signature's first call: the eager tape
    with pytest.raises(TypeError, match='tr.testmode'):
        tr.gradient(loss, ad, model, x)      # the second records a tape: refused
    drop = tr.Chain(tr.Dense(2, 2, rng=0), tr.Dropout(0.5))
    ad = tr.AutoCompiled()
    tr.gradient(loss, ad, drop, x)
    with pytest.raises(TypeError, match=r'Dropout\(0.5\) in training mode draws a new random'):
        tr.gradient(loss, ad, drop, x)       # automatic mode: training
    # batch statistics only: nothing to update, so it records and replays correctly
    plain_bn = tr.Chain(tr.Dense(2, 3, rng=0), tr.BatchNorm(3, track_stats=False))
    ad = tr.AutoCompiled()
    for x2 in (x, x * 2 - 1):
        np.testing.assert_allclose(tr.destructure(tr.gradient(loss, ad, plain_bn, x2)[0])[0],
                                   tr.destructure(tr.gradient(loss, plain_bn, x2)[0])[0],
                                   rtol=1e-12)


def test_float32_layers_stay_float32():
    x = X.astype(np.float32)
    for layer in (tr.trainmode(tr.BatchNorm(3, dtype=np.float32)),
                  tr.testmode(tr.BatchNorm(3, dtype=np.float32)),
                  tr.LayerNorm(3, dtype=np.float32), tr.trainmode(tr.Dropout(0.5))):
        assert layer(x).dtype == np.float32, layer
    bn = tr.trainmode(tr.BatchNorm(3, dtype=np.float32))
    g = tr.gradient(lambda m: np.sum(m(x) ** 2), bn)[0]
    assert g.scale.dtype == np.float32 and bn.state.mean.dtype == np.float32


def test_duplicated_with_autocompiled_in_test_mode():
    model = lux_model()
    x = RNG.standard_normal((10, 2))
    y = RNG.standard_normal((10, 2))

    def loss(m, x, y):
        return np.sum((m(x) - y) ** 2)
    tr.gradient(loss, model, x, y)                         # training moves the statistics
    dup = tr.Duplicated(tr.testmode(model))
    ad = tr.AutoCompiled()
    for scale in (1.0, 3.0):
        expected = tr.destructure(tr.gradient(loss, model, x, y)[0])[0]
        tr.gradient(loss, ad, dup, tr.Const(x), tr.Const(y))
        np.testing.assert_allclose(tr.destructure(dup.dval)[0], expected, rtol=1e-12)
        model.layers[1].state.mean[:] *= scale + 1         # changed in place: still read
    with pytest.raises(TypeError, match='in training mode'):
        tr.gradient(loss, ad, tr.trainmode(dup), tr.Const(x), tr.Const(y))
