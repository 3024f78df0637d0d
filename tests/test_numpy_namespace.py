"""``import tracked.numpy as np``: autograd-style programs that build arrays from lists of
tracked scalars run after changing only their import line."""
import pickle

import numpy
import pytest

import tracked as tr
import tracked.numpy as np
import tracked.numpy.random as npr


def test_numpy_names_are_numpys_own():
    for name in ('sin', 'add', 'pi', 'newaxis', 'float64', 'ndarray', 'zeros', 'arange'):
        assert getattr(np, name) is getattr(numpy, name)
    assert npr.default_rng is numpy.random.default_rng
    # functions that dispatch are NumPy's, retried with lists made arrays when NumPy
    # refuses a list of tracked values
    for fn, numpy_fn in ((np.sum, numpy.sum), (np.einsum, numpy.einsum),
                         (np.linalg.svd, numpy.linalg.svd), (np.fft.rfft, numpy.fft.rfft)):
        assert fn.__wrapped__ is numpy_fn and fn.__name__ == numpy_fn.__name__
        assert pickle.loads(pickle.dumps(fn)) is fn
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


def test_plain_input_takes_numpys_own_path():
    # the star import had bound NumPy's any, true for any generator (found by mypy):
    # r_/c_ and vectorize took their tracked path on plain input, refusing r_'s string
    # directives and running vectorize's pyfunc element by element despite signature=
    ragged = np.array([[1, 2], [3]], dtype=object)
    assert ragged.shape == (2,) and ragged[1] == [3]
    assert np.array([[1.0, 2.0], [3.0, 4.0]], order='F').flags.f_contiguous
    assert np.r_[1:3, 5].tolist() == [1, 2, 5]
    assert np.r_['0,2', [1, 2], [3, 4]].tolist() == [[1, 2], [3, 4]]
    assert np.c_['0', [1, 2], [3]].tolist() == [[1], [2], [3]]
    rows = np.vectorize(lambda v: v.sum(), signature='(n)->()')(numpy.ones((2, 3)))
    assert rows.tolist() == [3.0, 3.0]


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


def test_numpy_functions_given_lists_of_tracked_values():
    # autograd takes these through object arrays; NumPy never dispatches on the list
    a0, b0 = 0.7, 1.3
    calls = [lambda a, b: np.sum([a, b, a * b]), lambda a, b: np.prod([a, b]),
             lambda a, b: np.mean([a, b, 2.0]), lambda a, b: np.max([a, 2 * b]),
             lambda a, b: np.dot([a, b], [b, 1.0]), lambda a, b: np.linalg.norm([a, b]),
             lambda a, b: np.sum(np.where([True, False], [a, b], 0.0)),
             lambda a, b: np.sum(np.outer([a, b], [b, a])), lambda a, b: np.sum(np.diag([a, b])),
             lambda a, b: np.sum(np.reshape([a, b, a, b], (2, 2)) ** 2),
             lambda a, b: np.sum(np.cumsum([a, b])),
             lambda a, b: np.sum(np.sort([b, a]) * [1.0, 2.0]),
             lambda a, b: np.linalg.det([[a, b], [b, 2.0]]),
             lambda a, b: np.average([a, b], weights=[1.0, b]),
             lambda a, b: np.sum(np.select([numpy.array([True, False])], [[a, b]], default=b))]
    for f in calls:
        plain = f(a0, b0)
        assert numpy.isclose(tr.data(f(tr.param(a0), tr.param(b0))), plain)
        assert tr.gradcheck(f, a0, b0)
    def loss(a, b):
        return np.sum([a * b, np.max([a, b])]) + np.linalg.norm([a, b, 1.0])
    tape = tr.GradientTape(loss, a0, b0)
    numpy.testing.assert_allclose(tape.gradient(1.1, -0.4), tr.gradient(loss, 1.1, -0.4))
    # a tuple of ints holding a tracked int is a shape, not an array
    assert tr.gradient(lambda x, n: np.sum(np.reshape(np.stack([x] * 4), (n, -1))), 1.0, 2) \
        == (4.0, None)


def test_select_with_a_tracked_default():
    c = numpy.array([True, False, True])
    g = tr.gradient(lambda d: np.sum(np.select([c], [numpy.ones(3)], default=d)), 0.5)
    assert g == (1.0,)
    with pytest.raises(TypeError, match='tracked.numpy.select'):   # plain NumPy points here
        tr.gradient(lambda d: numpy.sum(numpy.select([c], [numpy.ones(3)], default=d)), 0.5)
