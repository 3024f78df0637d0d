"""``tracked.scipy.special``: the functions NumPy's protocols cannot intercept, against
finite differences (second order, forward mode) and SciPy's values."""
import numpy as np
import pytest

sp = pytest.importorskip('scipy.special')

import tracked as tr                                        # noqa: E402
from tracked.scipy import special as tsp                    # noqa: E402
from tests.rules.harness import arg, case, const, parametrize   # noqa: E402

CASES = [
    case(tsp.logsumexp, (5,)), case(tsp.logsumexp, ()), case(tsp.logsumexp, (2, 3)),
    case(tsp.logsumexp, (2, 3), kwargs={'axis': 1}),
    case(tsp.logsumexp, (2, 3, 4), kwargs={'axis': (0, 2), 'keepdims': True}),
    case(tsp.logsumexp, (2, 3), kwargs={'axis': -2}),
    case(lambda a, b: tsp.logsumexp(a, b=b), (2, 3), arg((3,), 0.5, 2.0), name='logsumexp(b=)'),
    case(lambda a, b: tsp.logsumexp(a, axis=0, b=b), (3,), arg((2, 3), 0.5, 2.0),
         name='logsumexp(b= broadcasting a)'),
    case(lambda a, b: tsp.logsumexp(a, b=b, return_sign=True)[0], (4,),
         arg((4,), values=[1.0, -2.0, 0.5, -0.3]), name='logsumexp(return_sign=True)'),
    case(lambda a: tsp.logsumexp(a, b=np.array([1.0, 0.0, 2.0])), (3,), name='logsumexp(b with 0)'),
    case(tsp.softmax, (5,)), case(tsp.softmax, (2, 3), kwargs={'axis': 1}),
    case(tsp.softmax, (2, 3)),
    case(tsp.log_softmax, (5,)), case(tsp.log_softmax, (2, 3), kwargs={'axis': 0}),
    case(tsp.polygamma, const(0), arg((5,), 0.5, 3.0)),
    case(tsp.polygamma, const(2), arg((2, 3), 0.5, 3.0)),
    case(tsp.polygamma, const(np.array([0, 1, 3])), arg((2, 3), 0.5, 3.0)),
    case(tsp.multigammaln, arg((), 3.0, 5.0), const(3)),
    case(tsp.multigammaln, arg((4,), 3.0, 5.0), const(5)),
]


@parametrize(CASES)
def test_case(c):
    c.check()


X = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]])


@pytest.mark.parametrize('kwargs', [{}, {'axis': 0}, {'axis': 1}, {'axis': -1, 'keepdims': True},
                                    {'b': np.array([1.0, -1.0, 2.0]), 'return_sign': True},
                                    {'b': np.array([[2.0], [0.5]]), 'axis': 1},
                                    {'b': np.array([1.0, 0.0, 1.0]), 'axis': 1}])
def test_logsumexp_matches_scipy(kwargs):
    mine = tsp.logsumexp(tr.param(X), **kwargs)
    theirs = sp.logsumexp(X, **kwargs)
    if kwargs.get('return_sign'):
        np.testing.assert_allclose(mine[0].data, theirs[0], rtol=1e-12)
        np.testing.assert_array_equal(tr.data(mine[1]), theirs[1])
    else:
        np.testing.assert_allclose(mine.data, theirs, rtol=1e-12)


def test_logsumexp_edges():
    assert tsp.logsumexp(np.array([1000.0, 1000.0])) == pytest.approx(1000.0 + np.log(2.0))
    assert tsp.logsumexp(np.array([-np.inf, -np.inf])) == -np.inf
    assert tsp.logsumexp(np.array([np.inf, 1.0])) == np.inf
    # a negative sum without return_sign is nan, as SciPy's
    assert np.isnan(tsp.logsumexp(np.zeros(2), b=np.array([1.0, -2.0])))
    # the gradient of b at b == 0 is exp(a) / sum, not 0
    (g,) = tr.gradient(lambda b: tsp.logsumexp(np.array([0.0, 1.0]), b=b), np.array([1.0, 0.0]))
    np.testing.assert_allclose(g, [1.0, np.e])


def test_softmax_and_polygamma_match_scipy():
    np.testing.assert_allclose(tsp.softmax(tr.param(X)).data, sp.softmax(X), rtol=1e-12)
    np.testing.assert_allclose(tsp.log_softmax(tr.param(X), axis=1).data,
                               sp.log_softmax(X, axis=1), rtol=1e-12)
    x = np.array([0.3, 1.5, 4.0])
    for n in (0, 1, 2, 4):
        np.testing.assert_allclose(tsp.polygamma(n, tr.param(x)).data, sp.polygamma(n, x),
                                   rtol=1e-12)
    np.testing.assert_allclose(tsp.polygamma(np.array([0, 1, 2]), x), sp.polygamma([0, 1, 2], x),
                               rtol=1e-12)
    np.testing.assert_allclose(tsp.multigammaln(tr.param(np.array([3.5, 7.0])), 4).data,
                               sp.multigammaln(np.array([3.5, 7.0]), 4), rtol=1e-12)
    with pytest.raises(ValueError, match='condition a'):
        tsp.multigammaln(1.0, 4)


def test_derivative_of_polygamma_is_the_next_one():
    for n in (0, 1, 3):
        (g,) = tr.gradient(lambda x: tsp.polygamma(n, x), 1.7)
        assert g == pytest.approx(sp.polygamma(n + 1, 1.7), rel=1e-12)


def test_other_names_are_scipys():
    from scipy.special import _ufuncs
    # the ufuncs themselves (the public names, unless SCIPY_ARRAY_API=1 wraps them)
    assert tsp.gammaln is _ufuncs.gammaln and tsp.erf is _ufuncs.erf and tsp.digamma is _ufuncs.psi
    assert tsp.softplus is sp.softplus and tsp.comb is sp.comb
    assert tsp.zeta(2.0, 1.5) == sp.zeta(2.0, 1.5) and tsp.zeta(3.0) == sp.zeta(3.0)


def test_errors_name_scipy_functions():
    with pytest.raises(TypeError, match=r'no derivative rule for scipy\.special\.ellipk\.'):
        tr.gradient(sp.ellipk, 0.3)
    with pytest.raises(TypeError, match=r'scipy\.special\.gammaln\(\.\.\., out=\.\.\.\)'):
        tr.gradient(lambda x: sp.gammaln(x, out=np.zeros(())), 0.3)
