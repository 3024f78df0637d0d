"""A tracked value that meets ``np.asarray`` (or ``float()``) inside SciPy: the error
names the public function the user called -- not the helper that converted, nor a
``scipy._lib`` decorator's wrapper -- and ``tracked.scipy``'s version when there is one."""
import numpy as np
import pytest

pytest.importorskip('scipy.linalg')

import scipy.integrate as si                            # noqa: E402
import scipy.interpolate as sint                        # noqa: E402
import scipy.linalg as sla                              # noqa: E402
import scipy.optimize as so                             # noqa: E402
import scipy.signal as sig                              # noqa: E402
import scipy.special as sp                              # noqa: E402
import scipy.stats as st                                # noqa: E402

import tracked as tr                                    # noqa: E402

M = np.array([[2.0, 0.5], [0.3, 1.0]])

# (the name the message starts with, how to call it on tracked a = M, the mirror or None)
CALLS = [
    ('scipy.linalg.solve_sylvester', lambda a: sla.solve_sylvester(a, M, M),
     'tracked.scipy.linalg.solve_sylvester'),           # batching wrapper in scipy._lib
    ('scipy.linalg.solve_banded', lambda a: sla.solve_banded((0, 0), a[:1], np.ones(2)),
     'tracked.scipy.linalg.solve_banded'),
    ('scipy.linalg.expm', lambda a: sla.expm(a), 'tracked.scipy.linalg.expm'),
    ('scipy.linalg.schur', lambda a: sla.schur(a), None),
    ('scipy.linalg.solve_continuous_lyapunov', lambda a: sla.solve_continuous_lyapunov(a, M),
     None),
    ('scipy.stats.norm.logpdf', lambda a: st.norm.logpdf(a), 'tracked.scipy.stats.norm.logpdf'),
    ('scipy.stats.t(...).cdf', lambda a: st.t(3.0).cdf(a), 'tracked.scipy.stats.t(...).cdf'),
    ('scipy.stats.multivariate_normal.entropy', lambda a: st.multivariate_normal.entropy(cov=a),
     'tracked.scipy.stats.multivariate_normal.entropy'),
    ('scipy.stats.multivariate_normal(...).logpdf',
     lambda a: st.multivariate_normal(np.zeros(2), M).logpdf(a),
     'tracked.scipy.stats.multivariate_normal(...).logpdf'),
    ('scipy.stats.multivariate_normal', lambda a: st.multivariate_normal(cov=a),
     'tracked.scipy.stats.multivariate_normal'),
    ('scipy.stats.pearsonr', lambda a: st.pearsonr(a[0], a[1]), None),
    ('scipy.special.logsumexp', lambda a: sp.logsumexp(a), 'tracked.scipy.special.logsumexp'),
    ('scipy.special.comb', lambda a: sp.comb(a, 2.0), None),
    ('scipy.signal.lfilter', lambda a: sig.lfilter([1.0], [1.0, 0.5], a[0]), None),
    ('scipy.signal.fftconvolve', lambda a: sig.fftconvolve(a, M),
     'tracked.scipy.signal.fftconvolve'),
    ('scipy.integrate.trapezoid', lambda a: si.trapezoid(a[0]), None),
    ('scipy.integrate.quad', lambda a: si.quad(lambda t: a[0, 0] * t, 0.0, 1.0), None),
    ('scipy.optimize.minimize', lambda a: so.minimize(lambda x: np.sum(x ** 2), a[0]), None),
    ('scipy.optimize.least_squares', lambda a: so.least_squares(lambda x: x - 1, a[0]), None),
    ('scipy.optimize.brentq', lambda a: so.brentq(lambda x: x - a[0, 0], 0.0, 5.0), None),
    ('scipy.interpolate.CubicSpline', lambda a: sint.CubicSpline(np.arange(2.0), a[0]), None),
]


@pytest.mark.parametrize('name, call, mirror', CALLS, ids=[c[0] for c in CALLS])
def test_the_error_names_the_function_called(name, call, mirror):
    with pytest.raises(TypeError) as info:
        tr.gradient(lambda a: np.sum(call(a)), M)
    msg = str(info.value)
    assert msg.startswith(f'{name} converts its arguments with np.asarray') or \
        msg.startswith(f'{name} calls float() on a tracked value'), msg
    if mirror:
        assert f'Use {mirror} instead' in msg, msg
    else:
        assert 'Use tracked.' not in msg, msg
    assert 'tr.data(' in msg, msg


def test_a_method_tracked_leaves_to_scipy_is_not_offered():
    from tracked.scipy import stats
    assert not hasattr(type(stats.norm), 'rvs')       # stats.norm.rvs is SciPy's own
    with pytest.raises(TypeError, match=r'^scipy\.stats\.norm\.entropy converts') as info:
        st.norm.entropy(tr.param(1.0))
    assert 'Use tracked' not in str(info.value) and 'differentiates norm' in str(info.value)
