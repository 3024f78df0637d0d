"""Elementwise rules: finite-difference cases for every rule, plus the conventions
(ties, kinks, zero gradients, dtype) that finite differences cannot pin down."""
import warnings

import numpy as np
import pytest

import tracked as tr
from tracked import registry
from tracked.api import vjp

from .harness import arg, case, const, parametrize

SHAPES = [(), (5,), (2, 3)]


def carg(shape, low=-2.0, high=2.0):
    """A complex argument: real and imaginary parts uniform in [low, high)."""
    return arg(shape, low, high, dtype=np.complex128)
PAIRS = [((), ()), ((5,), (5,)), ((2, 3), (3,)), ((3, 1), (4,)), ((), (2, 3))]


def unary(fn, low=-2.0, high=2.0, **kw):
    return [case(fn, arg(s, low, high), **kw) for s in SHAPES]


def binary(fn, lo1=-2.0, hi1=2.0, lo2=-2.0, hi2=2.0, consts=(1.5,), **kw):
    cases = [case(fn, arg(s1, lo1, hi1), arg(s2, lo2, hi2), **kw) for s1, s2 in PAIRS]
    for c in consts:
        cases.append(case(fn, arg((5,), lo1, hi1), const(c), **kw))
        cases.append(case(fn, const(c), arg((2, 3), lo2, hi2), **kw))
    return cases


MASK = np.array([[True, False, True], [False, True, False]])

CASES = [
    # arithmetic
    *binary(np.add), *binary(np.subtract), *binary(np.multiply),
    *binary(np.true_divide, lo2=0.5, hi2=2.0),
    case(np.true_divide, (2, 3), arg((3,), -2.0, -0.5)),
    *unary(np.negative), *unary(np.positive),
    *unary(np.reciprocal, 0.5, 2.0), case(np.reciprocal, arg((4,), -2.0, -0.5)),
    *unary(np.square),
    *unary(np.sqrt, 0.3, 2.0),
    *unary(np.cbrt, 0.3, 2.0), case(np.cbrt, arg((4,), -2.0, -0.3)),
    *unary(np.absolute), *unary(np.fabs),
    *binary(np.remainder, lo2=0.6, hi2=1.4, consts=(0.7,)),
    case(np.remainder, (2, 3), arg((3,), -1.4, -0.6)),
    *binary(np.fmod, lo2=0.6, hi2=1.4, consts=(0.7,)),
    case(np.fmod, (2, 3), arg((3,), -1.4, -0.6)),
    *binary(np.floor_divide, lo2=0.6, hi2=1.4, consts=(0.7,)),
    # powers: positive bases with differentiated exponents, constant exponents
    # (including integers with negative bases), and constant bases
    *binary(np.power, 0.5, 2.0, -2.0, 2.0, consts=()),
    case(np.power, arg((5,), 0.5, 2.0), const(2.0)),
    case(np.power, arg((5,), 0.5, 2.0), const(0.5)),
    case(np.power, arg((5,), 0.5, 2.0), const(-1.5)),
    case(np.power, arg((2, 3), 0.5, 2.0), const(0)),
    case(np.power, arg((5,), -2.0, 2.0), const(2)),
    case(np.power, arg((5,), -2.0, -0.5), const(3)),
    case(np.power, arg((5,), -2.0, -0.5), const(-2)),
    case(np.power, arg((2, 3), -2.0, -0.5), const(np.array([2.0, 3.0, -1.0]))),
    case(np.power, arg((), -2.0, -0.5), const(np.float64(3.0))),
    case(np.power, arg((5,), 0.5, 2.0), arg((), 1.5, 2.5)),
    case(np.power, const(2.0), (2, 3)),
    case(np.power, const(np.array([0.5, 1.5, 3.0])), (2, 3)),
    *binary(np.float_power, 0.5, 2.0, -2.0, 2.0, consts=()),
    case(np.float_power, arg((5,), -2.0, -0.5), const(3)),
    case(np.float_power, arg((5,), 0.5, 2.0), const(0.5)),
    case(np.float_power, const(3.0), (2, 3)),
    # exponentials and logarithms
    *unary(np.exp), *unary(np.exp2), *unary(np.expm1),
    *unary(np.log, 0.3, 2.0), *unary(np.log2, 0.3, 2.0), *unary(np.log10, 0.3, 2.0),
    *unary(np.log1p, -0.5, 2.0),
    *binary(np.logaddexp), *binary(np.logaddexp2),
    case(np.logaddexp, const(0.0), (5,), name='softplus'),
    # trigonometric and hyperbolic
    *unary(np.sin), *unary(np.cos), *unary(np.tan, -1.2, 1.2),
    *unary(np.arcsin, -0.9, 0.9), *unary(np.arccos, -0.9, 0.9), *unary(np.arctan),
    *binary(np.arctan2), *binary(np.hypot),
    *unary(np.sinh), *unary(np.cosh), *unary(np.tanh),
    *unary(np.arcsinh), *unary(np.arccosh, 1.2, 3.0), *unary(np.arctanh, -0.9, 0.9),
    *unary(np.deg2rad, -200.0, 200.0), *unary(np.radians, -200.0, 200.0),
    *unary(np.rad2deg), *unary(np.degrees),
    *unary(np.sinc), case(np.sinc, arg((4,), 1.1, 3.0)),
    case(np.sinc, arg((4,), values=[0.0, 0.003, -0.008, 0.5])),   # the series near 0
    # selection
    *binary(np.maximum), *binary(np.minimum), *binary(np.fmax), *binary(np.fmin),
    case(np.maximum, (2, 3), const(0.0), name='relu'),
    case(np.clip, (2, 3), const(-0.5), const(0.5)),
    case(np.clip, (), const(-0.5), const(0.5)),
    case(np.clip, (5,), const(None), const(0.5)),
    case(np.clip, (5,), const(-0.5), const(None)),
    case(np.clip, (2, 3), kwargs={'a_min': -0.5, 'a_max': 0.5}),
    *([case(np.clip, (2, 3), kwargs={'min': -0.5, 'max': 0.5})]      # min=/max=: NumPy 2.1
      if np.lib.NumpyVersion(np.__version__) >= '2.1.0' else []),
    case(np.clip, arg((4, 3), -3.0, 3.0), arg((3,), -1.5, -0.5), arg((4, 1), 0.5, 1.5)),
    case(np.clip, arg((), -3.0, 3.0), arg((), -1.5, -0.5), arg((5,), 0.5, 1.5)),
    # a plain array's clip method with tracked bounds: NumPy's internal clip ufunc
    case(lambda lo, hi: np.linspace(-3.0, 3.0, 12).reshape(4, 3).clip(min=lo, max=hi),
         arg((3,), -1.5, -0.5), arg((4, 1), 0.5, 1.5), covers=np._core.umath.clip,
         name='ndarray.clip(min=lo, max=hi)'),
    case(np.where, const(MASK), (2, 3), (2, 3)),
    case(np.where, const(MASK), (3,), ()),
    case(np.where, const(MASK[0]), (4, 1), (4, 3)),
    case(np.where, const(True), (), ()),
    case(np.where, const(MASK), const(0.0), (2, 3)),
    case(np.where, const(MASK), (2, 3), const(1.5)),
    # piecewise constant: zero gradient
    *unary(np.floor), *unary(np.ceil), *unary(np.trunc), *unary(np.rint),
    *unary(np.sign),
    case(np.round, (2, 3)), case(np.round, (5,), kwargs={'decimals': 1}),
    case(np.round, ()), case(np.round, (5,), const(2)),
    case(np.around, (2, 3)), case(np.around, (), kwargs={'decimals': 1}),
    # complex numbers: parts, and holomorphic functions of complex arguments
    *[case(fn, carg(s)) for fn in (np.real, np.imag, np.conjugate, np.angle, np.absolute)
      for s in SHAPES],
    *[case(fn, s) for fn in (np.real, np.imag, np.conjugate, np.angle) for s in SHAPES],
    case(np.angle, carg((5,)), kwargs={'deg': True}),
    case(np.real_if_close, carg((5,))), case(np.real_if_close, (2, 3)),
    *[case(fn, carg(s)) for fn in (np.exp, np.sin, np.cos, np.tan, np.sinh, np.cosh, np.tanh,
                                   np.square, np.reciprocal, np.negative, np.expm1,
                                   np.arctan, np.arcsinh, np.exp2)
      for s in ((), (2, 3))],
    *[case(fn, carg((4,), 0.3, 2.0)) for fn in (np.log, np.sqrt, np.log2, np.log10, np.log1p,
                                                 np.arcsin, np.arccos, np.arctanh, np.arccosh)],
    *[case(fn, carg(s1), carg(s2)) for fn in (np.add, np.subtract, np.multiply)
      for s1, s2 in PAIRS[:3]],
    case(np.true_divide, carg((2, 3)), carg((3,), 0.5, 2.0)),
    case(np.power, carg((5,), 0.5, 2.0), carg((5,), -1.0, 1.0)),
    case(np.power, carg((5,), 0.5, 2.0), const(3)),
    case(np.power, const(2.0), carg((2, 3))),
    case(np.multiply, (5,), const(1.5 - 2.0j), name='multiply(real,complex-constant)'),
    case(np.multiply, (2, 3), carg((3,)), name='multiply(real,complex)'),
    # arccosh' = 1/(sqrt(z-1) sqrt(z+1)): 1/sqrt(z^2-1) had the wrong sign for Re z < 0
    case(np.arccosh, carg((6,), -2.0, 2.0), name='arccosh(complex, both half-planes)'),
    # NumPy 2's sign(z) = z/|z| for complex z: not piecewise constant, not holomorphic
    *[case(np.sign, carg(s)) for s in SHAPES],
]

ELEMENTWISE = [
    np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.positive,
    np.power, np.float_power, np.square, np.sqrt, np.cbrt, np.reciprocal, np.exp,
    np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.logaddexp,
    np.logaddexp2, np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan,
    np.arctan2, np.hypot, np.sinh, np.cosh, np.tanh, np.arcsinh, np.arccosh,
    np.arctanh, np.absolute, np.fabs, np.maximum, np.minimum, np.fmax, np.fmin,
    np.deg2rad, np.rad2deg, np.radians, np.degrees, np.remainder, np.fmod,
    np.floor_divide, np.sinc, np.floor, np.ceil, np.trunc, np.rint, np.sign,
    np.round, np.around, np.clip, np.where, np.real, np.imag, np.conjugate, np.angle,
    np.real_if_close,
]


@parametrize(CASES)
def test_case(c):
    c.check()


def test_every_elementwise_function_is_registered_with_cases():
    covered = {c.fun for c in CASES}
    for f in ELEMENTWISE + [np.divide, np.abs, np.mod]:
        assert f in registry.RULES, f
        assert f in covered, f


def grads(f, *args, dy=None):
    """Gradients of ``f`` at ``args`` via the core vjp (raw cotangents, no leaf cast)."""
    y, back = vjp(f, *args)
    return back(np.ones(np.shape(y), dtype=y.dtype) if dy is None else dy)


# --------------------------------------------------------------------------
# dtype
# --------------------------------------------------------------------------

def test_float32_param_times_python_float_keeps_float32():
    x = tr.param(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    y = np.sum(x * 1.5)
    assert y.dtype == np.float32
    y.back()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, np.full(3, 1.5, dtype=np.float32))


UNARY_F32 = [np.negative, np.positive, np.square, np.sqrt, np.cbrt, np.reciprocal,
             np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.sin,
             np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh,
             np.arcsinh, np.arctanh, np.absolute, np.fabs, np.deg2rad, np.rad2deg,
             np.radians, np.degrees, np.floor, np.ceil, np.trunc, np.rint, np.sign,
             np.round, np.around, np.sinc,
             lambda x: x ** 2, lambda x: x ** 3, lambda x: x ** 0.5, lambda x: 2.0 ** x,
             lambda x: x / 3.0, lambda x: 3.0 / x, lambda x: x - 1.0, lambda x: 2.0 - x,
             lambda x: x % 0.3, lambda x: np.fmod(x, 0.3), lambda x: x // 0.3,
             lambda x: np.maximum(x, 0.5), lambda x: np.fmin(x, 0.5),
             lambda x: np.clip(x, 0.2, 0.6), lambda x: np.where(x > 0.5, x, 0.0),
             lambda x: np.logaddexp(0.0, x), lambda x: np.logaddexp2(x, 1.0),
             lambda x: np.arctan2(x, 2.0), lambda x: np.hypot(x, 2.0)]


@pytest.mark.parametrize('f', UNARY_F32, ids=lambda f: getattr(f, '__name__', 'f'))
def test_float32_cotangent_stays_float32(f):
    x = np.array([0.1, 0.4, 0.7], dtype=np.float32)
    (g,) = grads(f, x)
    assert g.dtype == np.float32
    assert g.shape == x.shape


def test_float32_binary_cotangents_stay_float32():
    x = np.array([0.5, 1.0, 1.5], dtype=np.float32)
    y = np.array([1.5, 1.0, 0.5], dtype=np.float32)
    for f in (np.add, np.subtract, np.multiply, np.true_divide, np.power, np.maximum,
              np.minimum, np.logaddexp, np.arctan2, np.hypot):
        gx, gy = grads(f, x, y)
        assert gx.dtype == gy.dtype == np.float32, f


# --------------------------------------------------------------------------
# numpy scalars / 0-d
# --------------------------------------------------------------------------

@pytest.mark.parametrize('f, expected', [
    (lambda x: x * x + 1.0, 6.0),
    (lambda x: np.sin(x) * np.exp(x), np.exp(3.0) * (np.sin(3.0) + np.cos(3.0))),
    (lambda x: x ** 2, 6.0),
    (lambda x: np.maximum(x, 1.0), 1.0),
    (lambda x: np.clip(x, 0.0, 2.0), 0.0),
    (lambda x: np.where(True, x, 0.0), 1.0),
    (lambda x: np.floor(x) + x, 1.0),
    (lambda x: np.round(x, 1) + np.sinc(x) * 0.0, 0.0),
])
def test_scalar_param(f, expected):
    x = tr.param(3.0)
    y = f(x)
    assert isinstance(y, tr.TrackedReal)
    y.back()
    assert x.grad.shape == ()
    assert float(x.grad) == pytest.approx(expected)


def test_numpy_scalar_arguments():
    (g,) = grads(lambda x: np.float64(2.0) * x + np.float32(1.0), np.float64(3.0))
    assert g == 2.0 and np.shape(g) == ()
    (g,) = grads(lambda x: np.tanh(x), np.float64(0.0))
    assert g == 1.0


# --------------------------------------------------------------------------
# ties, kinks and edge values
# --------------------------------------------------------------------------

def test_maximum_minimum_split_ties_equally():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 3.0, 2.0])
    gx, gy = grads(np.maximum, x, y)
    np.testing.assert_array_equal(gx, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0, 0.0])
    gx, gy = grads(np.minimum, x, y)
    np.testing.assert_array_equal(gx, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 0.0, 1.0])
    for f in (np.fmax, np.fmin):
        gx, gy = grads(f, x, x.copy())
        np.testing.assert_array_equal(gx, [0.5, 0.5, 0.5])
        np.testing.assert_array_equal(gy, [0.5, 0.5, 0.5])


def test_maximum_tie_with_broadcast_constant():
    (g,) = grads(lambda x: np.maximum(x, 0.0), np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 1.0])
    # a broadcast scalar tied with several elements collects each half
    (g,) = grads(lambda t: np.maximum(np.array([1.0, 1.0, 0.0]), t), np.float64(1.0))
    assert g == 0.5 + 0.5 + 1.0


def test_nan_handling_of_maximum_and_fmax():
    x = np.array([np.nan, 1.0])
    y = np.array([1.0, np.nan])
    gx, gy = grads(np.maximum, x, y)          # NaN propagates: no side was "taken"
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])
    gx, gy = grads(np.fmax, x, y)             # NaN ignored: the number is taken
    np.testing.assert_array_equal(gx, [0.0, 1.0])
    np.testing.assert_array_equal(gy, [1.0, 0.0])


def test_abs_at_zero_is_zero():
    for f in (np.abs, np.fabs, abs):
        (g,) = grads(f, np.array([-2.0, 0.0, 3.0]))
        np.testing.assert_array_equal(g, [-1.0, 0.0, 1.0])


def test_power_edge_values():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        (g,) = grads(lambda x: x ** 2, np.array([0.0, -3.0]))
        np.testing.assert_array_equal(g, [0.0, -6.0])
        (g,) = grads(lambda x: x ** 0, np.array([0.0, -3.0]))
        np.testing.assert_array_equal(g, [0.0, 0.0])
        (g,) = grads(lambda x: x ** 3, np.array([-2.0]))
        np.testing.assert_array_equal(g, [12.0])
        (g,) = grads(lambda x: x ** -1, np.array([-2.0]))
        np.testing.assert_array_equal(g, [-0.25])
        # array exponent containing 0 at base 0: 0, not nan
        gx, gy = grads(np.power, np.array([0.0, 0.0, -2.0, 2.0]),
                       np.array([0.0, 2.0, 3.0, 3.0]))
        np.testing.assert_array_equal(gx, [0.0, 0.0, 12.0, 12.0])
        # exponent gradient is 0 where the base is <= 0
        np.testing.assert_allclose(gy, [0.0, 0.0, 0.0, 8.0 * np.log(2.0)])
        # a differentiated 0-d exponent arrives as a NumPy scalar: same conventions
        gx, gy = grads(np.power, np.array([0.0, 3.0]), np.float64(0.0))
        np.testing.assert_array_equal(gx, [0.0, 0.0])
        assert gy == pytest.approx(0.0 + np.log(3.0))      # summed over the broadcast
        gx, gy = grads(np.power, np.array([0.0, -3.0]), np.float64(2.0))
        np.testing.assert_array_equal(gx, [0.0, -6.0])
        assert gy == 0.0
        (g,) = grads(lambda y: np.power(-2.0, y), np.array([2.0]))
        np.testing.assert_array_equal(g, [0.0])
        (g,) = grads(lambda y: 2.0 ** y, np.array([3.0]))
        np.testing.assert_allclose(g, [8.0 * np.log(2.0)])
    with np.errstate(divide='ignore'):
        (g,) = grads(lambda x: x ** 0.5, np.array([0.0, 4.0]))
    np.testing.assert_array_equal(g, [np.inf, 0.25])


def test_power_second_derivative_negative_base_integer_exponent():
    H = vjp(lambda x: vjp(lambda z: z ** 3, x)[1](np.ones(1))[0], np.array([-2.0]))[1]
    np.testing.assert_allclose(H(np.ones(1))[0], [-12.0])


def test_sinc_at_zero():
    (g,) = grads(np.sinc, np.array([0.0, 1.0]))
    np.testing.assert_allclose(g, [0.0, -1.0], atol=1e-15)
    # nested derivatives at 0 and across the switch to the series (|x| < 1e-2)
    h = tr.hessian(lambda x: np.sum(np.sinc(x)), np.array([0.0, 0.5]))
    np.testing.assert_allclose(np.diag(h), [-np.pi ** 2 / 3, _sinc2(0.5)], rtol=1e-12)
    d3 = tr.gradient(lambda x: tr.gradient(lambda y: tr.gradient(np.sinc, y)[0], x)[0], 0.0)[0]
    d4 = tr.gradient(lambda x: tr.gradient(lambda y: tr.gradient(
        lambda z: tr.gradient(np.sinc, z)[0], y)[0], x)[0], 0.0)[0]
    assert d3 == 0.0 and np.isclose(d4, np.pi ** 4 / 5, rtol=1e-12)
    for x in (0.0, 0.004, 0.0099, 0.0101, 0.03):
        assert tr.gradcheck(np.sinc, np.array([x, -x]))


def _sinc2(x):
    """The second derivative of sinc at x != 0, in closed form."""
    p = np.pi * x
    return (-(p ** 2) * np.sin(p) - 2 * p * np.cos(p) + 2 * np.sin(p)) / (np.pi * x ** 3)


def test_divide_aliases():
    gx, gy = grads(np.divide, np.array([1.0]), np.array([2.0]))
    assert gx == 0.5 and gy == -0.25
    assert grads(np.mod, np.array([3.5]), np.array([2.0]))[1] == -1.0
    assert grads(np.fmod, np.array([-3.5]), np.array([2.0]))[1] == 1.0


@pytest.mark.parametrize('f', [np.floor, np.ceil, np.trunc, np.rint, np.sign, np.round,
                               np.around, lambda x: np.round(x, 2),
                               lambda x: np.floor_divide(x, 0.3),
                               lambda x: np.floor_divide(1.0, x)])
def test_zero_gradient_functions_return_zeros(f):
    x = np.array([[-1.7, 0.2, 2.5], [0.0, 3.0, -0.4]])
    with np.errstate(divide='ignore'):       # floor_divide(1.0, 0.0)
        (g,) = grads(f, x)
        # second order: the (zero) gradient does not depend on x (None) or is zero
        (h,) = vjp(lambda z: grads(f, z)[0], x)[1](np.ones_like(x))
    assert g is not None
    assert g.shape == x.shape
    np.testing.assert_array_equal(g, np.zeros_like(x))
    assert h is None or np.array_equal(h, np.zeros_like(x))


def test_zero_gradient_through_param():
    x = tr.param(np.array([0.3, 1.7]))
    np.sum(np.floor(x) * 2.0 + np.sign(x)).back()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


# --------------------------------------------------------------------------
# clip and where
# --------------------------------------------------------------------------

def test_clip_boundaries_are_inclusive():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    (g,) = grads(lambda x: np.clip(x, -1.0, 1.0), x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 1.0, 0.0])
    gx, glo, ghi = grads(np.clip, x, -1.0, 1.0)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 1.0, 1.0, 0.0])
    assert glo == 1.0 and ghi == 1.0


def test_clip_array_bounds_get_gradients():
    x = np.array([[-2.0, 0.0, 2.0], [0.5, -0.5, 5.0]])
    lo = np.array([-1.0, -1.0, -1.0])
    hi = np.array([[1.0], [0.2]])
    gx, glo, ghi = grads(np.clip, x, lo, hi)
    np.testing.assert_array_equal(gx, [[0, 1, 0], [0, 1, 0]])
    np.testing.assert_array_equal(glo, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(ghi, [[1.0], [2.0]])
    assert glo.shape == lo.shape and ghi.shape == hi.shape


def test_clip_inverted_bounds_give_hi():
    # NumPy applies hi last: lo > hi gives hi everywhere, so hi gets all the gradient
    gx, glo, ghi = grads(np.clip, np.array([-1.0, 0.5, 3.0]), 1.0, 0.0)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0])
    assert glo == 0.0 and ghi == 3.0


def test_clip_method_and_keyword_spellings():
    x = tr.param(np.array([-2.0, 0.3, 2.0]))
    y = x.clip(-1.0, 1.0) + np.clip(x, a_max=1.0, a_min=None) + np.clip(x, 0.0, None)
    np.sum(y).back()
    np.testing.assert_array_equal(x.grad, [0 + 1 + 0, 1 + 1 + 1, 0 + 0 + 1])


def test_where_routes_gradient_and_unbroadcasts():
    cond = np.array([[True, False, True], [False, False, True]])
    gx, gy = grads(lambda x, y: np.where(cond, x, y), np.float64(2.0), np.ones((2, 1)))
    assert gx == 3.0 and np.shape(gx) == ()
    np.testing.assert_array_equal(gy, [[1.0], [2.0]])


def test_where_sends_exact_zeros_to_the_untaken_branch():
    # np.where, not g * cond: an inf/nan cotangent stays out of the other branch
    g = np.array([np.inf, 1.0])
    gx, gy = grads(lambda x, y: np.where(np.array([True, False]), x, y),
                   np.zeros(2), np.zeros(2), dy=g)
    np.testing.assert_array_equal(gx, [np.inf, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 1.0])


def test_where_tracked_condition_carries_no_gradient():
    x = tr.param(np.array([1.0, 0.0, 2.0]))
    idx = np.where(x)
    assert not tr.istracked(idx[0])
    np.testing.assert_array_equal(idx[0], [0, 2])
    z = np.where(x, np.array([1.0, 2.0, 3.0]), 0.0)
    assert not tr.istracked(z)


# --------------------------------------------------------------------------
# Floating-point decomposition, sign manipulation, i0, fix, sort_complex
# --------------------------------------------------------------------------

_AWAY = arg((2, 3), 0.3, 1.9)        # away from 0, integers and powers of two at the ends

MORE_CASES = [
    case(np.heaviside, (2, 3), (3,)),
    case(np.heaviside, const(np.array([0.0, 1.0, -1.0])), (3,)),    # h counts at x == 0
    case(np.copysign, (2, 3), (3,)),
    case(np.copysign, (), (4,)),
    case(np.ldexp, (2, 3), const(np.array([1, -2, 3]))),
    case(np.nextafter, (3,), (3,)),
    case(lambda x: np.frexp(x)[0] * 2.0, arg((4,), 0.55, 0.95), covers=np.frexp, name='frexp[0]'),
    case(lambda x: np.modf(x)[0] * np.modf(x)[1], arg((2, 3), 1.1, 1.9), covers=np.modf,
         name='modf'),
    case(lambda x, y: np.divmod(x, y)[1], arg((3,), 1.1, 1.9), arg((3,), 0.7, 0.9),
         covers=np.divmod, name='divmod[1]'),
    case(np.i0, (2, 3)), case(np.i0, arg((4,), 8.5, 12.0)), case(np.i0, ()),
    case(np.fix, _AWAY),
    case(np.sort_complex, arg((5,), dtype=np.complex128)),
]
# np.emath: real arguments outside the real domain give complex results; a real
# argument's gradient is the real part (arcsin and arccos of 2 + 0j had the imaginary
# part's derivative negated)
_OUTSIDE = arg((6,), values=[-3.0, -2.0, -0.5, 0.5, 2.0, 3.0])
_EMATH = (np.emath.sqrt, np.emath.log, np.emath.log2, np.emath.log10, np.emath.arcsin,
          np.emath.arccos, np.emath.arctanh)
EMATH_CASES = [
    *[case(fn, _OUTSIDE) for fn in _EMATH],
    *[case(fn, arg((2, 3), 0.2, 0.9)) for fn in _EMATH],       # inside: real results
    case(np.emath.power, _OUTSIDE, arg((6,), -1.0, 1.0)),
    case(np.emath.power, _OUTSIDE, const(3)),
    case(np.emath.logn, arg((), 2.0, 3.0), _OUTSIDE),
    case(np.emath.logn, arg((), values=-3.0), arg((6,), 0.5, 2.0)),
]
CASES = CASES + MORE_CASES + EMATH_CASES   # a new list: the parametrisations keep their own


@parametrize(MORE_CASES + EMATH_CASES)
def test_more_elementwise_against_finite_differences(c):
    c.check()


@pytest.mark.parametrize('fn', _EMATH)
def test_emath_values_and_dtypes_are_numpys(fn):
    x = np.array([-3.0, -0.5, 0.5, 2.0])
    for v in (x, np.abs(x) / 4):
        y = tr.data(fn(tr.param(v)))
        np.testing.assert_allclose(y, fn(v), rtol=1e-15)
        assert y.dtype == fn(v).dtype


def test_emath_sqrt_of_a_negative_number_issue_23():
    g = tr.gradient(lambda x: np.sum(np.imag(np.emath.sqrt(x))), np.array([-4.0, 4.0]))[0]
    np.testing.assert_allclose(g, [-0.25, 0.0])      # Im sqrt(x) = sqrt(-x) for x < 0
    g = tr.gradient(lambda x: np.imag(np.emath.arcsin(x)), 2.0)[0]
    np.testing.assert_allclose(g, 1 / np.sqrt(3.0))  # Im arcsin(x) = arccosh(x) for x > 1
    g = tr.gradient(lambda x: np.real(np.emath.logn(-3.0, x)), 2.0)[0]   # a Python base
    np.testing.assert_allclose(g, np.real(1 / (2.0 * np.log(-3.0 + 0j))))
    x32 = np.array([-1.0, 4.0], np.float32)
    assert tr.gradient(lambda x: np.sum(np.imag(np.emath.sqrt(x))), x32)[0].dtype == np.float32


def test_new_elementwise_values():
    x = np.array([-3.5, 0.0, 0.25, 9.0, 40.0])
    np.testing.assert_array_equal(tr.data(np.i0(tr.param(x))), np.i0(x))
    np.testing.assert_allclose(tr.gradient(lambda v: np.sum(np.i0(v)), x)[0],
                               np.sign(x) * _i1(np.abs(x)), rtol=1e-12)
    m, e = np.frexp(tr.param(x))
    assert type(e) is np.ndarray and e.dtype.kind == 'i'
    np.testing.assert_array_equal(tr.data(m), np.frexp(x)[0])
    g = tr.gradient(lambda v: np.sum(np.heaviside(v, 0.5) + np.copysign(v, -1.0)), x)[0]
    np.testing.assert_array_equal(g, [1.0, -1.0, -1.0, -1.0, -1.0])   # sign flipped unless negative


def _i1(x):
    """Modified Bessel function I1 by its series (reference for i0's derivative)."""
    from math import factorial
    return sum((x / 2) ** (2 * k + 1) / (factorial(k) * factorial(k + 1)) for k in range(80))


def test_complex_arccosh_left_half_plane():
    z = np.array([-0.13 + 0.36j, -1.5 - 0.2j, 0.4 - 1.1j])
    g, = tr.gradient(lambda z: np.sum(np.real(np.arccosh(z))), z)
    np.testing.assert_allclose(g, np.conj(1 / (np.sqrt(z - 1) * np.sqrt(z + 1))))


def test_complex_sign_is_z_over_abs():
    z = np.array([3 + 4j, -1j, 0j])
    g, = tr.gradient(lambda z: np.sum(np.imag(np.sign(z))), z)
    # d Im(z/|z|): 1j/|z| - (z/|z|) Im(z/|z|)/|z| (ChainRules' dL/dx + i dL/dy), 0 at 0
    s = np.array([0.6 + 0.8j, -1j])
    np.testing.assert_allclose(g, np.append((1j - s * s.imag) / np.array([5.0, 1.0]), 0))
