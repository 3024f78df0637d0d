"""tracked/flat.py: destructure (a model as one vector and back) and nparams, on plain
and tracked vectors, under nesting (a Hessian over a model's flat parameters), on
recorded and compiled tapes, and with SciPy's optimiser."""
import numpy as np
import pytest

import tracked as tr

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 2))
Y = RNG.standard_normal((6, 1))


def small_model():
    return tr.Chain(tr.Dense(2, 3, tr.tanh, rng=1), tr.Dense(3, 1, rng=2))


def loss(m, x, y):
    return tr.nn.mse(m(x), y)


def test_flat_vector_in_walk_order():
    m = small_model()
    flat, re = tr.destructure(m)
    d0, d1 = m.layers
    expected = np.concatenate([d0.weight.ravel(), d0.bias, d1.weight.ravel(), d1.bias])
    np.testing.assert_array_equal(flat, expected)
    assert flat.dtype == np.float64 and re.length == 13 == tr.nparams(m)
    back = re(flat)
    assert type(back) is tr.Chain and type(back.layers[0]) is tr.Dense
    assert back.layers[0].activation is tr.tanh
    np.testing.assert_array_equal(back.layers[1].weight, d1.weight)
    assert repr(re) == 'Restructure(Chain, 13 parameters)'


def test_dtypes_float32_and_mixed():
    m32 = tr.Chain(tr.Dense(2, 3, dtype=np.float32, rng=0))
    flat, re = tr.destructure(m32)
    assert flat.dtype == np.float32
    assert re(flat.astype(np.float64)).layers[0].weight.dtype == np.float32
    mixed = {'a': np.ones(2, np.float32), 'b': np.ones(3)}
    flat, re = tr.destructure(mixed)
    assert flat.dtype == np.float64
    out = re(np.arange(5.0))
    assert out['a'].dtype == np.float32 and out['b'].dtype == np.float64
    np.testing.assert_array_equal(out['b'], [2.0, 3.0, 4.0])


def test_non_parameters_stay_and_tied_arrays_appear_once():
    @tr.leaf
    class Table:
        def __init__(self):
            self.values = np.ones(4)
    table = Table()
    w = np.ones((2, 2))
    model = {'enc': w, 'dec': w, 'steps': np.arange(3), 'eps': 1e-5, 'act': np.tanh,
             'name': 'tied', 'table': table, 'mask': np.array([True, False])}
    flat, re = tr.destructure(model)
    assert flat.shape == (4,) and tr.nparams(model) == 4
    out = re(np.arange(4.0))
    assert out['enc'] is out['dec']
    np.testing.assert_array_equal(out['enc'], [[0.0, 1.0], [2.0, 3.0]])
    assert out['steps'] is model['steps'] and out['table'] is table
    assert out['eps'] == 1e-5 and out['act'] is np.tanh and out['name'] == 'tied'
    assert out['mask'] is model['mask']


def test_re_copies_a_plain_vector():
    flat, re = tr.destructure({'w': np.zeros(3)})
    v = np.ones(3)
    out = re(v)
    v[:] = 5.0                      # scipy.optimize may reuse its vector
    np.testing.assert_array_equal(out['w'], [1.0, 1.0, 1.0])


def test_wrong_length_names_both():
    _, re = tr.destructure(small_model())
    with pytest.raises(ValueError, match='v has length 12; the model has 13 parameters'):
        re(np.zeros(12))
    with pytest.raises(ValueError, match=r'v has shape \(13, 1\)'):
        re(np.zeros((13, 1)))


def test_empty_and_single_array():
    flat, re = tr.destructure({'name': 'nothing', 'n': 3})
    assert flat.shape == (0,) and re(flat) == {'name': 'nothing', 'n': 3}
    flat, re = tr.destructure(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(re(flat + 1), [[1, 2, 3], [4, 5, 6]])


def test_gradient_through_re_equals_model_gradient():
    m = small_model()
    flat, re = tr.destructure(m)
    g_flat, = tr.gradient(lambda v: loss(re(v), X, Y), flat)
    g_model = tr.gradient(loss, m, X, Y)[0]
    np.testing.assert_allclose(g_flat, tr.destructure(g_model)[0], rtol=1e-13)
    fd = tr.gradient(lambda v: loss(re(v), X, Y), tr.AutoFiniteDifferences(), flat)[0]
    np.testing.assert_allclose(g_flat, fd, rtol=1e-6, atol=1e-9)


def test_hessian_over_flat_parameters():
    m = small_model()
    flat, re = tr.destructure(m)

    def f(v):
        return loss(re(v), X, Y)
    H = tr.hessian(f, flat)                   # forward over reverse
    assert H.shape == (13, 13)
    np.testing.assert_allclose(H, tr.hessian_reverse(f, flat), atol=1e-12)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    # each column against central differences of the reverse-mode gradient
    eps = 1e-6
    for j in (0, 5, 12):
        e = np.zeros(13)
        e[j] = eps
        col = (tr.gradient(f, flat + e)[0] - tr.gradient(f, flat - e)[0]) / (2 * eps)
        np.testing.assert_allclose(H[:, j], col, rtol=1e-5, atol=1e-8)


def test_re_on_recorded_and_compiled_tapes():
    m = small_model()
    flat, re = tr.destructure(m)

    def f(v, x, y):
        return loss(re(v), x, y)
    tape = tr.GradientTape(f, flat, X, Y, wrt=(0,))
    ctape = tr.compile(tape, background=False)
    v2 = flat * 1.5 - 0.1
    expected = tr.gradient(lambda v: f(v, X, Y), v2)[0]
    np.testing.assert_allclose(tape.gradient(v2, X, Y)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(ctape.gradient(v2, X, Y)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(tr.gradient(f, tr.AutoCompiled(), v2, X, Y)[0], expected,
                               rtol=1e-12)


def test_nparams():
    assert tr.nparams(tr.Dense(784, 32)) == 25_120
    assert tr.nparams(tr.Chain(tr.Dense(784, 32), tr.Dense(32, 10), tr.softmax)) == 25_450
    assert tr.nparams(tr.Chain(tr.Dense(2, 4), tr.BatchNorm(4))) == 12 + 8
    assert tr.nparams(tr.fmap(tr.param, tr.Dense(3, 2))) == 8       # tracked arrays count
    assert tr.nparams([1.0, 2, 'x']) == 0


def test_flux_destructure_of_a_gradient():
    # Flux.destructure((weight = [6.0;;], bias = [6.0]))[1] |> norm
    g = tr.gradient(lambda m, x: np.sum(m(x) ** 2), tr.Chain(tr.Dense(np.array([[3.0]]))),
                    np.array([1]))[0]
    assert np.linalg.norm(tr.destructure(g)[0]) == 8.48528137423857


def test_scipy_lbfgs_fits_a_model():
    optimize = pytest.importorskip('scipy.optimize')
    x = np.linspace(-2, 2, 40)[:, None]
    y = np.sin(2 * x)
    m = tr.Chain(tr.Dense(1, 12, tr.tanh, rng=3), tr.Dense(12, 1, rng=4))
    flat, re = tr.destructure(m)

    def fun(v):
        val, (g,) = tr.withgradient(lambda v: tr.nn.mse(re(v)(x), y), v)
        return float(val), g
    start = fun(flat)[0]
    res = optimize.minimize(fun, flat, jac=True, method='L-BFGS-B', options={'maxiter': 500})
    assert res.fun < 1e-3 < start
    fitted = re(res.x)
    np.testing.assert_allclose(fitted(x), y, atol=0.1)
