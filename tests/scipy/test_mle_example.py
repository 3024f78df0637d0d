"""The README's SciPy example: a maximum-likelihood fit written against SciPy, run by
changing one import line, minimised by scipy.optimize with tracked's gradients."""
import os

import numpy as np
import pytest

pytest.importorskip('scipy')

EXAMPLE = '''
import numpy as np
from scipy.optimize import minimize
from scipy.special import gammaln
from tracked.scipy import stats          # was: from scipy import stats
import tracked as tr

rng = np.random.default_rng(0)
counts = rng.negative_binomial(5, 0.3, size=500)        # over-dispersed counts
heights = rng.normal(170.0, 8.0, size=500)

def nll(theta):
    log_r, logit_p, mu, log_sigma = theta
    r, p = np.exp(log_r), 1 / (1 + np.exp(-logit_p))
    # the negative binomial log pmf, written out with scipy.special.gammaln
    ll_counts = (gammaln(counts + r) - gammaln(r) - gammaln(counts + 1)
                 + r * np.log(p) + counts * np.log1p(-p))
    ll_heights = stats.norm.logpdf(heights, mu, np.exp(log_sigma))
    return -(np.sum(ll_counts) + np.sum(ll_heights))

def fun(theta):
    val, (grad,) = tr.withgradient(nll, theta)
    return val, grad

res = minimize(fun, np.array([0.0, 0.0, 160.0, 1.0]), jac=True, method='BFGS')
r, p = np.exp(res.x[0]), 1 / (1 + np.exp(-res.x[1]))
print(f'r = {r:.2f}, p = {p:.3f}, mu = {res.x[2]:.1f}, sigma = {np.exp(res.x[3]):.2f}')
'''


@pytest.mark.skipif(os.environ.get('SCIPY_ARRAY_API') == '1',
                    reason="SCIPY_ARRAY_API=1 makes scipy.special's ufuncs wrappers that convert "
                    "their arguments (import gammaln from tracked.scipy.special then)")
def test_mle_example_runs_and_finds_the_maximum(capsys):
    scope = {}
    exec(compile(EXAMPLE, 'README SciPy example', 'exec'), scope)
    res, heights = scope['res'], scope['heights']
    assert res.success
    # the normal part has a closed-form maximum: the sample mean and standard deviation
    np.testing.assert_allclose(res.x[2], heights.mean(), rtol=1e-6)
    np.testing.assert_allclose(np.exp(res.x[3]), heights.std(), rtol=1e-5)
    # the negative binomial part agrees with SciPy's own log density at the optimum, and
    # the gradient vanishes there
    import scipy.stats
    r, p = np.exp(res.x[0]), 1 / (1 + np.exp(-res.x[1]))
    np.testing.assert_allclose(
        scope['nll'](res.x),
        -np.sum(scipy.stats.nbinom.logpmf(scope['counts'], r, p))
        - np.sum(scipy.stats.norm.logpdf(heights, res.x[2], np.exp(res.x[3]))), rtol=1e-10)
    assert np.max(np.abs(scope['fun'](res.x)[1])) < 1e-3
    assert 'r = ' in capsys.readouterr().out


def test_the_same_code_runs_on_scipy_itself():
    # the "one import line": with SciPy's stats module the objective is the same number
    import scipy.stats
    scope = {}
    exec(compile(EXAMPLE.replace('from tracked.scipy import stats', 'from scipy import stats')
                 .split('def fun')[0], 'plain', 'exec'), scope)
    theta = np.array([1.2, -0.5, 168.0, 2.0])
    from tracked.scipy import stats
    scope_tracked = {}
    exec(compile(EXAMPLE.split('def fun')[0], 'tracked', 'exec'), scope_tracked)
    assert scope['stats'] is scipy.stats and scope_tracked['stats'] is stats
    np.testing.assert_allclose(scope['nll'](theta), scope_tracked['nll'](theta), rtol=1e-12)
