"""Reductions: finite-difference cases for every rule, plus zeros, ties, ddof, dtypes, errors."""
import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp

from .harness import arg, case, const, parametrize

S0, S1, S2, S3 = (), (5,), (3, 4), (2, 3, 4)


def _axis_cases(fn, extra=None, **kw):
    """Shapes (), (5,), (3,4), (2,3,4) with axis None/int/negative/tuple, keepdims, and
    axis passed positionally."""
    extra = extra or {}
    return [
        case(fn, S0, kwargs=dict(extra), **kw),
        case(fn, S1, kwargs=dict(extra), **kw),
        case(fn, S1, kwargs=dict(extra, axis=0, keepdims=True), **kw),
        case(fn, S2, kwargs=dict(extra), **kw),
        case(fn, S2, const(1), kwargs=dict(extra), **kw),            # axis positional
        case(fn, S2, kwargs=dict(extra, axis=-2), **kw),
        case(fn, S2, kwargs=dict(extra, axis=None, keepdims=True), **kw),
        case(fn, S3, kwargs=dict(extra, axis=(0, 2)), **kw),
        case(fn, S3, kwargs=dict(extra, axis=(-1, 0), keepdims=True), **kw),
        case(fn, S3, kwargs=dict(extra, axis=1, keepdims=True), **kw),
    ]


ZEROS1 = [1.5, 0.0, -2.0, 0.7]
ZEROS2 = [[0.0, 1.5, -1.2], [0.0, 0.0, 0.8], [2.0, 0.0, -0.5]]

CASES = (
    _axis_cases(np.sum)
    + _axis_cases(np.mean)
    + _axis_cases(np.nansum)
    + _axis_cases(np.nanmean)
    + _axis_cases(np.prod)
    + _axis_cases(np.max) + _axis_cases(np.amax)
    + _axis_cases(np.min) + _axis_cases(np.amin)
    + _axis_cases(np.nanmax) + _axis_cases(np.nanmin)
    + _axis_cases(np.var) + _axis_cases(np.std)
    + _axis_cases(np.var, {'ddof': 1})[2:] + _axis_cases(np.std, {'ddof': 1})[2:]
    + [
        case(np.sum, S2, kwargs=dict(where=np.array([True, False, True, True]), axis=1)),
        case(np.sum, S2, kwargs=dict(axis=0, initial=2.0)),
        case(np.sum, S2, kwargs=dict(dtype=np.float64)),
        case(np.mean, S2, kwargs=dict(where=np.array([[True], [False], [True]]), axis=0)),
        case(np.mean, S3, kwargs=dict(axis=()), name='mean(axis=())'),
        case(np.prod, S2, const(1), const(None), const(None), const(True),
             name='prod(x,1,None,None,True)'),
        case(np.prod, S2, kwargs=dict(axis=1, initial=1.5)),
        case(np.prod, S2, kwargs=dict(axis=0, where=np.array([True, False, True, True]))),
        case(np.prod, arg(None, values=ZEROS1), name='prod(one zero)'),
        case(np.prod, arg(None, values=ZEROS1[:1] + [0.0] + ZEROS1[1:]), name='prod(two zeros)'),
        case(np.prod, arg(None, values=ZEROS2), kwargs=dict(axis=0), name='prod(zeros, axis=0)'),
        case(np.prod, arg(None, values=ZEROS2), kwargs=dict(axis=1), name='prod(zeros, axis=1)'),
        case(np.prod, arg(None, values=ZEROS2), name='prod(zeros, all)'),
        case(np.prod, arg(None, values=[0.0]), name='prod([0])'),
        case(np.max, S2, kwargs=dict(axis=1, initial=-10.0)),
        case(np.max, S2,
             kwargs=dict(axis=0, initial=-10.0, where=np.array([True, False, True, True]))),
        case(np.min, S3, const(-1), const(None), const(True), name='min(x,-1,None,True)'),
        case(np.nanmax, arg(None, values=[[1.0, np.nan, 3.0], [0.5, 2.0, np.nan]]),
             kwargs=dict(axis=1), name='nanmax(with nan)'),
        case(np.nansum, arg(None, values=[[1.0, np.nan, 3.0], [0.5, 2.0, np.nan]]),
             kwargs=dict(axis=0), name='nansum(with nan)'),
        case(np.nanmean, arg(None, values=[[1.0, np.nan, 3.0], [0.5, 2.0, np.nan]]),
             kwargs=dict(axis=1), name='nanmean(with nan)'),
        case(np.var, S2, const(0), const(None), const(None), const(1), name='var(x,0,None,None,1)'),
        case(np.var, S3, kwargs=dict(axis=(0, 1), correction=1)),
        case(np.std, S3, kwargs=dict(axis=(0, 1), ddof=2, keepdims=True)),
        case(np.std, S2, kwargs=dict(dtype=np.float64, axis=0)),
        # cumulative
        case(np.cumsum, S0), case(np.cumsum, S1), case(np.cumsum, S2),
        case(np.cumsum, S2, const(1)), case(np.cumsum, S3, kwargs=dict(axis=-2)),
        case(np.cumsum, S3, kwargs=dict(axis=0)),
        case(np.cumprod, S0), case(np.cumprod, S1), case(np.cumprod, S2),
        case(np.cumprod, S2, const(0)), case(np.cumprod, S3, kwargs=dict(axis=-1)),
        case(np.cumprod, S3, kwargs=dict(axis=1)),
        case(np.cumprod, arg(None, values=ZEROS1 + [0.0, 1.1]), name='cumprod(two zeros)'),
        case(np.cumprod, arg(None, values=ZEROS2), kwargs=dict(axis=0),
             name='cumprod(zeros, axis=0)'),
        case(np.cumprod, arg(None, values=ZEROS2), kwargs=dict(axis=1),
             name='cumprod(zeros, axis=1)'),
        case(np.cumprod, arg(None, values=[0.0, 0.0, 0.0]), name='cumprod(all zeros)'),
        # trace
        case(np.trace, S2), case(np.trace, (4, 4)), case(np.trace, S2, const(1)),
        case(np.trace, S2, kwargs=dict(offset=-1)),
        case(np.trace, S3, kwargs=dict(axis1=2, axis2=0)),
        case(np.trace, S3, kwargs=dict(offset=1, axis1=-1, axis2=1)),
        case(np.trace, (2, 2, 3, 3), kwargs=dict(axis1=1, axis2=3)),
        # average
        case(np.average, S0), case(np.average, S1), case(np.average, S2, const(1)),
        case(np.average, S3, kwargs=dict(axis=(0, 2), keepdims=True)),
        case(np.average, S2, const(1), arg((4,), 0.5, 2.0)),    # weights positional, tracked
        case(np.average, S2, const(0), arg(S2, 0.5, 2.0)),
        case(np.average, S2, const(None), arg(S2, 0.5, 2.0)),
        case(np.average, S3, kwargs=dict(axis=(2, 0), weights=np.arange(1.0, 9.0).reshape(4, 2))),
        case(np.average, S3, kwargs=dict(axis=1, weights=np.array([1.0, 2.0, 0.5]), keepdims=True)),
        # complex: pullbacks conjugate the partial derivatives (products)
        *[case(fn, arg(s, dtype=np.complex128), kwargs=kw)
          for fn in (np.sum, np.mean, np.prod, np.cumsum, np.cumprod)
          for s, kw in ((S1, {}), (S3, {'axis': 1}))],
        case(np.prod, arg(None, values=[1 + 1j, 0j, -2 + 0.5j], dtype=np.complex128),
             name='prod(complex, one zero)'),
        case(np.var, arg(S2, dtype=np.complex128), kwargs=dict(axis=1)),
        case(np.std, arg(S2, dtype=np.complex128)),
        # a 0-d reduction among other values: a batch of tangents (forward-mode
        # Jacobians, Hessians) must keep its axis (it summed over it)
        *[case(lambda x, fn=fn, kw=kw: fn(x[1], **kw) * x, S1, covers=fn,
               name=f'{fn.__name__}(0-d, {kw}) in a batch')
          for fn, kws in ((np.sum, 3), (np.prod, 3), (np.max, 3), (np.mean, 1), (np.cumsum, 2))
          for kw in ({}, {'axis': 0}, {'axis': None, 'keepdims': True})[:kws]],
    ]
)


@parametrize(CASES)
def test_reduction_against_finite_differences(c):
    c.check()


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def grad(f, x):
    """Gradient of scalar-valued ``f`` at ``x`` (float64 unless ``x`` is a float array)."""
    x = np.asarray(x)
    return vjp(f, x if x.dtype.kind == 'f' else x.astype(np.float64))[1](np.ones(()))[0]


def fd_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def hessian(f, x):
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    H = np.zeros((n, n))
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0

        def gk(xx):
            return vjp(f, xx)[1](np.ones(()))[0]
        H[k] = np.ravel(vjp(gk, x)[1](e.reshape(x.shape))[0])
    return H


# --------------------------------------------------------------------------
# prod and cumprod with zeros: exact values
# --------------------------------------------------------------------------

def test_prod_gradient_with_one_zero_is_product_of_the_others():
    x = np.array([2.0, 0.0, 3.0, -1.5])
    g = grad(np.prod, x)
    np.testing.assert_allclose(g, [0.0, 2.0 * 3.0 * -1.5, 0.0, 0.0])
    assert np.all(np.isfinite(g))


def test_prod_gradient_with_two_zeros_is_zero():
    x = np.array([2.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(grad(np.prod, x), np.zeros(4))


def test_prod_hessian_with_zeros_is_exact():
    # d2/dxi dxj prod(x) = prod over k != i, j
    for x in ([2.0, 0.0, 3.0, -1.5], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.5]):
        x = np.array(x)
        expect = np.zeros((4, 4))
        for i in range(4):
            for j in range(4):
                if i != j:
                    expect[i, j] = np.prod(np.delete(x, [i, j]))
        np.testing.assert_allclose(hessian(np.prod, x), expect, atol=1e-12)


def test_prod_along_axis_with_zeros_matches_finite_differences():
    x = np.array(ZEROS2)
    for axis in (0, 1, None, (0, 1)):
        shape = np.shape(np.prod(x, axis=axis))
        w = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
        f = (lambda v, axis=axis, w=w: np.sum(np.prod(v, axis=axis) * w))
        g = grad(f, x)
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, fd_grad(f, x), atol=1e-8)


def test_cumprod_with_zeros_matches_finite_differences():
    x = np.array([1.5, 0.0, -2.0, 0.0, 0.7, 1.2])
    w = np.arange(1.0, 7.0)
    f = lambda v: np.sum(np.cumprod(v) * w)
    g = grad(f, x)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, fd_grad(f, x), atol=1e-8)


def test_prod_of_long_vector_gradient():
    # no overflow/underflow surprises in the scan for a long well-scaled vector
    x = np.linspace(0.9, 1.1, 1001)
    x[500] = 0.0
    g = grad(np.prod, x)
    expect = np.zeros_like(x)
    expect[500] = np.prod(np.delete(x, 500))
    np.testing.assert_allclose(g, expect, rtol=1e-12, atol=1e-300)


# --------------------------------------------------------------------------
# ties in max/min: the cotangent is split equally among tied elements
# --------------------------------------------------------------------------

@pytest.mark.parametrize('fn', [np.max, np.amax, np.min, np.amin, np.nanmax, np.nanmin])
def test_ties_split_equally(fn):
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    if fn in (np.min, np.amin, np.nanmin):
        x = -x
    np.testing.assert_allclose(grad(fn, x), [[0, 0.5, 0.5], [0, 0, 0]])
    f = lambda v: np.sum(fn(v, axis=1) * np.array([1.0, 3.0]))
    np.testing.assert_allclose(grad(f, x), [[0, 0.5, 0.5], [1.0, 1.0, 1.0]])


@pytest.mark.parametrize('fn', [np.max, np.amax, np.min, np.amin])
def test_ties_split_equally_with_keepdims(fn):
    # float64 input and cotangent, keepdims=True (softmax's z - amax(z, axis=1,
    # keepdims=True)): _chooser_vjp's shortcut; a NaN row gets no gradient
    x = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, 2.0, 2.0],
                  [np.nan, 1.0, 2.0, 0.0], [5.0, -1.0, 0.0, 1.0], [4.0, 4.0, 4.0, 1.0]])
    w = np.array([[1.0], [3.0], [-2.0], [0.5], [0.3]])
    v = x if fn in (np.max, np.amax) else -x
    g = grad(lambda t: np.sum(fn(t, axis=1, keepdims=True) * w), v)
    np.testing.assert_allclose(g, [[0, 0.5, 0.5, 0], [0.75] * 4, [0] * 4, [0.5, 0, 0, 0],
                                   [0.1, 0.1, 0.1, 0]], rtol=1e-15)
    g = grad(lambda t: np.sum(fn(t, axis=0, keepdims=True) * np.arange(1.0, 5.0)), v[[0, 1, 4, 4]])
    np.testing.assert_allclose(g, [[0, 0, 0, 0], [0, 0, 0, 4], [0.5, 1, 1.5, 0],
                                   [0.5, 1, 1.5, 0]], rtol=1e-15)
    for axis in (None, (0, 1), -1):
        g = grad(lambda t: np.sum(fn(t, axis=axis, keepdims=True) ** 2), v[[0, 3]])
        m = fn(v[[0, 3]], axis=axis, keepdims=True)
        want = (v[[0, 3]] == m) * 2 * m / np.sum(v[[0, 3]] == m, axis=axis, keepdims=True)
        np.testing.assert_allclose(g, want, rtol=1e-15)


def test_max_keepdims_matches_finite_differences_to_second_order():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 5))
    w = rng.standard_normal((4, 5))

    def f(v):       # a log-softmax cross-entropy, shifted by the row maximum
        z = v - np.amax(v, axis=1, keepdims=True)
        return -np.sum((z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))) * w)
    np.testing.assert_allclose(grad(f, x), fd_grad(f, x), rtol=1e-7, atol=1e-8)
    assert tr.gradcheck(f, x)
    g = lambda v: np.sum(np.max(v, axis=1, keepdims=True) ** 3 * w[:, :1])
    np.testing.assert_allclose(grad(g, x), fd_grad(g, x), rtol=1e-7, atol=1e-8)
    H = hessian(g, x)
    Hfd = np.array([np.ravel(fd_grad(lambda v: grad(g, v)[np.unravel_index(k, x.shape)], x))
                    for k in range(x.size)])
    np.testing.assert_allclose(H, Hfd, rtol=1e-6, atol=1e-7)
    assert np.count_nonzero(H) == 4         # one maximum per row


def test_max_initial_wins_gives_zero_gradient():
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(grad(lambda v: np.max(v, initial=5.0), x), [0.0, 0.0])


def test_amax_and_max_are_both_registered():
    from tracked import registry
    assert np.amax is not np.max          # distinct objects in NumPy 2
    for fn in (np.max, np.amax, np.min, np.amin):
        assert fn in registry.RULES


# --------------------------------------------------------------------------
# finite gradients at non-smooth points we chose to define
# --------------------------------------------------------------------------

def test_std_of_constant_has_zero_gradient():
    x = np.full((3, 4), 2.5)
    np.testing.assert_array_equal(grad(np.std, x), np.zeros((3, 4)))
    g = grad(lambda v: np.sum(np.std(v, axis=0, ddof=1)), x)
    np.testing.assert_array_equal(g, np.zeros((3, 4)))


def test_mean_and_sum_values():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(grad(lambda v: np.mean(v, axis=1)[1], x), [[0, 0, 0], [1 / 3] * 3])
    np.testing.assert_allclose(grad(lambda v: np.sum(v, 0)[2], x), [[0, 0, 1], [0, 0, 1]])


# --------------------------------------------------------------------------
# ddof / correction
# --------------------------------------------------------------------------

@pytest.mark.parametrize('ddof', [0, 1, 2])
def test_var_ddof_exact(ddof):
    x = np.array([1.0, 2.0, 4.0, 7.0])
    g = grad(lambda v: np.var(v, ddof=ddof), x)
    np.testing.assert_allclose(g, 2 * (x - x.mean()) / (4 - ddof))
    gs = grad(lambda v: np.std(v, ddof=ddof), x)
    np.testing.assert_allclose(gs, (x - x.mean()) / (4 - ddof) / np.std(x, ddof=ddof))


def test_var_correction_equals_ddof():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    np.testing.assert_allclose(grad(lambda v: np.var(v, correction=1), x),
                               grad(lambda v: np.var(v, ddof=1), x))


# --------------------------------------------------------------------------
# ufunc.reduce / ufunc.accumulate
# --------------------------------------------------------------------------

def test_ufunc_reduce_and_accumulate_differentiate():
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, (3, 4))
    w = rng.standard_normal((3, 4))
    assert tr.gradcheck(lambda v: np.add.reduce(v, axis=0), x)
    assert tr.gradcheck(lambda v: np.add.reduce(v), x)                 # default axis 0
    assert tr.gradcheck(lambda v: np.multiply.reduce(v, axis=1), x)
    assert tr.gradcheck(lambda v: np.maximum.reduce(v, axis=None), x)
    assert tr.gradcheck(lambda v: np.minimum.reduce(v, 1, keepdims=True), x)
    assert tr.gradcheck(lambda v: np.sum(np.add.accumulate(v) * w), x)
    assert tr.gradcheck(lambda v: np.sum(np.multiply.accumulate(v, axis=1) * w), x)
    p = tr.param(x)
    y = np.add.reduce(p, axis=0)
    assert y.shape == (4,)
    np.testing.assert_allclose(y.data, x.sum(0))
    y = np.add.accumulate(p)
    np.testing.assert_allclose(y.data, np.cumsum(x, axis=0))
    np.sum(y * w).back()
    np.testing.assert_allclose(p.grad, np.cumsum(w[::-1], axis=0)[::-1])


# --------------------------------------------------------------------------
# dtype preservation and argument errors
# --------------------------------------------------------------------------

F32_CALLS = [
    (np.sum, {}), (np.sum, {'axis': 1}), (np.mean, {'axis': 0}), (np.prod, {'axis': 1}),
    (np.max, {}), (np.amax, {'axis': 0}), (np.min, {'axis': 1}), (np.amin, {}),
    (np.nansum, {}), (np.nanmean, {'axis': 1}), (np.nanmax, {}), (np.nanmin, {'axis': 0}),
    (np.var, {'axis': 1, 'ddof': 1}), (np.std, {}), (np.cumsum, {'axis': 1}),
    (np.cumprod, {}), (np.trace, {}), (np.average, {'axis': 0}),
]


@pytest.mark.parametrize('fn,kw', F32_CALLS, ids=[f'{f.__name__}{kw}' for f, kw in F32_CALLS])
def test_float32_preserved(fn, kw):
    x32 = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    p = tr.param(x32)
    y = fn(p, **kw)
    assert y.dtype == np.float32, f'{fn.__name__} returned {y.dtype}'
    np.sum(y).back()
    assert p.grad.dtype == np.float32
    # and the value agrees with the float64 gradient
    g64 = grad(lambda v: np.sum(fn(v, **kw)), x32.astype(np.float64))
    np.testing.assert_allclose(p.grad, g64, rtol=1e-4, atol=1e-5)


def test_float_dtype_argument_is_honoured():
    x32 = np.ones((2, 3), dtype=np.float32)
    p = tr.param(x32)
    y = np.sum(p, dtype=np.float64)
    assert y.dtype == np.float64
    y.back()
    assert p.grad.dtype == np.float32
    np.testing.assert_array_equal(p.grad, np.ones((2, 3)))


@pytest.mark.parametrize('fn', [np.sum, np.mean, np.prod, np.var, np.std, np.cumsum, np.cumprod,
                                np.trace, np.nansum, np.nanmean])
def test_integer_dtype_is_refused(fn):
    p = tr.param(np.ones((2, 2)))
    with pytest.raises(TypeError, match='dtype'):
        fn(p, dtype=np.int64)


@pytest.mark.parametrize('fn', [np.sum, np.mean, np.prod, np.max, np.amin, np.var, np.std,
                                np.cumsum, np.cumprod, np.trace, np.nansum])
def test_out_is_refused(fn):
    p = tr.param(np.ones((2, 2)))
    out = np.zeros(()) if fn not in (np.cumsum, np.cumprod) else np.zeros(4)
    with pytest.raises(TypeError, match='out='):
        fn(p, out=out)
    with pytest.raises(TypeError, match='out='):   # positional out
        if fn in (np.max, np.amin):
            fn(p, None, out)
        elif fn is np.trace:
            fn(p, 0, 0, 1, None, out)
        else:
            fn(p, None, None, out)


def test_var_where_is_refused():
    p = tr.param(np.ones((2, 2)))
    with pytest.raises(TypeError, match='where='):
        np.var(p, where=np.array([True, False]))


def test_average_returned_and_zero_weights():
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    w = np.array([1.0, 3.0])
    p = tr.param(x)
    avg, scl = np.average(p, axis=1, weights=w, returned=True)
    np.testing.assert_allclose(avg.data if tr.istracked(avg) else avg, [1.75, 4.5])
    np.testing.assert_allclose(scl.data if tr.istracked(scl) else scl, [4.0, 4.0])
    np.sum(avg).back()
    np.testing.assert_allclose(p.grad, [[0.25, 0.75], [0.25, 0.75]])
    with pytest.raises(ZeroDivisionError):
        np.average(tr.param(x), axis=1, weights=np.array([1.0, -1.0]))


def test_method_spellings():
    x = np.random.default_rng(1).standard_normal((3, 4))
    for f in (lambda v: v.sum(1), lambda v: v.mean(axis=0), lambda v: v.prod(),
              lambda v: v.max(axis=1), lambda v: v.min(0, keepdims=True), lambda v: v.var(ddof=1),
              lambda v: v.std(1), lambda v: v.cumsum(0), lambda v: v.cumprod(1),
              lambda v: v.trace(1)):
        assert tr.gradcheck(f, x)


def test_zero_dimensional_reductions_in_forward_and_nested_modes():
    # tr.hessian (forward over reverse) of a loss holding a 0-d sum or mean: the
    # batched tangent of the 0-d reduction was summed over its batch axis
    x = np.array([1.0, 2.0, 3.0])
    for f in (lambda x: np.sum(x[0] * x[1]) ** 2 + x[2], lambda x: np.mean(x @ x) ** 2,
              lambda x: np.sum(x[0], axis=0) ** 3 * x[1]):
        np.testing.assert_allclose(tr.hessian(f, x), tr.hessian_reverse(f, x), atol=1e-12)
    J, = tr.jacobian(lambda x: np.sum(x @ x) * np.ones(5), x, mode='forward')
    np.testing.assert_allclose(J, np.tile(2 * x, (5, 1)))


def test_complex_prod_and_cumprod_conjugate():
    z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.5j])
    g, = tr.gradient(lambda z: np.real(np.prod(z)), z)
    np.testing.assert_allclose(g, np.conj([z[1] * z[2], z[0] * z[2], z[0] * z[1]]))
    g, = tr.gradient(lambda z: np.real(np.cumprod(z)[1]), z)
    np.testing.assert_allclose(g, np.conj([z[1], z[0], 0]))
