"""Elementwise rules: ufuncs and the functions NumPy builds from them.

Most rules are their partial derivatives (``defpartials``): ``d(ans, *args)`` per
argument, written with NumPy operations, from which the registry makes both the
pullback (``g * conj(d)``) and the tangent rule (``sum(d_k * t_k)``), so the two can
never disagree.  Partials are holomorphic derivatives, so complex inputs follow
ChainRules' convention with no extra code; the few non-holomorphic functions
(``abs`` and ``angle`` of complex numbers, ``real``, ``imag``, ``conj``) have
explicit pullbacks and tangents.  Pullbacks return cotangents of the broadcast
output shape; the tape unbroadcasts.  Constants are Python floats (weak scalars),
so float32 stays float32.  Per-op overhead matters: the common partials use the
fewest NumPy calls (reusing ``ans``), and masks come from comparisons, which are
not recorded.  ``kernel=`` is the compiled tape's scalar form of each forward.

Conventions where the derivative is not defined (PyTorch's choices unless noted):

- maximum/minimum/fmax/fmin: at ties (x == y) the gradient is split equally, 0.5
  to each side.  The "winner" is found by ``x == ans``, so one helper serves the
  NaN-propagating (maximum) and NaN-ignoring (fmax) forms: a NaN output gives 0.
- absolute/fabs at 0: gradient 0 (``g * sign(x)``); for complex z, ``g * z / |z|``
  and 0 at z == 0.
- power x**y: the base gradient ``y * x**(y-1)`` is 0 where y == 0 (so x**0 at
  x == 0 gives 0, not 0*inf = nan); x**2 at 0 gives 0, x**0.5 at 0 gives inf
  (the true one-sided derivative).  Integer exponents of negative bases are exact
  (x**(y-1) is evaluated in floating point, which is defined for integral y).
  The exponent gradient ``ans * log(x)`` is 0 where a real x <= 0 (log undefined
  there; np.where on a safe argument, not on the result, so no nan/warning leaks
  in); a complex result uses the complex logarithm.
- clip: inclusive bounds, like torch.clamp: the gradient passes to ``a`` where
  lo <= a <= hi (detected as ``a == ans``); otherwise to the bound that was taken
  (hi before lo when both equal the output, matching NumPy applying hi last).
- floor, ceil, trunc, rint, sign, floor_divide, round/around: zero gradient,
  written ``g * 0.0`` (zeros of the output shape and dtype that still nest)
  rather than ``None``, so the input gets a gradient of zeros, not "no gradient".
- sinc near 0: the derivative by its Taylor series (|x| < 1e-2), so that nested
  derivatives at x == 0 are right (-pi^2/3 for the second), not those of a safe
  denominator.
- angle: the derivative of ``arctan2(imag, real)``; 0 for real inputs (a constant
  0 or pi).
"""
import math

import operator
from typing import Any

import numpy as np

from ..forward import align_batch
from ..registry import RULES, Primitive, defpartials, defvjp, defcomposite
from ..dispatch import apply

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_DEG = 180.0 / math.pi
_RAD = math.pi / 180.0
# Python numbers are constants of the tape (a tracked 0-d value arrives as a NumPy
# scalar), so partials may branch on their values; never on array values.
_PYNUM = (int, float)


def is_complex(x):
    """Whether ``x`` (an array, a NumPy or Python scalar) holds complex numbers."""
    return getattr(getattr(x, 'dtype', None), 'kind', None) == 'c' or type(x) is complex


# --------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------

defpartials(np.add, 1, 1, kernel='({0} + {1})')
defpartials(np.subtract, 1, -1, kernel='({0} - {1})')
defpartials(np.multiply, lambda ans, x, y: y, lambda ans, x, y: x, kernel='({0} * {1})')
defpartials(np.true_divide, lambda ans, x, y: 1.0 / y,        # np.divide is np.true_divide
            lambda ans, x, y: -ans / y, kernel='({0} / {1})',
            vjps=(lambda g, ans, x, y: g / y if not is_complex(y) else g / np.conj(y), None))
defpartials(np.negative, -1, kernel='(-{0})')
defpartials(np.positive, 1, kernel='{0}')
defpartials(np.reciprocal, lambda ans, x: -ans * ans, kernel='(1.0 / {0})')
defpartials(np.square, lambda ans, x: 2.0 * x, kernel='({0} * {0})',
            vjps=(lambda g, ans, x: g * 2.0 * x if not is_complex(x)    # a 0-d g (lazy):
                  else g * 2.0 * np.conj(x),),)                         # one pass
defpartials(np.sqrt, lambda ans, x: 0.5 / ans, kernel='np.sqrt({0})')
defpartials(np.cbrt, lambda ans, x: 1.0 / (3.0 * ans * ans), kernel='np.cbrt({0})')
defpartials(np.fabs, lambda ans, x: np.sign(x), kernel='abs({0})')
# remainder (np.mod): ans = x - floor(x / y) * y; fmod truncates instead of flooring.
defpartials(np.remainder, 1, lambda ans, x, y: -np.floor_divide(x, y))
defpartials(np.fmod, 1, lambda ans, x, y: -np.trunc(x / y), kernel='np.fmod({0}, {1})')
defpartials(np.floor_divide, 0, 0)


def _abs_vjp(g, ans, x):
    if is_complex(x):                       # g * z / |z|, and 0 at z == 0
        return g * (x / np.where(ans == 0, 1.0, ans))
    return g * np.sign(x)


def _abs_jvp(tangents, ans, x):
    t = tangents[0]
    if is_complex(x):                       # Re(conj(z) dz) / |z|
        return np.real(np.conj(x) * t) / np.where(ans == 0, 1.0, ans)
    return np.sign(x) * t


defvjp(np.absolute, _abs_vjp, kernel='abs({0})', jvp=_abs_jvp)   # np.abs is np.absolute


# --------------------------------------------------------------------------
# Powers
# --------------------------------------------------------------------------

def _power_partials(power):
    """Partial derivatives (and the base's faster pullback) of ``power(x, y)``."""

    def base(ans, x, y):
        if type(y) in _PYNUM:                     # a constant exponent: the common case
            if y == 2:
                return 2.0 * x
            if y == 0:
                return 0.0
            return y * power(x, y - 1)
        # d/dx x**0 is 0 everywhere: exponent 1 where y == 0 avoids 0 * 0**-1 = nan
        # at x == 0 (masking the exponent, not the result, so no warning either).
        return y * power(x, np.where(y == 0, 1.0, y - 1))

    def base_vjp(g, ans, x, y):
        if type(y) in _PYNUM and y == 2 and (x.dtype.kind != 'c' if type(x) is np.ndarray
                                             else not is_complex(x)):
            return g * 2.0 * x          # not g * (2.0 * x): a 0-d g (lazy) makes one pass
        p = base(None, x, y)            # (the base's partial never reads ans: not kept)
        return g * (np.conj(p) if is_complex(p) else p)

    def base_consume(g, ans, x, y, negate=False):
        # x**2 with a cotangent g the backward pass owns: in g, no new buffer; with
        # negate (g shared), -g's pullback in one new buffer (the scalings by 2 and -1
        # are exact, so the order does not change the result)
        if type(y) in _PYNUM and y == 2 and type(x) is np.ndarray and \
                x.dtype.kind == 'f' and x.shape == g.shape:
            if negate:
                out = np.multiply(g, x)
                out *= -2.0
                return out
            np.multiply(g, x, out=g)
            g *= 2.0
            return g
        return base_vjp(-g, ans, x, y) if negate else None

    def exponent(ans, x, y):
        if type(x) in _PYNUM:                     # constant base, e.g. 2.0 ** y
            if x > 0:
                return ans * math.log(x)
            if not is_complex(ans):
                return 0.0 * ans
        if is_complex(ans):
            return ans * np.log(x * (1.0 + 0.0j))
        return ans * np.log(np.where(x > 0, x, 1.0))

    return base, exponent, base_vjp, base_consume


_pow_base, _pow_exponent, _pow_base_vjp, _pow_consume = _power_partials(np.power)
# The forward is ``x ** y``: ndarray's operator has fast paths (x**2 as a square, x**0.5
# as a square root) that the np.power ufunc called directly does not take.
defpartials(np.power, _pow_base, _pow_exponent, fn=operator.pow, name='np.power',
            kernel='power', vjps=(_pow_base_vjp, None)).consume = (_pow_consume, None)
RULES[np.power].fresh = (True, False)      # g * p: a new array
_fpow_base, _fpow_exponent, _fpow_base_vjp, _fpow_consume = _power_partials(np.float_power)
defpartials(np.float_power, _fpow_base, _fpow_exponent,
            vjps=(_fpow_base_vjp, None)).consume = (_fpow_consume, None)
RULES[np.float_power].fresh = (True, False)


# --------------------------------------------------------------------------
# Exponentials and logarithms
# --------------------------------------------------------------------------

defpartials(np.exp, lambda ans, x: ans, kernel='np.exp({0})')
defpartials(np.exp2, lambda ans, x: ans * _LN2, kernel='np.exp2({0})')
defpartials(np.expm1, lambda ans, x: ans + 1.0, kernel='np.expm1({0})')
defpartials(np.log, lambda ans, x: 1.0 / x, kernel='np.log({0})')
defpartials(np.log2, lambda ans, x: 1.0 / (x * _LN2), kernel='np.log2({0})')
defpartials(np.log10, lambda ans, x: 1.0 / (x * _LN10), kernel='np.log10({0})')
defpartials(np.log1p, lambda ans, x: 1.0 / (x + 1.0), kernel='np.log1p({0})')
defpartials(np.logaddexp, lambda ans, x, y: np.exp(x - ans), lambda ans, x, y: np.exp(y - ans),
            kernel='np.logaddexp({0}, {1})')
defpartials(np.logaddexp2, lambda ans, x, y: np.exp2(x - ans),
            lambda ans, x, y: np.exp2(y - ans), kernel='np.logaddexp2({0}, {1})')


# --------------------------------------------------------------------------
# Trigonometric and hyperbolic
# --------------------------------------------------------------------------

defpartials(np.sin, lambda ans, x: np.cos(x), kernel='np.sin({0})')
defpartials(np.cos, lambda ans, x: -np.sin(x), kernel='np.cos({0})')
defpartials(np.tan, lambda ans, x: 1.0 + ans * ans, kernel='np.tan({0})')


# Complex: 1/cos(arcsin z) and -1/sin(arccos z), on the branch NumPy's value took: on
# the cut above 1 (z = 2 + 0j, as np.emath.arcsin(2.0) makes) the principal
# sqrt(1 - z^2) is the other branch and the derivative of the imaginary part flips.
def _arcsin_partial(ans, x):
    if is_complex(x):
        return 1.0 / np.cos(ans)
    return 1.0 / np.sqrt(1.0 - x * x)


def _arccos_partial(ans, x):
    if is_complex(x):
        return -1.0 / np.sin(ans)
    return -1.0 / np.sqrt(1.0 - x * x)


defpartials(np.arcsin, _arcsin_partial, kernel='np.arcsin({0})')
defpartials(np.arccos, _arccos_partial, kernel='np.arccos({0})')
defpartials(np.arctan, lambda ans, x: 1.0 / (1.0 + x * x), kernel='np.arctan({0})')
defpartials(np.arctan2, lambda ans, y, x: x / (x * x + y * y),
            lambda ans, y, x: -y / (x * x + y * y), kernel='np.arctan2({0}, {1})')
defpartials(np.hypot, lambda ans, x, y: x / ans, lambda ans, x, y: y / ans,
            kernel='np.hypot({0}, {1})')
defpartials(np.sinh, lambda ans, x: np.cosh(x), kernel='np.sinh({0})')
defpartials(np.cosh, lambda ans, x: np.sinh(x), kernel='np.cosh({0})')
defpartials(np.tanh, lambda ans, x: 1.0 - ans * ans, kernel='np.tanh({0})')


def _tanh_consume(g, ans, x, negate=False):
    # The pullback in one new buffer instead of two (1 - ans * ans, then g times it):
    # measured 12.5 -> 9 µs at 128 x 256 (an MLP layer); the same operations in the
    # same order, so the same result.
    if type(ans) is not np.ndarray or ans.shape != g.shape:
        return -g * (1.0 - ans * ans) if negate else None
    t = ans * ans
    np.subtract(1.0, t, out=t)
    if negate:
        np.multiply(g, t, out=t)
        return np.negative(t, out=t)
    return np.multiply(g, t, out=g)


RULES[np.tanh].consume = (_tanh_consume,)
defpartials(np.arcsinh, lambda ans, x: 1.0 / np.sqrt(x * x + 1.0), kernel='np.arcsinh({0})')


def _arccosh_partial(ans, x):
    # Complex: 1/(sqrt(z - 1) sqrt(z + 1)), not 1/sqrt(z^2 - 1): the principal branch
    # of the latter flips sign across the imaginary axis, where arccosh has no cut.
    if is_complex(x):
        return 1.0 / (np.sqrt(x - 1.0) * np.sqrt(x + 1.0))
    return 1.0 / np.sqrt(x * x - 1.0)


defpartials(np.arccosh, _arccosh_partial, kernel='np.arccosh({0})')
defpartials(np.arctanh, lambda ans, x: 1.0 / (1.0 - x * x), kernel='np.arctanh({0})')
defpartials(np.deg2rad, _RAD, kernel='np.deg2rad({0})')
defpartials(np.radians, _RAD, kernel='np.radians({0})')   # a distinct ufunc from deg2rad
defpartials(np.rad2deg, _DEG, kernel='np.rad2deg({0})')
defpartials(np.degrees, _DEG, kernel='np.degrees({0})')   # a distinct ufunc from rad2deg


def _sinc_partial(ans, x):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x.  Near 0 that cancels, and its
    # own derivative at x == 0 (with a safe denominator) would be 0 instead of
    # -pi^2/3: a Taylor series there, exact to every order a nested gradient reaches
    # at 0 (error ~1e-19 for |x| < 1e-2), written with NumPy so that it nests.
    small = np.abs(x) < 1e-2
    xs = np.where(small, 1.0, x)
    u = (np.pi * x) ** 2
    series = (-np.pi ** 2 / 3.0) * x * (1.0 - u * (0.1 - u * (1.0 / 280.0 - u / 15120.0)))
    return np.where(small, series, (np.cos(np.pi * xs) - np.where(small, 1.0, ans)) / xs)


defpartials(np.sinc, _sinc_partial)


# --------------------------------------------------------------------------
# Complex parts: real, imag, conj, angle (non-holomorphic: explicit rules)
# --------------------------------------------------------------------------

def _real_vjp(g, ans, x):
    return g * x.dtype.type(1) if is_complex(x) else g        # a complex cotangent


def _imag_vjp(g, ans, x):
    return g * x.dtype.type(1j) if is_complex(x) else g * 0.0     # i g: d/dy of x + iy


def _angle_vjp(g, ans, z, deg=False):
    if not is_complex(z):
        return g * 0.0
    scale = _DEG if deg else 1.0       # d atan2(y, x) = (x dy - y dx) / |z|^2
    r2 = np.real(z * np.conj(z))
    return g * (1j * scale) * z / np.where(r2 == 0, 1.0, r2)


def _angle_jvp(tangents, ans, z, deg=False):
    t = tangents[0]
    if not is_complex(z):
        return np.real(t) * 0.0
    r2 = np.real(z * np.conj(z))
    return np.imag(np.conj(z) * t) / np.where(r2 == 0, 1.0, r2) * (_DEG if deg else 1.0)


defvjp(np.real, _real_vjp, linear='joint', view=True, batched=True,   # a real x: as is
       structure='elementwise')
defvjp(np.imag, _imag_vjp, linear='joint', view=True, batched=True, structure='elementwise')
defvjp(np.conjugate, lambda g, ans, x: np.conj(g), linear='joint', batched=True,  # np.conj
       kernel='{0}')                     # (compiled for real dtypes only)
defvjp(np.angle, _angle_vjp, jvp=_angle_jvp, structure='elementwise')


def _real_if_close(a, tol=100):
    # A value-dependent choice (a guard on a recorded tape): NumPy's own test.
    if is_complex(a) and np.all(np.abs(np.imag(a)) < tol * np.finfo(a.dtype).eps):
        return np.real(a)
    return a


defcomposite(np.real_if_close, _real_if_close)


# --------------------------------------------------------------------------
# Selection: maximum/minimum, clip, where
# --------------------------------------------------------------------------

def _picked(ans, a, b):
    """d max/min(a, b) / d a: 1 where ``a`` was taken, half at ties."""
    return np.where(a == b, ans.dtype.type(0.5), a == ans)


def _picked_other(ans, a, b):
    return _picked(ans, b, a)


_f: Any
for _f in (np.maximum, np.minimum, np.fmax, np.fmin):
    defpartials(_f, _picked, _picked_other, kernel=f'np.{_f.__name__}({{0}}, {{1}})')


def _clip_bounds(rest, kwargs):
    """(lo, hi) from np.clip's arguments after ``a``, however the user spelled them (a
    bound bound by keyword to its position arrives as NumPy's "no value" default)."""
    lo = rest[0] if len(rest) > 0 else kwargs.get('a_min', kwargs.get('min'))
    hi = rest[1] if len(rest) > 1 else kwargs.get('a_max', kwargs.get('max'))
    return (None if lo is np._NoValue else lo), (None if hi is np._NoValue else hi)


def _clip_fwd(a, lo, hi, **kwargs):
    return np.clip(a, lo, hi, **kwargs)


def _clip_masks(ans, a, lo, hi):
    """d clip / d (a, lo, hi): where each was taken (see the module docstring)."""
    to_lo = (ans == lo) & (ans != a)
    if hi is not None:
        to_lo = to_lo & (ans != hi)
    return a == ans, to_lo, (ans == hi) & (ans != a)


def _clip_a(g, ans, a, lo, hi, **kwargs):
    return g * (a == ans)


def _clip_lo(g, ans, a, lo, hi, **kwargs):
    return g * _clip_masks(ans, a, lo, hi)[1]


def _clip_hi(g, ans, a, lo, hi, **kwargs):
    return g * _clip_masks(ans, a, lo, hi)[2]


def _clip_jvp(tangents, ans, a, lo, hi, **kwargs):
    out = None
    for mask, t in zip(_clip_masks(ans, a, lo, hi), tangents):
        if t is not None:
            out = mask * t if out is None else out + mask * t
    return out


_clip_prim = Primitive(_clip_fwd, (_clip_a, _clip_lo, _clip_hi), name='np.clip', kernel='clip',
                       jvp=_clip_jvp, elementwise=True)


def _clip(a, *rest, **kwargs):
    # One primitive of (a, lo, hi) however the user spelled the bounds (positionally,
    # a_min=/a_max=, or NumPy 2's min=/max=), so each bound has its position.
    lo, hi = _clip_bounds(rest, kwargs)
    for k in ('a_min', 'a_max', 'min', 'max'):
        kwargs.pop(k, None)
    out = kwargs.pop('out', None)
    if out is not None:
        raise TypeError('np.clip(..., out=...) cannot write a tracked result into an array; '
                        'use y = np.clip(...) instead')
    return apply(_clip_prim, (a, lo, hi), kwargs)


defcomposite(np.clip, _clip)
# ndarray.clip(min=, max=) of a plain array with a tracked bound calls NumPy's internal
# clip ufunc (np.clip itself dispatches before reaching it): the same rule.
defcomposite(np._core.umath.clip, _clip)  # type: ignore[attr-defined, unused-ignore]

# np.where(cond, x, y): the condition carries no gradient.  One-argument np.where
# (indices) returns plain arrays: a tracked condition is position 0, which has no
# pullback, so nothing is recorded.
defvjp(np.where, None,
       lambda g, ans, c, x, y: np.where(c, g, 0.0),
       lambda g, ans, c, x, y: np.where(c, 0.0, g), kernel='({1} if {0} else {2})',
       linear='joint', batched=lambda ts, ans, c, x, y: np.where(
           c, *[0.0 if t is None else align_batch(t, v, ans) for t, v in zip(ts[1:], (x, y))]),
       # a condition computed from the inputs may pick either branch elsewhere: both
       structure=lambda varying, ans, c, x, y: 'elementwise' if 0 in varying else 'select')


# --------------------------------------------------------------------------
# Piecewise constant: zero gradient
# --------------------------------------------------------------------------

for _f in (np.floor, np.ceil, np.trunc, np.rint):
    defpartials(_f, 0, kernel=f'np.{_f.__name__}({{0}})')


# sign is piecewise constant on real numbers, but NumPy 2's sign of a complex z is
# z / |z| (0 at 0), which is not holomorphic: with s = sign(z) and r = |z|,
# ds = (dz - s Re(conj(s) dz)) / r, and its adjoint has the same form (0 at z = 0,
# a subgradient, as abs has).
def _sign_vjp(g, ans, x):
    if is_complex(x):
        r = np.abs(x)
        return (g - ans * np.real(np.conj(ans) * g)) / np.where(r == 0, np.inf, r)
    return g * 0.0


def _sign_jvp(tangents, ans, x):
    t = tangents[0]
    if is_complex(x):
        r = np.abs(x)
        return (t - ans * np.real(np.conj(ans) * t)) / np.where(r == 0, np.inf, r)
    return t * 0.0


defvjp(np.sign, _sign_vjp, kernel='np.sign({0})', jvp=_sign_jvp, batched=_sign_jvp)
for _f in (np.round, np.around):
    defvjp(_f, lambda g, ans, *args, **kwargs: g * 0.0, jvp=lambda t, ans, *a, **k: ans * 0.0,
           structure=lambda varying, ans, *args, **kwargs: {})     # no dependence at all


# --------------------------------------------------------------------------
# Floating-point decomposition and sign manipulation
# --------------------------------------------------------------------------
# heaviside(x, h): 0 in x, 1 in h where x == 0 (h is the value taken there).
# copysign(x, s): +-1 in x (the sign it was given), 0 in s.  ldexp(x, e): 2**e in x;
# the exponent is an integer.  nextafter(x, y) moves x by one ulp: 1 in x, 0 in y.
# frexp, modf and divmod have two outputs; their integer-valued parts carry none.

defpartials(np.heaviside, 0, lambda ans, x, h: (x == 0) * 1.0)
defpartials(np.copysign, lambda ans, x, s: np.where(np.signbit(x) == np.signbit(s), 1.0, -1.0),
            0, kernel='np.copysign({0}, {1})')
defpartials(np.ldexp, lambda ans, x, e: np.ldexp(1.0, e), None)
defpartials(np.nextafter, 1, 0)


def _frexp_vjp(g, ans, x):
    if g[0] is None:
        return g[1] * 0.0
    return g[0] * np.ldexp(1.0, -ans[1])        # mantissa = x * 2**-exponent


def _first_or_zero(g):
    """The cotangent of output 0 (zeros when only output 1 got one)."""
    return g[0] if g[0] is not None else g[1] * 0.0


def _second_or_zero(g):
    return g[1] if g[1] is not None else g[0] * 0.0


def _divmod_vjp_x(g, ans, x, y):
    return _second_or_zero(g)                   # quotient: 0; remainder: 1


def _divmod_vjp_y(g, ans, x, y):
    return -_second_or_zero(g) * ans[0]         # remainder = x - floor(x / y) * y


# Registered through composites over internal primitives: the core's eager fast path
# for a unary ufunc expects one output.
_frexp = Primitive(np.frexp, (_frexp_vjp,), name='np.frexp', multi=True,
                   jvp=lambda t, ans, x: (t[0] * np.ldexp(1.0, -ans[1]), None))
_modf = Primitive(np.modf, (lambda g, ans, x: _first_or_zero(g),), name='np.modf', multi=True,
                  jvp=lambda t, ans, x: (t[0], t[0] * 0.0))
_divmod = Primitive(np.divmod, (_divmod_vjp_x, _divmod_vjp_y), name='np.divmod', multi=True)
defcomposite(np.frexp, lambda x: apply(_frexp, (x,), {}))
defcomposite(np.modf, lambda x: apply(_modf, (x,), {}))
defcomposite(np.divmod, lambda x, y: apply(_divmod, (x, y), {}))


# --------------------------------------------------------------------------
# Functions NumPy writes with ufuncs: i0, fix, sort_complex
# --------------------------------------------------------------------------

try:                                           # NumPy's own Chebyshev coefficients
    from numpy.lib._function_base_impl import _i0A, _i0B  # type: ignore[attr-defined]  # private
except ImportError:                            # NumPy < 2
    from numpy.lib.function_base import _i0A, _i0B  # type: ignore[import-not-found]


def _chbevl(x, vals):
    b0, b1, b2 = vals[0], 0.0, 0.0
    for v in vals[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + v
    return 0.5 * (b0 - b2)


def _i0(x):
    """``np.i0`` written with ufuncs: NumPy's own Chebyshev expansions (Cephes), so the
    value is NumPy's and every derivative order comes from the elementwise rules.
    Both branches are evaluated on arguments inside their domain, then selected."""
    if getattr(x, 'dtype', np.dtype(float)).kind == 'c':
        raise TypeError('i0 not supported for complex values')
    ax = np.abs(x)
    small = np.minimum(ax, 8.0)
    large = np.maximum(ax, 8.0)
    return np.where(ax <= 8.0, np.exp(small) * _chbevl(small / 2.0 - 2, _i0A),
                    np.exp(large) * _chbevl(32.0 / large - 2.0, _i0B) / np.sqrt(large))


defcomposite(np.i0, _i0)
defcomposite(np.fix, lambda x, out=None: np.trunc(x) if out is None else np.trunc(x, out=out))
defcomposite(np.sort_complex, lambda a: np.astype(np.sort(a), np.result_type(a, 1j)))


# --------------------------------------------------------------------------
# np.emath (np.lib.scimath): complex results outside the real domain
# --------------------------------------------------------------------------
# NumPy's own code first converts with np.asarray (which refuses a tracked value), then
# turns a real argument complex when any element is outside the real domain; the same
# test here is a guard on a recorded tape.  ``x + 0j`` keeps float32 single (a weak
# scalar), and a real input's gradient is the real part of its cotangent.

def _complex_where(x, outside):
    if getattr(x, 'dtype', np.dtype(float)).kind != 'c' and np.any(outside(x)):
        return x + 0j
    return x


def _negative(x):
    return x < 0


def _beyond_one(x):
    return np.abs(x) > 1


for _f, _g, _outside in ((np.emath.sqrt, np.sqrt, _negative), (np.emath.log, np.log, _negative),
                         (np.emath.log2, np.log2, _negative),
                         (np.emath.log10, np.log10, _negative),
                         (np.emath.arccos, np.arccos, _beyond_one),
                         (np.emath.arcsin, np.arcsin, _beyond_one),
                         (np.emath.arctanh, np.arctanh, _beyond_one)):
    defcomposite(_f, lambda x, _g=_g, _outside=_outside: _g(_complex_where(x, _outside)),
                 arrays=('x',))
defcomposite(np.emath.logn, lambda n, x: np.log(_complex_where(x, _negative))
             / np.log(_complex_where(n, _negative)), arrays=('n', 'x'))
defcomposite(np.emath.power, lambda x, p: np.power(_complex_where(x, _negative), p),
             arrays=('x', 'p'))
