"""Python lists and tuples where NumPy takes arrays: converted once, when an operation
is recorded, so that no pullback and no recorded instruction sees a list; lists that
NumPy would not turn into one numeric array keep today's behaviour.

Per rule and path, the systematic harness checks every case with its constants and
held arguments as lists (``Case.check_lists``); the examples of issue 14 are findings
in test_paths.py.  Here: what the conversion must leave alone.
"""
import numpy as np
import pytest

import tracked as tr
from tracked import registry

X = np.array([0.5, 1.0, 2.0])


def test_a_recorded_instruction_holds_the_array_not_the_list():
    tape = tr.GradientTape(lambda x: np.einsum('i,i', x, [1.0, 2.0, 3.0]), X)
    (ins,) = [i for i in tape.instructions if i.name == 'np.einsum']
    assert type(ins.args[2]) is np.ndarray and ins.args[2].tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(tape.gradient(X + 1.0)[0], [1.0, 2.0, 3.0])


def test_lists_give_numpys_dtypes_and_python_numbers_stay_weak():
    x = X.astype(np.float32)
    for c in ([1, 2, 3], [1.0, 2.0, 3.0], (1j, 2.0, 3.0)):
        got = tr.data(np.einsum('i,i->i', tr.param(x), c)).dtype
        assert got == np.einsum('i,i->i', x, c).dtype, c
    assert tr.data(np.multiply(tr.param(x), 2.0)).dtype == np.float32   # not a 0-d array


@pytest.mark.parametrize('f', [
    lambda x: np.einsum('i,i', x, [1.0, [2.0, 3.0]]),
    lambda x: np.sum(np.linalg.solve(np.diag(x), [1.0, [2.0], 3.0])),
    lambda x: np.sum(np.interp(x, [0.0, [1.0, 2.0]], [0.0, 1.0])),
], ids=['einsum', 'solve', 'interp (a composite)'])
def test_a_ragged_list_raises_numpys_error(f):
    with pytest.raises(ValueError, match='setting an array element with a sequence'):
        f(X)
    with pytest.raises(ValueError, match='setting an array element with a sequence'):
        tr.gradient(f, X)


def test_a_list_holding_tracked_values_is_refused_as_before():
    with pytest.raises(TypeError, match='np.einsum converts its arguments'):
        tr.gradient(lambda x: np.einsum('i,i', [x[0], x[1], x[2]], x), X)
    with pytest.raises(TypeError, match='list holding tracked values'):
        tr.gradient(lambda x: np.sum(x * [x[0], 1.0, 2.0]), X)


def test_sequences_of_arrays_stay_sequences():
    f = lambda x: np.sum(np.stack([x, [1.0, 2.0, 3.0]]) ** 2)          # noqa: E731
    np.testing.assert_allclose(tr.gradient(f, X)[0], 2 * X)
    f = lambda x: np.sum(np.concatenate(([1.0], x, (2.0, 3.0))) * np.arange(6.0))  # noqa: E731
    np.testing.assert_allclose(tr.gradient(f, X)[0], [1.0, 2.0, 3.0])


def test_a_custom_rule_sees_its_arguments_as_given():
    seen = []

    @tr.rule
    def scaled(x, coeffs):
        seen.append(type(coeffs))
        c = np.array(coeffs)
        return x * c, lambda dy: (dy * c, None)
    g = tr.gradient(lambda x: np.sum(scaled(x, [1.0, 2.0, 3.0])), X)[0]
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])
    assert seen == [list]


def test_a_composite_declares_its_operands_by_parameter_name():
    def impl(x, xp, *rest, left=None):
        return x
    try:
        registry.defcomposite('example', impl, arrays=('xp', '*rest', 'left'))
        assert registry.OPERANDS['example'] == ((('xp', 1), ('left', None)), 2)
        with pytest.raises(ValueError, match="impl has no parameter 'fp'"):
            registry.defcomposite('example', impl, arrays=('fp',))
    finally:
        registry.RULES.pop('example', None)
        registry.OPERANDS.pop('example', None)
