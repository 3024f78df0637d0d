"""``tracked.scipy.stats``: ``scipy.stats`` distributions for tracked values.

``scipy.stats`` converts its arguments with ``np.asarray`` before anything else, so
NumPy's protocols never see a tracked value there.  The distributions here have
SciPy's names, signatures and results (shape parameters, then ``loc`` and ``scale``,
positional or by keyword; frozen forms ``norm(mu, sigma).logpdf(x)``; ``-inf``/0/1
outside the support, nan for an invalid parameter) and are written with NumPy and
``scipy.special`` operations, so they are differentiable in every argument to any
order, in forward mode and on recorded tapes.  The quantiles ``ppf`` and ``isf`` of
every continuous distribution are differentiable in ``q``, ``loc``, ``scale`` and the
shape parameters where ``cdf`` is.  Any other method (``rvs``, ``fit``, ``mean``, ...)
and any other name of ``scipy.stats`` is SciPy's own (plain values).

Distribution functions (``cdf``/``sf`` and their logs) and quantiles of the gamma,
beta, chi2 and t distributions have no gradient in their shape parameters (the
incomplete gamma and beta functions and their inverses have none in ``a``/``b``: see
``tracked/rules/scipy_special.py``); every density does.

Why one module of ~930 lines: it mirrors ``scipy.stats``, one namespace; each
distribution is a few lines over the shared machinery of the top.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import _ufuncs as sp      # the ufuncs (also under SCIPY_ARRAY_API=1)
import scipy.stats as _st

from . import linalg as _linalg
from ..rules import scipy_linalg as _linalg_rules
from ..dispatch import call as _call

__all__ = ['norm', 't', 'cauchy', 'logistic', 'laplace', 'gamma', 'beta', 'chi2', 'expon',
           'uniform', 'lognorm', 'halfnorm', 'invgamma', 'poisson', 'binom', 'bernoulli',
           'geom', 'nbinom', 'multivariate_normal', 'dirichlet', 'entropy']

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)


def __getattr__(name):
    """Every other name is ``scipy.stats``'s (plain values)."""
    return getattr(_st, name)


def _as_array(v):
    """A list or tuple of numbers as an array (as SciPy takes them); anything else as is."""
    return np.asarray(v, dtype=float) if isinstance(v, (list, tuple)) else v


def _is_const(v, value):
    """Whether ``v`` is the Python number ``value`` (skips an operation on the tape)."""
    return type(v) in (int, float) and v == value


def _valid(out, ok):
    """``out`` where the parameters are valid (``ok``: a mask, or True), nan elsewhere."""
    return out if ok is True else np.where(ok, out, np.nan)


def _safe(x, bad, value):
    """``x`` with ``value`` where ``bad``: an argument the other branch of a np.where
    never reads, so that neither its value nor its gradient can be inf or nan."""
    return np.where(bad, value, x)


# --------------------------------------------------------------------------
# The frame: argument parsing, loc/scale, frozen distributions
# --------------------------------------------------------------------------

class _Frozen:
    """A distribution with its parameters bound: ``norm(mu, sigma).logpdf(x)``."""

    def __init__(self, dist: Any, args: Any, kwds: Any) -> None:
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, name):
        if name in getattr(self.dist, '_parameter_methods', ()):
            return lambda: getattr(self.dist, f'_{name}')(*self.args, **self.kwds)
        method = getattr(type(self.dist), name, None)
        if method is not None and callable(method) and not name.startswith('_'):
            return lambda x, *a, **k: getattr(self.dist, name)(x, *self.args, *a,
                                                               **self.kwds, **k)
        return getattr(self.dist._scipy(*self.args, **self.kwds), name)   # SciPy's (plain)

    def __repr__(self):
        return f'<frozen tracked.scipy.stats.{self.dist.name}>'


class _Distribution:
    name = ''
    shapes: tuple[str, ...] = ()   # the shape parameters' names, in SciPy's order
    _params: tuple[str, ...] = ('loc', 'scale')

    @property
    def _scipy(self):
        return getattr(_st, self.name)

    def __call__(self, *args: Any, **kwds: Any) -> Any:
        return _Frozen(self, args, kwds)

    def __getattr__(self, name):
        return getattr(self._scipy, name)         # rvs, ppf, fit, mean, ...: SciPy's

    def __repr__(self):
        return f'<tracked.scipy.stats.{self.name}>'

    def _parse(self, args, kwds):
        names = self.shapes + self._params
        if len(args) > len(names):
            raise TypeError(f'{self.name}: expected at most {len(names)} parameters '
                            f'({", ".join(names)}), got {len(args)}')
        values = dict(zip(names, args))
        for k, v in kwds.items():
            if k not in names:
                raise TypeError(f'{self.name}: unexpected parameter {k!r} '
                                f'(parameters: {", ".join(names)})')
            if k in values:
                raise TypeError(f'{self.name}: parameter {k!r} given twice')
            values[k] = v
        missing = [n for n in self.shapes if n not in values]
        if missing:
            raise TypeError(f'{self.name}: missing shape parameter(s) {", ".join(missing)}')
        values.setdefault('loc', 0.0)
        values.setdefault('scale', 1.0)
        return [_as_array(values[n]) for n in names]

    def _argcheck(self, *shapes):
        """Where the shape parameters are valid: a mask, or True."""
        return True


class _Continuous(_Distribution):
    """``logpdf(x, *shapes, loc=0, scale=1)`` from the standard form ``_logpdf(z, *shapes)``."""

    _support_z = (-np.inf, np.inf)       # the standard form's support

    def _standard(self, x, args, kwds):
        *shapes, loc, scale = self._parse(args, kwds)
        x = _as_array(x)
        z = x if _is_const(loc, 0) else x - loc
        if not _is_const(scale, 1):
            z = z / scale
        return z, shapes, scale, self._ok(shapes, scale)

    def _ok(self, shapes, scale):
        """Where the parameters are valid (``_argcheck`` and a positive scale), or True."""
        ok = self._argcheck(*shapes)
        if not (type(scale) in (int, float) and scale > 0):
            positive = np.logical_not(scale <= 0)
            ok = positive if ok is True else ok & positive
        return ok

    def logpdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``logpdf(x, *shapes, loc=0, scale=1)``: the log density, as SciPy's.

        >>> import numpy as np, tracked as tr
        >>> from tracked.scipy.stats import norm, gamma
        >>> tr.gradient(lambda mu, s: norm.logpdf(1.0, mu, s), 0.0, 1.0)
        (np.float64(1.0), np.float64(0.0))
        >>> round(float(gamma.logpdf(2.0, 3.0, scale=0.5)), 12)
        -1.22741127776
        """
        z, shapes, scale, ok = self._standard(x, args, kwds)
        out = self._logpdf(z, *shapes)
        if not _is_const(scale, 1):
            out = out - np.log(scale)
        return _valid(out, ok)

    def pdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``pdf(x, *shapes, loc=0, scale=1)``: the density."""
        return np.exp(self.logpdf(x, *args, **kwds))

    def cdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``cdf(x, *shapes, loc=0, scale=1)``: the distribution function.

        >>> from tracked.scipy.stats import logistic
        >>> float(logistic.cdf(0.0, loc=0.0, scale=2.0))
        0.5
        """
        z, shapes, _, ok = self._standard(x, args, kwds)
        return _valid(self._cdf(z, *shapes), ok)

    def sf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``sf(x, *shapes, loc=0, scale=1)``: the survival function ``1 - cdf``."""
        z, shapes, _, ok = self._standard(x, args, kwds)
        return _valid(self._sf(z, *shapes), ok)

    def logcdf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``logcdf(x, *shapes, loc=0, scale=1)``: the log of ``cdf``, accurate in the tail."""
        z, shapes, _, ok = self._standard(x, args, kwds)
        with np.errstate(divide='ignore'):
            return _valid(self._logcdf(z, *shapes), ok)

    def logsf(self, x: Any, *args: Any, **kwds: Any) -> Any:
        """``logsf(x, *shapes, loc=0, scale=1)``: the log of ``sf``."""
        z, shapes, _, ok = self._standard(x, args, kwds)
        with np.errstate(divide='ignore'):
            return _valid(self._logsf(z, *shapes), ok)

    def ppf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """``ppf(q, *shapes, loc=0, scale=1)``: the quantile function (``cdf``'s inverse),
        differentiable in ``q``, ``loc``, ``scale`` (and the shapes where ``cdf`` is).

        >>> from tracked.scipy.stats import norm, expon
        >>> float(norm.ppf(0.5, loc=3.0)), round(float(expon.ppf(0.5, scale=2.0)), 12)
        (3.0, 1.38629436112)
        """
        return self._quantile(q, args, kwds, survival=False)

    def isf(self, q: Any, *args: Any, **kwds: Any) -> Any:
        """``isf(q, *shapes, loc=0, scale=1)``: the inverse survival function, ``ppf(1 - q)``."""
        return self._quantile(q, args, kwds, survival=True)

    def _quantile(self, q, args, kwds, survival):
        *shapes, loc, scale = self._parse(args, kwds)
        q = _as_array(q)
        fn, (at0, at1) = (self._isf, self._support_z[::-1]) if survival else \
            (self._ppf, self._support_z)
        # the ends of the support at q = 0 and 1 (fn is evaluated at 0.5 there instead,
        # so that no infinite derivative meets a zero cotangent)
        q0, q1 = q == 0, q == 1
        with np.errstate(invalid='ignore', divide='ignore'):     # q outside [0, 1]: nan
            z = np.where(q0, at0, np.where(q1, at1, fn(_safe(q, q0 | q1, 0.5), *shapes)))
        if not _is_const(scale, 1):
            z = z * scale
        out = z if _is_const(loc, 0) else z + loc
        ok = self._ok(shapes, scale)
        inside = np.logical_not((q < 0) | (q > 1))
        return _valid(out, inside if ok is True else ok & inside)

    # defaults in terms of each other; distributions override the stable forms
    def _isf(self, q, *shapes):
        return self._ppf(1.0 - q, *shapes)

    def _sf(self, z, *shapes):
        return 1.0 - self._cdf(z, *shapes)

    def _logcdf(self, z, *shapes):
        return np.log(self._cdf(z, *shapes))

    def _logsf(self, z, *shapes):
        return np.log(self._sf(z, *shapes))


class _Discrete(_Distribution):
    """``logpmf(k, *shapes, loc=0)`` from ``_logpmf(k, *shapes)`` on the integers of the
    support; ``cdf(k)`` is ``_cdf(floor(k))``."""

    _params = ('loc',)

    def _standard(self, k, args, kwds):
        *shapes, loc = self._parse(args, kwds)
        k = _as_array(k)
        return (k if _is_const(loc, 0) else k - loc), shapes, self._argcheck(*shapes)

    def logpmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``logpmf(k, *shapes, loc=0)``: the log probability mass, ``-inf`` off the
        support's integers, as SciPy's.

        >>> import numpy as np, tracked as tr
        >>> from tracked.scipy.stats import poisson
        >>> tr.gradient(lambda mu: np.sum(poisson.logpmf(np.array([1, 3]), mu)), 2.0)
        (np.float64(0.0),)
        """
        k, shapes, ok = self._standard(k, args, kwds)
        lo, hi = self._support(*shapes)
        outside = (k != np.floor(k)) | (k < lo)
        if hi is not None:
            outside = outside | (k > hi)
        with np.errstate(divide='ignore'):
            out = self._logpmf(_safe(k, outside, lo), *shapes)
        return _valid(np.where(outside, -np.inf, out), ok)

    def pmf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``pmf(k, *shapes, loc=0)``: the probability mass."""
        return np.exp(self.logpmf(k, *args, **kwds))

    def cdf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``cdf(k, *shapes, loc=0)``: the distribution function at ``floor(k)``."""
        return self._tail(k, args, kwds, self._cdf, 0.0, 1.0)

    def sf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``sf(k, *shapes, loc=0)``: ``1 - cdf(k)``."""
        return self._tail(k, args, kwds, self._sf, 1.0, 0.0)

    def _tail(self, k, args, kwds, fn, below_value, above_value):
        """``fn(floor(k))`` inside the support, the constants below and above it (where
        ``fn`` is evaluated at the lower end instead, so no nan reaches a gradient)."""
        k, shapes, ok = self._standard(k, args, kwds)
        k = np.floor(k)
        lo, hi = self._support(*shapes)
        below = k < lo
        above = False if hi is None else k >= hi
        out = fn(_safe(k, below | above, lo), *shapes)
        out = np.where(below, below_value, out)
        if hi is not None:
            out = np.where(above, above_value, out)
        return _valid(out, ok)

    def logcdf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``logcdf(k, *shapes, loc=0)``: the log of ``cdf``."""
        with np.errstate(divide='ignore'):
            return np.log(self.cdf(k, *args, **kwds))

    def logsf(self, k: Any, *args: Any, **kwds: Any) -> Any:
        """``logsf(k, *shapes, loc=0)``: the log of ``sf``."""
        with np.errstate(divide='ignore'):
            return np.log(self.sf(k, *args, **kwds))

    def _support(self, *shapes):
        return 0, None


# --------------------------------------------------------------------------
# Continuous distributions on the real line
# --------------------------------------------------------------------------

class _Symmetric(_Continuous):
    """A distribution symmetric about 0: ``sf(z) = cdf(-z)``."""

    def _sf(self, z, *shapes):
        return self._cdf(-z, *shapes)

    def _logsf(self, z, *shapes):
        return self._logcdf(-z, *shapes)

    def _isf(self, q, *shapes):
        return -self._ppf(q, *shapes)


class _Norm(_Symmetric):
    """The normal distribution: ``norm.logpdf(x, loc=0, scale=1)``, ..."""
    name = 'norm'

    def _logpdf(self, z):
        return -0.5 * z * z - _LOG_SQRT_2PI

    def _cdf(self, z):
        return sp.ndtr(z)

    def _logcdf(self, z):
        return sp.log_ndtr(z)

    def _ppf(self, q):
        return sp.ndtri(q)


class _T(_Symmetric):
    name = 't'
    shapes = ('df',)

    def _argcheck(self, df):
        return df > 0

    def _logpdf(self, z, df):
        return (sp.gammaln(0.5 * (df + 1.0)) - sp.gammaln(0.5 * df) - 0.5 * np.log(df * math.pi)
                - 0.5 * (df + 1.0) * np.log1p(z * z / df))

    def _cdf(self, z, df):
        return sp.stdtr(df, z)

    def _ppf(self, q, df):
        return sp.stdtrit(df, q)


class _Cauchy(_Symmetric):
    name = 'cauchy'

    def _logpdf(self, z):
        return -math.log(math.pi) - np.log1p(z * z)

    def _cdf(self, z):
        return 0.5 + np.arctan(z) / math.pi

    def _ppf(self, q):
        return np.tan(math.pi * (q - 0.5))


class _Logistic(_Symmetric):
    name = 'logistic'

    def _logpdf(self, z):
        return sp.log_expit(z) + sp.log_expit(-z)

    def _cdf(self, z):
        return sp.expit(z)

    def _logcdf(self, z):
        return sp.log_expit(z)

    def _ppf(self, q):
        return sp.logit(q)


class _Laplace(_Symmetric):
    name = 'laplace'

    def _logpdf(self, z):
        return -np.abs(z) - _LOG2

    # each side evaluated on its own half-line only (exp never overflows there)
    def _cdf(self, z):
        left = z < 0
        return np.where(left, 0.5 * np.exp(_safe(z, ~left, 0.0)),
                        1.0 - 0.5 * np.exp(-_safe(z, left, 0.0)))

    def _logcdf(self, z):
        left = z < 0
        return np.where(left, _safe(z, ~left, 0.0) - _LOG2,
                        np.log1p(-0.5 * np.exp(-_safe(z, left, 0.0))))

    def _ppf(self, q):
        low = q < 0.5
        return np.where(low, np.log(2.0 * _safe(q, ~low, 0.25)),
                        -np.log(2.0 - 2.0 * _safe(q, low, 0.75)))


# --------------------------------------------------------------------------
# Continuous distributions on the half-line and the unit interval
# --------------------------------------------------------------------------

class _Gamma(_Continuous):
    _support_z = (0.0, np.inf)
    name = 'gamma'
    shapes = ('a',)

    def _argcheck(self, a):
        return a > 0

    def _logpdf(self, z, a):
        neg = z < 0
        zs = _safe(z, neg, 1.0)
        return np.where(neg, -np.inf, sp.xlogy(a - 1.0, zs) - zs - sp.gammaln(a))

    def _cdf(self, z, a):
        return sp.gammainc(a, _clip0(z))

    def _sf(self, z, a):
        return sp.gammaincc(a, _clip0(z))

    def _ppf(self, q, a):
        return sp.gammaincinv(a, q)

    def _isf(self, q, a):
        return sp.gammainccinv(a, q)


def _clip0(z):
    """``max(z, 0)`` with the gradient of ``z`` where ``z > 0`` and none below."""
    return np.where(z < 0, 0.0, z)


def _clip01(z):
    return np.where(z < 0, 0.0, np.where(z > 1, 1.0, z))


class _Chi2(_Gamma):
    """chi2(df) is gamma(df / 2, scale=2)."""
    name = 'chi2'
    shapes = ('df',)

    def _logpdf(self, z, df):
        return super()._logpdf(0.5 * z, 0.5 * df) - _LOG2

    def _cdf(self, z, df):
        return super()._cdf(0.5 * z, 0.5 * df)

    def _sf(self, z, df):
        return super()._sf(0.5 * z, 0.5 * df)

    def _ppf(self, q, df):
        return 2.0 * super()._ppf(q, 0.5 * df)

    def _isf(self, q, df):
        return 2.0 * super()._isf(q, 0.5 * df)


class _Expon(_Continuous):
    _support_z = (0.0, np.inf)
    name = 'expon'

    def _logpdf(self, z):
        neg = z < 0
        return np.where(neg, -np.inf, -_safe(z, neg, 0.0))

    def _cdf(self, z):
        return -np.expm1(-_clip0(z))

    def _sf(self, z):
        return np.exp(-_clip0(z))

    def _logsf(self, z):
        return -_clip0(z)

    def _ppf(self, q):
        return -np.log1p(-q)

    def _isf(self, q):
        return -np.log(q)


class _Beta(_Continuous):
    _support_z = (0.0, 1.0)
    name = 'beta'
    shapes = ('a', 'b')

    def _argcheck(self, a, b):
        return (a > 0) & (b > 0)

    def _logpdf(self, z, a, b):
        out = (z < 0) | (z > 1)
        zs = _safe(z, out, 0.5)
        return np.where(out, -np.inf,
                        sp.xlogy(a - 1.0, zs) + sp.xlog1py(b - 1.0, -zs) - sp.betaln(a, b))

    def _cdf(self, z, a, b):
        return sp.betainc(a, b, _clip01(z))

    def _sf(self, z, a, b):
        return sp.betaincc(a, b, _clip01(z))

    def _ppf(self, q, a, b):
        return sp.betaincinv(a, b, q)

    def _isf(self, q, a, b):
        return sp.betainccinv(a, b, q)


class _Uniform(_Continuous):
    _support_z = (0.0, 1.0)
    name = 'uniform'

    def _logpdf(self, z):
        out = (z < 0) | (z > 1)
        return np.where(out, -np.inf, 0.0 * z)

    def _cdf(self, z):
        return _clip01(z)

    def _sf(self, z):
        return 1.0 - _clip01(z)

    def _ppf(self, q):
        return q + 0.0


class _Lognorm(_Continuous):
    _support_z = (0.0, np.inf)
    name = 'lognorm'
    shapes = ('s',)

    def _argcheck(self, s):
        return s > 0

    def _logpdf(self, z, s):
        bad = z <= 0
        lz = np.log(_safe(z, bad, 1.0))
        return np.where(bad, -np.inf, -0.5 * (lz / s) ** 2 - lz - np.log(s) - _LOG_SQRT_2PI)

    def _cdf(self, z, s):
        bad = z <= 0
        return np.where(bad, 0.0, sp.ndtr(np.log(_safe(z, bad, 1.0)) / s))

    def _sf(self, z, s):
        bad = z <= 0
        return np.where(bad, 1.0, sp.ndtr(-np.log(_safe(z, bad, 1.0)) / s))

    def _ppf(self, q, s):
        return np.exp(s * sp.ndtri(q))


class _Halfnorm(_Continuous):
    _support_z = (0.0, np.inf)
    name = 'halfnorm'

    def _logpdf(self, z):
        neg = z < 0
        zs = _safe(z, neg, 0.0)
        return np.where(neg, -np.inf, -0.5 * zs * zs - _LOG_SQRT_2PI + _LOG2)

    def _cdf(self, z):
        return sp.erf(_clip0(z) * _SQRT_HALF)

    def _sf(self, z):
        return sp.erfc(_clip0(z) * _SQRT_HALF)

    def _logcdf(self, z):
        return np.log1p(-sp.erfc(_clip0(z) * _SQRT_HALF))

    def _ppf(self, q):
        return sp.ndtri(0.5 + 0.5 * q)

    def _isf(self, q):
        return -sp.ndtri(0.5 * q)


class _Invgamma(_Continuous):
    _support_z = (0.0, np.inf)
    name = 'invgamma'
    shapes = ('a',)

    def _argcheck(self, a):
        return a > 0

    def _logpdf(self, z, a):
        bad = z <= 0
        zs = _safe(z, bad, 1.0)
        return np.where(bad, -np.inf, -(a + 1.0) * np.log(zs) - 1.0 / zs - sp.gammaln(a))

    def _cdf(self, z, a):
        bad = z <= 0
        return np.where(bad, 0.0, sp.gammaincc(a, 1.0 / _safe(z, bad, 1.0)))

    def _sf(self, z, a):
        bad = z <= 0
        return np.where(bad, 1.0, sp.gammainc(a, 1.0 / _safe(z, bad, 1.0)))

    def _ppf(self, q, a):
        return 1.0 / sp.gammainccinv(a, q)

    def _isf(self, q, a):
        return 1.0 / sp.gammaincinv(a, q)


# --------------------------------------------------------------------------
# Discrete distributions
# --------------------------------------------------------------------------

class _Poisson(_Discrete):
    name = 'poisson'
    shapes = ('mu',)

    def _argcheck(self, mu):
        return mu >= 0

    def _logpmf(self, k, mu):
        return sp.xlogy(k, mu) - mu - sp.gammaln(k + 1.0)

    def _cdf(self, k, mu):
        return sp.pdtr(k, mu)

    def _sf(self, k, mu):
        return sp.pdtrc(k, mu)


class _Binom(_Discrete):
    name = 'binom'
    shapes: tuple[str, ...] = ('n', 'p')

    def _argcheck(self, n, p):
        return (n >= 0) & (p >= 0) & (p <= 1)

    def _support(self, n, p):
        return 0, n

    def _logpmf(self, k, n, p):
        return (sp.gammaln(n + 1.0) - sp.gammaln(k + 1.0) - sp.gammaln(n - k + 1.0)
                + sp.xlogy(k, p) + sp.xlog1py(n - k, -p))

    # bdtr/bdtrc through betainc: SciPy deprecates their non-integer n
    def _cdf(self, k, n, p):
        return sp.betainc(n - k, k + 1.0, 1.0 - p)

    def _sf(self, k, n, p):
        return sp.betainc(k + 1.0, n - k, p)


# Binom with n = 1: one shape parameter fewer, so its methods take one argument fewer
# than the base class's (the ignores below say so to mypy).
class _Bernoulli(_Binom):
    name = 'bernoulli'
    shapes = ('p',)

    def _argcheck(self, p):  # type: ignore[override]
        return (p >= 0) & (p <= 1)

    def _support(self, p):  # type: ignore[override]
        return 0, 1

    def _logpmf(self, k, p):  # type: ignore[override]
        return sp.xlogy(k, p) + sp.xlog1py(1.0 - k, -p)

    def _cdf(self, k, p):  # type: ignore[override]
        return 1.0 - p + 0.0 * k          # k is 0 here (1 and above are clipped)

    def _sf(self, k, p):  # type: ignore[override]
        return p + 0.0 * k


class _Geom(_Discrete):
    name = 'geom'
    shapes = ('p',)

    def _argcheck(self, p):
        return (p > 0) & (p <= 1)

    def _support(self, p):
        return 1, None

    def _logpmf(self, k, p):
        return sp.xlog1py(k - 1.0, -p) + np.log(p)

    def _cdf(self, k, p):
        return -np.expm1(k * np.log1p(-p))

    def _sf(self, k, p):
        return np.exp(k * np.log1p(-p))


class _Nbinom(_Discrete):
    name = 'nbinom'
    shapes = ('n', 'p')

    def _argcheck(self, n, p):
        return (n > 0) & (p > 0) & (p <= 1)

    def _logpmf(self, k, n, p):
        return (sp.gammaln(n + k) - sp.gammaln(k + 1.0) - sp.gammaln(n)
                + n * np.log(p) + sp.xlog1py(k, -p))

    def _cdf(self, k, n, p):
        return sp.betainc(n, k + 1.0, p)

    def _sf(self, k, n, p):
        return sp.betaincc(n, k + 1.0, p)


norm = _Norm()
t = _T()
cauchy = _Cauchy()
logistic = _Logistic()
laplace = _Laplace()
gamma = _Gamma()
chi2 = _Chi2()
expon = _Expon()
beta = _Beta()
uniform = _Uniform()
lognorm = _Lognorm()
halfnorm = _Halfnorm()
invgamma = _Invgamma()
poisson = _Poisson()
binom = _Binom()
bernoulli = _Bernoulli()
geom = _Geom()
nbinom = _Nbinom()


# --------------------------------------------------------------------------
# Multivariate distributions
# --------------------------------------------------------------------------

class _MultivariateNormal:
    """``multivariate_normal.logpdf(x, mean=None, cov=1, allow_singular=False)``: as
    SciPy's, differentiable in ``x``, ``mean`` and ``cov``; ``pdf``; ``entropy(mean=None,
    cov=1)``, differentiable in ``cov``; frozen form ``multivariate_normal(mean,
    cov).logpdf(x)``.  Shapes as SciPy's: ``x`` is one point ``(d,)`` or points
    ``(..., d)``; a scalar ``cov`` is ``cov * I``, a vector a diagonal.  ``cov`` is read
    on its lower triangle (as SciPy's ``eigh`` reads it), which gets the gradient.

    A singular ``cov`` (``allow_singular=True``, and always for ``entropy``) is treated
    as SciPy treats it: the density lives on ``mean + range(cov)``, with the
    pseudo-determinant and the pseudo-inverse ``P`` (eigenvalues below SciPy's cutoff
    count as zero), and ``logpdf`` is ``-inf`` off that support.  The derivatives are
    those on the support: in ``x`` along it (the gradient ``-P (x - mean)`` lies in
    ``range(cov)``), in ``mean`` likewise, in ``cov`` along the directions that keep its
    rank (a rank-changing direction has none: the density jumps).  Through ``cov =
    F F^T`` with ``F`` of shape ``(d, r)``, every derivative in ``F`` is exact.

    >>> import numpy as np
    >>> from tracked.scipy.stats import multivariate_normal
    >>> float(multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(2)))
    -1.8378770664093453
    >>> float(multivariate_normal.logpdf(np.zeros(2), cov=np.diag([1.0, 0.0]),
    ...                                  allow_singular=True))       # a line in the plane
    -0.9189385332046727
    """
    name = 'multivariate_normal'

    def __call__(self, mean: Any = None, cov: int = 1, allow_singular: bool = False,
                 seed: Any = None) -> Any:
        return _Frozen(self, (), {'mean': mean, 'cov': cov, 'allow_singular': allow_singular})

    def __getattr__(self, name):
        return getattr(_st.multivariate_normal, name)

    def _scipy(self, **kwds):
        return _st.multivariate_normal(**kwds)

    def logpdf(self, x: Any, mean: Any = None, cov: int = 1, allow_singular: bool = False) -> Any:
        """``logpdf(x, mean=None, cov=1, allow_singular=False)``: the log density."""
        dim, mean, cov = _mvn_parameters(mean, cov)
        x = _as_points(x, dim)
        dev = x - mean
        if allow_singular:
            maha = np.sum((dev @ _linalg_rules.psd_pinv(cov)) * dev, axis=-1)
            rank = _call(_linalg_rules.psd_rank, cov)
            logdet = _linalg_rules.psd_log_pdet(cov)
        else:
            # cov = L L^T: logdet = 2 sum(log diag L), Mahalanobis term by one triangular solve
            chol = np.linalg.cholesky(cov)
            z = _linalg.solve_triangular(chol, np.swapaxes(np.reshape(dev, (-1, dim)), 0, 1),
                                         lower=True)
            maha = np.reshape(np.sum(z * z, axis=0), np.shape(x)[:-1])
            rank, logdet = dim, 2.0 * np.sum(np.log(np.diagonal(chol)))
        out = -0.5 * (rank * 2.0 * _LOG_SQRT_2PI + logdet + maha)
        if allow_singular:
            out = np.where(_call(_linalg_rules.psd_outside, cov, dev), -np.inf, out)
        return _squeeze(out)

    def pdf(self, x: Any, mean: Any = None, cov: int = 1, allow_singular: bool = False) -> Any:
        """The density: ``exp(logpdf)``."""
        return np.exp(self.logpdf(x, mean, cov, allow_singular))

    def entropy(self, mean: Any = None, cov: Any = 1) -> Any:
        """``entropy(mean=None, cov=1)``: the differential entropy, with the
        pseudo-determinant of a singular ``cov`` (as SciPy's).

        >>> import numpy as np, tracked as tr
        >>> from tracked.scipy.stats import multivariate_normal
        >>> tr.gradient(lambda c: multivariate_normal.entropy(cov=c), np.diag([2.0, 4.0]))[0]
        array([[0.25 , 0.   ],
               [0.   , 0.125]])
        """
        return self._entropy(mean, cov)

    _parameter_methods = ('entropy',)          # frozen: called with the bound parameters

    def _entropy(self, mean=None, cov=1, allow_singular=True):
        _, _, cov = _mvn_parameters(mean, cov)
        rank = _call(_linalg_rules.psd_rank, cov, allow_singular)
        return 0.5 * (rank * (2.0 * _LOG_SQRT_2PI + 1.0) + _linalg_rules.psd_log_pdet(cov))


def _mvn_parameters(mean, cov):
    """SciPy's ``_process_parameters``: the dimension, a mean vector and a matrix."""
    if mean is None:
        dim = 1 if np.ndim(cov) < 2 else np.shape(cov)[0]
        mean = np.zeros(dim)
    else:
        dim = int(np.size(mean))
        if np.ndim(mean) != 1:
            mean = np.reshape(mean, (dim,))
    if dim == 1 and np.ndim(cov) > 0:
        cov = np.reshape(cov, (1, 1))
    if np.ndim(cov) == 0:
        cov = cov * np.eye(dim)
    elif np.ndim(cov) == 1:
        cov = np.diag(cov)
    if np.shape(cov) != (dim, dim):
        raise ValueError(f'multivariate_normal: cov has shape {np.shape(cov)}, '
                         f'expected ({dim}, {dim})')
    return dim, mean, cov


def _as_points(x, dim):
    """SciPy's ``_process_quantiles``: points along the last axis."""
    nd = np.ndim(x)
    if nd == 0:
        return np.reshape(x, (1, 1)) if dim == 1 else np.reshape(x, (1,))
    if nd == 1:
        return np.reshape(x, (-1, 1)) if dim == 1 else np.reshape(x, (1, -1))
    return x


def _squeeze(out):
    """SciPy's ``_squeeze_output``: drop axes of length 1."""
    return np.reshape(out, tuple(n for n in np.shape(out) if n != 1))


class _Dirichlet:
    """``dirichlet.logpdf(x, alpha)`` and ``pdf``: differentiable in ``x`` and ``alpha``.
    As SciPy, the components lie along the first axis of ``x`` (``(K,)`` or
    ``(K, N)``), and ``K - 1`` of them may be given (the last is ``1 - sum``).

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.stats import dirichlet
    >>> round(float(dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), np.ones(3))), 12)   # log 2!
    0.69314718056
    """
    name = 'dirichlet'

    def __call__(self, alpha: Any, seed: Any = None) -> Any:
        return _Frozen(self, (alpha,), {})

    def __getattr__(self, name):
        return getattr(_st.dirichlet, name)

    def _scipy(self, alpha):
        return _st.dirichlet(alpha)

    def logpdf(self, x: Any, alpha: Any) -> Any:
        k = np.shape(alpha)[0]
        if np.shape(x)[0] == k - 1:
            x = np.concatenate([x, 1.0 - np.sum(x, axis=0, keepdims=True)], axis=0)
        a = np.reshape(alpha, (k,) + (1,) * (np.ndim(x) - 1))
        lnb = np.sum(sp.gammaln(alpha)) - sp.gammaln(np.sum(alpha))
        return np.sum(sp.xlogy(a - 1.0, x), axis=0) - lnb

    def pdf(self, x: Any, alpha: Any) -> Any:
        """The density: ``exp(logpdf)``."""
        return np.exp(self.logpdf(x, alpha))


multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()


# --------------------------------------------------------------------------
# Summary functions
# --------------------------------------------------------------------------

def entropy(pk: Any, qk: Any = None, base: Any = None, axis: int = 0,
            keepdims: bool = False) -> Any:
    """``entropy(pk, qk=None, base=None, axis=0)``: the Shannon entropy of ``pk``, or the
    Kullback-Leibler divergence ``sum(pk log(pk / qk))``, each normalised to sum 1
    along ``axis`` first, as ``scipy.stats.entropy``; differentiable in both.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.stats import entropy
    >>> float(entropy(np.array([1.0, 1.0]), base=2))
    1.0
    >>> tr.gradient(lambda q: entropy(np.array([0.5, 0.5]), q), np.array([0.5, 0.5]))
    (array([0., 0.]),)
    """
    if base is not None and base <= 0:
        raise ValueError('`base` must be a positive number or `None`.')
    if qk is not None:                  # broadcast first, then normalise: as SciPy
        pk, qk = np.broadcast_arrays(pk, qk)
        qk = qk / np.sum(qk, axis=axis, keepdims=True)
    pk = pk / np.sum(pk, axis=axis, keepdims=True)
    terms = sp.entr(pk) if qk is None else sp.rel_entr(pk, qk)
    # NumPy 2.5's stubs overload np.sum on a literal keepdims (2.4's take a bool)
    out = np.sum(terms, axis=axis, keepdims=keepdims)  # type: ignore[call-overload, unused-ignore]
    return out if base is None else out / math.log(base)
