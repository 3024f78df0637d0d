"""Each example of the "never silently wrong" issue: the right value and gradient, or an
error that says what to do (README, Limits, for what remains)."""
import logging
import math
import operator

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
    lambda x: np.float32(x) * x,
    lambda x: math.floor(x) * x,
    lambda x: math.trunc(x) * x,
    lambda x: math.isclose(x, 2.0) * x,
    lambda x: math.fsum([x, x]),
    lambda x: np.sum(np.array(x)),                  # a 0-d tracked value
    lambda x: np.sum(np.asarray([x])),
    lambda x: x * np.frombuffer(__import__('array').array('d', [x]))[0],
])
def test_conversions_that_drop_the_gradient_refuse(f):
    with pytest.raises(TypeError, match=r'tr\.data'):
        tr.gradient(f, 2.0)


def test_a_float_where_python_needs_an_int_names_the_fix():
    for use in (lambda x: operator.index(x), lambda x: [1, 2, 3][x], lambda x: range(x)):
        with pytest.raises(TypeError, match=r'holds a float64: .*int\(tr\.data\(t\)\)'):
            tr.gradient(lambda x: (use(x), x)[1], 2.0)


def test_conversions_to_text_print_the_value():
    # Printing a loss keeps working in every spelling, %-formatting included: text
    # carries no gradient to lose (float(loss) refuses, the value read is tr.data(loss))
    def f(x):
        y = x * x
        printed.append(f'{y:.3f} {y} {"{:.1f}".format(y)} {"%.2f" % y} {"%d" % y}')
        printed.append('%s' % y)
        logging.getLogger('tracked.test').info('loss %f', y)
        return y
    printed = []
    with assert_logged('loss 4.000000'):
        assert tr.gradient(f, 2.0) == (4.0,)
    assert printed[0] == '4.000 TrackedReal(np.float64(4.0)) (tracked) 4.0 4.00 4'
    loss = np.sum(tr.param(np.array([1.5, 2.0])) ** 2)          # Tracker's way
    assert 'loss %.2f' % loss == 'loss 6.25' and round(tr.data(loss), 1) == 6.2


class assert_logged:
    """Context manager: ``text`` is logged (logging formats lazily, with ``%``)."""

    def __init__(self, text):
        self.text = text

    def __enter__(self):
        self.records = []
        self.handler = logging.Handler()
        self.handler.emit = lambda r: self.records.append(r.getMessage())
        self.logger = logging.getLogger('tracked.test')
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        if exc[0] is None:
            assert self.records == [self.text]


@pytest.mark.parametrize('write', [lambda a, t: a.fill(t), lambda a, t: a.__setitem__(0, t),
                                   lambda a, t: np.fromiter([t], float)])
def test_writing_a_tracked_scalar_into_a_plain_array_raises(write):
    # NumPy's C setter calls float(t), which raises tracked's TypeError; because a tracked
    # value is indexable (a "sequence" to C), NumPy then replaces it with its own
    # ValueError, raised from ours: the traceback shows both (a documented limit)
    with pytest.raises(ValueError, match='sequence') as err:
        tr.gradient(lambda x: (write(np.zeros(3), x), 0.0)[1], 2.0)
    assert isinstance(err.value.__cause__, TypeError)
    assert 'tr.data(t)' in str(err.value.__cause__)
    assert 'zeros_like/empty_like(x)' in str(err.value.__cause__)


def test_writing_a_tracked_array_into_a_plain_array_names_the_fix():
    a = np.zeros(3)
    with pytest.raises(TypeError, match="tracked.numpy's zeros_like/empty_like"):
        a[:2] = tr.param(np.ones(2))


def test_control_flow_and_explicit_reads_keep_working():
    def f(x):
        scale = tr.data(x)                     # a value read on purpose
        return x * scale if x > 1 else -x      # a branch on a comparison
    assert tr.gradient(f, 2.0) == (2.0,)       # d(x * const)/dx: tr.data(x) is a constant
    assert tr.gradient(f, 0.5) == (-1.0,)
    tape = tr.GradientTape(f, 2.0)
    assert tape.gradient(3.0) == (3.0,)        # a tape reads the new value
    with pytest.raises(tr.TapeGuardError, match=r'truth value.*recorded True, now False'):
        tape.gradient(0.5)                     # a branch is a guard on a tape


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


@pytest.mark.parametrize('use', [
    lambda x, c: np.outer(x, c[:2]),             # c[:2]: a view made by the caller; np.outer
    lambda x, c: np.kron(x, c[:2]),              # saves another view of it, made by its rule
    lambda x, c: np.tensordot(x, np.reshape(c[:2], (2, 1)), 1),
    lambda x, c: x * c[:2],
])
def test_a_constant_saved_through_a_view_is_protected_with_its_array(use):
    def run(c):
        x = tr.param([1.0, 2.0])
        return x, np.sum(use(x, c))
    c = np.array([1.0, 2.0, 3.0])
    x, y = run(c)
    with pytest.raises(ValueError, match='read-only'):
        c[:] = 100.0                           # the array the saved views look into
    y.back()
    expected = tr.gradient(lambda x: np.sum(use(x, np.array([1.0, 2.0, 3.0]))), X - 1)[0]
    np.testing.assert_allclose(x.grad, expected)
    del y
    c[:] = 100.0                               # writable again once nothing saves it
    assert c.flags.writeable


def test_an_intermediate_read_with_tr_data_is_protected_until_back():
    x = tr.param([1.0, 2.0])
    h = x * 3.0
    y = np.sum(h ** 2)                          # saves h's value for its pullback
    with pytest.raises(ValueError, match='read-only'):
        tr.data(h)[...] = 10.0
    with pytest.raises(ValueError, match='read-only'):
        h.data[0] = 10.0
    y.back()
    np.testing.assert_array_equal(x.grad, [18.0, 36.0])     # 2 * 3h, not 2 * 3 * 10
    tr.data(h)[...] = 10.0                       # released by back(): legal again
    out = tr.data(tr.param([1.0, 2.0]) * 2.0)    # a result nothing else holds: writable
    out[0] = 5.0


def test_pullback_outputs_are_protected_while_back_lives():
    x = np.array([0.0, 1.0])
    y, back = tr.pullback(np.exp, x)             # np.exp's pullback reads its output
    with pytest.raises(ValueError, match='read-only'):
        y[...] = 0.0
    with pytest.raises(ValueError, match='read-only'):
        y -= 1.0
    np.testing.assert_allclose(back(np.ones(2))[0], np.exp(x))
    ys, back2 = tr.pullback(lambda x: (x, {'e': np.exp(x)}), x)
    assert ys[0] is x and x.flags.writeable      # an argument returned as is: the caller's
    assert not ys[1]['e'].flags.writeable
    del back, back2
    y[...] = 0.0
    ys[1]['e'][...] = 0.0


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
    with pytest.raises(TypeError, match=r"wrt='y': give the positions .* an int or a tuple"):
        tr.GradientTape(lambda x, y: x * y, 1.0, 2.0, wrt='y')
    # only gradient and withgradient take a backend
    for who, call in [('withjacobian', lambda b: tr.jacobian(np.sin, b, 2.0)),
                      ('pullback', lambda b: tr.pullback(np.sin, b, 2.0)),
                      ('diaghessian', lambda b: tr.diaghessian(np.sin, b, 2.0))]:
        for backend in (tr.AutoTracked(), tr.AutoCompiled):
            with pytest.raises(TypeError, match=rf'{who}\(f, \*args\) takes no backend'):
                call(backend)


def test_back_needs_a_cotangent_of_the_right_shape():
    x = tr.param(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r'needs dy for a y of shape \(2,\)'):
        tr.back(x * x)
    with pytest.raises(ValueError, match=r'dy has shape \(3,\), y has shape \(2,\)'):
        tr.back(x * x, np.ones(3))
    _, back = tr.pullback(lambda x: x * x, np.ones(2))
    with pytest.raises(ValueError, match=r'dy has shape \(1,\), the output has shape \(2,\)'):
        back(np.ones(1))
