"""The README's SciPy example: a maximum-likelihood fit written against SciPy, run by
changing one import line, minimised by scipy.optimize with tracked's gradients."""
import os
import pathlib
import re

import numpy as np
import pytest

pytest.importorskip('scipy')

README = (pathlib.Path(__file__).resolve().parents[2] / 'README.md').read_text()
EXAMPLE = next(block for block in re.findall(r'```python\n(.*?)```', README, re.S)
               if 'from tracked.scipy import stats' in block)


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
