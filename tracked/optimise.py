"""Optimisers and the training loop (Optimisers.jl / Flux style).

``state = setup(Adam(1e-3), model)`` builds a *state tree* that mirrors the model:
every array of the model is replaced by an ``OptLeaf`` holding the rule and that
array's moments.  ``update(state, model, grads)`` walks the three trees in parallel
and changes the model's arrays in place; ``train`` is the loop over batches, with a
tqdm progress bar.  The walk follows the tree protocol of tracked/tree_util.py (dicts,
lists, tuples, named tuples, dataclasses, objects with attributes, registered classes),
so any model that ``gradient`` understands can be trained.  An array that occurs twice
in the model (tied weights) has one state and is updated once, with its total gradient.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from . import functors as _functors
from .duplicated import Duplicated
from .tape import protected
from .tree_util import flatten, follow, tree_map
from .box import plain
from .boxes import Tracked

__all__ = ['Descent', 'Momentum', 'Adam', 'AdamW', 'OptLeaf', 'setup', 'update', 'train']


# --------------------------------------------------------------------------
# Rules: init(x) -> per-array state; apply(state, x, g) -> the step to subtract
# --------------------------------------------------------------------------

class Rule:
    """Base of the optimisation rules: ``init`` makes an array's state, ``apply`` the step."""

    def init(self, x: np.ndarray) -> Any:
        return None

    def apply(self, state: Any, x: np.ndarray, g: np.ndarray) -> Any:
        raise NotImplementedError

    def check(self, state: Any, x: np.ndarray) -> None:
        """A ``ValueError`` unless ``state`` (made by ``init``) fits array ``x``: ``update``
        asks for every array before it changes any (a step is all or nothing).

        >>> import numpy as np, tracked as tr
        >>> tr.Momentum().check(np.zeros(3), np.ones(2))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: update: an array of shape (2,) has optimiser state of shape (3,) ...
        """
        for a in state if isinstance(state, (list, tuple)) else (state,):
            if isinstance(a, np.ndarray) and a.shape != x.shape:
                raise ValueError(f'update: an array of shape {x.shape} has optimiser state of '
                                 f'shape {a.shape} (from tr.setup for another model); make '
                                 f'the state for this model with tr.setup(rule, model)')

    def __repr__(self) -> str:
        args = ', '.join(f'{k}={v!r}' for k, v in vars(self).items())
        return f'{type(self).__name__}({args})'


class Descent(Rule):
    """``Descent(lr=0.1)``: plain gradient descent, ``x -= lr * g``.

    >>> import numpy as np, tracked as tr
    >>> model = {'w': np.array([1.0, 2.0])}
    >>> state = tr.setup(tr.Descent(0.5), model)
    >>> tr.update(state, model, {'w': np.array([1.0, 1.0])}); model['w']
    array([0.5, 1.5])
    """

    def __init__(self, lr: float = 0.1) -> None:
        self.lr = lr

    def apply(self, state: None, x: np.ndarray, g: np.ndarray) -> Any:
        return self.lr * g


class Momentum(Rule):
    """``Momentum(lr=0.01, rho=0.9)``: ``v = rho * v + lr * g; x -= v``.

    >>> import numpy as np, tracked as tr
    >>> model = [np.array([1.0])]
    >>> state = tr.setup(tr.Momentum(0.1, 0.5), model)
    >>> for _ in range(2): tr.update(state, model, [np.array([1.0])])
    >>> model[0]          # steps 0.1, then 0.5 * 0.1 + 0.1
    array([0.75])
    """

    def __init__(self, lr: float = 0.01, rho: float = 0.9) -> None:
        self.lr, self.rho = lr, rho

    def init(self, x: np.ndarray) -> np.ndarray:
        return np.zeros_like(x)

    def apply(self, v: np.ndarray, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        v *= self.rho
        v += self.lr * g
        return v


class Adam(Rule):
    """``Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-8)``: Kingma & Ba, with bias correction.

    ``m, v`` are running means of ``g`` and ``g**2``; the step is
    ``lr * m̂ / (sqrt(v̂) + eps)`` with ``m̂ = m / (1 - beta1**t)`` and
    ``v̂ = v / (1 - beta2**t)``.  The first step is about ``lr * sign(g)``:

    >>> import numpy as np, tracked as tr
    >>> model = {'w': np.array([1.0, -1.0])}
    >>> state = tr.setup(tr.Adam(0.1), model)
    >>> tr.update(state, model, {'w': np.array([3.0, -0.5])}); model['w']
    array([ 0.9, -0.9])
    """

    def __init__(self, lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.lr, self.betas, self.eps = lr, tuple(betas), eps

    def init(self, x: np.ndarray) -> list[Any]:
        return [np.zeros_like(x), np.zeros_like(x), 0, np.empty_like(x)]

    def apply(self, state: list[Any], x: np.ndarray, g: np.ndarray) -> np.ndarray:
        m, v, t, step = state
        b1, b2 = self.betas
        t += 1
        state[2] = t
        m *= b1
        np.multiply(g, 1 - b1, out=step, casting='same_kind')   # no temporary array
        m += step
        v *= b2
        np.multiply(g, g, out=step, casting='same_kind')
        step *= 1 - b2
        v += step
        # lr * m̂ / (sqrt(v̂) + eps), in the preallocated buffer
        np.sqrt(v, out=step)
        step *= 1 / np.sqrt(1 - b2 ** t)
        step += self.eps
        np.divide(m, step, out=step)
        step *= self.lr / (1 - b1 ** t)
        return step


class AdamW(Adam):
    """``AdamW(lr=0.001, betas=(0.9, 0.999), decay=0.0, eps=1e-8)``: Adam with decoupled
    weight decay, ``x -= lr * (adam_direction + decay * x)`` (Loshchilov & Hutter, as in
    PyTorch and Optimisers.jl; ``decay=0`` is Flux's default and gives plain Adam).

    >>> import numpy as np, tracked as tr
    >>> model = {'w': np.array([1.0])}
    >>> state = tr.setup(tr.AdamW(0.1, decay=0.5), model)
    >>> tr.update(state, model, {'w': np.array([0.0])}); model['w']   # only the decay acts
    array([0.95])
    """

    def __init__(self, lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 decay: float = 0.0, eps: float = 1e-8) -> None:
        super().__init__(lr, betas, eps)
        self.decay = decay

    def apply(self, state: list[Any], x: np.ndarray, g: np.ndarray) -> np.ndarray:
        step = super().apply(state, x, g)
        if self.decay:
            step = step + (self.lr * self.decay) * x
        return step


# --------------------------------------------------------------------------
# The state tree
# --------------------------------------------------------------------------

class OptLeaf:
    """The optimiser state of one array in a state tree: ``rule`` and its ``state``."""

    __slots__ = ('rule', 'state')

    def __init__(self, rule: Rule, state: Any) -> None:
        self.rule, self.state = rule, state

    def __repr__(self) -> str:
        return f'OptLeaf({self.rule!r})'


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, Tracked)) and np.dtype(x.dtype).kind in 'fiu'


def setup(rule: Rule, model: Any) -> Any:
    """``setup(rule, model) -> state``: a tree like ``model`` with an ``OptLeaf`` per array.

    Arrays that occur several times (tied weights) share one ``OptLeaf``; tracked
    arrays (``fmap(param, model)``) get state shaped like their data.  All leaves hold
    the same ``rule`` object, so changing ``rule.lr`` later changes the learning rate
    of every array (a schedule).  Everything that
    is not an array (functions, sizes, Python floats) has ``None`` in the state tree:
    only arrays are trained, in place.  ``setup(rule, tr.Duplicated(model))`` is
    ``setup(rule, model)``.

    >>> import numpy as np, tracked as tr
    >>> state = tr.setup(tr.Adam(), {'w': np.zeros(2), 'name': 'layer'})
    >>> state
    {'w': OptLeaf(Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08)), 'name': None}
    """
    if not isinstance(rule, Rule):
        raise TypeError(f'setup(rule, model): rule must be an optimiser such as '
                        f'tr.Adam(1e-3), got {rule!r}')
    if isinstance(model, Duplicated):
        model = model.val

    def init(x: Any) -> OptLeaf | None:
        return OptLeaf(rule, rule.init(plain(x))) if _is_array(x) else None
    return tree_map(init, model, statics=False)


def update(state: Any, model: Any, grads: Any = None) -> None:
    """``update(state, model, grads)``: one optimiser step, changing ``model``'s arrays in place.

    ``grads`` mirrors the model as ``tr.gradient(loss, model)[0]`` does (``None`` where
    there is no gradient: that part is left alone).  An array that occurs twice in the
    model is updated once.  For a tracked model (``fmap(param, model)``) ``grads`` may
    be omitted: each leaf's ``.grad`` is used.  Tracked leaves have their ``.grad`` reset
    to zero after the step, as Tracker's ``update!`` does.  ``update(state, dup)`` with a
    ``tr.Duplicated`` uses the gradient it stores.

    >>> import numpy as np, tracked as tr
    >>> model = {'w': np.array([1.0, 2.0]), 'frozen': np.array([5.0])}
    >>> state = tr.setup(tr.Descent(0.1), model)
    >>> tr.update(state, model, {'w': np.array([1.0, 1.0]), 'frozen': None})
    >>> model['w'], model['frozen']
    (array([0.9, 1.9]), array([5.]))
    """
    if isinstance(model, Duplicated):
        model, grads = model.val, model.dval if grads is None else grads
    if grads is None and not _functors.istracked(model):
        raise TypeError('update(state, model, grads): grads is required unless the model is '
                        'tracked (tr.fmap(tr.param, model)); pass tr.gradient(loss, model)[0]')
    steps = _planned_steps(state, model, grads)
    if steps is None:
        steps = _checked_steps(state, model, grads)
    for leaf, x, _ in steps:
        _check_writeable(plain(x))
        leaf.rule.check(leaf.state, plain(x))
    # Everything was checked before this point: an update is all or nothing.
    for leaf, x, g in steps:
        value = plain(x)
        value -= leaf.rule.apply(leaf.state, value, g)
        if isinstance(x, Tracked):
            _functors.zero_grad(x)             # Tracker's update! resets the gradient


def _check_writeable(value: Any) -> None:
    if isinstance(value, np.ndarray) and value.flags.writeable:
        return
    if isinstance(value, np.ndarray) and protected(value):
        raise ValueError('update: a parameter\'s value is saved by a tape entry that is still '
                         'alive (a tracked result computed from the model, such as preds = '
                         'model(x), that has not been through back() and is still referenced): '
                         'changing it would change that result\'s gradient. Call back() on it '
                         'or drop it first, or compute what needs no gradient with '
                         'tr.data(model).')
    raise TypeError(f'update: an array of the model cannot be changed in place '
                    f'({type(value).__name__}, read-only); store parameters as writeable '
                    f'NumPy arrays')


def _checked_steps(state: Any, model: Any, grads: Any) -> list[tuple[OptLeaf, Any, Any]]:
    """``(leaf, array, gradient)`` for every array to update, by walking the three trees
    together with ``fmap``; raises a readable error where they differ."""
    steps = []

    def collect(x: Any, leaf: Any, g: Any = None) -> Any:
        if leaf is None:
            return x
        if not isinstance(leaf, OptLeaf):
            raise _StructureError(f'the state tree has {type(leaf).__name__} where the model '
                                  f'has an array')
        if not _is_array(x):
            return x
        if grads is None:
            g = x.grad if isinstance(x, Tracked) else None
        if g is not None:
            g = plain(g)
            if np.shape(g) != np.shape(plain(x)):
                raise ValueError(f'update: a gradient has shape {np.shape(g)} where the model '
                                 f'has an array of shape {np.shape(plain(x))}')
            steps.append((leaf, x, g))
        return x
    try:
        _functors.fmap(collect, model, state, *(() if grads is None else (grads,)))
    except (_StructureError, AttributeError, KeyError, IndexError, TypeError) as err:
        hint = ''
        if isinstance(grads, tuple) and not isinstance(model, tuple):
            hint = (' The gradient is a tuple: tr.gradient returns one entry per argument, '
                    'so pass tr.gradient(loss, model, ...)[0].')
        raise ValueError(f'update(state, model, grads): the three trees do not have the same '
                         f'structure ({err}). The state must come from tr.setup(rule, model) '
                         f'for this model, and grads mirror the model.{hint}') from None
    return steps


# Why a cached plan: walking three trees with fmap costs more per step than a compiled
# gradient of a small model.  The plan lists, once per (model, state), where each array
# sits; a step then only follows those paths, and re-checks that the model still holds
# the same arrays there (any doubt falls back to the full walk above).
# (id(model), id(state)) -> (model, state, the plan or None)
_PLANS: dict[tuple[int, int], tuple[Any, Any, list[tuple[Any, Any, OptLeaf]] | None]] = {}
_MAX_PLANS = 8


def _planned_steps(state: Any, model: Any,
                   grads: Any) -> list[tuple[OptLeaf, Any, Any]] | None:
    key = (id(model), id(state))
    plan = _PLANS.get(key)
    if plan is None or plan[0] is not model or plan[1] is not state:
        if len(_PLANS) >= _MAX_PLANS:
            try:                            # another thread may be evicting it too
                _PLANS.pop(next(iter(_PLANS)), None)
            except StopIteration:
                pass
        plan = _PLANS[key] = (model, state, _plan(model, state))
    entries = plan[2]
    if entries is None:
        return None
    steps = []
    try:
        for path, x, leaf in entries:
            if follow(model, path) is not x:
                _PLANS.pop(key, None)           # the model changed: plan again next time
                return None
            g = (x.grad if isinstance(x, Tracked) else None) if grads is None \
                else follow(grads, path)
            if g is None:
                continue
            g = plain(g)
            if np.shape(g) != x.shape:
                return None
            steps.append((leaf, x, g))
    except (AttributeError, KeyError, IndexError, TypeError):
        return None
    return steps


def _plan(model: Any, state: Any) -> list[tuple[Any, Any, OptLeaf]] | None:
    """``[(path, array, OptLeaf)]`` for each distinct array of the model, or None."""
    entries = []
    try:
        arrays, treedef = flatten(model)            # a tied array once
        for path, x in zip(treedef.paths(), arrays):
            s = follow(state, path)
            if _is_array(x) and s is not None:
                if not isinstance(s, OptLeaf):
                    return None
                entries.append((path, x, s))
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return None
    return entries


class _StructureError(Exception):
    pass


# --------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------

def train(loss: Callable[..., Any], model: Any, data: Iterable[Any], state: Any, *,
          tape: Any = None, adtype: Any = None, progress: bool = True,
          desc: str | None = None) -> list[float]:
    """``train(loss, model, data, state) -> losses``: one pass over ``data``, one step per batch.

    For each ``batch`` of ``data``, computes the gradient of ``loss(model, *batch)``
    (``loss(model, batch)`` when the batch is not a tuple) with respect to the model,
    then ``update(state, model, grads)``.  A tqdm progress bar shows the running loss
    (exponentially smoothed over about ten batches; ``progress=False`` hides the bar).
    Returns the list of batch losses, for plotting.

    Gradients come from the eager tape by default; ``adtype=tr.AutoCompiled()`` (or any
    backend of ``tr.withgradient``) chooses another, and ``tape=`` takes a tape recorded
    as ``tr.GradientTape(loss, model, *batch, wrt=(0,))`` (compiled or not), which is
    replayed for every batch (all batches must then have the recorded shapes).  A loss
    that is not finite stops training with ``FloatingPointError`` before the update.
    ``model`` may be a ``tr.Duplicated``: each step's gradient is then stored in it
    (with ``adtype=tr.AutoCompiled()``, without allocating gradient arrays).

    >>> import numpy as np, tracked as tr
    >>> model = tr.nn.Dense(np.zeros((1, 1)))
    >>> data = [(np.array([[1.0]]), np.array([[2.0]]))] * 50
    >>> losses = tr.train(lambda m, x, y: tr.nn.mse(m(x), y), model, data,
    ...                   tr.setup(tr.Adam(0.1), model), progress=False)
    >>> round(float(model(np.array([[1.0]]))[0, 0]), 1)
    2.0
    """
    try:
        # The text bar, not tqdm.auto: a notebook then keeps the final bar in its saved
        # output, where a widget would store only its initial 0%.
        from tqdm import tqdm
    except ImportError:
        # tqdm is an optional extra (runtime dependencies are numpy and numba only):
        # train without a bar rather than fail.
        if progress:
            warnings.warn('tr.train shows its progress bar with tqdm, which is not installed '
                          '(pip install tqdm); training without one', stacklevel=2)

        def tqdm(it: Iterable[Any], **kwargs: Any) -> Any:
            return _NoBar(it)
    if isinstance(state, Rule):
        raise TypeError(f'train(loss, model, data, state): state must be the optimiser state '
                        f'tree, state = tr.setup({state!r}, model), not the rule itself')
    step = _gradient_step(loss, tape, adtype, isinstance(model, Duplicated))
    losses = []
    smooth = 0.0
    try:
        n = len(data)  # type: ignore[arg-type]  # a generator has none: TypeError
    except TypeError:
        n = None
    bar = tqdm(data, total=n, desc=desc, disable=not progress, mininterval=0.5,
               unit='step', dynamic_ncols=True)
    for i, batch in enumerate(bar):
        batch = batch if isinstance(batch, tuple) else (batch,)
        val, grads = step(model, batch)
        val = float(plain(val))
        if not math.isfinite(val):
            bar.close()
            raise FloatingPointError(f'train: the loss is {val} at batch {i}; the model was '
                                     f'not updated with this batch')
        update(state, model, grads)
        losses.append(val)
        # running loss: exponentially smoothed, bias-corrected as in Adam
        smooth = 0.9 * smooth + 0.1 * val
        bar.set_postfix(loss=f'{smooth / (1 - 0.9 ** len(losses)):.4g}', refresh=False)
    bar.close()
    return losses


def _gradient_step(loss: Callable[..., Any], tape: Any, adtype: Any,
                   duplicated: bool = False) -> Callable[[Any, tuple[Any, ...]], tuple[Any, Any]]:
    """A function ``(model, batch) -> (loss value, gradient of the model)``."""
    from . import api
    if tape is not None and adtype is not None:
        raise TypeError('train: pass either tape= or adtype=, not both')
    if duplicated:
        if tape is not None:
            raise TypeError('train: a tr.Duplicated model takes adtype=tr.AutoCompiled() '
                            '(a tape per signature, writing into its stored gradient), '
                            'not tape=')
        backend = () if adtype is None else (adtype,)

        def duplicated_step(dup: Any, batch: tuple[Any, ...]) -> tuple[Any, Any]:
            # The batch is an argument next to a Duplicated one: constant, not differentiated.
            val, g = api.withgradient(loss, *backend, dup, *batch)
            return _first(val), g[0]
        return duplicated_step
    if tape is not None:
        buffers: list[Any] = []

        def tape_step(model: Any, batch: tuple[Any, ...]) -> tuple[Any, Any]:
            # From the second step on, the gradient is written into the first step's
            # arrays (out=): a compiled tape then allocates nothing per step.
            val, g = tape.withgradient(model, *batch, out=buffers[0] if buffers else None)
            if not buffers:
                buffers.append(g)
            return _first(val), _model_grad(g)
        return tape_step
    if adtype is not None:
        def backend_step(model: Any, batch: tuple[Any, ...]) -> tuple[Any, Any]:
            val, g = api.withgradient(loss, adtype, model, *batch)
            return _first(val), g[0]
        return backend_step

    def step(model: Any, batch: tuple[Any, ...]) -> tuple[Any, Any]:
        # Only the model is differentiated: the batch is closed over, not an argument.
        val, g = api.withgradient(lambda m: loss(m, *batch), model)
        return _first(val), g[0]
    return step


def _first(val: Any) -> Any:
    if isinstance(val, dict):
        return next(iter(val.values()))
    return val[0] if isinstance(val, tuple) else val


def _model_grad(g: Any) -> Any:
    return g[0] if isinstance(g, tuple) else g


class _NoBar:
    """Stands in for a tqdm bar when tqdm is not installed."""

    def __init__(self, it: Iterable[Any]) -> None:
        self._it = it

    def __iter__(self) -> Iterator[Any]:
        return iter(self._it)

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass
