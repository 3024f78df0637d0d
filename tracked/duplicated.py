"""Gradients that live with the model: ``Duplicated`` and ``Const`` (Flux + Enzyme's).

``dup = Duplicated(model)`` allocates the gradient once: a tree like the model (same
types) with a zero array for each trainable array (tracked/flat.py), a tied array's
one buffer shared in both places, None elsewhere.  ``gradient(f, dup, Const(x), ...)``
(``api.gradient`` hands such calls to the annotation's ``withgradient`` method,
``arguments.Annotation``, which calls ``withgradient`` below) zeroes those buffers,
writes the gradient into them (adds it, with ``zero=False``) and returns the stored
tree itself; ``update(state, dup)`` uses it.  With ``tr.AutoCompiled()`` the compiled
tape writes straight into the buffers (``out=``), so a training step allocates no
gradient arrays.

Which arguments are differentiated.  Only the trainable arrays of ``Duplicated``
arguments.  A plain argument next to a ``Duplicated`` one counts as ``Const``.  Flux's
docstrings disagree here: one promises "the same answer as gradient(f, args...)" (where
a plain array gets a gradient), another says "all unspecified arguments are wrapped in
Const" (and its example prints ``nothing`` for ``[1]``).  We follow the second: a plain
argument has no storage to receive a gradient (differentiating it would allocate, which
is what ``Duplicated`` is for), a data batch passed as is then costs no backward work,
and the answer is the same whatever the backend.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .arguments import Annotation, is_annotated, loss_output, trainable
from .backends import AutoTracked
from .compiled_tape import AutoCompiled
from .compiled_tape.trees import TrackedArgumentError
from .reverse import WithGradient, vjp
from .tree_util import TreeDef, flatten, follow, leaves, register_node, tree_map, unflatten
from .boxes import Tracked

__all__ = ['Duplicated', 'Const', 'is_annotated', 'withgradient']


class _Annotation(Annotation):
    """What ``Const`` and ``Duplicated`` share: ``gradient``'s calls holding them come here."""

    __slots__ = ()

    def withgradient(self, f: Callable[..., Any], backend: Any, args: tuple[Any, ...],
                     zero: bool) -> Any:
        return withgradient(f, backend, args, zero)


class Const(_Annotation):
    """``Const(x)``: an argument of ``gradient`` that is not differentiated, next to a
    ``Duplicated`` one (Enzyme's ``Const``); ``f`` receives ``x`` itself and its
    gradient is None.

    >>> import numpy as np, tracked as tr
    >>> dup = tr.Duplicated({'w': np.array([2.0])})
    >>> tr.gradient(lambda m, x: np.sum(m['w'] * x), dup, tr.Const(np.array([5.0])))
    ({'w': array([5.])}, None)
    """

    __slots__ = ('val',)

    def __init__(self, val: Any) -> None:
        if isinstance(val, (Const, Duplicated)):
            raise TypeError(f'Const({type(val).__name__}(...)): an argument is either '
                            f'constant or duplicated')
        self.val = val

    def __repr__(self) -> str:
        return f'Const({self.val!r})'


class Duplicated(_Annotation):
    """``Duplicated(model)``: ``model`` with storage for its gradient, allocated once
    (Flux + Enzyme's ``Duplicated``); ``.val`` is the model, ``.dval`` the gradient.

    ``gradient(f, dup, Const(x), ...)`` zeroes the stored gradient, fills it and returns
    it (the same arrays, ``dup.dval``); ``zero=False`` adds to it instead.  Any mix of
    ``Duplicated`` and ``Const`` arguments, in any order, with at least one
    ``Duplicated``; a plain argument counts as ``Const``: it has no storage to receive
    a gradient, and a data batch passed as is then costs no backward work (of Flux's
    two docstrings, which disagree, the one that wraps unspecified arguments in
    ``Const``; tracked/duplicated.py says more).  Only float arrays are differentiated
    (not Python numbers, integer arrays or
    ``@tr.leaf`` objects); tied arrays share one buffer, which receives their total
    gradient.  ``update(state, dup)``, ``setup(rule, dup)`` and ``train(loss, dup, ...)``
    take it in place of the model.  With ``tr.AutoCompiled()`` the gradient is written
    into the stored arrays (no allocation); a compiled tape of a model whose float leaves
    are all arrays the loss uses also takes ``out=(dup.dval, None, ...)``.  Under an
    outer differentiation use ``gradient(f, model, ...)``, whose gradient is tracked.

    >>> import numpy as np, tracked as tr
    >>> model = tr.Chain(tr.Dense(np.array([[3.0]])))
    >>> dup = tr.Duplicated(model)
    >>> g = tr.gradient(lambda m, x: np.sum(m(x) ** 2), dup, tr.Const(np.array([1.0])))
    >>> g[0].layers[0].weight, g[0] is dup.dval, g[1]
    (array([[6.]]), True, None)
    >>> dup
    Duplicated(
      Chain(
        Dense(1 => 1),                      # 2 parameters
      ),
      # norm(∇) ≈ 8.49
    )
    """

    __slots__ = ('val', 'dval', 'buffers', '_out', '_scratch')
    val: Any
    dval: Any
    buffers: list[np.ndarray]
    _out: _Params
    _scratch: _Params | None

    def __init__(self, val: Any, dval: Any = None) -> None:
        if isinstance(val, (Const, Duplicated)):
            raise TypeError(f'Duplicated({type(val).__name__}(...)): give the model itself')
        params = flatten(val, trainable)[0]
        if any(isinstance(a, Tracked) for a in params):
            raise TypeError('Duplicated(model) holds a model of plain arrays (its gradient '
                            'is stored in place); under an outer differentiation use '
                            'tr.gradient(f, model, ...)')
        if not params:
            raise ValueError(f'Duplicated(model): the {type(val).__name__} holds no float '
                             f'arrays to differentiate')
        if dval is None:
            dval = tree_map(lambda a: np.zeros_like(a) if trainable(a) else None, val,
                            statics=False)
        self.val = val
        self.dval = dval
        # The buffers in walk order, one per trainable array (a tied one once): the
        # order in which flatten(model, trainable) lists the arrays they belong to.
        self.buffers = leaves(dval, _is_array)
        self._out = _Params(self.buffers, None)       # the buffers as a tape's out=
        self._scratch = None
        self._check(params)

    def _check(self, params: Sequence[Any]) -> None:
        """Raise unless ``params`` (the model's trainable arrays now) fit the buffers."""
        bufs = self.buffers
        if len(params) != len(bufs) or any(
                np.shape(a) != b.shape or a.dtype != b.dtype for a, b in zip(params, bufs)):
            raise ValueError(
                f'Duplicated: the model has {len(params)} float arrays of shapes '
                f'{[np.shape(a) for a in params]}, its stored gradient {len(bufs)} of shapes '
                f'{[b.shape for b in bufs]}; make a new tr.Duplicated(model) after changing '
                f'the model\'s structure')

    def zero(self) -> Duplicated:
        """``dup.zero()``: set the stored gradient to zero; returns ``dup``."""
        for b in self.buffers:
            b.fill(0)
        return self

    def _scratch_out(self) -> _Params:
        """Arrays like the buffers, made once, as a tape's ``out``: with ``zero=False`` a
        compiled tape writes there (it overwrites), and the result is added."""
        if self._scratch is None:
            self._scratch = _Params([np.zeros_like(b) for b in self.buffers], None)
        return self._scratch

    def __repr__(self) -> str:
        from .show import show_duplicated
        return show_duplicated(self)


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def withgradient(f: Callable[..., Any], backend: Any, args: Sequence[Any],
                 zero: bool = True) -> Any:
    """``gradient``/``withgradient`` for arguments holding ``Duplicated``: ``(val, grads)``
    with ``grads`` the stored gradient trees for ``Duplicated`` arguments, None for the
    others.  ``backend`` is the optional ADType (None: the eager tape)."""
    dups = [i for i, a in enumerate(args) if type(a) is Duplicated]
    if not dups:
        if not zero:
            raise TypeError('zero=False adds to the gradient a tr.Duplicated argument stores; '
                            'no argument is Duplicated')
        raise TypeError('tr.Const marks the arguments that are not differentiated next to a '
                        'tr.Duplicated one; with no Duplicated argument, pass the values '
                        'themselves (then every array argument is differentiated)')
    if len({id(args[i]) for i in dups}) < len(dups):
        raise ValueError('the same tr.Duplicated is given twice; its storage holds one '
                         'gradient')
    values = tuple(a.val if type(a) in (Duplicated, Const) else a for a in args)
    if backend is None or type(backend) is AutoTracked:
        val = _eager(f, args, values, dups, zero)
    elif isinstance(backend, AutoCompiled):
        try:
            val = _compiled(f, backend, args, values, dups, zero)
        except TrackedArgumentError:     # under an outer differentiation: no tape
            val = _eager(f, args, values, dups, zero)
    else:
        val = _other(f, backend, args, values, dups, zero)
    grads = tuple(a.dval if type(a) is Duplicated else None for a in args)
    return WithGradient(val, grads)


def _eager(f: Callable[..., Any], args: Sequence[Any], values: Sequence[Any],
           dups: Sequence[int], zero: bool) -> Any:
    """The eager tape, differentiating the trainable arrays of the Duplicated arguments."""
    parts: list[tuple[int, TreeDef, int]] = []
    flat: list[Any] = []
    for i in dups:
        params, treedef = flatten(values[i], trainable)
        args[i]._check(params)
        parts.append((i, treedef, len(params)))
        flat.extend(params)

    def g(*ps: Any) -> Any:
        full = list(values)
        k = 0
        for i, treedef, n in parts:
            full[i] = unflatten(treedef, ps[k:k + n])
            k += n
        return f(*full)
    y, back = vjp(g, *flat)
    dy = loss_output(y)[1]
    cts = back(dy, last=True)
    if any(isinstance(ct, Tracked) for ct in cts):
        raise TypeError('a tr.Duplicated argument stores plain gradients, but this one '
                        'depends on an outer differentiation or is recorded by a '
                        'GradientTape; use tr.gradient(f, model, ...) there')
    bufs = [b for i in dups for b in args[i].buffers]
    for b, ct in zip(bufs, cts):
        if zero:
            if ct is None:
                b.fill(0)
            else:
                b[...] = ct
        elif ct is not None:
            b += ct
    return y


def _compiled(f: Callable[..., Any], backend: Any, args: Sequence[Any],
              values: Sequence[Any], dups: Sequence[int], zero: bool) -> Any:
    """AutoCompiled: the tape writes into the stored arrays (or, to add to them, into
    scratch arrays made once)."""
    tape_args = list(values)
    out: list[Any] = [None] * len(args)
    for i in dups:
        dup = args[i]
        params, treedef = flatten(values[i], trainable)
        dup._check(params)
        tape_args[i] = _Params(params, treedef)
        out[i] = dup._out if zero else dup._scratch_out()
        # What the loss does not depend on is not written by the tape: it stays zero.
        for b in out[i].arrays:
            b.fill(0)
    val, _ = backend.withgradient(f, *tape_args, wrt=tuple(dups), out=tuple(out))
    if not zero:
        for i in dups:
            for b, s in zip(args[i].buffers, args[i]._scratch_out().arrays):
                b += s
    return val


class _Params:
    """A ``Duplicated`` argument as a recorded tape sees it: a node whose children are
    the model's trainable arrays and whose static part is the rest of the model (its
    ``TreeDef``).  Passed whole, the model's Python floats and integer arrays would be
    differentiated by the tape too (as ``tr.gradient`` does); this way the tape
    differentiates exactly the arrays ``Duplicated`` stores, like the eager path."""

    __slots__ = ('arrays', 'treedef')

    def __init__(self, arrays: Sequence[Any], treedef: TreeDef | None) -> None:
        self.arrays = tuple(arrays)
        self.treedef = treedef


def _params_rebuild(treedef: TreeDef, arrays: Sequence[Any]) -> Any:
    # While the tape records f the arrays are tracked, and f gets the model; otherwise
    # (the tape's own gradient tree, the template of its out=) they are gradients.
    if arrays and all(isinstance(a, Tracked) for a in arrays):
        return unflatten(treedef, arrays)
    return _Params(arrays, treedef)


register_node(_Params, lambda p: (p.arrays, p.treedef), _params_rebuild)


def _other(f: Callable[..., Any], backend: Any, args: Sequence[Any],
           values: Sequence[Any], dups: Sequence[int], zero: bool) -> Any:
    """Any other backend: its gradient of the models, copied into the stored arrays."""
    def g(*models: Any) -> Any:
        full = list(values)
        for i, m in zip(dups, models):
            full[i] = m
        return f(*full)
    val, grads = backend.withgradient(g, *[values[i] for i in dups])
    for i, gt in zip(dups, grads):
        params, treedef = flatten(values[i], trainable)
        args[i]._check(params)
        for b, path in zip(args[i].buffers, treedef.paths()):
            ct = follow(gt, path)
            if zero:
                b[...] = 0 if ct is None else ct
            elif ct is not None:
                b += ct
    return val

