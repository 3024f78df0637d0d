"""Forward mode: jvp, forward-mode Jacobians and Hessians, and every combination of
nesting (forward over reverse, reverse over forward, forward over forward) without
perturbation confusion, on the eager tape and on recorded tapes."""
import numpy as np
import pytest

import tracked as tr
from tracked.forward import Dual

rng = np.random.default_rng(7)


def grad_reverse(f):
    """x -> the gradient of scalar f, by reverse mode."""
    return lambda x: tr.gradient(f, x)[0]


def grad_forward(f):
    """x -> the gradient of scalar f, by forward mode (one tangent per element)."""
    def g(x):
        J = tr.jacobian(f, x, mode='forward')[0]     # one row: f is scalar
        return np.reshape(J, np.shape(x))
    return g


MODES = {'reverse': grad_reverse, 'forward': grad_forward}
COMBOS = [(outer, inner) for outer in MODES for inner in MODES]


# --- one pass, no tape ---------------------------------------------------------------

def test_jvp_is_one_forward_pass_without_a_tape():
    seen = []

    def f(x):
        seen.append(type(x))
        return np.tanh(x) @ np.ones(3) * x[0]
    x, v = rng.standard_normal(3), rng.standard_normal(3)
    y, t = tr.jvp(f, (x,), (v,))
    assert seen == [Dual]                          # f ran once, on tangent-carrying values
    J = tr.jacobian(f, x, mode='reverse')[0]
    np.testing.assert_allclose(y, f(x))
    np.testing.assert_allclose(t, J @ v, rtol=1e-12)


def test_forward_and_reverse_jacobians_agree_and_auto_picks_forward_for_tall_maps():
    W = rng.standard_normal((40, 3))
    f = lambda z: np.tanh(W @ z) * 2                # noqa: E731   R^3 -> R^40
    z = rng.standard_normal(3)
    Jf, Jr, Ja = (tr.jacobian(f, z, mode=m)[0] for m in ('forward', 'reverse', 'auto'))
    np.testing.assert_allclose(Jf, Jr, rtol=1e-12)
    np.testing.assert_allclose(Ja, Jr, rtol=1e-12)
    expected = 2 * (1 - np.tanh(W @ z) ** 2)[:, None] * W
    np.testing.assert_allclose(Jf, expected, rtol=1e-12)
    with pytest.raises(ValueError, match='mode'):
        tr.jacobian(f, z, mode='sideways')


def test_complex_tangents_follow_the_convention():
    z, v = np.array([1 + 2j, -0.5 + 1j]), np.array([0.3 - 1j, 2 + 0.5j])
    y, t = tr.jvp(lambda z: np.exp(z) * z, (z,), (v,))
    np.testing.assert_allclose(t, (np.exp(z) * z + np.exp(z)) * v)    # holomorphic: f'(z) v
    _, t = tr.jvp(lambda z: np.abs(z) ** 2, (z,), (v,))
    np.testing.assert_allclose(t, 2 * np.real(np.conj(z) * v))
    with pytest.raises(ValueError, match='complex'):
        tr.jacobian(np.sin, z)


# --- nesting in every combination ------------------------------------------------------

@pytest.mark.parametrize('outer, inner', COMBOS)
def test_no_perturbation_confusion_in_any_combination(outer, inner):
    d_out, d_in = MODES[outer], MODES[inner]
    assert d_out(lambda x: x * d_in(lambda y: x + y)(1.0))(1.0) == pytest.approx(1.0)
    assert d_out(lambda x: x * d_in(lambda y: x * y)(3.0))(2.0) == pytest.approx(4.0)
    # Siskind & Pearlmutter's mix of the two variables
    assert d_out(lambda x: x * d_in(lambda y: x * y + y)(x))(2.0) == pytest.approx(5.0)


@pytest.mark.parametrize('outer, inner', COMBOS)
def test_second_derivatives_in_any_combination(outer, inner):
    f = lambda x: np.sum(np.sin(x) * x ** 2) + np.prod(x)     # noqa: E731
    x = np.array([0.4, -1.1, 0.7])
    H = MODES[outer](lambda x: np.reshape(MODES[inner](f)(x), (3,)) @ np.array([1.0, 2.0, 3.0]))(x)
    Hr = tr.hessian_reverse(f, x) @ np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(H, Hr, rtol=1e-10)


@pytest.mark.parametrize('a, b, c', [(a, b, c) for a in MODES for b in MODES for c in MODES])
def test_third_derivatives_in_any_combination(a, b, c):
    d3 = MODES[a](MODES[b](MODES[c](np.tanh)))(0.4)
    t = np.tanh(0.4)
    assert d3 == pytest.approx(-2 * (1 - t ** 2) * (1 - 3 * t ** 2), rel=1e-10)


def test_forward_over_forward_is_a_second_directional_derivative():
    f = lambda x: np.sum(np.exp(x[:2]) * x[1:] ** 3)          # noqa: E731
    x, v, w = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    d2 = tr.jvp(lambda y: tr.jvp(f, (y,), (v,))[1], (x,), (w,))[1]
    np.testing.assert_allclose(d2, w @ tr.hessian_reverse(f, x) @ v, rtol=1e-10)


def test_reverse_over_forward_is_a_hessian_vector_product():
    f = lambda x: np.sum(np.log1p(x ** 2) * np.cos(x))       # noqa: E731
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    g = tr.gradient(lambda y: tr.jvp(f, (y,), (v,))[1], x)[0]
    np.testing.assert_allclose(g, tr.hessian_reverse(f, x) @ v, rtol=1e-10)
    np.testing.assert_allclose(tr.hvp(f, x, v), g, rtol=1e-10)


def test_hessian_diaghessian_hvp_are_forward_over_reverse_and_agree_with_reverse():
    W = rng.standard_normal((6, 6)) / 3
    f = lambda x: np.sum(np.tanh(W @ x)) + 0.5 * np.sum(x ** 2)   # noqa: E731
    x = rng.standard_normal(6)
    H = tr.hessian_reverse(f, x)
    np.testing.assert_allclose(tr.hessian(f, x), H, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(tr.diaghessian(f, x)[0], np.diag(H), rtol=1e-10)
    v = rng.standard_normal(6)
    np.testing.assert_allclose(tr.hvp(f, x, v), H @ v, rtol=1e-10)


# --- the Lux example: a Jacobian inside a loss --------------------------------------------

def _lux_model(p, x):
    h = np.tanh(x @ p['W1'].T + p['b1'])
    return h @ p['W2'].T + p['b2']


def _lux_loss(mode):
    def loss(p, x):
        J = tr.jacobian(lambda xi: _lux_model(p, xi), x, mode=mode)[0]    # (2, 2)
        return np.sum(J ** 2) + np.sum(_lux_model(p, x) ** 2)
    return loss


def _lux_params():
    r = np.random.default_rng(3)
    return {'W1': r.standard_normal((4, 2)), 'b1': r.standard_normal(4),
            'W2': r.standard_normal((2, 4)), 'b2': r.standard_normal(2)}


def test_lux_jacobian_inside_a_loss_is_forward_mode_and_matches_reverse():
    p, x = _lux_params(), np.array([0.3, -0.8])
    g_auto = tr.gradient(_lux_loss('auto'), p, x)
    g_rev = tr.gradient(_lux_loss('reverse'), p, x)
    for k in p:
        np.testing.assert_allclose(g_auto[0][k], g_rev[0][k], rtol=1e-10)
    np.testing.assert_allclose(g_auto[1], g_rev[1], rtol=1e-10)
    assert tr.gradcheck(_lux_loss('auto'), p, x, order=1)


def test_a_recorded_tape_holds_a_forward_mode_jacobian():
    p, x = _lux_params(), np.array([0.3, -0.8])
    loss = _lux_loss('forward')
    tape = tr.GradientTape(loss, p, x)
    p2 = {k: v * 1.1 for k, v in p.items()}
    val, (gp, gx) = tape.withgradient(p2, x + 0.1)
    ev, (ep, ex) = tr.withgradient(loss, p2, x + 0.1)
    assert val == pytest.approx(ev, rel=1e-12)
    for k in p:
        np.testing.assert_allclose(gp[k], ep[k], rtol=1e-10)
    np.testing.assert_allclose(gx, ex, rtol=1e-10)


def test_custom_rule_tangents():
    @tr.rule(jvp=lambda t, y, x: t[0] * (1 - y * y))
    def tanh(x):
        y = np.tanh(x)
        return y, lambda dy: (dy * (1 - y * y),)

    @tr.rule
    def softplus(x):                       # no jvp=: from its pullback (double vjp)
        y = np.logaddexp(0.0, x)
        return y, lambda dy: (dy / (1 + np.exp(-x)),)
    x = np.array([0.2, -0.7, 1.3])
    assert tr.jvpcheck(lambda x: tanh(x) * softplus(x), x)
    np.testing.assert_allclose(tr.hessian(lambda x: np.sum(tanh(x) * softplus(x)), x),
                               tr.hessian_reverse(lambda x: np.sum(tanh(x) * softplus(x)), x),
                               rtol=1e-10)


def test_lux_model_with_batchnorm_forward_and_reverse_inner_jacobians_agree():
    # Lux's nested-AD example: Chain(Dense(2 => 4, tanh), BatchNorm(4), Dense(4 => 2)),
    # a loss holding its Jacobian in the input, differentiated in the parameters; one
    # 2-element input (BatchNorm in test mode: one sample trains to a constant) and the
    # manual's batch of 10 in training mode (a 20 x 20 Jacobian through the statistics)
    def loss(mode):
        return lambda m, x: np.sum(tr.jacobian(m, x, mode=mode)[0] ** 2) + np.sum(m(x) ** 2)
    for x, mode_of in ((np.array([0.3, -0.8]), tr.testmode),
                       (np.random.default_rng(0).random((10, 2)), tr.trainmode)):
        model = mode_of(tr.Chain(tr.Dense(2, 4, tr.tanh, rng=1), tr.BatchNorm(4),
                                 tr.Dense(4, 2, rng=2)))
        grads = {m: tr.gradient(loss(m), model, x) for m in ('forward', 'reverse', 'auto')}
        ref, _ = tr.destructure(grads['reverse'][0])
        for m in ('forward', 'auto'):
            flat, _ = tr.destructure(grads[m][0])
            np.testing.assert_allclose(flat, ref, rtol=1e-10, atol=1e-10 * np.max(np.abs(ref)))
            np.testing.assert_allclose(grads[m][1], grads['reverse'][1], rtol=1e-10,
                                       atol=1e-12 * np.max(np.abs(ref)))


def test_auto_takes_forward_mode_for_square_jacobians():
    seen = []

    def f(x):
        seen.append(type(x))
        return np.tanh(x[::-1]) * x
    x = np.array([0.3, -0.8, 1.1])
    tr.jacobian(f, x)
    assert seen[-1] is Dual                         # 3 inputs, 3 outputs: forward mode
    seen.clear()
    tr.jacobian(lambda x: f(x)[:2], x)
    assert seen == [tr.TrackedArray]                # 3 inputs, 2 outputs: reverse mode, once
    seen.clear()
    tr.jacobian(lambda x: f(x)[:1], x[:2])
    assert seen == [Dual]                           # 2 inputs: forward at once, f runs once


def test_custom_rule_without_jvp_nests_in_forward_mode():
    # the tangent by double vjp must close over the outer level's values: forward over
    # forward and reverse over forward gave zero (the pullback saw plain values)
    @tr.rule
    def softplus(x):
        return np.logaddexp(0.0, x), lambda dy: (dy / (1 + np.exp(-x)),)
    x = np.array([0.3, -1.0, 2.0])
    s = 1 / (1 + np.exp(-x))
    ff = [tr.jvp(lambda z: tr.jvp(softplus, (z,), (e,))[1], (x,), (e,))[1] @ e for e in np.eye(3)]
    np.testing.assert_allclose(ff, s * (1 - s), rtol=1e-12)
    rf = tr.gradient(lambda z: np.sum(tr.jvp(softplus, (z,), (np.ones(3),))[1]), x)[0]
    np.testing.assert_allclose(rf, s * (1 - s), rtol=1e-12)
    assert tr.gradcheck(lambda z: np.sum(tr.jacobian(softplus, z, mode='forward')[0] ** 2), x)


def test_opaque_rule_inside_a_gradient_of_forward_mode_is_exact():
    import math

    @tr.rule
    def erf(x):                            # math.erf: opaque on tracked values
        y = np.vectorize(math.erf)(x)
        return y, lambda dy: (dy * 2 / np.sqrt(np.pi) * np.exp(-x ** 2),)

    @tr.rule(jvp=lambda t, y, x: t[0] * 2 / np.sqrt(np.pi) * np.exp(-x ** 2))
    def erf2(x):                           # the same with a tangent rule in NumPy
        return erf.forward.function(x)
    x = np.array([0.3, -1.0])
    np.testing.assert_allclose(tr.jvp(erf, (x,), (np.ones(2),))[1],
                               2 / np.sqrt(np.pi) * np.exp(-x ** 2))
    # reverse over forward: the pullback, rebuilt over the tracked x, is differentiated
    for rule in (erf, erf2):
        g = tr.gradient(lambda z: np.sum(tr.jvp(rule, (z,), (np.ones(2),))[1]), x)[0]
        np.testing.assert_allclose(g, -4 * x / np.sqrt(np.pi) * np.exp(-x ** 2), rtol=1e-12)


def test_a_complex_tangent_for_a_real_argument_is_refused():
    with pytest.raises(ValueError, match='complex tangent'):
        tr.jvp(np.sin, (np.array([1.0, 2.0]),), (np.array([1j, 1.0]),))
