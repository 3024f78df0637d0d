"""``import tracked.numpy as np``: autograd-style programs that build arrays from lists of
tracked scalars run after changing only their import line."""
import numpy
import pytest

import tracked as tr
import tracked.numpy as np
import tracked.numpy.random as npr


def test_numpy_names_are_numpys_own():
    for name in ('sin', 'sum', 'pi', 'newaxis', 'float64', 'einsum'):
        assert getattr(np, name) is getattr(numpy, name)
    assert npr.default_rng is numpy.random.default_rng
    assert np.linalg.svd is numpy.linalg.svd and np.fft.rfft is numpy.fft.rfft
    assert np.linalg.__name__ == 'tracked.numpy.linalg'       # whatever was imported first
    assert 'array' in dir(np) and 'sin' in dir(np)


def test_array_of_tracked_scalars_and_nested_lists():
    f = lambda x, y: np.sum(np.array([[x, y], [x * y, 1.0]]) ** 2)      # noqa: E731
    g = tr.gradient(f, 1.0, 2.0)
    assert g == (pytest.approx(2 * 1.0 + 2 * 1.0 * 4.0), pytest.approx(2 * 2.0 + 2 * 2.0))
    assert tr.gradcheck(lambda v: f(v[0], v[1]), numpy.array([0.7, -1.3]))
    assert np.array([1.0, 2.0]).dtype == numpy.float64          # plain input: plain NumPy
    t = tr.param(2.0)
    assert np.asarray(t) is t                                    # asarray keeps it tracked
    assert np.array([t, 1.0], dtype=numpy.float32).dtype == numpy.float32
    assert np.array(t, ndmin=2).shape == (1, 1)


def test_plain_numpy_refuses_with_a_pointer_here():
    with pytest.raises(TypeError, match='tracked.numpy'):
        tr.gradient(lambda a: numpy.sum(numpy.array([a, a])), 1.0)


def test_r_c_stack_full_vectorize():
    assert tr.gradient(lambda a: np.sum(np.r_[a, 1.0, np.array([a, a])] * 2), 2.0) == (6.0,)
    assert tr.gradient(lambda a: np.sum(np.c_[np.array([a, 1.0]), np.array([2.0, a])]), 2.0) \
        == (2.0,)
    assert tr.gradient(lambda a: np.sum(np.concatenate([[a, 1.0], [a * a]])), 3.0) == (7.0,)
    assert tr.gradient(lambda a: np.sum(np.stack([[a, a], [1.0, a]])), 3.0) == (3.0,)
    assert tr.gradient(lambda a: np.sum(np.full(3, a)), 2.0) == (3.0,)
    assert tr.gradient(lambda a: np.sum(np.full_like(numpy.zeros(2), a)), 2.0) == (2.0,)
    sq = np.vectorize(lambda v: v ** 2 if v > 0 else -v)
    numpy.testing.assert_allclose(tr.gradient(lambda x: np.sum(sq(x)),
                                              numpy.array([1.0, -2.0, 3.0]))[0], [2.0, -1.0, 6.0])
    numpy.testing.assert_allclose(sq(numpy.array([1.0, -2.0])), [1.0, 2.0])


def test_an_autograd_program_runs_after_changing_its_import():
    # autograd's examples/tanh.py and a logistic regression in autograd's style:
    # arrays built from lists of scalars, np.dot, elementwise functions
    def tanh(x):
        y = np.exp(-2.0 * x)
        return (1.0 - y) / (1.0 + y)

    d = lambda f: (lambda x: tr.gradient(f, x)[0])      # noqa: E731
    x = 0.7
    assert d(tanh)(x) == pytest.approx(1 - numpy.tanh(x) ** 2)
    assert d(d(tanh))(x) == pytest.approx(-2 * numpy.tanh(x) * (1 - numpy.tanh(x) ** 2))

    def logistic_predictions(weights, inputs):
        return 0.5 * (np.tanh(np.dot(inputs, weights)) + 1)

    def training_loss(w0, w1, w2):
        weights = np.array([w0, w1, w2])                 # a list of tracked scalars
        inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15],
                           [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
        targets = np.array([True, True, False, True])
        preds = logistic_predictions(weights, inputs)
        label_probabilities = preds * targets + (1 - preds) * (1 - targets)
        return -np.sum(np.log(label_probabilities))
    w = (0.1, -0.2, 0.3)
    g = tr.gradient(training_loss, *w)
    fd = tr.gradient(training_loss, tr.AutoFiniteDifferences(), *w)
    numpy.testing.assert_allclose(g, fd, rtol=1e-6)
    tape = tr.GradientTape(training_loss, *w)
    numpy.testing.assert_allclose(tape.gradient(0.2, 0.1, -0.4),
                                  tr.gradient(training_loss, 0.2, 0.1, -0.4), rtol=1e-12)


def test_nested_and_forward_mode():
    f = lambda x: np.sum(np.array([x[0] * x[1], x[1] ** 2]))     # noqa: E731
    x = numpy.array([1.0, 2.0])
    numpy.testing.assert_allclose(tr.hessian(f, x), [[0.0, 1.0], [1.0, 2.0]])
    numpy.testing.assert_allclose(tr.jvp(f, (x,), (numpy.array([1.0, 0.0]),))[1], 2.0)
