"""autograd's own extensions, for programs ported with only their imports changed
(issue 28 item 4): ``tracked.autograd.extend`` (``primitive``, ``defvjp``, ``defjvp``),
``tracked.autograd.test_util.check_grads``, ``tracked.autograd.misc`` (``flatten``, the
optimisers) and ``tracked.autograd.scipy.signal.convolve``."""
import itertools

import numpy
import pytest

import tracked as tr
import tracked.numpy as np
import tracked.numpy.random as npr
from tracked.autograd import grad
from tracked.autograd.extend import defjvp, defvjp, primitive
from tracked.autograd.misc import flatten
from tracked.autograd.misc.optimizers import adam, rmsprop, sgd
from tracked.autograd.scipy.signal import convolve
from tracked.autograd.test_util import check_grads, combo_check


# -- autograd's examples/define_gradient.py, imports changed --------------------------

@primitive
def logsumexp(x):
    """Numerically stable log(sum(exp(x)))"""
    max_x = np.max(x)
    return max_x + np.log(np.sum(np.exp(x - max_x)))


def logsumexp_vjp(ans, x):
    x_shape = x.shape
    return lambda g: np.full(x_shape, g) * np.exp(x - np.full(x_shape, ans))


defvjp(logsumexp, logsumexp_vjp)


def example_func(y):
    z = y ** 2
    lse = logsumexp(z)
    return np.sum(lse)


def test_define_gradient_example_gives_autograds_numbers():
    npr.seed(0)
    y = npr.randn(10)
    g = grad(example_func)(y)
    softmax = numpy.exp(y ** 2) / numpy.sum(numpy.exp(y ** 2))
    numpy.testing.assert_allclose(g, 2 * y * softmax, rtol=1e-12)
    check_grads(example_func, modes=['rev'])(y)                    # order 2, as autograd's
    check_grads(example_func)(y)                                   # and forward mode
    H = tr.hessian(example_func, y)
    expect = numpy.diag(2 * softmax) + numpy.outer(2 * y * softmax, 2 * y) * (
        numpy.eye(10) - softmax)                                   # d(2 y s)/dy
    numpy.testing.assert_allclose(H, expect, rtol=1e-10, atol=1e-12)
    tape = tr.GradientTape(example_func, y)
    numpy.testing.assert_allclose(tape.gradient(y * 0.5)[0], grad(example_func)(y * 0.5),
                                  rtol=1e-12)


def test_primitive_without_vjp_says_so_and_none_means_no_gradient():
    f = primitive(lambda x, y: x * y)
    with pytest.raises(NotImplementedError, match='defvjp'):
        tr.gradient(f, 2.0, 3.0)
    defvjp(f, None, lambda ans, x, y: lambda g: g * x)
    assert tr.gradient(f, 2.0, 3.0) == (None, 2.0)
    defvjp(f, lambda ans, x, y: lambda g: g * y, argnums=(0,))
    assert tr.gradient(f, 2.0, 3.0) == (3.0, 2.0)
    with pytest.raises(TypeError, match='not a primitive'):
        defvjp(lambda x: x, None)


def test_defjvp_serves_forward_mode_and_nests():
    calls = []

    @primitive
    def cube(x):
        return x ** 3
    defvjp(cube, lambda ans, x: lambda g: 3 * g * x ** 2)

    def tangent(t, ans, x):
        calls.append(1)
        return 3 * t * x ** 2
    defjvp(cube, tangent)
    x = numpy.array([0.5, -2.0])
    assert tr.jvp(cube, (x,), (numpy.ones(2),))[1] == pytest.approx(3 * x ** 2)
    assert calls
    numpy.testing.assert_allclose(tr.hessian(lambda x: np.sum(cube(x)), x), numpy.diag(6 * x))
    assert grad(grad(grad(lambda t: cube(t))))(1.5) == pytest.approx(6.0)


# -- check_grads itself has teeth ------------------------------------------------------

def test_check_grads_catches_a_wrong_vjp_at_first_and_second_order():
    x = numpy.array([0.3, 1.0])
    wrong = primitive(lambda x: np.sin(x))
    defvjp(wrong, lambda ans, x: lambda g: g * np.cos(x) * 1.01)
    with pytest.raises(AssertionError):
        check_grads(wrong, modes=['rev'], order=1)(x)
    # right at first order, but the VJP reads x's value: its own derivative is lost
    detached = primitive(lambda x: x ** 3)
    defvjp(detached, lambda ans, x: lambda g: g * 3 * tr.ignore_derivatives(x) ** 2)
    check_grads(detached, modes=['rev'], order=1)(x)
    with pytest.raises(AssertionError):
        check_grads(detached, modes=['rev'], order=2)(x)


def test_combo_check_runs_every_combination():
    seen = []

    def f(x, p):
        seen.append(p)
        return np.sum(x ** p)
    combo_check(f, [0], modes=['rev'], order=1)([numpy.ones(2) * 1.5], [2.0, 3.0])
    assert {2.0, 3.0} <= set(seen)


# -- misc: flatten and the optimisers ---------------------------------------------------

def test_flatten_round_trips_and_is_differentiable():
    tree = {'w': numpy.arange(4.0).reshape(2, 2), 'b': [0.5, numpy.zeros(1)], 'n': (3,)}
    flat, unflatten = flatten(tree)
    numpy.testing.assert_array_equal(flat, [0, 1, 2, 3, 0.5, 0, 3])
    back = unflatten(flat)
    numpy.testing.assert_array_equal(back['w'], tree['w'])
    assert back['b'][0] == 0.5 and back['n'] == (3,)
    g = tr.gradient(lambda t: np.sum(flatten(t)[0] ** 2), tree)[0]
    numpy.testing.assert_array_equal(g['w'], 2 * tree['w'])
    assert g['b'][0] == 1.0


@pytest.mark.parametrize('opt, kw', [(sgd, dict(step_size=0.1, num_iters=500)),
                                     (rmsprop, dict(step_size=0.01, num_iters=2000)),
                                     (adam, dict(step_size=0.05, num_iters=1000))],
                         ids=['sgd', 'rmsprop', 'adam'])
def test_optimisers_minimise_a_quadratic_on_a_tree(opt, kw):
    target = {'a': numpy.array([1.0, -2.0]), 'b': 0.5}

    def objective(p, i):
        return np.sum((p['a'] - target['a']) ** 2) + (p['b'] - target['b']) ** 2
    gradient = grad(objective)
    seen = []
    x = opt(gradient, {'a': numpy.zeros(2), 'b': 0.0},
            callback=lambda p, i, g: seen.append(i), **kw)
    numpy.testing.assert_allclose(x['a'], target['a'], atol=2e-2)
    assert x['b'] == pytest.approx(0.5, abs=2e-2)
    assert seen[:3] == [0, 1, 2]


# -- scipy.signal.convolve, autograd's semantics ------------------------------------------

def _reference(A, B, axes, dot_axes, mode):
    """The definition, by loops: out[keep_A, keep_B, n] = sum over k and dot axes of
    A[..., k, ...] * B[..., n - k, ...] (full), cut to the valid part in 'valid' mode."""
    A, B = numpy.asarray(A), numpy.asarray(B)
    ca, cb = axes if axes is not None else (list(range(A.ndim)), list(range(A.ndim)))
    da, db = dot_axes
    ka = [i for i in range(A.ndim) if i not in ca and i not in da]
    kb = [i for i in range(B.ndim) if i not in cb and i not in db]
    full = [A.shape[i] + B.shape[j] - 1 for i, j in zip(ca, cb)]
    out = numpy.zeros([A.shape[i] for i in ka] + [B.shape[j] for j in kb] + full)
    for ia in itertools.product(*[range(n) for n in A.shape]):
        for ib in itertools.product(*[range(n) for n in B.shape]):
            if any(ia[i] != ib[j] for i, j in zip(da, db)):
                continue
            pos = tuple(ia[i] for i in ka) + tuple(ib[j] for j in kb) + tuple(
                ia[i] + ib[j] for i, j in zip(ca, cb))
            out[pos] += A[ia] * B[ib]
    if mode == 'valid':
        cut = [slice(None)] * (len(ka) + len(kb))
        for i, j in zip(ca, cb):
            lo = min(A.shape[i], B.shape[j]) - 1
            cut.append(slice(lo, lo + abs(A.shape[i] - B.shape[j]) + 1))
        out = out[tuple(cut)]
    return out


CONV = [((4, 5), (2, 3), None, ((), ())),
        ((2, 3), (4, 5), None, ((), ())),
        ((2, 2, 5, 4), (2, 3, 2, 2), ([2, 3], [2, 3]), ([1], [0])),   # convnet's layer
        ((6,), (3, 4), ([0], [0]), ((), ())),
        ((5, 3), (2, 3), ([0], [0]), ([1], [1]))]


@pytest.mark.parametrize('mode', ['full', 'valid'])
@pytest.mark.parametrize('sa, sb, axes, dot_axes', CONV)
def test_convolve_matches_its_definition_and_its_derivatives(sa, sb, axes, dot_axes, mode):
    rng = numpy.random.default_rng(1)
    A, B = rng.standard_normal(sa), rng.standard_normal(sb)
    out = convolve(A, B, axes=axes, dot_axes=dot_axes, mode=mode)
    numpy.testing.assert_allclose(out, _reference(A, B, axes, dot_axes, mode), atol=1e-12)
    W = rng.standard_normal(out.shape)
    f = lambda a, b: np.sum(np.sin(convolve(a, b, axes=axes, dot_axes=dot_axes,  # noqa: E731
                                             mode=mode)) * W)
    check_grads(f, argnum=(0, 1), modes=['rev'])(A, B)
    check_grads(f, argnum=0, modes=['fwd'], order=1)(A, B)


def test_convolve_matches_scipy_on_its_common_ground():
    signal = pytest.importorskip('scipy.signal')
    rng = numpy.random.default_rng(2)
    A, B = rng.standard_normal((6, 7)), rng.standard_normal((3, 2))
    for mode in ('full', 'valid'):
        numpy.testing.assert_allclose(convolve(A, B, mode=mode),
                                      signal.convolve(A, B, mode=mode), atol=1e-12)


# -- autograd's examples/fluidsim/fluidsim.py, simplified, imports changed -----------------
# (its project() writes into the fields in place: vx -= ..., through a reshape's view)

def project(vx, vy):
    p = np.zeros(vx.shape)
    h = 1.0 / vx.shape[0]
    div = -0.5 * h * (np.roll(vx, -1, axis=0) - np.roll(vx, 1, axis=0)
                      + np.roll(vy, -1, axis=1) - np.roll(vy, 1, axis=1))
    for k in range(10):
        p = (div + np.roll(p, 1, axis=0) + np.roll(p, -1, axis=0)
             + np.roll(p, 1, axis=1) + np.roll(p, -1, axis=1)) / 4.0
    vx -= 0.5 * (np.roll(p, -1, axis=0) - np.roll(p, 1, axis=0)) / h
    vy -= 0.5 * (np.roll(p, -1, axis=1) - np.roll(p, 1, axis=1)) / h
    return vx, vy


def advect(f, vx, vy):
    rows, cols = f.shape
    cell_ys, cell_xs = np.meshgrid(np.arange(rows), np.arange(cols))
    center_xs = (cell_xs - vx).ravel()
    center_ys = (cell_ys - vy).ravel()
    left_ix = np.floor(center_xs).astype(int)
    top_ix = np.floor(center_ys).astype(int)
    rw = center_xs - left_ix
    bw = center_ys - top_ix
    left_ix = np.mod(left_ix, rows)
    right_ix = np.mod(left_ix + 1, rows)
    top_ix = np.mod(top_ix, cols)
    bot_ix = np.mod(top_ix + 1, cols)
    flat_f = (1 - rw) * ((1 - bw) * f[left_ix, top_ix] + bw * f[left_ix, bot_ix]) \
        + rw * ((1 - bw) * f[right_ix, top_ix] + bw * f[right_ix, bot_ix])
    return np.reshape(flat_f, (rows, cols))


def simulate(vx, vy, smoke, num_time_steps):
    for t in range(num_time_steps):
        vx_updated = advect(vx, vx, vy)
        vy_updated = advect(vy, vx, vy)
        vx, vy = project(vx_updated, vy_updated)
        smoke = advect(smoke, vx, vy)
    return smoke


def test_fluidsim_example_gives_numpys_value_and_the_finite_difference_gradient():
    from tracked.autograd import value_and_grad
    rows = cols = 6
    rng = numpy.random.default_rng(0)
    init_smoke = rng.uniform(size=(rows, cols))
    target = rng.uniform(size=(rows, cols))

    def objective(params):
        vx = np.reshape(params[:rows * cols], (rows, cols))
        vy = np.reshape(params[rows * cols:], (rows, cols))
        return np.mean((target - simulate(vx, vy, init_smoke, 3)) ** 2)
    params = rng.uniform(-0.3, 0.3, size=2 * rows * cols)
    value, g = value_and_grad(objective)(params)
    assert value == pytest.approx(objective(params.copy()), rel=1e-13)
    h = 1e-6
    for seed in range(3):
        v = numpy.random.default_rng(seed).standard_normal(params.size)
        fd = (objective(params + h * v) - objective(params - h * v)) / (2 * h)
        assert g @ v == pytest.approx(fd, rel=1e-5)
