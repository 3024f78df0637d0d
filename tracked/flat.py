"""A model's parameters as one flat vector: ``destructure``, ``nparams``, ``trainable``.

The parameters of a model are its *trainable* arrays: the arrays of floating-point
(or complex) numbers the tree protocol (tracked/tree_util.py) reaches, an array that
occurs twice counted once.  Integer and boolean arrays, numbers (a layer's ``eps``;
0-d arrays too), strings, functions and ``@tr.leaf`` objects (so the running statistics of
``BatchNorm``, kept in a ``@tr.leaf`` state) are not parameters: ``destructure``'s
``re`` puts them back as they are, ``nparams`` does not count them, and
``tr.Duplicated`` stores no gradient for them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .arguments import trainable
from .tree_util import TreeDef, flatten, unflatten
from .boxes import Tracked

__all__ = ['trainable', 'destructure', 'Restructure', 'nparams']


def nparams(tree: Any) -> int:
    """``nparams(tree)``: the number of parameters (elements of trainable arrays) in a
    tree; an array that occurs twice (tied weights) is counted once.

    >>> import numpy as np, tracked as tr
    >>> tr.nparams(tr.nn.Dense(784, 32))
    25120
    >>> w = np.ones((3, 2))
    >>> tr.nparams({'enc': w, 'dec': w, 'steps': np.arange(5), 'eps': 1e-5})
    6
    """
    return sum(int(np.size(a)) for a in flatten(tree, trainable)[0])


def destructure(model: Any) -> tuple[np.ndarray, Restructure]:
    """``flat, re = destructure(model)``: one vector of every trainable array of
    ``model`` (in the order the tree is walked; a tied array once), and ``re``, which
    rebuilds a model of the same types from such a vector (``Flux.destructure``).

    ``flat`` has the arrays' common dtype (a float32 model gives a float32 vector).
    ``re(v)`` takes a plain or a tracked vector of the same length: each array of the
    result is a copy of its piece of ``v`` (a tracked piece when ``v`` is tracked, so
    ``gradient(lambda v: loss(re(v)), flat)`` works, nests and records on a tape);
    everything that is not a parameter is the original's own.

    >>> import numpy as np, tracked as tr
    >>> model = tr.nn.Dense(np.array([[1.0, 2.0]]), np.array([0.5]))
    >>> flat, re = tr.destructure(model)
    >>> flat
    array([1. , 2. , 0.5])
    >>> re(np.zeros(3)).weight, model.weight
    (array([[0., 0.]]), array([[1., 2.]]))
    >>> tr.gradient(lambda v: np.sum(re(v)(np.array([3.0, 4.0]))), flat)
    (array([3., 4., 1.]),)
    """
    arrays, treedef = flatten(model, trainable)
    if arrays:
        flat = np.concatenate([np.ravel(a) for a in arrays])
    else:
        flat = np.zeros(0)
    return flat, Restructure(treedef, [(np.shape(a), a.dtype) for a in arrays],
                             type(model).__name__)


class Restructure:
    """``re(v)``: the model ``destructure`` took apart, holding the values of vector
    ``v`` (see ``destructure``); ``re.length`` is the length ``v`` must have.

    >>> import numpy as np, tracked as tr
    >>> _, re = tr.destructure({'w': np.ones((2, 2)), 'b': np.zeros(2)})
    >>> re
    Restructure(dict, 6 parameters)
    >>> re(np.arange(6.0))
    {'w': array([[0., 1.],
           [2., 3.]]), 'b': array([4., 5.])}
    >>> re(np.ones(5))
    Traceback (most recent call last):
    ...
    ValueError: re(v): v has length 5; the model has 6 parameters, so v must be a vector of length 6
    """

    def __init__(self, treedef: TreeDef, specs: list[tuple[tuple[int, ...], np.dtype]],
                 name: str = 'model') -> None:
        self.treedef = treedef
        self.name = name
        self.specs = specs                       # (shape, dtype) of each array
        self.offsets = np.cumsum([0] + [int(np.prod(s, dtype=np.int64)) for s, _ in specs])
        self.length = int(self.offsets[-1])

    def __call__(self, v: Any) -> Any:      # a vector: array-like or tracked
        shape = np.shape(v)
        if len(shape) != 1 or shape[0] != self.length:
            given = f'length {shape[0]}' if len(shape) == 1 else f'shape {shape}'
            raise ValueError(f're(v): v has {given}; the model has {self.length} parameters, '
                             f'so v must be a vector of length {self.length}')
        tracked = isinstance(v, Tracked)
        if not tracked:
            v = np.asarray(v)
        pieces = []
        for (shape, dtype), lo, hi in zip(self.specs, self.offsets[:-1], self.offsets[1:]):
            piece = v[lo:hi]
            if tracked:
                piece = piece.reshape(shape)
                if piece.dtype != dtype:
                    piece = piece.astype(dtype)
            else:
                # A copy: an optimiser (scipy.optimize) may reuse the vector it passed.
                piece = np.array(piece, dtype=dtype).reshape(shape)
            pieces.append(piece)
        return unflatten(self.treedef, pieces)

    def __repr__(self) -> str:
        return f'Restructure({self.name}, {self.length:_} parameters)'
