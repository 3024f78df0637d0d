"""``tracked.scipy.integrate``: odeint and solve_ivp differentiated by the adjoint method,
against finite differences (first and second order, forward mode), closed forms,
and on recorded and compiled tapes."""
import numpy as np
import pytest

pytest.importorskip('scipy.integrate')

import tracked as tr                                        # noqa: E402
from tracked.scipy.integrate import odeint, solve_ivp       # noqa: E402

TOL = {'rtol': 1e-11, 'atol': 1e-11}
T = np.linspace(0.0, 2.0, 5)


def oscillator(y, t, k, c):
    return np.stack([y[1], -k * y[0] - c * y[1]])


def loss(y0, k, c):
    return np.sum(odeint(oscillator, y0, T, (k, c), **TOL) ** 2)


Y0 = np.array([1.0, 0.3])


def test_odeint_matches_scipy_and_the_closed_form_gradient():
    import scipy.integrate as si
    np.testing.assert_allclose(odeint(oscillator, tr.param(Y0), T, (2.0, 0.3), **TOL).data,
                               si.odeint(oscillator, Y0, T, (2.0, 0.3), **TOL), rtol=1e-12)
    # y' = -k y: y(t) = y0 exp(-k t), d y(t) / dk = -t y(t)
    t = np.array([0.0, 0.5, 2.0])
    (g,) = tr.gradient(
        lambda k: np.sum(odeint(lambda y, t, k: -k * y, np.ones(1), t, (k,), **TOL)), 0.7)
    np.testing.assert_allclose(g, np.sum(-t * np.exp(-0.7 * t)), rtol=1e-8)


def test_odeint_against_finite_differences():
    assert tr.gradcheck(loss, Y0, 2.0, 0.3, order=1, rtol=1e-6)
    assert tr.jvpcheck(loss, Y0, 2.0, 0.3, rtol=1e-6)


def test_odeint_second_order():
    # the pullback integrates the adjoint system with the same primitive: differentiable
    assert tr.gradcheck(loss, Y0, 2.0, 0.3, order=2, rtol=1e-4)
    h = tr.hessian(lambda k: loss(Y0, k, 0.3), 2.0)
    eps = 1e-4
    g = [tr.gradient(lambda k: loss(Y0, k, 0.3), k)[0] for k in (2.0 - eps, 2.0 + eps)]
    np.testing.assert_allclose(h, (g[1] - g[0]) / (2 * eps), rtol=1e-5)


def test_neural_ode_with_a_tree_of_parameters():
    # autograd's neural-ODE style: params is a list of (W, b) layers passed through args
    rng = np.random.default_rng(0)
    params = [(0.5 * rng.standard_normal((4, 2)), np.zeros(4)),
              (0.5 * rng.standard_normal((2, 4)), 0.1 * np.ones(2))]

    def net(y, t, params):
        (w1, b1), (w2, b2) = params
        return w2 @ np.tanh(w1 @ y + b1) + b2

    target = np.array([[1.0, -0.5], [0.5, 0.0], [0.2, 0.3], [0.0, 0.4]])

    def fit(params):
        ys = odeint(net, np.array([1.0, -0.5]), np.linspace(0, 1, 4), (params,), **TOL)
        return np.sum((ys - target) ** 2)
    (g,) = tr.gradient(fit, params)
    (fd,) = tr.gradient(fit, tr.AutoFiniteDifferences(), params)
    for (gw, gb), (fw, fb) in zip(g, fd):
        np.testing.assert_allclose(gw, fw, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(gb, fb, rtol=1e-5, atol=1e-8)


def test_solve_ivp_with_a_list_right_hand_side():
    def f(t, y, k):
        return [y[1], -k * y[0]]            # a list of tracked scalars, as users write it

    def final(k, y0):
        sol = solve_ivp(f, (0.0, 2.0), y0, args=(k,), t_eval=np.linspace(0, 2, 5), **TOL)
        assert sol.success and sol.y.shape == (2, 5)
        return np.sum(sol.y[0] ** 2)
    assert tr.gradcheck(final, 1.5, np.array([1.0, 0.0]), order=2, rtol=1e-4)
    # y'' = -k y from (1, 0): y(t) = cos(sqrt(k) t)
    (g,) = tr.gradient(lambda k: solve_ivp(f, (0.0, 2.0), np.array([1.0, 0.0]), args=(k,),
                                           t_eval=[2.0], method='DOP853', **TOL).y[0, 0], 1.5)
    np.testing.assert_allclose(g, -np.sin(np.sqrt(1.5) * 2.0) * 2.0 / (2 * np.sqrt(1.5)), rtol=1e-7)


def test_solve_ivp_without_t_eval_holds_the_solvers_steps():
    import scipy.integrate as si

    def f(t, y, k):
        return -k * y
    sol = solve_ivp(f, (0.0, 1.0), tr.param(np.ones(1)), args=(0.5,), **TOL)
    ref = si.solve_ivp(f, (0.0, 1.0), np.ones(1), args=(0.5,), **TOL)
    np.testing.assert_allclose(sol.t, ref.t)
    np.testing.assert_allclose(sol.y.data, ref.y, rtol=1e-9)
    # on a recorded tape the steps are a guard: other values that step elsewhere are refused
    tape = tr.GradientTape(
        lambda k: np.sum(solve_ivp(f, (0.0, 1.0), np.ones(1), args=(k,), **TOL).y), 0.5)
    with pytest.raises(tr.TapeGuardError):
        tape.gradient(5.0)


def forced(y, t, k):
    """A time-dependent right-hand side: moving the start time is not a shift."""
    return -k * y + np.sin(3 * t) * y[::-1]


def test_output_times_are_differentiable():
    # d y(T) / dT = f(y(T), T): exp(-T)' for y' = -y
    g = tr.gradient(lambda t_end: odeint(lambda y, t: -y, np.ones(1), [0.0, t_end], **TOL)[-1, 0],
                    1.0)[0]
    assert np.isclose(g, -np.exp(-1.0), rtol=1e-8)
    times = np.array([0.1, 0.6, 1.3])
    f = lambda t, k: np.sum(odeint(forced, Y0, t, (k,), **TOL) ** 2)
    assert tr.gradcheck(f, times, 0.7, rtol=1e-4, atol=1e-6)
    assert tr.jvpcheck(lambda t: odeint(forced, Y0, t, (0.7,), **TOL), times, rtol=1e-4, atol=1e-6)
    tape = tr.GradientTape(f, times, 0.7)
    for g2 in (tape.gradient(times * 1.1, 0.6),
               tr.compile(tape, background=False).gradient(times * 1.1, 0.6)):
        for a, b in zip(g2, tr.gradient(f, times * 1.1, 0.6)):
            np.testing.assert_allclose(a, b, rtol=1e-8)

    def final(t0, t_end, t_eval=None):
        sol = solve_ivp(lambda t, y: forced(y, t, 0.7), (t0, t_end), Y0, t_eval=t_eval, **TOL)
        return np.sum(sol.y[:, -1] ** 2)
    # the span's ends, with the solver's own steps (held at fractions of the span) or t_eval
    assert tr.gradcheck(final, 0.1, 1.2, rtol=1e-4, atol=1e-6, order=1)
    assert tr.gradcheck(lambda t0: final(t0, 1.2, [0.5, 1.2]), 0.1, rtol=1e-4, atol=1e-6)
    assert tr.gradcheck(lambda te: final(0.1, 1.5, te), np.array([0.5, 1.2]), rtol=1e-4,
                        atol=1e-6)


def test_recorded_and_compiled_tapes_rerun_the_solver():
    tape = tr.GradientTape(loss, Y0, 2.0, 0.3)
    ctape = tr.compile(tape, background=False)
    for args in ((Y0, 2.0, 0.3), (np.array([0.5, -1.0]), 1.2, 0.6)):
        val, g = tr.withgradient(loss, *args)
        for v2, g2 in (tape.withgradient(*args), ctape.withgradient(*args)):
            np.testing.assert_allclose(v2, val, rtol=1e-10)
            for a, b in zip(g2, g):
                np.testing.assert_allclose(a, b, rtol=1e-8)


def test_a_closure_over_a_tracked_parameter_is_refused_with_the_fix():
    def f(k):
        return np.sum(odeint(lambda y, t: -k * y, np.ones(1), T))
    with pytest.raises(TypeError, match=r'args=\(\.\.\.\)'):
        tr.gradient(f, 0.5)


def test_plain_values_give_plain_results():
    ys = odeint(oscillator, Y0, T, (2.0, 0.3))
    assert type(ys) is np.ndarray and ys.shape == (5, 2)
