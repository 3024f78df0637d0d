"""Each example of the "never silently wrong" issue: the right value and gradient, or an
error that says what to do (README, Limits, for what remains)."""
import math

import numpy as np
import pytest

import tracked as tr
import tracked.numpy as tnp

X = np.array([2.0, 3.0])


# --------------------------------------------------------------------------
# 1. Conversions that would drop a gradient refuse
# --------------------------------------------------------------------------

@pytest.mark.parametrize('f', [
    lambda x: np.float64(x) * 2,
    lambda x: math.exp(x) + x,
    lambda x: float(x) * x,
    lambda x: complex(x) * x,
    lambda x: int(x * 1.5) * x,
    lambda x: np.sum(np.array([x, 2 * x])),
])
def test_conversions_that_drop_the_gradient_refuse(f):
    with pytest.raises(TypeError, match=r'tr\.data'):
        tr.gradient(f, 2.0)


@pytest.mark.parametrize('write', [lambda a, t: a.fill(t), lambda a, t: a.__setitem__(0, t)])
def test_writing_a_tracked_scalar_into_a_plain_array_raises(write):
    # NumPy's C setter tests for a sequence before it calls float(): its own ValueError
    # (a documented limit); never a plain array holding the value without its gradient
    with pytest.raises((TypeError, ValueError), match='sequence|tr.data'):
        tr.gradient(lambda x: (write(np.zeros(3), x), 0.0)[1], 2.0)


def test_writing_a_tracked_array_into_a_plain_array_names_the_fix():
    a = np.zeros(3)
    with pytest.raises(TypeError, match="tracked.numpy's zeros_like/empty_like"):
        a[:2] = tr.param(np.ones(2))


def test_control_flow_and_explicit_reads_keep_working():
    def f(x):
        scale = x.item()                       # a value read on purpose
        return x * scale if x > 1 else -x      # a branch on a comparison
    assert tr.gradient(f, 2.0) == (2.0,)       # d(x * const)/dx: item() is a constant
    assert tr.gradient(f, 0.5) == (-1.0,)
    tape = tr.GradientTape(f, 2.0)
    assert tape.gradient(2.0) == (2.0,)
    with pytest.raises(tr.TapeGuardError, match=r'\.item\(\).*recorded 2\.0, now 3\.0'):
        tape.gradient(3.0)                     # a value read is a guard on a tape


# --------------------------------------------------------------------------
# 2. Mutation after recording is detected
# --------------------------------------------------------------------------

def test_mutation_between_forward_and_back_is_refused():
    x = tr.param([1.0, 2.0])
    c = np.array([1.0, 2.0])
    y = np.sum(x ** 2) + np.sum(x * c)
    with pytest.raises(ValueError, match='read-only'):
        tr.data(x)[...] = 10.0
    with pytest.raises(ValueError, match='read-only'):
        c[:] = 100.0
    y.back()
    np.testing.assert_array_equal(x.grad, [3.0, 6.0])
    tr.data(x)[...] = 10.0                  # the recommended update, once back() ran
    c[:] = 100.0
    np.testing.assert_array_equal(tr.data(x), [10.0, 10.0])


def test_protection_ends_with_the_entries_that_saved_the_value():
    x = tr.param(np.ones(3))
    y = np.sum(np.sin(x))
    view = tr.data(x)[1:]                   # made while protected: read-only too
    with pytest.raises(ValueError, match='read-only'):
        view[0] = 5.0
    del y                                   # no entry holds the value any more
    tr.data(x)[0] = 4.0
    assert tr.data(x).flags.writeable


# --------------------------------------------------------------------------
# 3. Unusual arrays: right, or refused with the type named
# --------------------------------------------------------------------------

def test_masked_arrays_are_refused_not_unmasked():
    m = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(TypeError, match=r'numpy\.ma\.MaskedArray.*filled'):
        tr.withgradient(lambda x: np.sum(x ** 2), m)
    with pytest.raises(TypeError, match=r'MaskedArray from np\.multiply'):
        tr.gradient(lambda x: np.sum(x * m), np.ones(3))
    with pytest.raises(TypeError, match='MaskedArray'):
        tr.param(m)


@pytest.mark.filterwarnings('ignore::PendingDeprecationWarning')     # np.matrix itself
def test_matrices_are_refused():
    M = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match=r'numpy\.matrix.*np\.asarray'):
        tr.gradient(lambda x: np.sum(x * x), M)       # * is a matrix product there
    with pytest.raises(TypeError, match=r'numpy\.matrix from np\.multiply'):
        tr.gradient(lambda x: np.sum(x * M), np.ones((2, 2)))


def test_object_arrays_are_refused():
    c = np.array([1.0, 2.0, 3.0], dtype=object)
    for f in (lambda x: np.sum(c * x), lambda x: np.sum(x * c)):
        with pytest.raises(TypeError, match=r'dtype object.*astype\(float\)'):
            tr.gradient(f, np.ones(3))


def test_memmaps_and_structured_constants_work(tmp_path):
    mm = np.memmap(tmp_path / 'x.dat', dtype=np.float64, mode='w+', shape=(3,))
    mm[:] = [1.0, 2.0, 3.0]
    val, (g,) = tr.withgradient(lambda x: np.sum(x ** 2), mm)
    assert val == 14.0 and type(g) is np.ndarray
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])
    rec = np.array([(1.0, 5), (2.0, 6)], dtype=[('w', float), ('n', int)])
    g, grec = tr.gradient(lambda x, r: np.sum(x * r['w']), X, rec)
    np.testing.assert_array_equal(g, [1.0, 2.0])
    assert grec is None                      # a structured array is a constant


def test_filling_and_assigning_tracked_values_with_tracked_numpy():
    def f(x):
        out = tnp.empty_like(x)
        for i in range(2):
            out[i] = x[i] ** 2 * (i + 1)
        return np.sum(out) + np.sum(tnp.full(3, x[0])) + np.sum(tnp.full_like(np.zeros(2), x[1]))
    np.testing.assert_array_equal(tr.gradient(f, X)[0], [4.0 + 3.0, 12.0 + 2.0])
    assert tr.gradcheck(f, X)
    with pytest.raises(TypeError, match='tracked.numpy.full'):
        tr.gradient(lambda t: np.sum(np.full_like(np.zeros(3), t)), 2.0)


# --------------------------------------------------------------------------
# 4. Misuse gets a message that names the mistake
# --------------------------------------------------------------------------

@tr.rule
def forgets_its_pullback(x):
    return np.sin(x)


@tr.rule
def returns_three(x):
    return np.sin(x), (lambda g: (g * np.cos(x),)), 'extra'


@tr.rule
def one_cotangent_for_two(x, y):
    return np.sum(x * y), lambda g: (g * y,)


@tr.rule
def cotangent_too_big(x):
    return x * 2.0, lambda g: (np.ones((3, 3)),)


@tr.rule
def cotangent_of_the_output_shape(x, s):
    return x * s, lambda g: (g * s, g * x)   # s's cotangent broadcast: the tape sums it


def test_custom_rule_mistakes_are_named():
    with pytest.raises(TypeError, match=r'forgets_its_pullback must return \(value, pullback\)'
                                        r'.*returned a float64'):
        tr.gradient(lambda x: forgets_its_pullback(x), 1.0)
    with pytest.raises(TypeError, match='returns_three.*tuple of 3'):
        tr.gradient(lambda x: returns_three(x), 1.0)
    with pytest.raises(ValueError, match='1 cotangents for 2 arguments') as err:
        tr.gradient(lambda x: one_cotangent_for_two(x, 2.0), np.ones(3))
    if hasattr(err.value, '__notes__'):       # Python >= 3.11 names the rule
        assert 'one_cotangent_for_two' in ''.join(err.value.__notes__)
    with pytest.raises(ValueError, match=r'shape \(3, 3\) for argument 0 of shape \(3,\)'):
        tr.gradient(lambda x: np.sum(cotangent_too_big(x)), np.ones(3))
    gx, gs = tr.gradient(lambda x, s: np.sum(cotangent_of_the_output_shape(x, s)), X, 3.0)
    np.testing.assert_array_equal(gx, [3.0, 3.0])
    assert gs == 5.0


def test_api_misuse_is_named():
    with pytest.raises(TypeError, match=r'tr\.AutoTracked\(\), not the class'):
        tr.gradient(lambda x: x * x, tr.AutoTracked, 2.0)
    for who, call in [('gradient', lambda: tr.gradient(2.0, 3.0)),
                      ('pullback', lambda: tr.pullback(None, 3.0)),
                      ('withjacobian', lambda: tr.jacobian(np.ones(2), 3.0)),
                      ('hessian', lambda: tr.hessian(2.0, lambda x: x)),
                      ('jvp', lambda: tr.jvp('f', (1.0,), (1.0,)))]:
        with pytest.raises(TypeError, match=rf'{who}\(f, \*args\): f must be the function'):
            call()
    with pytest.raises(ValueError, match=r'wrt=\(5,\): f was given 2 arguments'):
        tr.GradientTape(lambda x, y: x * y, 1.0, 2.0, wrt=5)
    assert tr.GradientTape(lambda x, y: x * y, 1.0, 2.0, wrt=-1).gradient(1.0, 3.0) == (None, 1.0)


def test_back_needs_a_cotangent_of_the_right_shape():
    x = tr.param(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r'needs dy for a y of shape \(2,\)'):
        tr.back(x * x)
    with pytest.raises(ValueError, match=r'dy has shape \(3,\), y has shape \(2,\)'):
        tr.back(x * x, np.ones(3))
    _, back = tr.pullback(lambda x: x * x, np.ones(2))
    with pytest.raises(ValueError, match=r'dy has shape \(1,\), the output has shape \(2,\)'):
        back(np.ones(1))
