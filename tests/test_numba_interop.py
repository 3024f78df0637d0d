"""numba and tracked values: a tracked value reaching a numba-compiled function raises a
``TypeError`` from tracked that names the function and the ways out (not numba's
``TypingError``); a numba kernel wrapped in ``@tr.rule`` with a NumPy pullback is
differentiated to any order, in forward mode and on recorded tapes."""
import subprocess
import sys

import numba
import numpy as np
import pytest

import tracked as tr

X = np.array([-1.5, -0.2, 0.4, 2.0])


@numba.njit
def double(x):
    return 2.0 * x


@numba.jit
def scale(a, x):
    return a * x


@numba.vectorize(['float64(float64)'])
def vsquare(x):
    return x * x


@numba.vectorize
def lazy_square(x):
    return x * x


@numba.jit(forceobj=True)
def objmode_cube(x):
    return x ** 3


def _refusal(name):
    return rf'^{name} \(compiled by numba\) cannot take a tracked value .*@tr\.rule.*tr\.data\(x\)'


@pytest.mark.parametrize('f, name', [
    (lambda x: double(x), 'tests.test_numba_interop.double'),
    (lambda x: scale(2.0, x), 'tests.test_numba_interop.scale'),       # a later argument
    (lambda x: double(x[0]), 'tests.test_numba_interop.double'),       # a tracked scalar
], ids=['njit', 'jit, second argument', 'scalar'])
def test_a_tracked_value_reaching_a_numba_function_names_it(f, name):
    for run in (lambda: tr.gradient(lambda x: np.sum(f(x)), X),
                lambda: tr.jvp(lambda x: f(x), (X,), (np.ones(4),)),     # forward mode
                lambda: tr.GradientTape(lambda x: np.sum(f(x)), X)):
        with pytest.raises(TypeError, match=_refusal(name)) as info:
            run()
        assert not isinstance(info.value, numba.core.errors.NumbaError)


@pytest.mark.parametrize('ufunc', [vsquare, lazy_square], ids=['vectorize', 'lazy vectorize'])
def test_numba_ufuncs_reach_tracked_and_name_the_fixes(ufunc):
    with pytest.raises(TypeError, match=r'no derivative rule for .*square\. .*@tr\.rule.*'
                                        r'tr\.data\(x\)'):
        tr.gradient(lambda x: np.sum(ufunc(x)), X)


def test_object_mode_still_runs_python_on_tracked_values():
    np.testing.assert_allclose(tr.gradient(lambda x: np.sum(objmode_cube(x)), X)[0], 3 * X ** 2)


def test_numba_typeof_outside_a_call_refuses_too():
    with pytest.raises(TypeError, match='^a numba-compiled function cannot take a tracked'):
        numba.typeof(tr.param(X))
    assert numba.typeof(X) == numba.typeof(np.zeros(2))     # plain arrays as ever


def test_importing_tracked_does_not_import_numba():
    code = 'import sys, tracked; print("numba" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == 'False'


# --------------------------------------------------------------------------
# The pattern: a numba kernel in @tr.rule, its pullback in NumPy (and rules)
# --------------------------------------------------------------------------

@numba.njit
def iir_kernel(a, x):
    """y[0] = x[0], y[i] = a y[i-1] + x[i]: a recurrence, what numba is for."""
    y = np.empty_like(x)
    acc = 0.0
    for i in range(x.size):
        acc = a * acc + x[i]
        y[i] = acc
    return y


@tr.rule
def iir(a, x):
    y = iir_kernel(a, x)

    def pullback(g):
        # dy = filter(da * y[i-1] + dx): the adjoint filter runs backwards in time
        gx = iir(a, g[::-1])[::-1]
        return np.sum(gx[1:] * y[:-1]), gx
    return y, pullback


def iir_numpy(a, x):
    """The same filter in NumPy (tracked), the oracle."""
    n = len(x)
    k = np.arange(n)
    powers = np.where(k[:, None] >= k[None, :], a ** np.maximum(k[:, None] - k[None, :], 0), 0.0)
    return powers @ x


def loss(a, x):
    return np.sum(np.tanh(iir(a, x)) ** 2)


def loss_numpy(a, x):
    return np.sum(np.tanh(iir_numpy(a, x)) ** 2)


def test_the_rule_runs_the_kernel_on_plain_values():
    np.testing.assert_allclose(iir(0.5, X), iir_numpy(0.5, X), rtol=1e-14)


def test_a_numba_kernel_in_a_rule_nests_to_any_order():
    a = 0.6
    assert tr.gradcheck(loss, a, X, order=3)
    for got, want in zip(tr.gradient(loss, a, X), tr.gradient(loss_numpy, a, X)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(tr.hessian(lambda x: loss(a, x), X),
                               tr.hessian(lambda x: loss_numpy(a, x), X), rtol=1e-10)
    np.testing.assert_allclose(tr.hessian_reverse(lambda x: loss(a, x), X),
                               tr.hessian(lambda x: loss_numpy(a, x), X), rtol=1e-10)
    d2a = tr.gradient(lambda a: tr.gradient(loss, a, X)[0], a)[0]        # nested gradients
    h = 1e-4
    fd = (loss(a + h, X) - 2 * loss(a, X) + loss(a - h, X)) / h ** 2
    np.testing.assert_allclose(d2a, fd, rtol=1e-5)
    v = np.array([1.0, -2.0, 0.5, 0.3])
    y, t = tr.jvp(lambda x: iir(a, x), (X,), (v,))
    np.testing.assert_allclose(t, iir_numpy(a, v), rtol=1e-12)           # linear in x


def test_a_numba_kernel_in_a_rule_on_recorded_and_compiled_tapes():
    a1, a2 = 0.6, -0.3
    x2 = X[::-1] * 0.7
    tape = tr.GradientTape(loss, a1, X)
    ctape = tr.compile(tape, background=False)
    for t in (tape, ctape):
        for args in ((a1, X), (a2, x2)):
            for got, want in zip(t.gradient(*args), tr.gradient(loss_numpy, *args)):
                np.testing.assert_allclose(got, want, rtol=1e-10)
