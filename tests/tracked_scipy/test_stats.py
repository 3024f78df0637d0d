"""``tracked.scipy.stats``: every distribution's methods against finite differences (in
the quantile, ``loc``, ``scale`` and the shape parameters, to second order and in
forward mode) and against SciPy's values, frozen forms, the multivariate ones."""
import numpy as np
import pytest

st = pytest.importorskip('scipy.stats')

import tracked as tr                                        # noqa: E402
from tracked.scipy import stats as ts                       # noqa: E402
from tests.rules.harness import arg, case, const, parametrize   # noqa: E402

# name: (shape parameters' domains, the standardised quantile's domain,
#        whether the distribution functions have gradients in the shapes)
CONTINUOUS = {
    'norm': ((), (-3.0, 3.0), True),
    't': (((1.5, 6.0),), (-3.0, 3.0), False),
    'cauchy': ((), (-3.0, 3.0), True),
    'logistic': ((), (-3.0, 3.0), True),
    'laplace': ((), (0.1, 3.0), True),
    'gamma': (((0.7, 4.0),), (0.2, 4.0), False),
    'beta': (((0.7, 3.0), (0.7, 3.0)), (0.1, 0.9), False),
    'chi2': (((1.0, 6.0),), (0.2, 5.0), False),
    'expon': ((), (0.1, 3.0), True),
    'uniform': ((), (0.1, 0.9), True),
    'lognorm': (((0.3, 1.5),), (0.2, 3.0), True),
    'halfnorm': ((), (0.1, 3.0), True),
    'invgamma': (((1.5, 4.0),), (0.2, 3.0), False),
}
DENSITIES = ('logpdf', 'pdf')
DISTRIBUTION_FUNCTIONS = ('cdf', 'sf', 'logcdf', 'logsf')
QUANTILES = ('ppf', 'isf')


def continuous_cases(name):
    shapes, (lo, hi), shape_grads = CONTINUOUS[name]
    dist = getattr(ts, name)
    out = []
    for method in DENSITIES + DISTRIBUTION_FUNCTIONS:
        fn = getattr(dist, method)
        diff_shapes = shape_grads or method in DENSITIES
        shape_specs = [arg((), a, b) if diff_shapes else const((a + b) / 2) for a, b in shapes]
        # x = loc + scale * z, differentiated in all of x, shapes, loc, scale
        out.append(case(lambda z, *p, fn=fn: fn(0.5 + 1.5 * z, *p[:-2], loc=p[-2], scale=p[-1]),
                        arg((4,), lo, hi), *shape_specs, arg((), 0.4, 0.6), arg((), 1.4, 1.6),
                        name=f'{name}.{method}(x, shapes, loc, scale)'))
        out.append(case(lambda z, fn=fn, s=[(a + b) / 2 for a, b in shapes]: fn(z, *s),
                        arg((2, 3), lo, hi), name=f'{name}.{method}(x)'))
    for method in QUANTILES:           # in q, loc, scale (and the shapes where cdf has them)
        fn = getattr(dist, method)
        shape_specs = [arg((), a, b) if shape_grads else const((a + b) / 2) for a, b in shapes]
        out.append(case(lambda q, *p, fn=fn: fn(q, *p[:-2], loc=p[-2], scale=p[-1]),
                        arg((4,), 0.05, 0.95), *shape_specs, arg((), 0.4, 0.6), arg((), 1.4, 1.6),
                        name=f'{name}.{method}(q, shapes, loc, scale)'))
    return out


CASES = [c for name in CONTINUOUS for c in continuous_cases(name)] + [
    # discrete: gradients in the continuous parameters; quantiles are data
    case(lambda mu: ts.poisson.logpmf(np.array([0, 1, 3, 7]), mu), arg((), 0.5, 5.0),
         name='poisson.logpmf'),
    case(lambda mu: ts.poisson.pmf(np.array([0, 1, 3, 7]), mu), arg((4,), 0.5, 5.0),
         name='poisson.pmf'),
    *[case(lambda mu, m=m: getattr(ts.poisson, m)(np.array([0, 1, 3, 7]), mu), arg((), 0.5, 5.0),
           name=f'poisson.{m}') for m in DISTRIBUTION_FUNCTIONS],
    *[case(lambda p, m=m: getattr(ts.binom, m)(np.array([0, 2, 5, 9]), 10, p), arg((), 0.1, 0.9),
           name=f'binom.{m}') for m in ('logpmf', 'pmf') + DISTRIBUTION_FUNCTIONS],
    case(lambda n, p: ts.binom.logpmf(np.array([0, 2, 5]), n, p), arg((), 6.0, 9.0),
         arg((3,), 0.1, 0.9), name='binom.logpmf(n, p)'),
    *[case(lambda p, m=m: getattr(ts.bernoulli, m)(np.array([0, 1, 1, 0]), p), arg((4,), 0.1, 0.9),
           name=f'bernoulli.{m}') for m in ('logpmf', 'pmf', 'cdf', 'sf')],
    *[case(lambda p, m=m: getattr(ts.geom, m)(np.array([1, 2, 5]), p), arg((), 0.1, 0.9),
           name=f'geom.{m}') for m in ('logpmf', 'cdf', 'sf', 'logsf')],
    *[case(lambda n, p, m=m: getattr(ts.nbinom, m)(np.array([0, 2, 5]), n, p), arg((), 1.0, 5.0),
           arg((), 0.1, 0.9), name=f'nbinom.{m}') for m in ('logpmf', 'pmf')],
    case(lambda p: ts.nbinom.cdf(np.array([0, 2, 5]), 3.0, p), arg((), 0.1, 0.9),
         name='nbinom.cdf'),
    # multivariate
    case(lambda x, m, a: ts.multivariate_normal.logpdf(x, m, a @ a.T + np.eye(3)), (5, 3), (3,),
         (3, 3), name='multivariate_normal.logpdf(x (5,3), mean, cov)'),
    case(lambda x, m, a: ts.multivariate_normal.pdf(x, m, a @ a.T + np.eye(2)), (2,), (2,),
         (2, 2), name='multivariate_normal.pdf(one point)'),
    case(lambda x, s: ts.multivariate_normal.logpdf(x, cov=s), (4,), arg((), 0.5, 2.0),
         name='multivariate_normal.logpdf(scalar cov, dim 1)'),
    case(lambda x, d: ts.multivariate_normal(np.zeros(3), d).logpdf(x), (2, 3), arg((3,), 0.5, 2.0),
         name='multivariate_normal(mean, diagonal).logpdf'),
    case(lambda x, a: ts.dirichlet.logpdf(x / np.sum(x, axis=0), a), arg((3, 4), 0.2, 1.0),
         arg((3,), 0.5, 3.0), name='dirichlet.logpdf(x (K,N), alpha)'),
    case(lambda x, a: ts.dirichlet.logpdf(x, a), arg((2,), 0.1, 0.4), arg((3,), 0.5, 3.0),
         name='dirichlet.logpdf(K-1 components)'),
    case(lambda a: ts.dirichlet(a).pdf(np.array([0.2, 0.3, 0.5])), arg((3,), 0.5, 3.0),
         name='dirichlet(alpha).pdf'),
    # summaries
    case(ts.entropy, arg((5,), 0.1, 2.0), name='entropy(pk)'),
    case(ts.entropy, arg((3, 4), 0.1, 2.0), arg((3, 4), 0.1, 2.0), kwargs={'axis': 1, 'base': 2},
         name='entropy(pk, qk, axis=1, base=2)'),
    case(ts.entropy, arg((4,), 0.1, 2.0), arg((3, 4), 0.1, 2.0), kwargs={'axis': -1},
         name='entropy(pk, qk broadcast)'),
]


@parametrize(CASES)
def test_case(c):
    c.check()


X = np.array([-3.0, -0.5, 0.0, 0.3, 0.7, 1.0, 1.5, 4.0])
Q = np.array([0.0, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0, -0.1, 1.2])


@pytest.mark.parametrize('name', list(CONTINUOUS))
def test_continuous_values_match_scipy(name):
    shapes = [(a + b) / 2 for a, b in CONTINUOUS[name][0]]
    for loc, scale in [(0.0, 1.0), (0.5, 2.0), (-0.2, 0.5)]:
        for method in DENSITIES + DISTRIBUTION_FUNCTIONS:
            with np.errstate(divide='ignore'):
                theirs = getattr(getattr(st, name), method)(X, *shapes, loc=loc, scale=scale)
            mine = getattr(getattr(ts, name), method)(tr.param(X), *shapes, loc=loc, scale=scale)
            np.testing.assert_allclose(tr.data(mine), theirs, rtol=1e-9, atol=1e-300,
                                       err_msg=f'{name}.{method}')
        for method in QUANTILES:          # the ends of the support at 0 and 1, nan outside
            theirs = getattr(getattr(st, name), method)(Q, *shapes, loc=loc, scale=scale)
            mine = getattr(getattr(ts, name), method)(tr.param(Q), *shapes, loc=loc, scale=scale)
            np.testing.assert_allclose(tr.data(mine), theirs, rtol=1e-9, err_msg=f'{name}.{method}')


K = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 7.0, 12.0])


@pytest.mark.parametrize('name, shapes', [('poisson', (3.2,)), ('binom', (10, 0.3)),
                                          ('bernoulli', (0.3,)), ('geom', (0.3,)),
                                          ('nbinom', (4, 0.4))])
def test_discrete_values_match_scipy(name, shapes):
    for loc in (0, 1):
        for method in ('logpmf', 'pmf') + DISTRIBUTION_FUNCTIONS:
            with np.errstate(divide='ignore'):
                theirs = getattr(getattr(st, name), method)(K, *shapes, loc=loc)
            mine = getattr(getattr(ts, name), method)(K, *map(tr.param, shapes), loc=loc)
            np.testing.assert_allclose(tr.data(mine), theirs, rtol=1e-9, atol=1e-300,
                                       err_msg=f'{name}.{method}')


def test_entropy_matches_scipy():
    rng = np.random.default_rng(3)
    p, q = rng.random((3, 4)), rng.random((3, 4))
    for kw in ({}, {'axis': 1}, {'base': 3.0}, {'axis': -1, 'keepdims': True}):
        np.testing.assert_allclose(ts.entropy(tr.param(p), **kw).data, st.entropy(p, **kw),
                                   rtol=1e-12)
        np.testing.assert_allclose(ts.entropy(p, tr.param(q), **kw).data, st.entropy(p, q, **kw),
                                   rtol=1e-12)
        np.testing.assert_allclose(ts.entropy(tr.param(p[0]), q, **kw).data,
                                   st.entropy(p[0], q, **kw), rtol=1e-12)


def test_lists_are_taken_as_arrays():
    np.testing.assert_allclose(ts.norm.logpdf([0.0, 1.0], [0, 1], [1, 2]),
                               st.norm.logpdf([0.0, 1.0], [0, 1], [1, 2]), rtol=1e-12)
    np.testing.assert_allclose(ts.poisson.pmf([0, 2], [1.0, 2.0]),
                               st.poisson.pmf([0, 2], [1.0, 2.0]), rtol=1e-12)
    np.testing.assert_allclose(ts.gamma.ppf([0.2, 0.7], 2.0), st.gamma.ppf([0.2, 0.7], 2.0),
                               rtol=1e-12)


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
def test_invalid_parameters_give_nan_as_scipy():
    assert np.isnan(ts.norm.logpdf(1.0, 0.0, -1.0)) and np.isnan(st.norm.logpdf(1.0, 0.0, -1.0))
    assert np.isnan(ts.gamma.logpdf(1.0, -1.0)) and np.isnan(ts.binom.pmf(2, 5, 1.5))
    np.testing.assert_array_equal(np.isnan(ts.norm.cdf(1.0, 0.0, np.array([1.0, -1.0, 0.0]))),
                                  [False, True, True])


def test_parameters_by_position_keyword_and_frozen():
    x = np.array([0.5, 1.5])
    expected = st.t.logpdf(x, 3.0, 1.0, 2.0)
    for value in (ts.t.logpdf(x, 3.0, 1.0, 2.0), ts.t.logpdf(x, df=3.0, loc=1.0, scale=2.0),
                  ts.t(3.0, scale=2.0, loc=1.0).logpdf(x),
                  ts.t(df=3.0, loc=1.0, scale=2.0).logpdf(x)):
        np.testing.assert_allclose(value, expected, rtol=1e-12)
    with pytest.raises(TypeError, match='missing shape parameter'):
        ts.t.logpdf(x)
    with pytest.raises(TypeError, match="unexpected parameter 'sigma'"):
        ts.norm.logpdf(x, sigma=1.0)
    # other methods and names are SciPy's own
    assert ts.norm.rvs(size=3, random_state=0).shape == (3,)
    assert ts.norm(1.0, 2.0).mean() == 1.0
    assert ts.pearsonr is st.pearsonr


def test_multivariate_values_match_scipy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    c, m, x = a @ a.T + np.eye(3), rng.standard_normal(3), rng.standard_normal((5, 3))
    for args in [(x, m, c), (x[0], m, c), (x[:, 0], 0.5, 2.0), (x, m, np.diag(c)), (x, None, c)]:
        np.testing.assert_allclose(ts.multivariate_normal.logpdf(*args),
                                   st.multivariate_normal.logpdf(*args), rtol=1e-12)
    np.testing.assert_allclose(ts.multivariate_normal(m, c).pdf(x),
                               st.multivariate_normal(m, c).pdf(x), rtol=1e-12)
    alpha = np.array([1.5, 2.0, 3.0])
    p = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]).T
    for xx in (p, p[:2], p[:, 0]):
        np.testing.assert_allclose(ts.dirichlet.logpdf(xx, alpha), st.dirichlet.logpdf(xx, alpha),
                                   rtol=1e-12)


def test_multivariate_normal_covariance_gradient_closed_form():
    # d/dC log N(x; 0, C) = 1/2 (C^-1 x x^T C^-1 - C^-1), read on the lower triangle
    # (as np.linalg.cholesky, and SciPy's eigh, read only that one)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    c, x = a @ a.T + np.eye(3), rng.standard_normal(3)
    (g,) = tr.gradient(lambda c: ts.multivariate_normal.logpdf(x, np.zeros(3), c), c)
    ci = np.linalg.inv(c)
    full = 0.5 * (ci @ np.outer(x, x) @ ci - ci)
    np.testing.assert_allclose(g + np.triu(g, 1).T, np.tril(full + np.triu(full, 1).T), rtol=1e-10)
    np.testing.assert_allclose(g[np.diag_indices(3)], np.diag(full), rtol=1e-10)


def test_laplace_and_expon_distribution_functions_do_not_overflow():
    with np.errstate(over='raise', invalid='raise'):
        (g,) = tr.gradient(lambda x: np.sum(ts.laplace.cdf(x) + ts.laplace.logsf(x)),
                           np.array([-800.0, 0.0, 800.0]))
    assert np.all(np.isfinite(g))
    (g,) = tr.gradient(lambda x: np.sum(ts.expon.cdf(x)), np.array([-1.0, 2.0]))
    np.testing.assert_allclose(g, [0.0, np.exp(-2.0)])


def test_hierarchical_model_hessian_on_recorded_tape():
    # a normal-normal model's log posterior in (mu, log tau): the Hessian from a
    # recorded HessianTape equals the eager one
    y = np.array([2.8, 0.8, -0.3, 0.7, -0.1, 0.1, 1.8, 1.2])
    s = np.array([1.5, 1.0, 1.6, 1.1, 0.9, 1.1, 1.0, 1.8])

    def logpost(theta):
        mu, log_tau = theta[0], theta[1]
        tau = np.exp(log_tau)
        return (np.sum(ts.norm.logpdf(y, mu, np.sqrt(tau ** 2 + s ** 2)))
                + ts.halfnorm.logpdf(tau, scale=5.0) + log_tau + ts.norm.logpdf(mu, 0.0, 5.0))
    theta = np.array([0.8, -0.2])
    h = tr.hessian(logpost, theta)
    np.testing.assert_allclose(h, h.T, rtol=1e-10)
    np.testing.assert_allclose(tr.HessianTape(logpost, theta).hessian(theta), h, rtol=1e-10)
    assert tr.gradcheck(logpost, theta)


# --------------------------------------------------------------------------
# multivariate_normal with a singular covariance (allow_singular=True), entropy
# --------------------------------------------------------------------------

def _singular(d=3, r=2, seed=4):
    """A rank-r covariance F F^T, a mean, and points on and off its support."""
    rng = np.random.default_rng(seed)
    f, m = rng.standard_normal((d, r)), rng.standard_normal(d)
    on = m + rng.standard_normal((5, r)) @ f.T
    return f, m, on, on + 0.1 * rng.standard_normal((5, d))


@pytest.mark.parametrize('d, r', [(3, 2), (4, 1), (3, 3), (2, 1)])
def test_singular_multivariate_normal_matches_scipy(d, r):
    f, m, on, off = _singular(d, r)
    c, x = f @ f.T, np.vstack([on, off])
    for args in [(x, m, c), (on[0], m, c), (x, None, c)]:
        mine = ts.multivariate_normal.logpdf(tr.param(args[0]), *args[1:], allow_singular=True)
        theirs = st.multivariate_normal.logpdf(*args, allow_singular=True)
        np.testing.assert_array_equal(np.isinf(tr.data(mine)), np.isinf(theirs))
        np.testing.assert_allclose(tr.data(mine), theirs, rtol=1e-12)
    np.testing.assert_allclose(ts.multivariate_normal(m, c, allow_singular=True).pdf(x),
                               st.multivariate_normal(m, c, allow_singular=True).pdf(x),
                               rtol=1e-12)
    assert (r < d) == bool(np.isinf(ts.multivariate_normal.logpdf(off, m, c,
                                                                   allow_singular=True)).all())
    for mean, cov in ((None, c), (None, 2.5), (np.zeros(3), np.array([1.0, 0.0, 3.0])),
                      (None, np.diag([2.0, 0.0]))):
        np.testing.assert_allclose(tr.data(ts.multivariate_normal.entropy(mean, tr.param(cov))),
                                   st.multivariate_normal.entropy(mean, cov), rtol=1e-12)
    np.testing.assert_allclose(ts.multivariate_normal(m, c, allow_singular=True).entropy(),
                               st.multivariate_normal(m, c, allow_singular=True).entropy(),
                               rtol=1e-12)


def test_singular_multivariate_normal_raises_as_scipy():
    f, m, on, _ = _singular()
    c = f @ f.T
    with pytest.raises(np.linalg.LinAlgError):
        ts.multivariate_normal(m, c).entropy()          # frozen without allow_singular
    with pytest.raises(ValueError, match='positive semidefinite'):
        ts.multivariate_normal.logpdf(on, m, -c, allow_singular=True)


def _fold(s):
    """A symmetric gradient as the lower triangle reads it."""
    return np.tril(s + s.T) - np.diag(np.diag(s))


def test_singular_multivariate_normal_gradients_on_the_support():
    # logpdf = -1/2 (r log 2 pi + log pdet C + d^T P d), P = pinv(C), d = x - mean:
    # d/dx = -P d lies in range(C); d/dC = 1/2 (P d d^T P - P), read on the lower triangle
    f, m, on, off = _singular()
    c, x = f @ f.T, on[0]
    p, dev = np.linalg.pinv(c), on[0] - m
    gx, gm, gc = tr.gradient(lambda x, m, c: ts.multivariate_normal.logpdf(
        x, m, c, allow_singular=True), x, m, c)
    np.testing.assert_allclose(gx, -p @ dev, atol=1e-12)
    np.testing.assert_allclose(gm, p @ dev, atol=1e-12)
    np.testing.assert_allclose(gx, c @ np.linalg.pinv(c) @ gx, atol=1e-12)   # in range(C)
    np.testing.assert_allclose(gc, _fold(0.5 * (p @ np.outer(dev, dev) @ p - p)), atol=1e-10)
    (ge,) = tr.gradient(lambda c: ts.multivariate_normal.entropy(cov=c), c)
    np.testing.assert_allclose(ge, _fold(0.5 * p), atol=1e-12)
    # off the support the density is 0: no gradient
    g0 = tr.gradient(lambda x: ts.multivariate_normal.logpdf(x, m, c, allow_singular=True),
                     off[0])[0]
    np.testing.assert_array_equal(g0, 0.0)


def _rank_keeping(c, b):
    """A curve C(t) = (I + t B) C (I + t B)^T of covariances of C's rank."""
    return lambda t: (np.eye(3) + t * b) @ c @ (np.eye(3) + t * b).T


def test_singular_multivariate_normal_second_order_along_rank_keeping_directions():
    f, m, on, _ = _singular()
    rng = np.random.default_rng(5)
    b, u = rng.standard_normal((3, 3)), rng.standard_normal(2)
    curve = _rank_keeping(f @ f.T, b)

    def along(t):     # the point moves with the support: x(t) = m + (I + t B) F u
        return ts.multivariate_normal.logpdf(m + (np.eye(3) + t * b) @ f @ u, m, curve(t),
                                             allow_singular=True)

    def entropy(t):
        return ts.multivariate_normal.entropy(cov=curve(t))
    h = 1e-4
    for fn in (along, entropy):
        fd1 = (fn(h) - fn(-h)) / (2 * h)
        fd2 = (fn(h) - 2 * fn(0.0) + fn(-h)) / h ** 2
        np.testing.assert_allclose(tr.gradient(fn, 0.0)[0], fd1, rtol=1e-7)
        np.testing.assert_allclose(tr.jvp(fn, (0.0,), (1.0,))[1], fd1, rtol=1e-7)
        np.testing.assert_allclose(tr.gradient(lambda t: tr.gradient(fn, t)[0], 0.0)[0], fd2,
                                   rtol=1e-5)
        np.testing.assert_allclose(tr.hessian(fn, 0.0), fd2, rtol=1e-5)
    # in the factor F and the mean: Hessians (forward over reverse, reverse over reverse)
    # and a tape recorded at one F replayed at another

    def loss(fz):
        return ts.multivariate_normal.logpdf(m + np.reshape(fz, (3, 2)) @ u, m,
                                             np.reshape(fz, (3, 2)) @ np.reshape(fz, (3, 2)).T,
                                             allow_singular=True)
    assert tr.gradcheck(loss, f.ravel())
    np.testing.assert_allclose(tr.hessian(loss, f.ravel()), tr.hessian_reverse(loss, f.ravel()),
                               rtol=1e-8, atol=1e-10)
    tape = tr.GradientTape(loss, f.ravel())
    f2 = f.ravel() + 0.1 * rng.standard_normal(6)
    np.testing.assert_allclose(tape.gradient(f2)[0], tr.gradient(loss, f2)[0], rtol=1e-10)
    assert tr.gradcheck(lambda f: ts.multivariate_normal.entropy(cov=f @ f.T), f, order=3)


def test_allow_singular_with_a_full_rank_covariance_is_the_usual_density():
    rng = np.random.default_rng(6)
    a, m, x = rng.standard_normal((3, 3)), rng.standard_normal(3), rng.standard_normal((4, 3))
    c = a @ a.T + np.eye(3)

    def both(c, singular):
        return np.sum(ts.multivariate_normal.logpdf(x, m, c, allow_singular=singular))
    np.testing.assert_allclose(tr.gradient(lambda c: both(c, True), c)[0],
                               tr.gradient(lambda c: both(c, False), c)[0], rtol=1e-9)
    np.testing.assert_allclose(tr.hessian(lambda c: both(c, True), c),
                               tr.hessian(lambda c: both(c, False), c), rtol=1e-7, atol=1e-10)
