"""Guards (tracked/compiled_tape/guards.py): value-dependent control flow is checked on replay."""
import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import GradientTape, TapeGuardError


def relu_scalar(x):
    return 0.0 * x if x < 0 else x          # ReverseDiff's failing case


def test_reversediff_branch_case_raises_instead_of_returning_the_recorded_branch():
    tape = GradientTape(relu_scalar, -1.3)
    assert tape.gradient(-0.5) == (0.0,)
    with pytest.raises(TapeGuardError, match=r'recorded True, now False') as e:
        tape.gradient(1.34)
    assert 'test_guards.py' in str(e.value) and 'relu_scalar' in str(e.value)


def test_retrace_re_records_on_another_path():
    tape = GradientTape(relu_scalar, -1.3, on_guard='retrace')
    assert tape.gradient(1.34) == (1.0,)
    assert tape.gradient(-2.0) == (0.0,)
    assert tape(3.0) == 3.0


def test_bool_of_a_reduction_and_while_loops():
    def f(x):
        while np.sum(x * x) > 1.0:
            x = x * 0.5
        return np.sum(x)
    tape = GradientTape(f, np.array([1.0, 1.0]))       # halves once
    np.testing.assert_allclose(tape.gradient(np.array([0.9, 0.9]))[0], [0.5, 0.5])
    with pytest.raises(TapeGuardError):
        tape.gradient(np.array([3.0, 3.0]))            # would halve three times
    with pytest.raises(TapeGuardError):
        tape.gradient(np.array([0.1, 0.1]))            # would not halve


def test_float_and_item_of_a_differentiated_value_refuse_of_an_input_are_guarded():
    reads = [(float, r'float'), (lambda t: t.item(), r'\.item'), (lambda t: t.tolist(), r'\.item')]
    for read, _ in reads:
        with pytest.raises(TypeError, match='drop its gradient'):
            GradientTape(lambda x: np.sum(x) * read(np.max(x)), np.array([1.0, 2.0]))
    # of an input outside wrt they lose no gradient: guarded by value
    for read, what in reads:
        g = lambda x, s: np.sum(x) * read(np.max(s))
        tape = GradientTape(g, np.ones(2), np.array([1.0, 2.0]), wrt=(0,))
        np.testing.assert_allclose(tape.gradient(np.ones(2), np.array([0.5, 2.0]))[0], [2.0, 2.0])
        with pytest.raises(TapeGuardError, match=f'{what}.*now 3.0'):
            tape.gradient(np.ones(2), np.array([1.0, 3.0]))


def test_int_and_index_are_guarded():
    f = lambda x, n: np.sum(x[:int(np.sum(n))])
    tape = GradientTape(f, np.ones(4), np.array([1.0, 1.0]), wrt=(0,))
    np.testing.assert_allclose(tape.gradient(np.ones(4), np.array([0.5, 1.5]))[0], [1, 1, 0, 0])
    with pytest.raises(TapeGuardError, match='int'):
        tape.gradient(np.ones(4), np.array([1.0, 2.0]))
    g = lambda x, k: np.sum(x[:k])                     # __index__ of a tracked integer
    tape = GradientTape(lambda x, m: g(x, np.argmax(m)), np.ones(4), np.array([0., 0, 1]),
                        wrt=(0,))
    with pytest.raises(TapeGuardError, match='index'):
        tape.gradient(np.ones(4), np.array([1.0, 0, 0]))


def test_boolean_mask_replays_with_the_new_mask_and_guards_its_count():
    f = lambda x: np.sum(x[x > 0] ** 2)
    tape = GradientTape(f, np.array([1.0, -1.0, 2.0]))
    x2 = np.array([-3.0, 2.0, 1.0])                    # same count, other positions
    np.testing.assert_allclose(tape.gradient(x2)[0], [0.0, 4.0, 2.0])
    with pytest.raises(TapeGuardError, match='number of True entries'):
        tape.gradient(np.array([1.0, 1.0, 1.0]))


def test_index_arrays_from_values_are_recomputed():
    f = lambda x: np.sum(x[np.argsort(x)[:2]] * np.array([1.0, 10.0]))
    tape = GradientTape(f, np.array([3.0, 1.0, 2.0]))
    x2 = np.array([1.0, 3.0, 2.0])
    np.testing.assert_allclose(tape.gradient(x2)[0], tr.api.gradient(f, x2)[0])


def test_guards_are_listed_when_printed():
    tape = GradientTape(relu_scalar, -1.3)
    assert len(tape.guards) == 1
    assert 'guard bool == True' in str(tape)


def test_retrace_onto_a_branch_with_other_outputs():
    # recorded where the gradient exists, replayed where f is constant (gradient None),
    # and back: fresh output buffers follow the re-recorded tape each time
    f = lambda x: 0.0 if x < 0 else x * x   # noqa: E731
    tape = tr.GradientTape(f, 1.5, on_guard='retrace')
    assert tape.gradient(2.0) == (4.0,)
    assert tape.gradient(-2.0) == (None,)
    assert tape.gradient(3.0) == (6.0,)


def test_hessian_tape_retraces_into_the_callers_out():
    # the retrace path re-checks out= (found by mypy: HessianTape had no _check_out)
    def f(x):
        return np.sum(x ** 3) if x[0] > 0 else np.sum(x ** 4)
    tape = tr.HessianTape(f, np.ones(2), on_guard='retrace')
    out = np.zeros((2, 2))
    assert tape.hessian(np.array([-1.0, 2.0]), out=out) is out
    np.testing.assert_allclose(out, np.diag([12.0, 48.0]))
    np.testing.assert_allclose(tape.hessian(np.array([1.0, 2.0])), np.diag([6.0, 12.0]))
