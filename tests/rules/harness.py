"""One way to state a rule test: ``case(np.fn, spec, spec, ..., kwargs=...)``.

Each ``spec`` is a shape tuple (a random float64 argument that is differentiated),
``arg(shape, low=, high=)`` for a restricted domain, or ``const(value)`` for an
argument that is passed as is and not differentiated.  ``check`` runs
``tr.gradcheck`` (central finite differences, float64) to ``order`` (default 2:
the pullback itself is differentiated on an outer tape).  A case whose ``fun`` wraps
the NumPy call (``lambda a: np.linalg.cholesky(a @ a.T + 3 * np.eye(3))``) names the
rule it tests with ``covers=np.linalg.cholesky`` for the systematic coverage check.
"""
import numpy as np
import pytest

import tracked as tr


class arg:
    def __init__(self, shape, low=-2.0, high=2.0, dtype=np.float64, values=None):
        self.shape, self.low, self.high, self.dtype, self.values = shape, low, high, dtype, values

    def make(self, rng):
        if self.values is not None:
            return np.array(self.values, dtype=self.dtype)
        x = rng.uniform(self.low, self.high, self.shape)
        if np.dtype(self.dtype).kind == 'c':
            x = x + 1j * rng.uniform(self.low, self.high, self.shape)
        return x.astype(self.dtype)


class const:
    def __init__(self, value):
        self.value = value


class Case:
    def __init__(self, fun, *specs, kwargs=None, order=2, name=None, rtol=1e-5, atol=1e-6,
                 covers=None):
        self.fun, self.kwargs, self.order = fun, kwargs or {}, order
        self.covers = fun if covers is None else covers   # the rule this case tests
        self.specs = [arg(s) if isinstance(s, tuple) else s for s in specs]
        self.rtol, self.atol = rtol, atol
        fname = getattr(self.covers, '__name__', repr(self.covers))
        shapes = ','.join(repr(s.value) if isinstance(s, const) else str(s.shape if s.values is None
                                                                         else np.shape(s.values))
                          for s in self.specs)
        self.id = name or f'{fname}({shapes}{"," + repr(self.kwargs) if self.kwargs else ""})'

    def check(self, seed=0):
        rng = np.random.default_rng(seed)
        values = [s.value if isinstance(s, const) else s.make(rng) for s in self.specs]
        diff = [i for i, s in enumerate(self.specs) if not isinstance(s, const)]

        def f(*xs):
            full = list(values)
            for i, x in zip(diff, xs):
                full[i] = x
            return self.fun(*full, **self.kwargs)
        assert tr.gradcheck(f, *[values[i] for i in diff], order=self.order,
                             rtol=self.rtol, atol=self.atol)
        assert tr.jvpcheck(f, *[values[i] for i in diff], rtol=self.rtol, atol=self.atol)


def case(fun, *specs, **kw):
    return Case(fun, *specs, **kw)


def parametrize(cases):
    """Decorate a test taking ``c`` with one parameter per case."""
    return pytest.mark.parametrize('c', cases, ids=[c.id for c in cases])


def grad(f, x):
    """The gradient of ``f`` at ``x`` (one argument), for targeted tests."""
    return tr.gradient(f, x)[0]
