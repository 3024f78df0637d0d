"""Small layers, activations and losses (Flux's, in NumPy's row-major batch-first layout).

Everything here is ordinary NumPy code: it runs on plain arrays, on tracked values
(``fmap(param, model)``), inside ``gradient`` and on a recorded tape alike, and its
derivatives are those of the NumPy operations it is written with.  Layers are plain
classes whose attributes hold arrays, so ``fmap`` walks them, ``gradient(loss,
model)[0]`` mirrors them, and ``setup``/``update`` (``tracked.optimise``) find their
parameters without any registration.

Conventions: a batch is the *first* axis and features the *last* (``x`` has shape
``(batch, n_in)``), so a ``Dense`` weight is ``(n_out, n_in)`` and ``y = x @ W.T + b``;
activations and losses that work over classes use the last axis.
"""
from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ['Dense', 'Embedding', 'Chain',
           'relu', 'sigmoid', 'tanh', 'softmax', 'logsoftmax', 'logsumexp',
           'mse', 'crossentropy', 'logitcrossentropy', 'onehot']


# --------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------

def relu(x: Any) -> Any:
    """``relu(x) -> max(x, 0)`` elementwise, with derivative 0 at 0 (as in Flux and PyTorch).

    >>> import numpy as np, tracked as tr
    >>> tr.nn.relu(np.array([-1.0, 0.0, 2.0]))
    array([0., 0., 2.])
    """
    # np.where rather than np.maximum, whose rule splits the gradient of a tie (0.5 at 0).
    return np.where(x > 0, x, 0)


def sigmoid(x: Any) -> Any:
    """``sigmoid(x) -> 1 / (1 + exp(-x))`` elementwise, without overflow for large ``|x|``.

    >>> import numpy as np, tracked as tr
    >>> tr.nn.sigmoid(np.array([0.0, 1000.0, -1000.0]))
    array([0.5, 1. , 0. ])
    """
    # exp(-log(1 + exp(-x))): logaddexp never overflows, and its pullback stays finite
    # where 1 / (1 + exp(-x)) would multiply 0 by inf for very negative x.
    return np.exp(-np.logaddexp(0, -x))


def tanh(x: Any) -> Any:
    """``tanh(x)`` elementwise (``np.tanh``, listed here for use as a layer activation).

    >>> import numpy as np, tracked as tr
    >>> float(tr.nn.tanh(np.array(0.0)))
    0.0
    """
    return np.tanh(x)


def logsumexp(x: Any, axis: int | tuple[int, ...] | None = -1, keepdims: bool = False) -> Any:
    """``logsumexp(x, axis=-1) -> log(sum(exp(x), axis))``, computed without overflow.

    Reduces over the *last* axis by default (the class axis of a batch of logits);
    ``axis=None`` reduces over all elements, a tuple over several axes.

    >>> import numpy as np, tracked as tr
    >>> tr.nn.logsumexp(np.array([[1000.0, 1000.0], [1.0, 1.0]])) - np.log(2)
    array([1000.,    1.])
    """
    # Shifting by the maximum leaves the value unchanged; its gradient contribution is
    # m' * (1 - sum(softmax)) = 0, so the shift stays in the graph (no stop-gradient
    # needed, and a recorded tape recomputes it for new inputs).
    m = np.max(x, axis=axis, keepdims=True)
    y = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    if keepdims:
        return y
    shape = np.shape(x)
    axes = range(len(shape)) if axis is None else \
        [a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))]
    return np.reshape(y, tuple(n for i, n in enumerate(shape) if i not in axes))


def softmax(x: Any, axis: int | tuple[int, ...] | None = -1) -> Any:
    """``softmax(x, axis=-1) -> exp(x) / sum(exp(x), axis)``: probabilities along the last axis.

    >>> import numpy as np, tracked as tr
    >>> tr.nn.softmax(np.array([1.0, 2.0]))
    array([0.26894142, 0.73105858])
    """
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / np.sum(z, axis=axis, keepdims=True)


def logsoftmax(x: Any, axis: int | tuple[int, ...] | None = -1) -> Any:
    """``logsoftmax(x, axis=-1) -> x - logsumexp(x, axis)``: log-probabilities, stable.

    >>> import numpy as np, tracked as tr
    >>> tr.nn.logsoftmax(np.array([0.0, 0.0]))
    array([-0.69314718, -0.69314718])
    """
    return x - logsumexp(x, axis=axis, keepdims=True)


# --------------------------------------------------------------------------
# Losses: mean over the batch (Flux's default agg=mean)
# --------------------------------------------------------------------------

def mse(yhat: Any, y: Any, agg: Callable[[Any], Any] = np.mean) -> Any:
    """``mse(yhat, y) -> mean((yhat - y) ** 2)`` over all elements (``agg=np.sum`` to sum).

    ``y`` has the shape of ``yhat`` (or is a scalar): other shapes raise a ``ValueError``
    instead of broadcasting ((3, 1) against (3,) would compare every pair).

    >>> import numpy as np, tracked as tr
    >>> float(tr.nn.mse(np.array([1.0, 2.0]), np.array([1.0, 4.0])))
    2.0
    """
    shape = _shape(y)
    if shape and shape != _shape(yhat):
        raise ValueError(f'mse: y must have the shape of yhat, {_shape(yhat)} (or be a '
                         f'scalar); got {shape}. Reshape one of them: they are not '
                         f'broadcast')
    return agg((yhat - y) ** 2)


def _shape(x: Any) -> tuple[int, ...]:
    # x.shape directly: np.shape of a tracked value is a dispatched call (~1 us)
    shape = getattr(x, 'shape', None)
    return np.shape(x) if shape is None else shape


def _targets(y: Any, like: Any, who: str) -> Any:
    """``y`` as one-hot/probabilities shaped like ``like``: class labels are expanded.

    Labels are recognised by having one axis fewer than the predictions.  They are
    indices, never differentiated (``gradient(loss, model, x, labels)`` tracks integer
    arrays too, as float64).  Only shapes and the labels are checked: the predictions
    may be tracked, and their values are never read.
    """
    shape = _shape(like)
    if not shape or shape[-1] < 2:
        raise ValueError(f'{who} needs one column per class on the last axis of the '
                         f'predictions, at least 2; got shape {shape} (with one column the '
                         f'loss is constant). For two classes give two columns')
    if _shape(y) == shape:
        return y
    if _shape(y) != shape[:-1]:
        raise ValueError(f'{who}: y must be one-hot or probabilities of shape {shape} (the '
                         f'predictions), or integer class labels of shape {shape[:-1]}; got '
                         f'shape {_shape(y)}')
    labels = y if hasattr(y, 'dtype') else np.asarray(y)
    if labels.dtype.kind == 'f':
        if not np.all(labels == np.round(labels)):      # (a guard on a recorded tape)
            raise ValueError(f'targets with one axis fewer than the predictions {shape} '
                             f'are class labels and must be integers; for probabilities, '
                             f'give them the shape of the predictions')
    elif labels.dtype.kind not in 'iu':
        raise TypeError(f'class labels must be integers, got dtype {labels.dtype}')
    _check_labels(labels, shape[-1], who)
    # Compared, not read: on a recorded tape the labels stay an input, so a replay with
    # other labels uses them (reading their values would freeze the recorded ones).
    return (np.expand_dims(labels, -1) == np.arange(shape[-1])).astype(np.float64)


def _check_labels(labels: Any, n_classes: int, who: str) -> None:
    """A ``ValueError`` naming the first label outside ``[0, n_classes)``."""
    outside = (labels < 0) | (labels >= n_classes)
    # A guard on a recorded tape: np.sum of a mask compiles to a kernel, np.all does not
    if np.sum(outside):
        at = tuple(int(i) for i in np.unravel_index(np.argmax(outside), np.shape(outside)))
        raise ValueError(f'{who}: labels must be integers in [0, {n_classes}) for '
                         f'{n_classes} classes; got {labels[at]:g} at position '
                         f'{at[0] if len(at) == 1 else at}')


def crossentropy(yhat: Any, y: Any, agg: Callable[[Any], Any] = np.mean,
                 eps: float | None = None) -> Any:
    """``crossentropy(yhat, y) -> mean over the batch of -sum(y * log(yhat + eps), axis=-1)``.

    ``yhat`` holds probabilities (e.g. the output of ``softmax``) with classes on the
    last axis; ``y`` is one-hot or probabilities of the same shape, or integer class
    labels with one axis fewer (not differentiated); other shapes, labels outside
    ``[0, n_classes)`` and a single class column raise a ``ValueError``.  ``eps``
    (default: the machine epsilon of ``yhat``'s dtype, as in Flux) keeps ``log`` finite
    at 0.  Prefer ``logitcrossentropy`` on logits: it is more accurate.

    >>> import numpy as np, tracked as tr
    >>> round(float(tr.nn.crossentropy(np.array([[0.1, 0.9]]), np.array([[0.0, 1.0]]))), 6)
    0.105361
    """
    y = _targets(y, yhat, 'crossentropy')
    if eps is None:
        dt = getattr(yhat, 'dtype', np.dtype(np.float64))
        eps = np.finfo(dt if dt.kind == 'f' else np.float64).eps
    return agg(-np.sum(y * np.log(yhat + eps), axis=-1))


def logitcrossentropy(logits: Any, y: Any, agg: Callable[[Any], Any] = np.mean) -> Any:
    """``logitcrossentropy(logits, y) -> crossentropy(softmax(logits), y)``, computed stably.

    Classes are on the last axis; ``y`` is one-hot or probabilities shaped like
    ``logits``, or integer class labels with one axis fewer (checked as in
    ``crossentropy``).  The mean is over the batch.

    >>> import numpy as np, tracked as tr
    >>> round(float(tr.nn.logitcrossentropy(np.array([[0.0, 0.0]]), np.array([1]))), 6)
    0.693147
    """
    y = _targets(y, logits, 'logitcrossentropy')
    return agg(-np.sum(y * logsoftmax(logits, axis=-1), axis=-1))


def onehot(labels: npt.ArrayLike, n_classes: int,
           dtype: npt.DTypeLike = np.float64) -> npt.NDArray[Any]:
    """``onehot(labels, n) -> array of shape labels.shape + (n,)``, 1 at each label.

    >>> import numpy as np, tracked as tr
    >>> tr.nn.onehot(np.array([2, 0]), 3)
    array([[0., 0., 1.],
           [1., 0., 0.]])
    """
    labels = np.asarray(labels)
    if labels.dtype.kind not in 'iu':
        raise TypeError(f'onehot expects integer class labels, got dtype {labels.dtype}')
    _check_labels(labels, n_classes, 'onehot')
    return np.eye(n_classes, dtype=dtype)[labels]


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------

def as_rng(rng: int | np.random.Generator | None) -> np.random.Generator:
    """A NumPy ``Generator`` from a seed or a generator (the layers' ``rng=``)."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _weight(w: Any, what: str) -> Any:
    """A layer's weight as a float array (integer input becomes float64, like ``param``)."""
    if getattr(w, 'dtype', None) is not None and not isinstance(w, np.ndarray):
        return w                                  # a tracked value: keep it as it is
    w = np.asarray(w)
    if w.dtype.kind in 'iub':
        w = w.astype(np.float64)
    elif w.dtype.kind != 'f':
        raise TypeError(f'{what} must be an array of real numbers, got dtype {w.dtype}')
    return w


def function_name(f: Any) -> str:
    """How a layer prints its activation function."""
    return getattr(f, '__name__', repr(f))


class _Printer:
    """How ``print(layer)`` lists a model: ``show.summary``, registered by the package
    (``register_printer``; show.py walks ``Chain`` and the layers' state, so this module
    cannot import it)."""

    show: Callable[[Any], str] = repr


_PRINTER = _Printer()


def register_printer(show: Callable[[Any], str]) -> None:
    """Make ``show(layer)`` what ``print(layer)`` gives (called once by the package)."""
    _PRINTER.show = show


class Layer:
    """Base of the ``tr.nn`` layers: ``print(layer)`` lists it Flux's way, with parameter
    counts (tracked/show.py); ``repr`` is the one-line form.

    >>> import tracked as tr
    >>> print(tr.nn.Dense(2, 3))
    Dense(2 => 3)       # 9 parameters
    """

    def __str__(self) -> str:
        return _PRINTER.show(self)


class Dense(Layer):
    """``Dense(n_in, n_out, activation=None)``: ``y = activation(x @ weight.T + bias)``.

    Also ``Dense(weight, bias=None, activation=None)`` from existing arrays; ``weight``
    has shape ``(n_out, n_in)``, ``bias`` ``(n_out,)`` (``None`` means zeros, ``False``
    no bias).  The input has shape ``(..., n_in)``, the output ``(..., n_out)``.  New
    weights are Glorot-uniform (Flux's default) drawn from ``rng`` (a seed or a NumPy
    ``Generator``), biases zeros; ``dtype`` defaults to float64.

    >>> import numpy as np, tracked as tr
    >>> layer = tr.nn.Dense(np.array([[1.0, 2.0]]), np.array([0.5]), tr.nn.relu)
    >>> layer(np.array([[1.0, 1.0], [-1.0, -1.0]]))
    array([[3.5],
           [0. ]])
    """

    def __init__(self, *args: Any, activation: Callable[[Any], Any] | None = None,
                 bias: Any = None, rng: int | np.random.Generator | None = None,
                 dtype: npt.DTypeLike = np.float64) -> None:
        if not args:
            raise TypeError('Dense(n_in, n_out, activation=None) or '
                            'Dense(weight, bias=None, activation=None)')
        if isinstance(args[0], (int, np.integer)):
            if len(args) < 2 or not isinstance(args[1], (int, np.integer)) or len(args) > 3:
                raise TypeError(f'Dense(n_in, n_out, activation=None): got {len(args)} '
                                f'positional arguments {args!r}')
            n_in, n_out = int(args[0]), int(args[1])
            if len(args) == 3:
                activation = args[2]
            limit = np.sqrt(6.0 / (n_in + n_out))
            weight = as_rng(rng).uniform(-limit, limit, (n_out, n_in)).astype(dtype)
        else:
            if len(args) > 3:
                raise TypeError('Dense(weight, bias=None, activation=None): too many arguments')
            weight = args[0]
            rest = list(args[1:])
            if rest and callable(rest[0]) and not hasattr(rest[0], 'shape'):
                rest.insert(0, None)              # Dense(weight, activation)
            if rest:
                bias = rest[0]
            if len(rest) > 1:
                activation = rest[1]
        self.weight = _weight(weight, 'Dense weight')
        if np.ndim(self.weight) != 2:
            raise ValueError(f'Dense weight must have shape (n_out, n_in), got '
                             f'{np.shape(self.weight)}')
        n_out = np.shape(self.weight)[0]
        if bias is None or bias is True:
            bias = np.zeros(n_out, dtype=self.weight.dtype)
        if bias is False:
            self.bias = None
        else:
            self.bias = _weight(bias, 'Dense bias')
            if np.shape(self.bias) != (n_out,):
                raise ValueError(f'Dense bias must have shape ({n_out},) to match a weight '
                                 f'of shape {np.shape(self.weight)}, got {np.shape(self.bias)}')
        if activation is not None and not callable(activation):
            raise TypeError(f'Dense activation must be callable, got {activation!r}')
        self.activation = activation

    def __call__(self, x: Any) -> Any:
        n_out, n_in = self.weight.shape
        shape = _shape(x)
        if shape[-1:] != (n_in,):
            raise ValueError(f'Dense({n_in} => {n_out}) expects input of shape (..., {n_in}), '
                             f'got {shape}')
        y = x @ self.weight.T
        if self.bias is not None:
            y = y + self.bias
        return y if self.activation is None else self.activation(y)

    def __repr__(self) -> str:
        if np.ndim(self.weight) != 2:                # e.g. a gradient tree with None
            return f'Dense(weight={self.weight!r}, bias={self.bias!r})'
        n_out, n_in = np.shape(self.weight)
        extra = '' if self.activation is None else f', {function_name(self.activation)}'
        nobias = '' if self.bias is not None else ', bias=False'
        return f'Dense({n_in} => {n_out}{extra}{nobias})'


class Embedding(Layer):
    """``Embedding(n_vocab, dim)`` or ``Embedding(weight)``: a lookup table of rows.

    ``weight`` has shape ``(n_vocab, dim)``; ``m(i)`` is row ``i`` (0-based) and an
    integer array of indices gives a stack of rows (shape ``i.shape + (dim,)``).  New
    weights are standard normal (Flux's default), drawn from ``rng``.

    >>> import numpy as np, tracked as tr
    >>> m = tr.nn.Embedding(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    >>> m(0), m(np.array([2, 0]))
    (array([1., 2.]), array([[5., 6.],
           [1., 2.]]))
    """

    def __init__(self, *args: Any, rng: int | np.random.Generator | None = None,
                 dtype: npt.DTypeLike = np.float64) -> None:
        if len(args) == 2 and all(isinstance(a, (int, np.integer)) for a in args):
            self.weight = as_rng(rng).standard_normal((int(args[0]), int(args[1]))).astype(dtype)
        elif len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            self.weight = _weight(args[0], 'Embedding weight')
            if np.ndim(self.weight) != 2:
                raise ValueError(f'Embedding weight must have shape (n_vocab, dim), got '
                                 f'{np.shape(self.weight)}')
        else:
            raise TypeError(f'Embedding(n_vocab, dim) or Embedding(weight), got {args!r}')

    def __call__(self, i: Any) -> Any:          # an integer, or an integer array
        idx = np.asarray(i)
        if idx.dtype.kind not in 'iu':
            raise TypeError(f'Embedding expects integer indices, got dtype {idx.dtype}')
        n = np.shape(self.weight)[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f'Embedding index out of range: the vocabulary has {n} rows '
                             f'(0..{n - 1}), got indices from {idx.min()} to {idx.max()}')
        return self.weight[i if idx.ndim == 0 else idx]

    def __repr__(self) -> str:
        if np.ndim(self.weight) != 2:
            return f'Embedding(weight={self.weight!r})'
        n, d = np.shape(self.weight)
        return f'Embedding({n} => {d})'


class Chain(Layer):
    """``Chain(*layers)``: call the layers in order, ``Chain(f, g)(x) == g(f(x))``.

    Any callable can be a layer (``softmax``, a lambda); ``.layers`` is the tuple of
    layers, and a chain supports ``len``, iteration and indexing (a slice is a Chain).

    >>> import numpy as np, tracked as tr
    >>> m = tr.nn.Chain(tr.nn.Dense(np.eye(2)), tr.nn.softmax)
    >>> m(np.array([0.0, 0.0]))
    array([0.5, 0.5])
    """

    def __init__(self, *layers: Callable[..., Any]) -> None:
        for layer in layers:
            if not callable(layer):
                raise TypeError(f'Chain layers must be callable, got {layer!r}')
        self.layers = tuple(layers)

    def __call__(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Callable[..., Any]]:
        return iter(self.layers)

    def __getitem__(self, i: int | slice) -> Any:
        return Chain(*self.layers[i]) if isinstance(i, slice) else self.layers[i]

    def __repr__(self) -> str:
        inner = ', '.join(function_name(layer) if isinstance(layer, FUNCTION_TYPES)
                          else repr(layer) for layer in self.layers)
        return f'Chain({inner})'


FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, np.ufunc)
