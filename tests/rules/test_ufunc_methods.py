"""ufunc methods (reduce, accumulate, outer, at, reduceat) of every ufunc with a rule."""
import numpy as np
import pytest

import tracked as tr
from tracked import registry

from .harness import arg, case, parametrize

POS = arg((3, 4), 0.5, 2.0)

CASES = [
    case(lambda v: np.maximum.accumulate(v, axis=1), (3, 4), covers=registry.ACCUMULATE[np.maximum],
         name='maximum.accumulate'),
    case(lambda v: np.minimum.accumulate(v), (5,), covers=registry.ACCUMULATE[np.minimum],
         name='minimum.accumulate'),
    case(lambda v: np.fmax.accumulate(v, 0), (3, 4), covers=registry.ACCUMULATE[np.fmax],
         name='fmax.accumulate'),
    case(lambda v: np.fmin.accumulate(v, axis=-1), (2, 5), covers=registry.ACCUMULATE[np.fmin],
         name='fmin.accumulate'),
]

METHOD_CALLS = [
    lambda v: np.logaddexp.reduce(v), lambda v: np.logaddexp.reduce(v, axis=1, keepdims=True),
    lambda v: np.logaddexp2.reduce(v, axis=None), lambda v: np.hypot.reduce(v, axis=1),
    lambda v: np.subtract.reduce(v, axis=1), lambda v: np.true_divide.reduce(v, 0, initial=2.0),
    lambda v: np.fmax.reduce(v, axis=1),
    lambda v: np.arctan2.reduce(v, axis=0),
    lambda v: np.logaddexp.accumulate(v, axis=1), lambda v: np.subtract.accumulate(v),
    lambda v: np.multiply.outer(v, np.arange(1.0, 4.0)), lambda v: np.subtract.outer(v[0], v),
    lambda v: np.power.outer(v[1], v[:, 0]),
    lambda v: np.add.reduceat(v, [0, 2, 1], axis=1), lambda v: np.maximum.reduceat(v, [0, 2]),
    lambda v: np.multiply.reduceat(v, [1, 3], axis=-1),
]


@parametrize(CASES)
def test_running_extrema_against_finite_differences(c):
    c.check()


@pytest.mark.parametrize('k', range(len(METHOD_CALLS)))
def test_methods_differentiate_and_match_numpy(k):
    f = METHOD_CALLS[k]
    x = np.random.default_rng(k).uniform(0.5, 2.0, (3, 4))
    np.testing.assert_allclose(tr.data(f(tr.param(x))), f(x), rtol=1e-13)
    assert tr.gradcheck(f, x) and tr.jvpcheck(f, x)


def test_at_updates_in_place_and_differentiates():
    x = np.random.default_rng(1).standard_normal((3, 4))

    def f(v, w):
        a = v * 1.0
        np.add.at(a, [0, 0, 2], w)             # repeated indices accumulate
        np.subtract.at(a, (1, 2), w[0, 0])
        np.multiply.at(a, [1], 2.0)
        np.negative.at(a, (2, slice(1, 3)))
        return a
    w = np.ones((3, 4)) * 0.5
    np.testing.assert_allclose(tr.data(f(tr.param(x), w)), f(x, w))
    np.testing.assert_allclose(tr.data(f(tr.param(x), tr.param(w))), f(x, w))
    assert tr.gradcheck(lambda v: f(v, w), x) and tr.jvpcheck(lambda v: f(v, w), x)
    assert tr.gradcheck(lambda ww: f(x + 0 * ww, ww), w)


@pytest.mark.parametrize('ufunc, b', [(np.multiply, [2.0, 3.0, 0.5, 7.0]),
                                      (np.maximum, [5.0, -3.0, 4.0, 6.0]),
                                      (np.divide, [2.0, 3.0, 0.5, 4.0]),
                                      (np.power, 1.5), (np.negative, None)])
def test_at_applies_the_ufunc_once_per_repeated_index(ufunc, b):
    # NumPy's unbuffered semantics: position (1, 2) is hit three times, (0, 0) twice
    idx = (np.array([1, 0, 1, 1]), np.array([2, 0, 2, 2]))
    if ufunc is np.negative:
        idx = (idx[0][:3], idx[1][:3])
    x = np.random.default_rng(3).uniform(0.5, 2.0, (2, 3))

    def f(v, w):
        a = v + 0.0
        if w is None:
            ufunc.at(a, idx)
        else:
            ufunc.at(a, idx, w)
        return a
    w = None if b is None else np.array(b)
    expected = x.copy()
    ufunc.at(expected, idx) if w is None else ufunc.at(expected, idx, w)
    np.testing.assert_allclose(tr.data(f(tr.param(x), w)), expected, rtol=1e-14)
    assert tr.gradcheck(lambda v: f(v, w), x) and tr.jvpcheck(lambda v: f(v, w), x)
    if w is not None and np.ndim(w):
        assert tr.gradcheck(lambda ww: f(x + 0 * ww[0], ww), w)
    loss = lambda v: np.sum(f(v, w) ** 2)
    tape = tr.GradientTape(loss, x)
    x2 = x[::-1].copy()
    np.testing.assert_allclose(tape.gradient(x2)[0], tr.gradient(loss, x2)[0], rtol=1e-12)
    np.testing.assert_allclose(tr.compile(tape, background=False).gradient(x2)[0],
                               tr.gradient(loss, x2)[0], rtol=1e-12)


def test_at_into_a_plain_array_is_refused():
    with pytest.raises(TypeError, match='bincount'):
        np.add.at(np.zeros(3), [0, 1], tr.param(np.ones(2)))


def test_methods_of_comparisons_are_plain():
    p = tr.param(np.array([1.0, 2.0, 3.0]))
    assert type(np.less.outer(p, p)) is np.ndarray
    assert type(np.equal.reduce(p > 1)) in (np.bool_, np.ndarray)


def test_running_max_on_a_tape_replays_the_new_order():
    rng = np.random.default_rng(2)
    f = lambda v: np.sum(np.maximum.accumulate(v, axis=1) ** 2) + np.logaddexp.reduce(v, None)
    tape = tr.GradientTape(f, rng.standard_normal((3, 6)))
    ctape = tr.compile(tape, background=False)
    for _ in range(3):
        x2 = rng.standard_normal((3, 6))
        np.testing.assert_allclose(tape.gradient(x2)[0], tr.gradient(f, x2)[0])
        np.testing.assert_allclose(ctape.gradient(x2)[0], tr.gradient(f, x2)[0])


def test_running_max_ties_go_to_the_latest():
    g = tr.gradient(lambda v: np.sum(np.maximum.accumulate(v)), np.array([1.0, 3.0, 3.0, 2.0]))[0]
    np.testing.assert_array_equal(g, [1.0, 1.0, 2.0, 0.0])
