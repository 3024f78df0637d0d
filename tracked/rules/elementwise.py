"""Elementwise rules: ufuncs and the functions NumPy builds from them.

Every pullback is ``vjp(g, ans, *args)`` written with NumPy operations, so it is
recorded (and differentiable) when ``g``/``args`` are tracked at an outer level.
Pullbacks return cotangents of the broadcast output shape; the tape unbroadcasts.
Constants inside pullbacks are Python floats (weak scalars), so float32 stays
float32.  Per-op overhead matters: the common pullbacks use the fewest NumPy calls
(e.g. reuse ``ans``), and masks come from comparisons, which are not recorded.

Conventions where the derivative is not defined (PyTorch's choices unless noted):

- maximum/minimum/fmax/fmin: at ties (x == y) the gradient is split equally, 0.5
  to each side.  The "winner" is found by ``x == ans``, so one helper serves the
  NaN-propagating (maximum) and NaN-ignoring (fmax) forms: a NaN output gives 0.
- absolute/fabs at 0: gradient 0 (``g * sign(x)``).
- power x**y: the base gradient ``y * x**(y-1)`` is 0 where y == 0 (so x**0 at
  x == 0 gives 0, not 0*inf = nan); x**2 at 0 gives 0, x**0.5 at 0 gives inf
  (the true one-sided derivative).  Integer exponents of negative bases are exact
  (x**(y-1) is evaluated in floating point, which is defined for integral y).
  The exponent gradient ``ans * log(x)`` is 0 where x <= 0 (log undefined there;
  np.where on a safe argument, not on the result, so no nan/warning leaks in).
- clip: inclusive bounds, like torch.clamp: the gradient passes to ``a`` where
  lo <= a <= hi (detected as ``a == ans``); otherwise to the bound that was taken
  (hi before lo when both equal the output, matching NumPy applying hi last).
- floor, ceil, trunc, rint, sign, floor_divide, round/around: zero gradient,
  written ``g * 0.0`` (zeros of the output shape and dtype that still nest)
  rather than ``None``, so the input gets a gradient of zeros, not "no gradient".
- sinc at 0: first derivative 0 exactly (the difference quotient's numerator
  vanishes there); the second derivative at exactly x == 0 is not special-cased.
"""
import math

import operator

import numpy as np

from ..registry import defvjp, identity

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_DEG = 180.0 / math.pi
_RAD = math.pi / 180.0
# Python numbers are constants of the tape (a tracked 0-d value arrives as a NumPy
# scalar), so pullbacks may branch on their values; never on array values.
_PYNUM = (int, float)


def _zero(g, ans, *args, **kwargs):
    return g * 0.0


# --------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------

defvjp(np.add, identity, identity, kernel='({0} + {1})')
defvjp(np.subtract, identity, lambda g, ans, x, y: -g, kernel='({0} - {1})')
defvjp(np.multiply, lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x,
       kernel='({0} * {1})')
defvjp(np.true_divide, lambda g, ans, x, y: g / y,            # np.divide is np.true_divide
       lambda g, ans, x, y: -g * ans / y, kernel='({0} / {1})')
defvjp(np.negative, lambda g, ans, x: -g, kernel='(-{0})')
defvjp(np.positive, identity, kernel='{0}')
defvjp(np.reciprocal, lambda g, ans, x: -g * ans * ans, kernel='(1.0 / {0})')
defvjp(np.square, lambda g, ans, x: g * 2.0 * x,    # a 0-d g (lazy): one pass
       kernel='({0} * {0})')
defvjp(np.sqrt, lambda g, ans, x: g / (2.0 * ans), kernel='np.sqrt({0})')
defvjp(np.cbrt, lambda g, ans, x: g / (3.0 * ans * ans), kernel='np.cbrt({0})')
defvjp(np.absolute, lambda g, ans, x: g * np.sign(x),         # np.abs is np.absolute
       kernel='abs({0})')
defvjp(np.fabs, lambda g, ans, x: g * np.sign(x), kernel='abs({0})')
# remainder (np.mod): ans = x - floor(x / y) * y; fmod truncates instead of flooring.
defvjp(np.remainder, identity,
       lambda g, ans, x, y: -g * np.floor_divide(x, y))
defvjp(np.fmod, identity,
       lambda g, ans, x, y: -g * np.trunc(x / y), kernel='np.fmod({0}, {1})')
defvjp(np.floor_divide, _zero, _zero)


# --------------------------------------------------------------------------
# Powers
# --------------------------------------------------------------------------

def _power_vjps(power):
    """Pullbacks of ``power(x, y)`` for np.power and np.float_power."""

    def base(g, ans, x, y):
        if type(y) in _PYNUM:                     # a constant exponent: the common case
            if y == 2:
                return g * 2.0 * x          # not g * (2.0 * x): a 0-d g (lazy) makes one pass
            if y == 0:
                return g * 0.0
            return g * (y * power(x, y - 1))
        # d/dx x**0 is 0 everywhere: exponent 1 where y == 0 avoids 0 * 0**-1 = nan
        # at x == 0 (masking the exponent, not the result, so no warning either).
        return g * (y * power(x, np.where(y == 0, 1.0, y - 1)))

    def exponent(g, ans, x, y):
        if type(x) in _PYNUM:                     # constant base, e.g. 2.0 ** y
            return g * (ans * math.log(x)) if x > 0 else g * 0.0
        return g * (ans * np.log(np.where(x > 0, x, 1.0)))

    return base, exponent


# The forward is ``x ** y``: ndarray's operator has fast paths (x**2 as a square, x**0.5
# as a square root) that the np.power ufunc called directly does not take.
defvjp(np.power, *_power_vjps(np.power), fn=operator.pow, name='np.power', kernel='power')
defvjp(np.float_power, *_power_vjps(np.float_power))


# --------------------------------------------------------------------------
# Exponentials and logarithms
# --------------------------------------------------------------------------

defvjp(np.exp, lambda g, ans, x: g * ans, kernel='np.exp({0})')
defvjp(np.exp2, lambda g, ans, x: g * (ans * _LN2), kernel='np.exp2({0})')
defvjp(np.expm1, lambda g, ans, x: g * (ans + 1.0), kernel='np.expm1({0})')
defvjp(np.log, lambda g, ans, x: g / x, kernel='np.log({0})')
defvjp(np.log2, lambda g, ans, x: g / (x * _LN2), kernel='np.log2({0})')
defvjp(np.log10, lambda g, ans, x: g / (x * _LN10), kernel='np.log10({0})')
defvjp(np.log1p, lambda g, ans, x: g / (x + 1.0), kernel='np.log1p({0})')
defvjp(np.logaddexp, lambda g, ans, x, y: g * np.exp(x - ans),
       lambda g, ans, x, y: g * np.exp(y - ans), kernel='np.logaddexp({0}, {1})')
defvjp(np.logaddexp2, lambda g, ans, x, y: g * np.exp2(x - ans),
       lambda g, ans, x, y: g * np.exp2(y - ans), kernel='np.logaddexp2({0}, {1})')


# --------------------------------------------------------------------------
# Trigonometric and hyperbolic
# --------------------------------------------------------------------------

defvjp(np.sin, lambda g, ans, x: g * np.cos(x), kernel='np.sin({0})')
defvjp(np.cos, lambda g, ans, x: -g * np.sin(x), kernel='np.cos({0})')
defvjp(np.tan, lambda g, ans, x: g * (1.0 + ans * ans), kernel='np.tan({0})')
defvjp(np.arcsin, lambda g, ans, x: g / np.sqrt(1.0 - x * x), kernel='np.arcsin({0})')
defvjp(np.arccos, lambda g, ans, x: -g / np.sqrt(1.0 - x * x), kernel='np.arccos({0})')
defvjp(np.arctan, lambda g, ans, x: g / (1.0 + x * x), kernel='np.arctan({0})')
defvjp(np.arctan2, lambda g, ans, y, x: g * x / (x * x + y * y),
       lambda g, ans, y, x: -g * y / (x * x + y * y), kernel='np.arctan2({0}, {1})')
defvjp(np.hypot, lambda g, ans, x, y: g * (x / ans), lambda g, ans, x, y: g * (y / ans),
       kernel='np.hypot({0}, {1})')
defvjp(np.sinh, lambda g, ans, x: g * np.cosh(x), kernel='np.sinh({0})')
defvjp(np.cosh, lambda g, ans, x: g * np.sinh(x), kernel='np.cosh({0})')
defvjp(np.tanh, lambda g, ans, x: g * (1.0 - ans * ans), kernel='np.tanh({0})')
defvjp(np.arcsinh, lambda g, ans, x: g / np.sqrt(x * x + 1.0), kernel='np.arcsinh({0})')
defvjp(np.arccosh, lambda g, ans, x: g / np.sqrt(x * x - 1.0), kernel='np.arccosh({0})')
defvjp(np.arctanh, lambda g, ans, x: g / (1.0 - x * x), kernel='np.arctanh({0})')
defvjp(np.deg2rad, lambda g, ans, x: g * _RAD, kernel='np.deg2rad({0})')
defvjp(np.radians, lambda g, ans, x: g * _RAD,       # a distinct ufunc object from deg2rad
       kernel='np.radians({0})')
defvjp(np.rad2deg, lambda g, ans, x: g * _DEG, kernel='np.rad2deg({0})')
defvjp(np.degrees, lambda g, ans, x: g * _DEG,       # a distinct ufunc object from rad2deg
       kernel='np.degrees({0})')


def _sinc_vjp(g, ans, x):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x; the numerator is 0 at x == 0,
    # so a safe denominator there gives the right limit, 0, without a second np.where.
    return g * ((np.cos(np.pi * x) - ans) / np.where(x == 0, 1.0, x))


defvjp(np.sinc, _sinc_vjp)


# --------------------------------------------------------------------------
# Selection: maximum/minimum, clip, where
# --------------------------------------------------------------------------

def _picked(g, ans, a, b):
    """Cotangent of ``a`` in max/min(a, b): all of g where ``a`` was taken, half at ties."""
    return g * np.where(a == b, ans.dtype.type(0.5), a == ans)


def _picked_other(g, ans, a, b):
    return _picked(g, ans, b, a)


for _f in (np.maximum, np.minimum, np.fmax, np.fmin):
    defvjp(_f, _picked, _picked_other, kernel=f'np.{_f.__name__}({{0}}, {{1}})')


def _clip_bounds(rest, kwargs):
    """(lo, hi) from np.clip's arguments after ``a``, however the user spelled them."""
    lo = rest[0] if len(rest) > 0 else kwargs.get('a_min', kwargs.get('min'))
    hi = rest[1] if len(rest) > 1 else kwargs.get('a_max', kwargs.get('max'))
    return lo, hi


def _clip_a(g, ans, a, *rest, **kwargs):
    return g * (a == ans)


def _clip_lo(g, ans, a, *rest, **kwargs):
    lo, hi = _clip_bounds(rest, kwargs)
    taken = (ans == lo) & (ans != a)
    if hi is not None:
        taken = taken & (ans != hi)
    return g * taken


def _clip_hi(g, ans, a, *rest, **kwargs):
    lo, hi = _clip_bounds(rest, kwargs)
    return g * ((ans == hi) & (ans != a))


defvjp(np.clip, _clip_a, _clip_lo, _clip_hi, kernel='clip')

# np.where(cond, x, y): the condition carries no gradient.  One-argument np.where
# (indices) returns plain arrays: a tracked condition is position 0, which has no
# pullback, so nothing is recorded.
defvjp(np.where, None,
       lambda g, ans, c, x, y: np.where(c, g, 0.0),
       lambda g, ans, c, x, y: np.where(c, 0.0, g), kernel='({1} if {0} else {2})')


# --------------------------------------------------------------------------
# Piecewise constant: zero gradient
# --------------------------------------------------------------------------

for _f in (np.floor, np.ceil, np.trunc, np.rint, np.sign):
    defvjp(_f, _zero, kernel=f'np.{_f.__name__}({{0}})')
for _f in (np.round, np.around):
    defvjp(_f, _zero)
