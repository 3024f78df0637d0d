"""tracked.nn: layer layouts, activations and losses against reference formulas and
finite differences (every layer and loss through tr.gradcheck, to order 2)."""
import numpy as np
import pytest

import tracked as tr
from tracked import nn

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))
Y1 = nn.onehot(np.array([0, 3, 4, 3]), 5)
LABELS = np.array([0, 3, 4, 3])


# --------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------

def test_activation_values():
    x = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_array_equal(nn.relu(x), [0.0, 0.0, 3.0])
    np.testing.assert_allclose(nn.sigmoid(x), 1 / (1 + np.exp(-x)), rtol=1e-15)
    np.testing.assert_allclose(nn.tanh(x), np.tanh(x))
    p = nn.softmax(X)
    np.testing.assert_allclose(p, np.exp(X) / np.exp(X).sum(-1, keepdims=True), rtol=1e-14)
    np.testing.assert_allclose(p.sum(-1), 1.0)
    np.testing.assert_allclose(nn.logsoftmax(X), np.log(p), rtol=1e-13)
    np.testing.assert_allclose(nn.logsumexp(X), np.log(np.exp(X).sum(-1)), rtol=1e-14)


def test_relu_derivative_at_zero_is_zero():
    g = tr.gradient(lambda x: np.sum(nn.relu(x)), np.array([-1.0, 0.0, 2.0]))[0]
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])
    assert nn.relu(np.array([1, -2])).tolist() == [1, 0]


def test_activations_are_stable_for_large_inputs():
    big = np.array([[1000.0, 1000.0, -1000.0], [-1000.0, 0.0, 1000.0]])
    with np.errstate(over='raise', invalid='raise', divide='raise'):
        np.testing.assert_allclose(nn.softmax(big), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
        np.testing.assert_allclose(nn.logsumexp(big), [1000 + np.log(2), 1000.0])
        np.testing.assert_allclose(nn.logsoftmax(big)[1], [-2000.0, -1000.0, 0.0])
    np.testing.assert_array_equal(nn.sigmoid(np.array([-1000.0, 1000.0])), [0.0, 1.0])
    # the sigmoid's gradient stays finite where exp(-x) overflows
    g = tr.gradient(lambda x: np.sum(nn.sigmoid(x)), np.array([-1000.0, 0.0, 1000.0]))[0]
    np.testing.assert_allclose(g, [0.0, 0.25, 0.0])


def test_axis_arguments():
    np.testing.assert_allclose(nn.softmax(X, axis=0).sum(0), 1.0)
    np.testing.assert_allclose(nn.logsumexp(X, axis=0), np.log(np.exp(X).sum(0)))
    np.testing.assert_allclose(nn.logsumexp(X, axis=None), np.log(np.exp(X).sum()))
    assert nn.logsumexp(X, keepdims=True).shape == (4, 1)
    x3 = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(nn.logsumexp(x3, axis=(0, 2)), np.log(np.exp(x3).sum((0, 2))))
    np.testing.assert_allclose(nn.logsoftmax(x3, axis=1), np.log(nn.softmax(x3, axis=1)))


@pytest.mark.parametrize('f', [nn.relu, nn.sigmoid, nn.tanh, nn.softmax, nn.logsoftmax,
                               nn.logsumexp, lambda x: nn.logsumexp(x, axis=None),
                               lambda x: nn.softmax(x, axis=0)],
                         ids=['relu', 'sigmoid', 'tanh', 'softmax', 'logsoftmax', 'logsumexp',
                              'logsumexp_all', 'softmax_axis0'])
def test_activation_gradients(f):
    assert tr.gradcheck(lambda x: np.sum(np.sin(f(x))), X)


def test_float32_preserved():
    x = X.astype(np.float32)
    for f in (nn.relu, nn.sigmoid, nn.tanh, nn.softmax, nn.logsoftmax, nn.logsumexp):
        assert f(x).dtype == np.float32, f
    assert nn.logitcrossentropy(x, Y1.astype(np.float32)).dtype == np.float32
    layer = nn.Dense(5, 3, dtype=np.float32, rng=0)
    assert layer.weight.dtype == layer.bias.dtype == np.float32
    assert layer(x).dtype == np.float32


# --------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------

def test_loss_values():
    yhat = nn.softmax(X)
    expected = -np.mean(np.sum(Y1 * np.log(yhat), axis=-1))
    np.testing.assert_allclose(nn.logitcrossentropy(X, Y1), expected, rtol=1e-13)
    np.testing.assert_allclose(nn.crossentropy(yhat, Y1), expected, rtol=1e-12)
    np.testing.assert_allclose(nn.mse(X, Y1), np.mean((X - Y1) ** 2))
    np.testing.assert_allclose(nn.mse(X, Y1, agg=np.sum), np.sum((X - Y1) ** 2))
    np.testing.assert_allclose(nn.logitcrossentropy(X, Y1, agg=np.sum), 4 * expected)
    # Flux's examples: crossentropy([0.1, 0.9], [0, 1]) = -log(0.9)
    np.testing.assert_allclose(nn.crossentropy(np.array([0.1, 0.9]), np.array([0.0, 1.0])),
                               -np.log(0.9), rtol=1e-12)
    # a zero probability on a class with zero target gives no nan
    assert np.isfinite(nn.crossentropy(np.array([[0.0, 1.0]]), np.array([[0.0, 1.0]])))


def test_integer_labels_mean_one_hot():
    np.testing.assert_allclose(nn.logitcrossentropy(X, LABELS), nn.logitcrossentropy(X, Y1))
    np.testing.assert_allclose(nn.crossentropy(nn.softmax(X), LABELS),
                               nn.crossentropy(nn.softmax(X), Y1))


def test_probability_targets():
    y = nn.softmax(RNG.standard_normal((4, 5)))
    expected = -np.mean(np.sum(y * nn.logsoftmax(X), axis=-1))
    np.testing.assert_allclose(nn.logitcrossentropy(X, y), expected)


@pytest.mark.parametrize('name', ['mse', 'crossentropy', 'logitcrossentropy', 'labels'])
def test_loss_gradients(name):
    f = {'mse': lambda x: nn.mse(x, Y1),
         'crossentropy': lambda x: nn.crossentropy(nn.softmax(x), Y1),
         'logitcrossentropy': lambda x: nn.logitcrossentropy(x, Y1),
         'labels': lambda x: nn.logitcrossentropy(x, LABELS)}[name]
    assert tr.gradcheck(f, X)
    # with respect to the targets too
    if name != 'labels':
        probs = nn.softmax(RNG.standard_normal((4, 5)))
        assert tr.gradcheck(lambda y: {'mse': nn.mse, 'crossentropy': nn.crossentropy,
                                       'logitcrossentropy': nn.logitcrossentropy}[name](
            nn.softmax(X) if name == 'crossentropy' else X, y), probs)


def test_logitcrossentropy_gradient_is_softmax_minus_target():
    g = tr.gradient(lambda x: nn.logitcrossentropy(x, Y1), X)[0]
    np.testing.assert_allclose(g, (nn.softmax(X) - Y1) / len(X), atol=1e-15)


def test_onehot():
    np.testing.assert_array_equal(nn.onehot(np.array([1, 0]), 3), [[0, 1, 0], [1, 0, 0]])
    assert nn.onehot(2, 4).tolist() == [0, 0, 1, 0]
    with pytest.raises(ValueError, match=r'in \[0, 3\) for 3 classes; got 3 at position 0'):
        nn.onehot(np.array([3]), 3)
    with pytest.raises(TypeError, match='integer'):
        nn.onehot(np.array([0.5]), 3)


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------

def test_dense_layout_and_constructors():
    layer = nn.Dense(5, 3, rng=1)
    assert layer.weight.shape == (3, 5) and layer.bias.shape == (3,)
    assert layer.weight.dtype == np.float64
    np.testing.assert_array_equal(layer.bias, 0.0)
    limit = np.sqrt(6 / 8)
    assert np.all(np.abs(layer.weight) <= limit)
    np.testing.assert_array_equal(nn.Dense(5, 3, rng=1).weight, layer.weight)   # seeded
    np.testing.assert_allclose(layer(X), X @ layer.weight.T)
    assert layer(X[0]).shape == (3,)
    assert layer(RNG.standard_normal((2, 4, 5))).shape == (2, 4, 3)

    W, b = RNG.standard_normal((3, 5)), RNG.standard_normal(3)
    for m in (nn.Dense(W, b, np.tanh), nn.Dense(W, b, activation=np.tanh),
              nn.Dense(W, bias=b, activation=np.tanh)):
        np.testing.assert_allclose(m(X), np.tanh(X @ W.T + b))
    m = nn.Dense(W, np.tanh)                                   # Dense(weight, activation)
    np.testing.assert_allclose(m(X), np.tanh(X @ W.T))
    assert m.bias.shape == (3,)
    m = nn.Dense(W, False)
    assert m.bias is None
    np.testing.assert_allclose(m(X), X @ W.T)
    assert nn.Dense(5, 3, nn.relu).activation is nn.relu
    assert nn.Dense(np.array([[1, 2]])).weight.dtype == np.float64    # ints become float
    assert repr(nn.Dense(5, 3, nn.relu)) == 'Dense(5 => 3, relu)'


def test_dense_errors():
    with pytest.raises(ValueError, match=r'\(\.\.\., 5\)'):
        nn.Dense(5, 3)(np.ones((2, 4)))
    with pytest.raises(ValueError, match='bias'):
        nn.Dense(np.ones((3, 5)), np.ones(4))
    with pytest.raises(ValueError, match='n_out, n_in'):
        nn.Dense(np.ones(3))
    with pytest.raises(TypeError, match='callable'):
        nn.Dense(5, 3, 'relu')
    with pytest.raises(TypeError):
        nn.Dense(5)


def test_dense_gradients():
    W, b = RNG.standard_normal((3, 5)), RNG.standard_normal(3)
    assert tr.gradcheck(lambda W, b, x: np.sum(nn.Dense(W, b, nn.tanh)(x) ** 2), W, b, X)
    assert tr.gradcheck(lambda W, x: np.sum(nn.Dense(W, False, nn.sigmoid)(x)), W, X)


def test_embedding():
    W = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    m = nn.Embedding(W)
    np.testing.assert_array_equal(m(0), [1.0, 2.0])
    np.testing.assert_array_equal(m(np.int64(2)), [5.0, 6.0])
    np.testing.assert_array_equal(m(np.array([2, 0, 2])), W[[2, 0, 2]])
    assert m(np.array([[0, 1], [2, 2]])).shape == (2, 2, 2)
    e = nn.Embedding(10, 4, rng=0)
    assert e.weight.shape == (10, 4)
    np.testing.assert_array_equal(nn.Embedding(10, 4, rng=0).weight, e.weight)
    assert nn.Embedding([[1, 2], [3, 4]]).weight.dtype == np.float64
    with pytest.raises(IndexError, match='3 rows'):
        m(3)
    with pytest.raises(IndexError):
        m(np.array([-1]))
    with pytest.raises(TypeError, match='integer'):
        m(np.array([0.5]))
    with pytest.raises(TypeError):
        nn.Embedding(3)


def test_embedding_gradients():
    E = RNG.standard_normal((6, 3))
    idx = np.array([1, 1, 4])
    assert tr.gradcheck(lambda E: np.sum(nn.Embedding(E)(idx) ** 3), E)
    g = tr.gradient(lambda E: np.sum(nn.Embedding(E)(idx)), E)[0]
    np.testing.assert_array_equal(g[:, 0], [0, 2, 0, 0, 1, 0])    # repeated rows accumulate


def test_gradient_zoo_embedding_softmax():
    # Flux's "gradient zoo": Embedding then softmax, loss sum(m(0) .^ 2)
    model = nn.Chain(nn.Embedding(np.array([[1, 2], [3, 4], [5, 6]])), nn.softmax)
    val, (g,) = tr.withgradient(lambda m: np.sum(m(0) ** 2), model)
    assert val == pytest.approx(0.6067761335170363, rel=1e-15)
    np.testing.assert_allclose(g.layers[0].weight,
                               [[-0.18171549534589682, 0.18171549534589682], [0, 0], [0, 0]],
                               rtol=1e-14)
    assert g.layers[1] is None


def test_chain():
    d1, d2 = nn.Dense(5, 4, nn.relu, rng=0), nn.Dense(4, 2, rng=1)
    m = nn.Chain(d1, d2, nn.softmax)
    assert m.layers == (d1, d2, nn.softmax)
    assert len(m) == 3 and m[0] is d1 and list(m) == [d1, d2, nn.softmax]
    np.testing.assert_allclose(m(X), nn.softmax(d2(d1(X))))
    np.testing.assert_allclose(m[:2](X), d2(d1(X)))
    assert nn.Chain()(X) is X
    assert nn.Chain(lambda x: 2 * x)(1.0) == 2.0
    assert repr(m) == 'Chain(Dense(5 => 4, relu), Dense(4 => 2), softmax)'
    with pytest.raises(TypeError, match='callable'):
        nn.Chain(d1, 3)


def test_model_gradient_mirrors_structure():
    m = nn.Chain(nn.Dense(5, 4, nn.tanh, rng=0), nn.Dense(4, 5, rng=1))
    g = tr.gradient(lambda m: nn.logitcrossentropy(m(X), Y1), m)[0]
    assert type(g) is nn.Chain and type(g.layers[0]) is nn.Dense
    assert g.layers[0].weight.shape == (4, 5) and g.layers[1].bias.shape == (5,)
    assert g.layers[0].activation is None
    # the same numbers through the Tracker-style workflow
    tm = tr.fmap(tr.param, m)
    tr.back(nn.logitcrossentropy(tm(X), Y1))
    np.testing.assert_allclose(tr.grad(tm).layers[0].weight, g.layers[0].weight, rtol=1e-13)
    np.testing.assert_allclose(tm.layers[1].bias.grad, g.layers[1].bias, rtol=1e-13)


def test_model_gradcheck_through_flat_parameters():
    m = nn.Chain(nn.Dense(5, 4, nn.tanh, rng=0), nn.Dense(4, 5, nn.sigmoid, rng=1), nn.softmax)
    shapes = [(4, 5), (4,), (5, 4), (5,)]

    def loss(theta):
        parts, i = [], 0
        for s in shapes:
            n = int(np.prod(s))
            parts.append(np.reshape(theta[i:i + n], s))
            i += n
        model = nn.Chain(nn.Dense(parts[0], parts[1], nn.tanh),
                         nn.Dense(parts[2], parts[3], nn.sigmoid), nn.softmax)
        return nn.crossentropy(model(X), Y1)
    theta = np.concatenate([m.layers[0].weight.ravel(), m.layers[0].bias,
                            m.layers[1].weight.ravel(), m.layers[1].bias])
    assert tr.gradcheck(loss, theta)


class TiedLM:
    """An embedding whose table is reused, transposed, as the output layer."""

    def __init__(self, n_vocab, dim):
        self.embed = nn.Embedding(n_vocab, dim, rng=0)
        self.head = nn.Dense(self.embed.weight)          # weight (n_vocab, dim): same array

    def __call__(self, idx):
        return nn.logsoftmax(self.head(np.tanh(self.embed(idx))))


def test_tied_weights():
    model = TiedLM(4, 3)
    assert model.head.weight is model.embed.weight
    idx = np.array([0, 2])
    g = tr.gradient(lambda m: np.sum(m(idx)[:, 1]), model)[0]

    def f(W):
        h = np.tanh(nn.Embedding(W)(idx))
        return np.sum(nn.logsoftmax(nn.Dense(W, model.head.bias)(h))[:, 1])
    total = tr.gradient(f, model.embed.weight)[0]
    np.testing.assert_allclose(g.embed.weight, total, rtol=1e-12)
    np.testing.assert_allclose(g.head.weight, total, rtol=1e-12)
    assert tr.gradcheck(f, model.embed.weight)


def test_labels_through_gradient_are_not_differentiated():
    # gradient(loss, model, x, labels) tracks integer arrays too (as float64)
    m = nn.Dense(5, 5, rng=0)
    g_labels = tr.gradient(lambda m, x, y: nn.logitcrossentropy(m(x), y), m, X, LABELS)
    g_onehot = tr.gradient(lambda m, x, y: nn.logitcrossentropy(m(x), y), m, X, Y1)
    np.testing.assert_allclose(g_labels[0].weight, g_onehot[0].weight, rtol=1e-14)
    assert g_labels[2] is None or not np.any(g_labels[2])
    np.testing.assert_allclose(nn.logitcrossentropy(X, LABELS.astype(float)),
                               nn.logitcrossentropy(X, Y1))
    with pytest.raises(ValueError, match='class labels'):
        nn.logitcrossentropy(X, np.array([0.5, 1, 2, 3]))
    with pytest.raises(TypeError, match='integers'):
        nn.logitcrossentropy(X, np.array(['a', 'b', 'c', 'd']))


# --------------------------------------------------------------------------
# The losses refuse what they cannot mean (issue 23): never a silent broadcast
# --------------------------------------------------------------------------

LOGITS = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0]])


@pytest.mark.parametrize('loss', [nn.logitcrossentropy,
                                  lambda p, y: nn.crossentropy(nn.softmax(p), y)],
                         ids=['logitcrossentropy', 'crossentropy'])
@pytest.mark.parametrize('labels, message', [
    ([0, 5, 1], r'labels must be integers in \[0, 2\) for 2 classes; got 5 at position 1'),
    ([0, -1, 1], r'in \[0, 2\) for 2 classes; got -1 at position 1'),   # was dropped too
    ([0.0, 1.0, 2.0], r'got 2 at position 2'),
    ([[0, 1, 1]], r'integer class labels of shape \(3,\); got shape \(1, 3\)'),
    ([0, 1], r'got shape \(2,\)'),
    (np.ones((3, 3)), r'probabilities of shape \(3, 2\)'),
])
def test_losses_refuse_labels_and_targets_they_cannot_mean(loss, labels, message):
    with pytest.raises(ValueError, match=message):
        loss(LOGITS, np.array(labels))
    with pytest.raises(ValueError, match=message):                # while differentiated
        tr.gradient(lambda x: loss(x, np.array(labels)), LOGITS)


def test_out_of_range_labels_of_issue_23():
    with pytest.raises(ValueError, match=r'got 5 at position 1'):
        nn.logitcrossentropy(LOGITS, np.array([0, 5, 1]))       # was 0.52 (one sample dropped)
    with pytest.raises(ValueError, match=r'got 5 at position 1'):
        nn.onehot(np.array([0, 5, 1]), 2)
    with pytest.raises(ValueError, match=r'got 3 at position \(1, 1\)'):
        nn.logitcrossentropy(np.zeros((2, 2, 3)), np.array([[0, 1], [2, 3]]))


@pytest.mark.parametrize('loss', [nn.logitcrossentropy, nn.crossentropy])
def test_one_column_of_predictions_is_refused(loss):
    with pytest.raises(ValueError, match=r'one column per class.*at least 2; got shape \(3, 1\)'):
        loss(LOGITS[:, :1], np.array([0, 1, 1]))                # was 0.0, gradient 0
    with pytest.raises(ValueError, match='one column per class'):
        loss(LOGITS[:, :1], np.array([[0.0], [1.0], [1.0]]))


def test_mse_refuses_shapes_it_would_broadcast():
    with pytest.raises(ValueError, match=r'shape of yhat, \(3, 1\).*got \(3,\)'):
        nn.mse(np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 2.0, 3.0]))   # was 1.333
    with pytest.raises(ValueError, match='not broadcast'):
        tr.gradient(lambda p: nn.mse(p, np.ones(3)), np.ones((3, 1)))
    assert nn.mse(np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [2.0], [3.0]])) == 0.0
    assert nn.mse(np.array([1.0, 3.0]), 2.0) == 1.0             # a scalar target is fine


def test_checked_losses_still_differentiate():
    labels = np.array([0, 1, 1])
    for f in (lambda x: nn.logitcrossentropy(x, labels), lambda x: nn.mse(x, LOGITS * 2),
              lambda x: nn.crossentropy(nn.softmax(x), labels)):
        assert tr.gradcheck(f, LOGITS)
    # labels as a differentiated argument (tracked float64), and on a recorded tape
    g = tr.gradient(lambda x, y: nn.logitcrossentropy(x, y), LOGITS, labels)
    np.testing.assert_allclose(g[0], tr.gradient(lambda x: nn.logitcrossentropy(x, labels),
                                                 LOGITS)[0])
    with pytest.raises(ValueError, match='got 2 at position 0'):
        tr.gradient(lambda x, y: nn.logitcrossentropy(x, y), LOGITS, np.array([2, 0, 1]))
    tape = tr.GradientTape(lambda x, y: nn.logitcrossentropy(x, y), LOGITS, labels, wrt=(0,))
    other = np.array([1, 0, 0])
    np.testing.assert_allclose(tape.gradient(LOGITS, other)[0],
                               tr.gradient(lambda x: nn.logitcrossentropy(x, other), LOGITS)[0])
    with pytest.raises(tr.TapeGuardError):
        tape.gradient(LOGITS, np.array([0, 5, 1]))


def test_doctests():
    import doctest
    result = doctest.testmod(nn, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
