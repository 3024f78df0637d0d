"""Programs written in HIPS autograd's style, run with only their imports changed:

    import autograd.numpy as np                 -> import tracked.numpy as np
    from autograd import grad, value_and_grad   -> from tracked.autograd import ...
    from autograd.scipy... import ...           -> from tracked.scipy... import ...

Each is checked against finite differences or a closed form, not only for running."""
import numpy
import pytest

import tracked as tr
import tracked.numpy as np
import tracked.numpy.random as npr
from tracked.autograd import elementwise_grad, grad, hessian, jacobian, value_and_grad

scipy = pytest.importorskip('scipy')
from scipy.optimize import minimize                                  # noqa: E402
from tracked.scipy.special import gammaln, logsumexp                 # noqa: E402
from tracked.scipy.stats import multivariate_normal as mvn           # noqa: E402


def test_the_transformations_have_autograds_shapes_and_conventions():
    x = np.array([0.3, -1.2, 2.0])
    f = lambda x, s: np.sum(np.sin(x) * s)                           # noqa: E731
    numpy.testing.assert_allclose(grad(f)(x, 2.0), 2 * numpy.cos(x))
    assert grad(f, 1)(x, 2.0) == pytest.approx(numpy.sum(numpy.sin(x)))
    gx, gs = grad(f, (0, 1))(x, 2.0)
    assert gx.shape == (3,) and gs == pytest.approx(numpy.sum(numpy.sin(x)))
    numpy.testing.assert_array_equal(grad(lambda x, y: np.sum(y))(x, x), numpy.zeros(3))
    assert jacobian(lambda x: np.outer(x, x))(x).shape == (3, 3, 3)
    assert hessian(lambda m: np.sum(m ** 3))(numpy.ones((2, 2))).shape == (2, 2, 2, 2)
    numpy.testing.assert_allclose(elementwise_grad(np.exp)(x), numpy.exp(x))
    assert grad(grad(grad(lambda t: t ** 4)))(1.5) == pytest.approx(24 * 1.5)


def test_a_pendulum_built_from_lists_of_scalars():
    # the state is rebuilt from scalars each step (autograd's style), and the loss is a
    # sum over a Python list of tracked scalars
    def simulate(params, steps=40, dt=0.05):
        length, damping = params[0], params[1]
        theta, omega = 1.0, 0.0
        energies = []
        for _ in range(steps):
            state = np.array([theta, omega])
            rate = np.array([state[1], -9.81 / length * np.sin(state[0]) - damping * state[1]])
            theta, omega = state + dt * rate
            energies.append(0.5 * omega ** 2 + 9.81 / length * (1 - np.cos(theta)))
        return np.sum(energies) / steps + np.max([theta, omega]) ** 2

    p = np.array([1.3, 0.2])
    g = grad(simulate)(p)
    numpy.testing.assert_allclose(g, tr.gradient(simulate, tr.AutoFiniteDifferences(), p)[0],
                                  rtol=1e-6)
    tape = tr.GradientTape(simulate, p)
    numpy.testing.assert_allclose(tape.gradient(p * 1.1)[0], grad(simulate)(p * 1.1), rtol=1e-10)


def test_gaussian_process_marginal_likelihood_fitted_with_scipy():
    def rbf(kernel_params, x, xp):
        scale = np.exp(kernel_params[0])
        lengths = np.exp(kernel_params[1:])
        diffs = np.expand_dims(x / lengths, 1) - np.expand_dims(xp / lengths, 0)
        return scale * np.exp(-0.5 * np.sum(diffs ** 2, axis=2))

    def log_marginal_likelihood(params, x, y):
        mean, noise = params[0], np.exp(params[1]) + 1e-4
        cov = rbf(params[2:], x, x) + noise * np.eye(len(y))
        return mvn.logpdf(y, mean * np.ones(len(y)), cov)

    rs = npr.RandomState(1)
    x = np.concatenate([np.linspace(-2, -0.5, 8), np.linspace(1, 2, 7)]).reshape(15, 1)
    y = np.cos(2 * x[:, 0]) + 0.1 * rs.randn(15)
    objective = lambda p: -log_marginal_likelihood(p, x, y)          # noqa: E731
    p0 = 0.1 * rs.randn(4)
    numpy.testing.assert_allclose(
        grad(objective)(p0), tr.gradient(objective, tr.AutoFiniteDifferences(), p0)[0],
        rtol=1e-5)
    res = minimize(value_and_grad(objective), p0, jac=True, method='CG')
    assert res.success and res.fun < objective(p0) - 5
    assert numpy.max(numpy.abs(grad(objective)(res.x))) < 1e-3


def test_a_character_rnn_with_dict_parameters_and_a_hand_written_adam():
    def concat_and_multiply(weights, *args):
        stacked = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
        return np.dot(stacked, weights)

    def log_likelihood(params, seqs):
        hidden = np.repeat(params['h0'], seqs.shape[1], axis=0)
        total = 0.0
        for t in range(seqs.shape[0] - 1):
            hidden = np.tanh(concat_and_multiply(params['change'], seqs[t], hidden))
            out = concat_and_multiply(params['predict'], hidden)
            total = total + np.sum((out - logsumexp(out, axis=1, keepdims=True)) * seqs[t + 1])
        return total / (seqs.shape[0] * seqs.shape[1])

    alphabet, state = 6, 5
    rs = npr.RandomState(0)
    codes = np.array([[ord(c) % alphabet for c in word] for word in ('abcabc', 'acbbca')]).T
    seqs = np.array(codes[:, :, None] == np.arange(alphabet), dtype=float)
    params = {'h0': 0.1 * rs.randn(1, state),
              'change': 0.1 * rs.randn(alphabet + state + 1, state),
              'predict': 0.1 * rs.randn(state + 1, alphabet)}
    loss = lambda p: -log_likelihood(p, seqs)                        # noqa: E731
    assert tr.gradcheck(loss, params, order=1)
    start = loss(params)
    m = {k: numpy.zeros_like(v) for k, v in params.items()}
    v = {k: numpy.zeros_like(w) for k, w in params.items()}
    for i in range(60):
        g = grad(loss)(params)
        for k in params:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
            params[k] = params[k] - 0.05 * (m[k] / (1 - 0.9 ** (i + 1))) / (
                numpy.sqrt(v[k] / (1 - 0.999 ** (i + 1))) + 1e-8)
    assert loss(params) < 0.7 * start


def test_negative_binomial_stationary_point_by_newton_with_nested_grads():
    def loglike(r, p, x):
        return np.sum(gammaln(r + x) - gammaln(r) - gammaln(x + 1) + x * np.log(p)
                      + r * np.log(1 - p))

    npr.seed(3)
    data = npr.poisson(npr.gamma(4.0, 1.5, size=600))
    p_of = lambda r: np.sum(data) / np.sum(r + data)                 # noqa: E731
    score = lambda r: grad(loglike)(r, p_of(r), data)                # noqa: E731
    r = scipy.optimize.newton(score, 2.0, fprime=grad(score), fprime2=grad(grad(score)))
    gr, gp = grad(lambda rp: loglike(rp[0], rp[1], data))((r, p_of(r)))
    assert abs(gr) < 1e-6 and abs(gp) < 1e-6
