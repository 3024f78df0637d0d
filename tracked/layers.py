"""Layers with state or a train/test mode: ``BatchNorm``, ``LayerNorm``, ``Dropout``,
and ``trainmode``/``testmode``, which switch every such layer of a tree (Flux's
``trainmode!``/``testmode!``).

Like tracked/nn.py's layers, these are plain classes of NumPy code: they run on plain
arrays, tracked values (reverse and forward mode, nested) and recorded tapes alike,
and their parameters (``scale``, ``bias``) are found by every tree walk.

Mode.  ``BatchNorm`` and ``Dropout`` behave differently in training (batch
statistics; random masks) and in testing (running statistics; the identity).  Their
``active`` attribute is None by default: *automatic*, training exactly when the call is
being differentiated (Flux's ``within_gradient``): inside the function that
``tr.gradient``, ``pullback``, ``jacobian``, ... differentiate or a tape records (so a
``Dropout`` on the model's plain input trains too), or on tracked values
(``tr.param``'s).  ``trainmode``/``testmode`` set it to True/False, and
``trainmode(model, 'auto')`` back to automatic.

State.  ``BatchNorm``'s running mean and variance live in a ``State``, a ``@tr.leaf``
object: no tree walk enters it, so they are not parameters (no gradient, not in
``destructure``, not counted by ``nparams``), and every copy of the model made by a
walk (``fmap``, the tracked copy inside ``tr.gradient``, ``destructure``'s ``re``)
shares it, so a training step updates the user's model.  The update uses plain
values only, after the batch statistics are computed: it is outside the
differentiated computation and never stores a tracked value.

Recorded tapes.  Test mode replays correctly: the running statistics are read by a
non-differentiable instruction that a replay re-runs, so a compiled tape sees them as
they are at each call.  Training mode is refused while a tape records (a replay would
neither update the statistics nor draw new dropout masks); ``BatchNorm(n,
track_stats=False)`` (batch statistics only, in both modes) records fine.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .ignoring import non_differentiable
from .nn import Layer, as_rng, function_name
from .tape import active_recorder, differentiating
from .tree_util import leaf, leaves
from .box import plain
from .boxes import Tracked

__all__ = ['State', 'BatchNorm', 'LayerNorm', 'Dropout', 'trainmode', 'testmode']


@leaf
class State:
    """``State(**arrays)``: arrays a layer keeps and updates itself, outside any
    differentiation (``BatchNorm``'s running statistics).  A ``@tr.leaf``: tree walks
    keep it whole and copies of the model share it.

    >>> import numpy as np, tracked as tr
    >>> s = tr.layers.State(mean=np.zeros(2))
    >>> s, tr.nparams({'w': np.ones(3), 'stats': s})
    (State(mean=array([0., 0.])), 3)
    """

    def __init__(self, **arrays: Any) -> None:
        self.__dict__.update(arrays)

    def arrays(self) -> list[Any]:
        """The arrays held, in the order given."""
        return list(self.__dict__.values())

    if TYPE_CHECKING:           # its attributes are the names it was given
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def __repr__(self) -> str:
        inner = ', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())
        return f'State({inner})'


class _Switchable(Layer):
    """A layer with a train/test mode, switched by ``trainmode``/``testmode``."""

    active: bool | None = None

    def _training(self, x: Any, *params: Any) -> bool:
        if self.active is not None:
            return bool(self.active)
        return (differentiating() or active_recorder() is not None or isinstance(x, Tracked)
                or any(isinstance(p, Tracked) for p in params))

    def _mode_text(self) -> str:
        return '' if self.active is None else f', active={bool(self.active)}'


def _refuse_while_recording(layer: Any, why: str) -> None:
    if active_recorder() is not None:
        raise TypeError(
            f'{layer!r} in training mode {why}, which a recorded tape would not replay '
            f'(it would keep the recorded values). Record the tape with the model in test '
            f'mode (tr.testmode(model)), or train with the eager tape (tr.gradient without '
            f'tr.AutoCompiled or a GradientTape).')


# The running statistics as a tape sees them: an instruction (it depends on the
# recorded input x) that a replay re-runs, reading the State as it is then.  Read as
# plain constants instead, a compiled tape would keep the values it was compiled with.
@non_differentiable
def _running_mean(x: Any, state: State) -> np.ndarray:
    return np.array(state.mean)       # a copy: the State changes in place later


@non_differentiable
def _running_inv_std(x: Any, state: State, eps: float) -> Any:
    return 1 / np.sqrt(state.var + eps)


class BatchNorm(_Switchable):
    """``BatchNorm(n, activation=None, eps=1e-5, momentum=0.1, affine=True,
    track_stats=True)``: normalise each of the ``n`` features (the last axis) over the
    batch (every other axis), then ``activation(y * scale + bias)``.

    In training mode (see the module docstring) the batch's mean and variance are used
    and the running ones updated, ``running = (1 - momentum) * running + momentum *
    batch`` (the variance unbiased), outside the differentiation; in test mode the
    running statistics are used.  ``scale`` (ones) and ``bias`` (zeros) are the
    parameters (none with ``affine=False``); ``track_stats=False`` keeps no running
    statistics and always uses the batch's.

    >>> import numpy as np, tracked as tr
    >>> bn = tr.BatchNorm(2)
    >>> x = np.array([[1.0, 10.0], [3.0, 30.0]])
    >>> np.round(tr.trainmode(bn)(x), 4)      # the batch's statistics
    array([[-1., -1.],
           [ 1.,  1.]])
    >>> bn.state.mean, bn.state.var           # one step of momentum 0.1 from (0, 1)
    (array([0.2, 2. ]), array([ 1.1, 20.9]))
    >>> np.round(tr.testmode(bn)(x), 3)       # the running statistics
    array([[0.763, 1.75 ],
           [2.67 , 6.125]])
    """

    def __init__(self, n: int, activation: Callable[[Any], Any] | None = None, *,
                 eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_stats: bool = True, dtype: npt.DTypeLike = np.float64) -> None:
        n = int(n)
        self.scale = np.ones(n, dtype) if affine else None
        self.bias = np.zeros(n, dtype) if affine else None
        self.state = State(mean=np.zeros(n, dtype), var=np.ones(n, dtype)) \
            if track_stats else None
        self.eps = eps
        self.momentum = momentum
        self.activation = activation
        self.active = None

    def _size(self) -> int | None:
        a = self.scale if self.state is None else self.state.mean
        return None if a is None else np.shape(a)[0]

    def __call__(self, x: Any) -> Any:
        n = self._size()
        shape = np.shape(x)
        if n is not None and shape[-1:] != (n,):
            raise ValueError(f'{self!r} expects input of shape (..., {n}), got {shape}')
        axes = tuple(range(len(shape) - 1))
        if self._training(x, self.scale) or self.state is None:
            mean = np.mean(x, axis=axes)
            d = x - mean
            var = np.mean(d * d, axis=axes)
            if self.state is not None:
                self._track(mean, var, int(np.prod(shape[:-1], dtype=np.int64)))
            y = d / np.sqrt(var + self.eps)
        else:
            y = (x - _running_mean(x, self.state)) * _running_inv_std(x, self.state, self.eps)
        if self.scale is not None:
            y = y * self.scale + self.bias
        return y if self.activation is None else self.activation(y)

    def _track(self, mean: Any, var: Any, count: int) -> None:
        _refuse_while_recording(self, 'updates its running statistics on every call')
        m = plain(self.momentum)
        state = self.state
        assert state is not None            # (called only when it tracks)
        state.mean *= 1 - m
        state.mean += m * plain(mean)
        state.var *= 1 - m
        state.var += (m * count / max(count - 1, 1)) * plain(var)

    def __repr__(self) -> str:
        n = self._size()
        if n is None and (self.state is not None or self.scale is not None):
            return f'BatchNorm(scale={self.scale!r}, bias={self.bias!r})'  # a gradient tree
        parts = [] if n is None else [str(n)]
        if self.activation is not None:
            parts.append(function_name(self.activation))
        if self.scale is None:
            parts.append('affine=False')
        if self.state is None:
            parts.append('track_stats=False')
        return f'BatchNorm({", ".join(parts)}{self._mode_text()})'


class LayerNorm(Layer):
    """``LayerNorm(n, activation=None, eps=1e-5, affine=True)``: normalise each sample
    over its last axis (over the last ``len(n)`` axes for a tuple ``n``), then
    ``activation(y * scale + bias)``; the same in training and testing.

    >>> import numpy as np, tracked as tr
    >>> np.round(tr.LayerNorm(2)(np.array([[1.0, 3.0], [10.0, 40.0]])), 4)
    array([[-1.,  1.],
           [-1.,  1.]])
    """

    def __init__(self, n: int | tuple[int, ...], activation: Callable[[Any], Any] | None = None,
                 *, eps: float = 1e-5, affine: bool = True,
                 dtype: npt.DTypeLike = np.float64) -> None:
        shape = (int(cast(int, n)),) if np.ndim(n) == 0 else \
            tuple(int(k) for k in cast(tuple, n))
        self.size = shape
        self.scale = np.ones(shape, dtype) if affine else None
        self.bias = np.zeros(shape, dtype) if affine else None
        self.eps = eps
        self.activation = activation

    def __call__(self, x: Any) -> Any:
        k = len(self.size)
        shape = np.shape(x)
        want = tuple(int(plain(s)) for s in self.size)
        if shape[len(shape) - k:] != want:
            raise ValueError(f'{self!r} expects input of shape (..., '
                             f'{", ".join(map(str, want))}), got {shape}')
        axes = tuple(range(-k, 0))
        d = x - np.mean(x, axis=axes, keepdims=True)
        y = d / np.sqrt(np.mean(d * d, axis=axes, keepdims=True) + self.eps)
        if self.scale is not None:
            y = y * self.scale + self.bias
        return y if self.activation is None else self.activation(y)

    def __repr__(self) -> str:
        if any(s is None for s in self.size):
            return f'LayerNorm(scale={self.scale!r}, bias={self.bias!r})'     # a gradient tree
        size = [int(plain(s)) for s in self.size]
        parts = [str(size[0]) if len(size) == 1 else str(tuple(size))]
        if self.activation is not None:
            parts.append(function_name(self.activation))
        if self.scale is None:
            parts.append('affine=False')
        return f'LayerNorm({", ".join(parts)})'


class Dropout(_Switchable):
    """``Dropout(p, rng=None)``: in training mode, zero each element with probability
    ``p`` and scale the rest by ``1 / (1 - p)``; in test mode, the identity.  Masks are
    drawn from ``rng`` (a seed or a NumPy ``Generator``).

    >>> import numpy as np, tracked as tr
    >>> d = tr.trainmode(tr.Dropout(0.5, rng=0))
    >>> d(np.ones(6))
    array([2., 0., 0., 0., 2., 2.])
    >>> tr.testmode(d)(np.ones(2))
    array([1., 1.])
    """

    def __init__(self, p: float, *, rng: int | np.random.Generator | None = None) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f'Dropout(p): p is a probability in [0, 1], got {p}')
        self.p = float(p)
        self.rng = as_rng(rng)
        self.active = None

    def __call__(self, x: Any) -> Any:
        p = plain(self.p)
        if p == 0 or not self._training(x):
            return x
        _refuse_while_recording(self, 'draws a new random mask on every call')
        keep = self.rng.random(np.shape(x)) >= p
        dtype = np.result_type(getattr(x, 'dtype', np.float64), np.float32)
        scale = keep.astype(dtype) * dtype.type(1 / (1 - p) if p < 1 else 0)
        return x * scale

    def __repr__(self) -> str:
        return f'Dropout({plain(self.p)}{self._mode_text()})'


# --------------------------------------------------------------------------
# trainmode, testmode
# --------------------------------------------------------------------------

_MODES: dict[Any, bool | None] = {True: True, False: False, 'auto': None, None: None}
M = TypeVar('M')


def trainmode(model: M, active: bool | Literal['auto'] | None = True) -> M:
    """``trainmode(model, active=True)``: put every ``BatchNorm`` and ``Dropout`` of the
    tree in training mode (``active=False``: test mode; ``'auto'``: automatic, the
    default); returns ``model``.

    >>> import numpy as np, tracked as tr
    >>> m = tr.Chain(tr.Dense(2, 2), tr.Dropout(0.5))
    >>> tr.trainmode(m)
    Chain(Dense(2 => 2), Dropout(0.5, active=True))
    >>> tr.trainmode(m, 'auto')
    Chain(Dense(2 => 2), Dropout(0.5))
    """
    if active not in _MODES:
        raise ValueError(f"trainmode(model, active): active is True, False or 'auto', "
                         f"got {active!r}")
    for layer in leaves(model, lambda x: isinstance(x, _Switchable)):
        layer.active = _MODES[active]
    return model


def testmode(model: M, inactive: bool | Literal['auto'] | None = True) -> M:
    """``testmode(model, inactive=True)``: put every ``BatchNorm`` and ``Dropout`` of
    the tree in test mode (``inactive=False``: training mode; ``'auto'``: automatic);
    returns ``model``.

    >>> import numpy as np, tracked as tr
    >>> tr.testmode(tr.Chain(tr.BatchNorm(3), tr.Dropout(0.1)))
    Chain(BatchNorm(3, active=False), Dropout(0.1, active=False))
    """
    if inactive not in _MODES:
        raise ValueError(f"testmode(model, inactive): inactive is True, False or 'auto', "
                         f"got {inactive!r}")
    return trainmode(model, inactive if inactive in ('auto', None) else not inactive)
