"""Statistics rules: finite-difference cases (every quantile method), NumPy's values,
NaN handling, keyword forms and tape replays with another ordering."""
import warnings

import numpy as np
import pytest

import tracked as tr

from .harness import arg, case, const, parametrize

S1, S2, S3 = (7,), (4, 5), (3, 4, 5)
METHODS = ('inverted_cdf', 'averaged_inverted_cdf', 'closest_observation',
           'interpolated_inverted_cdf', 'hazen', 'weibull', 'linear', 'median_unbiased',
           'normal_unbiased', 'lower', 'higher', 'midpoint', 'nearest')
NANS = arg(None, values=[[1.0, np.nan, 3.0, 0.2], [0.5, 2.0, np.nan, np.nan], [0.1, 0.4, 0.9, 1.6]])
CNANS = arg(None, values=[[1.0 + 0.5j, np.nan, 3.0 - 1j, 0.2j], [0.5, 2.0 + 2j, np.nan, -1 + 1j]],
            dtype=np.complex128)
Q = np.array([0.1, 0.45, 0.83])
NEW_NUMPY = np.lib.NumpyVersion(np.__version__) >= '2.2.0'

CASES = (
    [case(np.quantile, S3, const(Q), kwargs=dict(axis=1, method=m)) for m in METHODS]
    + [case(np.quantile, S2, const(0.3), kwargs=dict(method=m)) for m in METHODS]
    + [case(lambda q, m=m: np.quantile(np.linspace(-1.0, 2.0, 9) ** 3, q, method=m),
            arg((2,), 0.3, 0.35), covers=np.quantile, name=f'quantile(q, {m})')
       for m in ('linear', 'hazen', 'weibull', 'median_unbiased', 'normal_unbiased',
                 'interpolated_inverted_cdf')]
    + [
        case(np.quantile, S3, const(0.7), kwargs=dict(axis=(0, 2), keepdims=True)),
        case(np.quantile, S1, const(Q), const(0)),
        case(np.percentile, S2, const([10.0, 60.0]), kwargs=dict(axis=0)),
        case(np.percentile, S3, const(35.0),
             kwargs=dict(axis=-1, method='midpoint', keepdims=True)),
        case(np.median, S1), case(np.median, (6,)), case(np.median, S2, const(1)),
        case(np.median, S3, kwargs=dict(axis=(0, 1), keepdims=True)), case(np.median, ()),
        case(np.nanmedian, NANS, kwargs=dict(axis=1)), case(np.nanmedian, S2),
        case(np.nanquantile, NANS, const(Q), kwargs=dict(axis=1)),
        case(np.nanpercentile, NANS, const(40.0), kwargs=dict(axis=0, method='hazen')),
        case(np.nanprod, NANS, kwargs=dict(axis=1)), case(np.nanprod, S2),
        case(np.nanvar, NANS, kwargs=dict(axis=1)), case(np.nanvar, S3, kwargs=dict(ddof=1)),
        case(np.nanstd, NANS, kwargs=dict(axis=0, keepdims=True)), case(np.nanstd, S2, const(1)),
        case(np.nancumsum, NANS, kwargs=dict(axis=1)), case(np.nancumsum, S2),
        case(np.nancumprod, NANS, kwargs=dict(axis=0)), case(np.nancumprod, S1),
        # complex: nanvar/nanstd are of |x - mean|^2 (the composite squared x - mean)
        case(np.nanvar, CNANS, kwargs=dict(axis=1)), case(np.nanstd, CNANS),
        case(np.nanprod, CNANS, kwargs=dict(axis=0)), case(np.nancumprod, CNANS),
        case(np.ptp, S2), case(np.ptp, S3, kwargs=dict(axis=1, keepdims=True)), case(np.ptp, ()),
        *([case(np.cumulative_sum, S1),
           case(np.cumulative_sum, S2, kwargs=dict(axis=1, include_initial=True)),
           case(np.cumulative_prod, S1, kwargs=dict(include_initial=True)),
           case(np.cumulative_prod, S3, kwargs=dict(axis=-1))]
          if hasattr(np, 'cumulative_sum') else []),      # NumPy >= 2.1
        case(np.cov, S2), case(np.cov, S2, kwargs=dict(rowvar=False, bias=True)),
        case(np.cov, S1, S1), case(np.cov, S2, kwargs=dict(ddof=2)),
        case(np.cov, S2, kwargs=dict(fweights=np.array([1, 2, 1, 3, 1]))),
        case(lambda m, w: np.cov(m, aweights=w), S2, arg((5,), 0.5, 2.0), covers=np.cov,
             name='cov(aweights tracked)'),
        case(np.corrcoef, S2), case(np.corrcoef, S1, S1),
        case(np.corrcoef, S2, const(None), const(False)),
        # weights (inverted_cdf only): the gradient goes to the element picked
        case(lambda a, w: np.quantile(a, Q, axis=1, method='inverted_cdf', weights=w), S2,
             arg(S2, 0.5, 2.0), covers=np.quantile, name='quantile(weights=)'),
        case(lambda a: np.nanpercentile(a, 40.0, axis=0, method='inverted_cdf',
                                        weights=np.linspace(0.5, 2.0, 12).reshape(3, 4)),
             NANS, covers=np.nanpercentile, name='nanpercentile(weights=)'),
    ]
)


@parametrize(CASES)
def test_statistics_against_finite_differences(c):
    c.check()


@pytest.mark.parametrize('method', METHODS)
def test_quantile_values_are_numpys(method):
    x = np.random.default_rng(1).standard_normal((3, 6, 5))
    for q in (0.0, 0.31, 1.0, Q):
        for kw in ({}, {'axis': 1}, {'axis': (0, 2), 'keepdims': True}):
            got = tr.data(np.quantile(tr.param(x), q, method=method, **kw))
            np.testing.assert_allclose(got, np.quantile(x, q, method=method, **kw), rtol=1e-14)


def test_median_gradient_even_and_odd():
    g = tr.gradient(np.median, np.array([3.0, 1.0, 2.0]))[0]
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])
    g = tr.gradient(np.median, np.array([4.0, 1.0, 3.0, 2.0]))[0]
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.5])


def test_nan_forms_skip_nans_with_finite_gradients():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 5.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        for f in (lambda v: np.nanmedian(v, axis=1), lambda v: np.nanvar(v, axis=1),
                  lambda v: np.nanpercentile(v, 30, axis=1), lambda v: np.median(v, axis=1)):
            np.testing.assert_allclose(tr.data(f(tr.param(x))), f(x), equal_nan=True)
            g = tr.gradient(lambda v: np.nansum(f(v)), x)[0]
            assert np.all(np.isfinite(g))
        np.testing.assert_allclose(tr.gradient(lambda v: np.nanmedian(v, axis=1)[2], x)[0][2],
                                   [0.0, 0.0, 1.0])


def test_nan_in_plain_median_gives_nan():
    y = np.median(tr.param(np.array([1.0, np.nan, 2.0])))
    assert np.isnan(tr.data(y))


def _weighted_inverted_cdf(a, q, weights, axis=None, keepdims=False, nan=False):
    """The weighted inverted-CDF quantile by its definition: the smallest value (of
    positive weight) whose cumulative weight reaches q of the total; NumPy >= 2.2's."""
    q = np.asarray(q, dtype=float)
    w = np.broadcast_to(weights if np.ndim(weights) == np.ndim(a) else np.expand_dims(
        weights, tuple(i for i in range(np.ndim(a)) if i != axis % np.ndim(a))), np.shape(a))
    axes = tuple(range(np.ndim(a))) if axis is None else \
        tuple(ax % np.ndim(a) for ax in np.atleast_1d(axis))
    rest = [i for i in range(np.ndim(a)) if i not in axes]
    av = np.moveaxis(a, axes, range(-len(axes), 0)).reshape(*[np.shape(a)[i] for i in rest], -1)
    wv = np.moveaxis(w, axes, range(-len(axes), 0)).reshape(av.shape)

    def one(v, ww, qq):
        keep = ~np.isnan(v) if nan else np.ones(v.shape, bool)
        if not nan and np.isnan(v).any():
            return np.nan
        v, ww = v[keep], ww[keep]
        order = np.argsort(v, kind='stable')
        cum = np.cumsum(ww[order])
        cdf = cum / cum[-1]                     # exactly 1 at the end
        return v[order][np.argmax((cdf >= qq) & (ww[order] > 0))]
    out = np.array([[one(v, ww, qq) for v, ww in zip(av.reshape(-1, av.shape[-1]),
                                                        wv.reshape(-1, av.shape[-1]))]
                    for qq in q.ravel()]).reshape(q.shape + av.shape[:-1])
    if keepdims:
        out = np.expand_dims(out, tuple(q.ndim + ax for ax in axes))
    return out


def test_weighted_quantile_values_are_numpys():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6, 5))
    w = rng.uniform(0.0, 2.0, x.shape)
    w[0, 0, :2] = w[2, :3, 1] = 0.0                     # some zero weights
    x_nan = x.copy()
    x_nan[1, 2, 3] = np.nan
    for fn, scale in ((np.quantile, 1.0), (np.percentile, 100.0), (np.nanquantile, 1.0)):
        for a in (x, x_nan):
            for q in (0.0, 0.31, 1.0, Q):
                for kw in ({}, {'axis': 1}, {'axis': (0, 2), 'keepdims': True},
                           {'axis': 2, 'weights': w[0, 0]}):
                    if fn is np.nanquantile and 'weights' in kw:
                        continue        # NumPy 2.4's nanquantile fails on 1-d weights itself
                    kw = {'weights': w, **kw}
                    with warnings.catch_warnings():
                        warnings.simplefilter('ignore')
                        got = tr.data(fn(tr.param(a), np.multiply(q, scale),
                                         method='inverted_cdf', **kw))
                        # NumPy 2.0's weighted quantiles erred (zero weights, tuple axes,
                        # nanquantile): compared with NumPy's from 2.2 on
                        expected = fn(a, np.multiply(q, scale), method='inverted_cdf',
                                      **kw) if NEW_NUMPY else None
                    ref = _weighted_inverted_cdf(a, q, nan=fn is np.nanquantile, **kw)
                    np.testing.assert_array_equal(got, ref)
                    if NEW_NUMPY:
                        np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="Only method 'inverted_cdf'"):
        np.quantile(tr.param(x), 0.5, weights=w)
    with pytest.raises(ValueError, match='non-negative'):
        np.quantile(tr.param(x), 0.5, method='inverted_cdf', weights=-w)
    with pytest.raises(TypeError, match='Axis must be specified'):
        np.quantile(tr.param(x), 0.5, method='inverted_cdf', weights=w[0, 0])


def test_recorded_tape_sorts_the_new_values():
    rng = np.random.default_rng(2)
    f = lambda v: np.sum(np.median(v, axis=1) ** 2) + np.percentile(v, 30) + np.nanvar(v)
    tape = tr.GradientTape(f, rng.standard_normal((3, 5)))
    ctape = tr.compile(tape, background=False)
    for _ in range(3):
        x2 = rng.standard_normal((3, 5))        # another ordering
        np.testing.assert_allclose(tape.gradient(x2)[0], tr.gradient(f, x2)[0])
        np.testing.assert_allclose(ctape.gradient(x2)[0], tr.gradient(f, x2)[0])


def test_keyword_arguments():
    x = np.random.default_rng(3).standard_normal((4, 5))
    w = np.linspace(0.5, 2.0, 5)
    assert tr.gradcheck(lambda a, q: np.quantile(a=a, q=q, axis=1), x, np.array([0.2, 0.7]))
    assert tr.gradcheck(lambda m, ww: np.cov(m=m, aweights=ww), x, w)
    assert tr.gradcheck(lambda a: np.percentile(a, q=40.0, axis=0, method='hazen'), x)


def test_errors():
    p = tr.param(np.ones(4))
    with pytest.raises(ValueError, match='range'):
        np.quantile(p, 1.5)
    with pytest.raises(ValueError, match='valid method'):
        np.quantile(p, 0.5, method='nope')
    with pytest.raises(TypeError, match='out='):
        np.median(p, out=np.zeros(()))


def test_complex_nanvar_and_nanstd_values():
    z = np.array([[1 + 2j, 3 - 1j, np.nan], [0.5 + 0.5j, 2j, 1.0]])
    for fn in (np.nanvar, np.nanstd):
        for kw in ({}, {'axis': 1}, {'axis': 0, 'ddof': 0, 'keepdims': True}):
            val = tr.withgradient(lambda z: np.sum(fn(z, **kw)), z).val
            np.testing.assert_allclose(val, np.sum(fn(z, **kw)))
            assert np.isrealobj(val)
