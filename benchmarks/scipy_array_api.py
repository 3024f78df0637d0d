"""Measure: which SciPy functions differentiate *unmodified* on tracked values when
SciPy's array-API dispatch is on (``SCIPY_ARRAY_API=1``) and tracked values offer an
``__array_namespace__``.  A probe, not a feature: it patches ``Tracked`` at run time
(the lead asked for a prototype and a measurement, no global switch shipped).

    SCIPY_ARRAY_API=1 python benchmarks/scipy_array_api.py            # the prototype
    python benchmarks/scipy_array_api.py --baseline                    # tracked today

The namespace is NumPy's functions (they dispatch tracked values to the registry)
with ``asarray`` passing tracked values through (a copy, so that SciPy's in-place
updates of its "own" arrays are recorded instead of refused) and ``result_type``
reading their dtype.  Each probe's gradient is compared with central differences.

Measured with SciPy 1.17.1, NumPy 2.4 (2 cores): baseline 3 of 50 (the ufuncs
``xlogy``, ``entr`` and ``zeta``, which reach the registry anyway); prototype 19 of 50:
special.logsumexp/softmax/log_softmax/xlogy, stats.zscore/skew/kurtosis/moment/gmean/
hmean/pmean/sem/tvar/describe, integrate.trapezoid/cumulative_trapezoid, fft.fft/rfft,
cluster.vq.whiten.  The rest fail for three reasons: a tracked value next to a plain
ndarray ("Multiple namespaces for array inputs": logsumexp(b=ndarray), pearsonr,
ttest_1samp, every scipy.signal filter and convolution, solve_triangular with a
constant matrix); no dispatch at all (the scipy.stats distributions, scipy.linalg's
LAPACK wrappers, polygamma/multigammaln/entropy, ndimage, spatial.distance: np.asarray
first; SciPy's wrappers around the special ufuncs convert too, so entr and zeta fail
here); or a NumPy function without a rule here.  Returning SciPy's own NumPy namespace
instead avoids the mixing error but makes SciPy take its NumPy paths, which convert
with np.asarray: 1 of 50.  (Re-measured after issue 13's verification: 19 and 3.)
"""
import os
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout
import tracked as tr                   # noqa: E402
from tracked.boxes import Tracked

BASELINE = '--baseline' in sys.argv
if not BASELINE and os.environ.get('SCIPY_ARRAY_API') != '1':
    sys.exit('set SCIPY_ARRAY_API=1 before SciPy is imported (or pass --baseline)')



class _NS(types.ModuleType):
    """NumPy's functions (which dispatch tracked values to the registry), with the
    array-API constructors and dtype queries made to pass tracked values through."""
    def __getattr__(self, name):
        return getattr(np, name)

ns = _NS('tracked_array_api')


def asarray(obj, dtype=None, device=None, copy=None):
    if isinstance(obj, Tracked):
        obj = obj if dtype is None or obj.dtype == dtype else obj.astype(dtype)
        return np.copy(obj)
    return np.asarray(obj, dtype=dtype)


ns.asarray = asarray
ns.result_type = lambda *a: np.result_type(*[x.dtype if isinstance(x, Tracked) else x for x in a])
ns.__name__ = 'tracked_array_api'


def namespace(self, api_version=None):
    return ns


if not BASELINE:
    Tracked.__array_namespace__ = namespace
    Tracked.device = property(lambda self: 'cpu')
    Tracked.to_device = lambda self, d, stream=None: self
    Tracked.mT = property(lambda self: np.swapaxes(self, -1, -2))

import scipy                           # noqa: E402  (after the patch, as a user would)
import scipy.cluster                   # noqa: E402
import scipy.fft                       # noqa: E402
import scipy.integrate as si           # noqa: E402
import scipy.linalg as sla             # noqa: E402
import scipy.ndimage                   # noqa: E402
import scipy.signal as ss              # noqa: E402
import scipy.spatial.distance as dist  # noqa: E402
import scipy.special as sp             # noqa: E402
import scipy.stats as st               # noqa: E402
print('scipy', scipy.__version__)
rng = np.random.default_rng(0)
x = rng.standard_normal(6)
X = rng.standard_normal((4, 3))
A = X[:3] + 3 * np.eye(3)
S = A @ A.T
probes = {
 'special.logsumexp': lambda x: sp.logsumexp(x),
 'special.logsumexp(b=)': lambda x: sp.logsumexp(x, b=np.arange(1.0, 7.0)),
 'special.softmax': lambda x: np.sum(sp.softmax(x) * np.arange(6.0)),
 'special.log_softmax': lambda x: np.sum(sp.log_softmax(x) * np.arange(6.0)),
 'special.polygamma': lambda x: np.sum(sp.polygamma(1, np.exp(x))),
 'special.multigammaln': lambda x: sp.multigammaln(np.exp(x[0]) + 3, 3),
 'special.zeta(s,q)': lambda x: np.sum(sp.zeta(2.0, np.exp(x))),
 'special.entr': lambda x: np.sum(sp.entr(np.exp(x))),
 'special.xlogy': lambda x: np.sum(sp.xlogy(x, np.exp(x))),
 'stats.norm.logpdf': lambda x: np.sum(st.norm.logpdf(x, 0.5, 2.0)),
 'stats.norm.logpdf(tracked loc)': lambda x: np.sum(st.norm.logpdf(1.0, x, 2.0)),
 'stats.multivariate_normal.logpdf': lambda x: st.multivariate_normal.logpdf(x[:3], np.zeros(3), S),
 'stats.zscore': lambda x: np.sum(st.zscore(x) ** 3),
 'stats.skew': lambda x: st.skew(x),
 'stats.kurtosis': lambda x: st.kurtosis(x),
 'stats.moment': lambda x: st.moment(x, 3),
 'stats.variation': lambda x: st.variation(np.exp(x)),
 'stats.entropy': lambda x: st.entropy(np.exp(x)),
 'stats.pearsonr': lambda x: st.pearsonr(x, np.arange(6.0)).statistic,
 'stats.gmean': lambda x: st.gmean(np.exp(x)),
 'stats.hmean': lambda x: st.hmean(np.exp(x)),
 'stats.pmean': lambda x: st.pmean(np.exp(x), 2.0),
 'stats.sem': lambda x: st.sem(x),
 'stats.tmean': lambda x: st.tmean(x),
 'stats.tvar': lambda x: st.tvar(x),
 'stats.describe.mean': lambda x: st.describe(x).mean,
 'stats.ttest_1samp': lambda x: st.ttest_1samp(x, 0.0).statistic,
 'stats.entropy(p, q)': lambda x: st.entropy(np.exp(x), np.exp(x[::-1])),
 'linalg.expm': lambda x: np.sum(sla.expm(np.reshape(x[:4], (2, 2)))),
 'linalg.solve_triangular': lambda x: np.sum(sla.solve_triangular(A, x[:3])),
 'linalg.cho_solve': lambda x: np.sum(sla.cho_solve(sla.cho_factor(S), x[:3])),
 'linalg.solve': lambda x: np.sum(sla.solve(A, x[:3])),
 'linalg.det': lambda x: sla.det(np.reshape(x[:4], (2, 2))),
 'linalg.inv': lambda x: np.sum(sla.inv(np.reshape(x[:4], (2, 2)) + 3 * np.eye(2))),
 'linalg.sqrtm': lambda x: np.sum(sla.sqrtm(np.reshape(x[:4], (2, 2)) * 0.1 + 3 * np.eye(2))),
 'linalg.logm': lambda x: np.sum(sla.logm(np.reshape(x[:4], (2, 2)) * 0.1 + 3 * np.eye(2))),
 'linalg.norm': lambda x: sla.norm(x),
 'signal.convolve': lambda x: np.sum(ss.convolve(x, np.array([1.0, 2.0, 0.5])) ** 2),
 'signal.correlate': lambda x: np.sum(ss.correlate(x, np.array([1.0, 2.0, 0.5])) ** 2),
 'signal.fftconvolve': lambda x: np.sum(ss.fftconvolve(x, np.array([1.0, 2.0, 0.5])) ** 2),
 'signal.lfilter': lambda x: np.sum(ss.lfilter([1.0, 0.5], [1.0], x) ** 2),
 'integrate.trapezoid': lambda x: si.trapezoid(x ** 2),
 'integrate.simpson': lambda x: si.simpson(x ** 2),
 'integrate.cumulative_trapezoid': lambda x: np.sum(si.cumulative_trapezoid(x ** 2)),
 'fft.fft': lambda x: np.sum(np.abs(scipy.fft.fft(x)) ** 2),
 'fft.rfft': lambda x: np.sum(np.abs(scipy.fft.rfft(x)) ** 2),
 'fft.dct': lambda x: np.sum(scipy.fft.dct(x) ** 2),
 'ndimage.gaussian_filter': lambda x: np.sum(scipy.ndimage.gaussian_filter(x, 1.0) ** 2),
 'spatial.distance.cdist': lambda x: np.sum(dist.cdist(np.reshape(x, (3, 2)), np.ones((2, 2)))),
 'cluster.vq.whiten': lambda x: np.sum(scipy.cluster.vq.whiten(np.reshape(x, (3, 2))) ** 2),
}
ok = []
for name, f in probes.items():
    try:
        t0 = time.perf_counter()
        (g,) = tr.gradient(f, x)
        (fd,) = tr.gradient(f, tr.AutoFiniteDifferences(), x)
        good = g is not None and np.allclose(g, fd, rtol=1e-5, atol=1e-7)
        print(f'{"OK " if good else "BAD"} {name}  ({1e3 * (time.perf_counter() - t0):.1f} ms)')
        ok.append(good)
    except Exception as e:
        msg = f'{type(e).__name__}: {e}'.replace('\n', ' ')
        print(f'ERR {name}: {msg[:150]}')
        ok.append(False)
print(f'{sum(ok)} of {len(ok)} work unmodified ({"baseline" if BASELINE else "prototype"})')
