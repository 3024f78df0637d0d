"""SciPy's special-function ufuncs: finite-difference cases for every rule (to second
order, and forward mode), plus the names in errors and the boundary conventions.
Skipped when SciPy is not installed.

The cases call the ufunc objects (``scipy.special._ufuncs``), which are the public
names unless ``SCIPY_ARRAY_API=1`` makes those Python wrappers; the tests of the
public names skip then."""
import os

import numpy as np
import pytest

public = pytest.importorskip('scipy.special')

import tracked as tr                                    # noqa: E402
from scipy.special import _ufuncs                       # noqa: E402
from scipy.special import _ufuncs as sp                 # noqa: E402
from tracked import registry                            # noqa: E402
from tracked.api import vjp                             # noqa: E402

from .harness import arg, case, const, parametrize     # noqa: E402

SHAPES = [(), (5,), (2, 3)]
PAIRS = [((), ()), ((5,), (5,)), ((2, 3), (3,)), ((), (2, 3))]


def unary(fn, low=-2.0, high=2.0, **kw):
    return [case(fn, arg(s, low, high), **kw) for s in SHAPES]


def binary(fn, lo1, hi1, lo2, hi2, **kw):
    return [case(fn, arg(s1, lo1, hi1), arg(s2, lo2, hi2), **kw) for s1, s2 in PAIRS]


def in_x(fn, first, low, high, **kw):
    """Cases differentiating the last argument; ``first`` are the constant ones
    (scalars, or arrays of 5 that broadcast against the shapes here)."""
    return [case(fn, *map(const, first), arg(s, low, high), **kw) for s in [(), (5,), (2, 5)]]


def carg(shape, low=-2.0, high=2.0):
    return arg(shape, low, high, dtype=np.complex128)


ORDERS = np.array([0.0, 0.5, 1.0, 2.5, 3.0])
INT_ORDERS = np.array([0, 1, 2, 3, 4])

CASES = [
    # gamma and beta functions
    *unary(sp.gamma, 0.5, 3.0), case(sp.gamma, arg((4,), -1.8, -1.2)),
    case(sp.gamma, carg((3,), 0.5, 2.0), order=1),
    *unary(sp.rgamma, 0.5, 3.0),
    *unary(sp.gammaln, 0.5, 3.0), case(sp.gammaln, arg((4,), -1.8, -1.2)),
    *unary(sp.loggamma, 0.5, 3.0), case(sp.loggamma, carg((3,), 0.5, 2.0), order=1),
    *unary(sp.psi, 0.5, 3.0), case(sp.psi, arg((4,), -2.8, -2.2)),
    *unary(sp.gammasgn, 0.5, 3.0),
    *in_x(_ufuncs._zeta, (3.0,), 0.5, 3.0),
    case(lambda q: _ufuncs._zeta(np.array([2.0, 3.5, 4.0]), q), arg((2, 3), 0.5, 3.0),
         covers=_ufuncs._zeta, name='zeta(s, q)'),
    *binary(sp.beta, 0.5, 3.0, 0.5, 3.0), *binary(sp.betaln, 0.5, 3.0, 0.5, 3.0),
    *binary(sp.poch, 0.5, 3.0, -0.4, 2.0),
    # incomplete gamma and beta functions, in x
    *in_x(sp.gammainc, (1.5,), 0.2, 3.0),
    case(sp.gammainc, const(ORDERS + 0.5), arg((5,), 0.2, 3.0)),
    *in_x(sp.gammaincc, (0.7,), 0.2, 3.0),
    *in_x(sp.gammaincinv, (2.5,), 0.1, 0.9), *in_x(sp.gammainccinv, (2.5,), 0.1, 0.9),
    *in_x(sp.betainc, (1.5, 2.5), 0.1, 0.9), *in_x(sp.betaincc, (0.7, 3.0), 0.1, 0.9),
    *in_x(sp.betaincinv, (1.5, 2.5), 0.1, 0.9), *in_x(sp.betainccinv, (2.0, 0.8), 0.1, 0.9),
    # error functions and the normal distribution
    *unary(sp.erf), case(sp.erf, carg((4,), -1.0, 1.0)),
    *unary(sp.erfc), case(sp.erfc, carg((4,), -1.0, 1.0)),
    *unary(sp.erfinv, -0.9, 0.9), *unary(sp.erfcinv, 0.1, 1.9),
    *unary(sp.erfcx), case(sp.erfcx, carg((4,), -1.0, 1.0)),
    *unary(sp.erfi), case(sp.erfi, carg((4,), -1.0, 1.0)),
    *unary(sp.dawsn), case(sp.dawsn, carg((4,), -1.0, 1.0)),
    case(sp.wofz, carg((4,), -1.0, 1.0)),
    case(sp.wofz, carg((), 0.5, 2.0)), case(sp.wofz, carg((2, 3), -2.0, 2.0)),
    *unary(sp.ndtr, -3.0, 3.0), case(sp.ndtr, carg((4,), -1.0, 1.0)),
    *unary(sp.ndtri, 0.05, 0.95),
    *unary(sp.log_ndtr, -5.0, 3.0), case(sp.log_ndtr, arg((4,), -40.0, -20.0), rtol=1e-4),
    *unary(sp.ndtri_exp, -3.0, -0.1),
    *binary(sp.owens_t, -2.0, 2.0, -2.0, 2.0),
    # logistic and information theory
    *unary(sp.expit, -4.0, 4.0), *unary(sp.logit, 0.05, 0.95), *unary(sp.log_expit, -4.0, 4.0),
    *binary(sp.xlogy, -2.0, 2.0, 0.2, 3.0), case(sp.xlogy, const(np.array([0.0, 1.0, 2.0])),
                                                 arg((3,), 0.2, 3.0)),
    case(sp.xlogy, carg((3,)), carg((3,), 0.5, 2.0)),
    *binary(sp.xlog1py, -2.0, 2.0, -0.5, 2.0),
    case(sp.xlog1py, carg((3,)), carg((3,), 0.5, 2.0)),
    *unary(sp.entr, 0.1, 2.0),
    *binary(sp.rel_entr, 0.1, 2.0, 0.1, 2.0), *binary(sp.kl_div, 0.1, 2.0, 0.1, 2.0),
    *in_x(sp.huber, (1.0,), -3.0, 3.0), *binary(sp.huber, 0.5, 1.5, -3.0, 3.0),
    *binary(sp.pseudo_huber, 0.5, 2.0, -3.0, 3.0),
    *binary(sp.boxcox, 0.3, 2.0, 0.2, 1.5), case(sp.boxcox, arg((5,), 0.3, 2.0), const(0.0)),
    case(sp.boxcox, arg((4,), 0.3, 2.0), arg((4,), -1.5, -0.2)),
    case(sp.boxcox, arg((3,), 0.3, 2.0), const(np.array([0.0, 0.5, -1.0]))),
    *binary(sp.boxcox1p, -0.5, 2.0, 0.2, 1.5),
    # Bessel functions in z, for fixed orders
    *in_x(sp.jv, (ORDERS,), 0.3, 5.0), *in_x(sp.jv, (1.5,), 0.3, 5.0),
    case(sp.jv, const(2.0), carg((4,), 0.5, 2.0)),
    *in_x(sp.yv, (ORDERS,), 0.5, 5.0),
    *in_x(sp.iv, (ORDERS,), 0.3, 3.0), case(sp.iv, const(2.0), arg((5,), -3.0, 3.0)),
    case(sp.iv, const(1.0), carg((4,), 0.5, 2.0)),
    *in_x(sp.kv, (ORDERS,), 0.3, 3.0), case(sp.kv, const(0.5), carg((4,), 0.5, 2.0)),
    *in_x(sp.yn, (INT_ORDERS,), 0.5, 5.0), *in_x(sp.kn, (INT_ORDERS,), 0.3, 3.0),
    *unary(sp.j0, 0.3, 5.0), *unary(sp.j1, -5.0, 5.0),
    *unary(sp.y0, 0.5, 5.0), *unary(sp.y1, 0.5, 5.0),
    *unary(sp.i0, -3.0, 3.0), *unary(sp.i1, -3.0, 3.0),
    *unary(sp.k0, 0.3, 3.0), *unary(sp.k1, 0.3, 3.0),
    *in_x(sp.ive, (ORDERS,), 0.3, 3.0), case(sp.ive, const(2.0), arg((5,), -3.0, -0.3)),
    *unary(sp.i0e, 0.3, 3.0), case(sp.i0e, arg((4,), -3.0, -0.3)),
    *unary(sp.i1e, 0.3, 3.0), case(sp.i1e, arg((4,), -3.0, -0.3)),
    *in_x(sp.kve, (ORDERS,), 0.3, 3.0), case(sp.kve, const(1.0), carg((4,), 0.5, 2.0)),
    *unary(sp.k0e, 0.3, 3.0), *unary(sp.k1e, 0.3, 3.0),
    *in_x(sp.jve, (ORDERS,), 0.3, 5.0), *in_x(sp.yve, (ORDERS,), 0.5, 5.0),
    *in_x(sp.hankel1, (1.5,), 0.5, 4.0), *in_x(sp.hankel2, (ORDERS,), 0.5, 4.0),
    # exponential integrals and elementary helpers
    *unary(sp.exp1, 0.2, 3.0), *unary(sp.expi, 0.2, 3.0), case(sp.expi, arg((4,), -3.0, -0.2)),
    case(sp.expn, const(np.array([1, 2, 3])), arg((2, 3), 0.2, 3.0)),
    case(sp.expn, const(2), arg((), 0.2, 3.0)), case(sp.expn, const(1), arg((5,), 0.2, 3.0)),
    case(sp.expn, const(np.array([0, 1, 0])), arg((3,), 0.2, 3.0)),
    case(sp.expn, const(0), arg((), 0.2, 3.0)),
    *unary(sp.exprel), case(sp.exprel, arg((5,), -1e-3, 1e-3)),
    case(sp.exprel, arg((3,), values=[0.0, 5e-3, -0.02])),
    *unary(sp.expm1), *unary(sp.log1p, -0.5, 2.0), *unary(sp.exp2), *unary(sp.exp10, -1.0, 1.0),
    *unary(sp.cbrt, 0.3, 2.0), *unary(sp.cosm1),
    *binary(sp.powm1, 0.3, 2.0, -1.5, 1.5),
    *unary(sp.sindg, -200.0, 200.0), *unary(sp.cosdg, -200.0, 200.0),
    *unary(sp.tandg, -80.0, 80.0), *unary(sp.cotdg, 10.0, 170.0),
    case(sp.radian, (3,), (3,), ()), case(sp.radian, (), const(30.0), const(15.0)),
    *unary(sp.round), *unary(sp.spence, 0.2, 3.0), case(sp.spence, carg((3,), 0.5, 2.0)),
    # distribution functions, in the continuous argument
    *in_x(sp.stdtr, (np.array([1.0, 2.5, 4.0, 10.0, 30.0]),), -3.0, 3.0),
    *in_x(sp.stdtrit, (3.5,), 0.05, 0.95),
    *in_x(sp.chdtr, (3.0,), 0.3, 5.0),
    *in_x(sp.chdtrc, (np.array([1.0, 2.0, 5.0, 7.0, 9.0]),), 0.3, 5.0),
    case(sp.gdtr, arg((5,), 0.5, 2.0), const(2.5), arg((5,), 0.3, 3.0)),
    case(sp.gdtr, arg((), 0.5, 2.0), const(1.5), arg((2, 3), 0.3, 3.0)),
    case(sp.gdtrc, arg((5,), 0.5, 2.0), const(2.5), arg((5,), 0.3, 3.0)),
    *in_x(sp.pdtr, (3,), 0.3, 6.0), *in_x(sp.pdtrc, (np.array([0, 1, 2, 5, 7]),), 0.3, 6.0),
    *in_x(sp.bdtr, (3, 10), 0.1, 0.9), *in_x(sp.bdtrc, (np.array([0, 2, 4, 6, 8]), 10), 0.1, 0.9),
]


@parametrize(CASES)
def test_case(c):
    c.check()


# SciPy ufuncs that have rules: the ones the issue lists, and the rest of this module's.
REQUIRED = ['gamma', 'gammaln', 'loggamma', 'digamma', 'psi', 'beta', 'betaln', 'erf', 'erfc',
            'erfinv', 'erfcinv', 'erfcx', 'ndtr', 'ndtri', 'log_ndtr', 'expit', 'logit',
            'log_expit', 'xlogy', 'xlog1py', 'entr', 'rel_entr', 'kl_div', 'i0', 'i1', 'i0e',
            'i1e', 'iv', 'ive', 'j0', 'j1', 'jv', 'y0', 'y1', 'yn', 'gammainc', 'gammaincc']


@pytest.mark.parametrize('name', REQUIRED)
def test_required_ufuncs_are_registered(name):
    assert getattr(_ufuncs, name if name != 'digamma' else 'psi') in registry.RULES


def test_error_names_scipy_function():
    assert registry.RULES[sp.gammaln].name == 'scipy.special.gammaln'
    assert registry.RULES[_ufuncs._zeta].name == 'scipy.special.zeta'


ARRAY_API = os.environ.get('SCIPY_ARRAY_API') == '1'


@pytest.mark.skipif(ARRAY_API, reason='SCIPY_ARRAY_API=1 wraps the public ufuncs in functions '
                    'that convert their arguments; tracked.scipy.special has the ufuncs')
def test_public_names_are_the_ufuncs():
    for name in REQUIRED:
        assert getattr(public, name) is getattr(_ufuncs, name if name != 'digamma' else 'psi')


@pytest.mark.skipif(ARRAY_API, reason='SCIPY_ARRAY_API=1 wraps the public ufuncs')
def test_unmodified_scipy_calls():
    sp = public
    x = np.array([0.5, 1.5, 4.0])
    (g,) = tr.gradient(lambda x: np.sum(sp.gammaln(x) + sp.erf(x) * sp.expit(x)), x)
    expected = sp.psi(x) + 2 / np.sqrt(np.pi) * np.exp(-x * x) * sp.expit(x) + \
        sp.erf(x) * sp.expit(x) * (1 - sp.expit(x))
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    # scipy.special.zeta(s, q) and softplus are Python functions calling registered ufuncs
    (g,) = tr.gradient(lambda q: sp.zeta(2.0, q), 1.5)
    np.testing.assert_allclose(g, -2.0 * sp.zeta(3.0, 1.5), rtol=1e-12)
    (g,) = tr.gradient(lambda x: np.sum(sp.softplus(x)), x)
    np.testing.assert_allclose(g, sp.expit(x), rtol=1e-12)


def test_orders_and_shapes_without_a_formula_refuse():
    # jv's order and gammainc's shape have no closed-form derivative: asking for it
    # raises (a missing gradient would silently drop that part of the chain rule)
    with pytest.raises(NotImplementedError, match=r"scipy.special.gammainc.*argument 'a'"):
        tr.gradient(lambda a, x: sp.gammainc(a, x), 1.5, 2.0)
    with pytest.raises(NotImplementedError, match=r"scipy.special.jv.*argument 'v'"):
        tr.gradient(lambda t: sp.jv(2.0 * t, 2.0), 0.5)
    with pytest.raises(NotImplementedError, match='scipy.special.betainc'):
        tr.jvp(lambda b: sp.betainc(2.0, b, 0.3), (1.5,), (1.0,))
    # constants there are fine, and the other arguments differentiate
    (gx,) = tr.gradient(lambda x: sp.gammainc(1.5, x), 2.0)
    np.testing.assert_allclose(gx, 2.0 ** 0.5 * np.exp(-2.0) / sp.gamma(1.5), rtol=1e-12)
    (gz,) = tr.gradient(lambda z: sp.jv(1.0, z), 2.0)
    np.testing.assert_allclose(gz, (sp.j0(2.0) - sp.jv(2, 2.0)) / 2, rtol=1e-12)
    # integer orders have no gradient (the function is piecewise constant in them)
    gn, gx = tr.gradient(lambda n, x: sp.yn(n, x), 2, 1.5)
    assert gn is None
    np.testing.assert_allclose(gx, 0.5 * (sp.yn(1, 1.5) - sp.yn(3, 1.5)), rtol=1e-12)


def grads(f, *args):
    y, back = vjp(f, *args)
    return back(np.ones(np.shape(y)))


def test_zero_boundaries():
    # x log y is 0 at x == 0 for every y: no gradient to y there, log y to x
    with np.errstate(divide='ignore'):
        gx, gy = grads(sp.xlogy, np.array([0.0, 0.0, 2.0]), np.array([0.0, 3.0, 4.0]))
        _, gy1p = grads(sp.xlog1py, np.array([0.0, 2.0]), np.array([-1.0, 1.0]))
        (ge,) = grads(sp.entr, np.array([0.0, 1.0, -1.0]))
        _, gkl = grads(sp.kl_div, np.array([0.0, 1.0]), np.array([2.0, 2.0]))
        _, grel = grads(sp.rel_entr, np.array([0.0, 1.0]), np.array([2.0, 2.0]))
    np.testing.assert_array_equal(gx, [-np.inf, np.log(3.0), np.log(4.0)])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.5])
    np.testing.assert_array_equal(gy1p, [0.0, 1.0])
    np.testing.assert_array_equal(ge, [np.inf, -1.0, 0.0])
    np.testing.assert_array_equal(gkl, [1.0, 0.5])
    np.testing.assert_array_equal(grel, [0.0, -0.5])


def test_exprel_near_zero_is_smooth():
    x = np.array([0.0, 1e-9, 1e-5, -1e-5, 9e-3, 2e-2])
    (g,) = grads(sp.exprel, x)
    series = 0.5 + x / 3 + x ** 2 / 8 + x ** 3 / 30 + x ** 4 / 144 + x ** 5 / 840
    np.testing.assert_allclose(g, series, rtol=1e-12)


def test_log_ndtr_far_left_tail():
    # phi(x) / Phi(x) ~ -x for x -> -inf: no underflow to 0/0
    (g,) = grads(sp.log_ndtr, np.array([-40.0, -200.0]))
    np.testing.assert_allclose(g, [40.0248, 200.005], rtol=1e-5)


def test_scaled_bessel_of_complex_raises():
    with pytest.raises(TypeError, match='scipy.special.ive of a complex argument'):
        tr.gradient(lambda z: np.real(sp.ive(1.0, z)), 1.0 + 1.0j)


def test_float32_stays_float32():
    x = np.array([0.5, 1.5], dtype=np.float32)
    for f in (sp.gammaln, sp.erf, sp.expit, sp.ndtr, sp.log_ndtr, lambda x: sp.xlogy(x, x),
              lambda x: sp.gammainc(2.0, x), sp.i0e, lambda x: sp.jv(1.0, x)):
        (g,) = grads(f, x)
        assert g.dtype == np.float32, f


def test_hessian_of_a_log_likelihood():
    # Poisson log likelihood in log-rate: -exp(t) + k t - gammaln(k + 1); the
    # gammaln term is constant, the Hessian is -exp(t)
    k = np.array([0.0, 3.0, 7.0])

    def loglik(t):
        return np.sum(sp.xlogy(k, np.exp(t)) - np.exp(t) - sp.gammaln(k + 1))
    t = np.array([0.1, 1.0, 2.0])
    np.testing.assert_allclose(tr.hessian(loglik, t), -np.diag(np.exp(t)), rtol=1e-12)
