"""Nesting to any depth without perturbation confusion; losses that contain derivatives
of a model (Jacobian regularisation, physics-informed networks), differentiated with
respect to the weights and checked against finite differences."""
import numpy as np
import pytest

import tracked as tr

rng = np.random.default_rng(42)


def _fd_gradient(loss, params, eps=1e-6):
    """Central differences of ``loss(params)`` for a dict of float64 arrays."""
    out = {}
    for k, v in params.items():
        g = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            up = {**params, k: v.copy()}
            down = {**params, k: v.copy()}
            up[k][i] += eps
            down[k][i] -= eps
            g[i] = (float(loss(up)) - float(loss(down))) / (2 * eps)
        out[k] = g
    return out


def test_no_perturbation_confusion():
    assert tr.gradient(lambda x: x * tr.gradient(lambda y: x + y, 1.0)[0], 1.0) == (1.0,)
    # The same with the inner derivative taken with respect to the *outer* variable
    # captured from outside: d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x
    assert tr.gradient(lambda x: x * tr.gradient(lambda y: x * y, 3.0)[0], 2.0) == (4.0,)
    # Siskind & Pearlmutter: d/dx (x * d/dy (x + y))|_{y=x} mixes the two variables
    g = tr.gradient(lambda x: x * tr.gradient(lambda y: x * y + y, x)[0], 2.0)
    assert g == (2 * 2.0 + 1.0,)


@pytest.mark.parametrize('f, d3, x', [
    (np.sin, lambda x: -np.cos(x), 0.7),
    (np.exp, np.exp, -0.3),
    (lambda x: x ** 4, lambda x: 24 * x, 1.5),
    (lambda x: np.tanh(x), lambda x: -2 * (1 - np.tanh(x) ** 2) * (1 - 3 * np.tanh(x) ** 2), 0.4),
])
def test_third_derivatives(f, d3, x):
    def d(g):
        return lambda x: tr.gradient(g, x)[0]
    assert d(d(d(f)))(x) == pytest.approx(d3(x), rel=1e-12)


def test_fourth_derivative_and_hessian_of_gradient_norm():
    d = lambda g: (lambda x: tr.gradient(g, x)[0])   # noqa: E731
    assert d(d(d(d(lambda x: x ** 5))))(2.0) == pytest.approx(240.0)
    # Hessian of 0.5 |grad f|^2 for f = sum(x^3): grad = 3x^2, g = 4.5 sum(x^4), H = diag(54 x^2)
    x = np.array([1.0, -2.0, 0.5])
    H = tr.hessian(lambda x: 0.5 * np.sum(tr.gradient(lambda z: np.sum(z ** 3), x)[0] ** 2), x)
    np.testing.assert_allclose(H, np.diag(54 * x ** 2))


def test_gradient_of_gradient_with_arrays_and_crossing_levels():
    x0 = np.array([0.5, -1.0])
    y0 = np.array([2.0, 3.0])

    def outer(x):
        gy, = tr.gradient(lambda y: np.sum(x * y ** 2), y0)     # 2 x y, depends on x
        return np.sum(gy * x)                                    # 2 sum(x^2 y)
    g, = tr.gradient(outer, x0)
    np.testing.assert_allclose(g, 4 * x0 * y0)
    assert tr.gradcheck(outer, x0, order=2)


def test_jacobian_and_hessian_inside_gradient():
    x0 = np.array([0.3, 0.8])

    def trace_hessian(a):
        return np.trace(tr.hessian(lambda x: np.sum(a * x ** 3), x0))   # 6 sum(a x)
    g, = tr.gradient(trace_hessian, np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, 6 * x0)

    def jac_sum(a):
        J, = tr.jacobian(lambda x: np.sin(a * x), x0)                     # diag(a cos(a x))
        return np.sum(J ** 2)
    a0 = np.array([1.5, -0.5])
    np.testing.assert_allclose(tr.gradient(jac_sum, a0)[0],
                               tr.AutoFiniteDifferences().gradient(jac_sum, a0)[0], rtol=1e-6)


def _mlp_params(sizes, scale=0.7):
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f'W{i}'] = rng.standard_normal((b, a)) * scale
        p[f'b{i}'] = rng.standard_normal(b) * 0.1
    return p


def _mlp(p, x):
    n = len(p) // 2
    for i in range(n):
        x = p[f'W{i}'] @ x + p[f'b{i}']
        if i < n - 1:
            x = np.tanh(x)
    return x


def test_jacobian_regularisation_of_a_tanh_mlp():
    params = _mlp_params([3, 5, 2])
    xs = rng.standard_normal((4, 3))
    ys = rng.standard_normal((4, 2))

    def loss(p):
        total = 0.0
        for x, y in zip(xs, ys):
            J, = tr.jacobian(lambda x: _mlp(p, x), x)         # (2, 3), inside the loss
            total = total + np.sum((_mlp(p, x) - y) ** 2) + 0.1 * np.sum(J ** 2)
        return total
    g, = tr.gradient(loss, params)
    fd = _fd_gradient(loss, params)
    for k in params:
        np.testing.assert_allclose(g[k], fd[k], rtol=1e-5, atol=1e-7)


def test_physics_informed_loss_with_input_gradient():
    # u(t) = mlp(t); residual of u' + u = 0 at collocation points, plus u(0) = 1
    params = _mlp_params([1, 6, 1])
    ts = np.linspace(0.0, 1.0, 5)

    def u(p, t):
        return _mlp(p, np.reshape(t, (1,)))[0]

    def loss(p):
        total = (u(p, 0.0) - 1.0) ** 2
        for t in ts:
            du, = tr.gradient(lambda t: u(p, t), t)
            total = total + (du + u(p, t)) ** 2
        return total
    g, = tr.gradient(loss, params)
    fd = _fd_gradient(loss, params)
    for k in params:
        np.testing.assert_allclose(g[k], fd[k], rtol=1e-5, atol=1e-7)


def test_gradcheck_third_order_through_the_api():
    assert tr.gradcheck(lambda x: np.sum(np.sin(x) * np.exp(x)), np.array([0.2, -0.4]), order=3)


def test_nested_pullback_with_outer_tracked_cotangent():
    # d/ds [J(x)^T (s v)] computed through a pullback whose seed is tracked outside
    x = np.array([0.5, 1.5])
    v = np.array([1.0, -1.0])

    def h(s):
        _, back = tr.pullback(lambda x: np.sin(x) * x, x)
        return np.sum(back(s * v)[0])
    g, = tr.gradient(h, 2.0)
    assert g == pytest.approx(np.sum((np.cos(x) * x + np.sin(x)) * v))


# --------------------------------------------------------------------------
# The same nestings in every combination of forward and reverse mode
# --------------------------------------------------------------------------

def _grad_reverse(f):
    return lambda x: tr.gradient(f, x)[0]


def _grad_forward(f):
    """The gradient of scalar ``f`` by forward mode: one tangent per element of x."""
    return lambda x: np.reshape(tr.jacobian(f, x, mode='forward')[0], np.shape(x))


MODES = {'reverse': _grad_reverse, 'forward': _grad_forward}
COMBOS = [(o, i) for o in MODES for i in MODES]


@pytest.mark.parametrize('outer, inner', COMBOS)
def test_crossing_levels_in_every_mode(outer, inner):
    x0, y0 = np.array([0.5, -1.0]), np.array([2.0, 3.0])

    def f(x):
        gy = MODES[inner](lambda y: np.sum(x * y ** 2))(y0)       # 2 x y, depends on x
        return np.sum(gy * x)                                      # 2 sum(x^2 y)
    np.testing.assert_allclose(MODES[outer](f)(x0), 4 * x0 * y0, rtol=1e-12)


@pytest.mark.parametrize('modes', [('forward',) * 4, ('reverse', 'forward') * 2,
                                   ('forward', 'reverse') * 2, ('forward', 'forward', 'reverse',
                                                                'reverse')])
def test_fourth_derivative_in_mixed_modes(modes):
    f = lambda x: x ** 5                                  # noqa: E731
    for m in modes:
        f = MODES[m](f)
    assert f(2.0) == pytest.approx(240.0)


@pytest.mark.parametrize('outer, inner', COMBOS)
def test_jacobian_regularisation_in_every_mode(outer, inner):
    params = _mlp_params([3, 5, 2])
    flat, re = tr.destructure(params)
    xs, ys = rng.standard_normal((3, 3)), rng.standard_normal((3, 2))

    def loss(v):
        p = re(v)
        total = 0.0
        for x, y in zip(xs, ys):
            J, = tr.jacobian(lambda x: _mlp(p, x), x, mode=inner)     # (2, 3)
            total = total + np.sum((_mlp(p, x) - y) ** 2) + 0.1 * np.sum(J ** 2)
        return total
    g = MODES[outer](loss)(flat)
    fd = tr.gradient(loss, tr.AutoFiniteDifferences(), flat)[0]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('outer, inner', COMBOS)
def test_physics_informed_loss_in_every_mode(outer, inner):
    params = _mlp_params([1, 6, 1])
    flat, re = tr.destructure(params)
    ts = np.linspace(0.0, 1.0, 4)

    def loss(v):
        p = re(v)
        u = lambda t: _mlp(p, np.reshape(t, (1,)))[0]           # noqa: E731
        total = (u(0.0) - 1.0) ** 2
        for t in ts:
            total = total + (MODES[inner](u)(t) + u(t)) ** 2   # u' + u = 0
        return total
    g = MODES[outer](loss)(flat)
    fd = tr.gradient(loss, tr.AutoFiniteDifferences(), flat)[0]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
