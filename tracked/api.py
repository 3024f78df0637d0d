"""The convenience API (Zygote/Flux style), each operator a few lines over ``vjp``.

``vjp`` (reverse.py) is the one primitive: it records ``f`` at a fresh trace level
and returns the value and a reusable ``back``.  ``pullback`` adds argument trees;
``gradient`` and ``withgradient`` ask a backend object to compute: the one given after
``f`` (``tr.AutoCompiled()``, ...) or the eager tape, ``reverse.EAGER``; a call with
``tr.Const``/``tr.Duplicated`` arguments goes to the annotation (tracked/arguments.py
says which arguments are leaves and which output is the loss, for every path).  This
module imports no backend: it sits below ``tracked.compiled_tape`` (Jacobians, Hessians
and forward mode: ``jacobians.py``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .arguments import Args, annotated_withgradient, check_function, is_annotated, split_backend
from .reverse import WithGradient, eager_withgradient, vjp
from .tape import Owner, protect
from .tree_util import is_node, leaves
from . import box
from .boxes import Tracked

__all__ = ['vjp', 'pullback', 'gradient', 'withgradient']


# --------------------------------------------------------------------------
# pullback, gradient, withgradient
# --------------------------------------------------------------------------

def pullback(f: Callable[..., Any], *args: Any) -> tuple[Any, Callable[..., tuple[Any, ...]]]:
    """``pullback(f, *args) -> (y, back)``: the value of ``f`` and a function mapping an
    output cotangent ``dy`` to the gradient tuple (one entry per argument, mirroring
    its structure; None where there is no gradient).

    ``back`` may be called many times.  For a tuple (or dict) output, ``dy`` mirrors
    it and may hold None; for a scalar output ``dy`` defaults to 1.

    >>> import tracked as tr
    >>> y, back = tr.pullback(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)
    >>> y
    np.float64(30.0)
    >>> back(1.0)
    (np.float64(15.0), np.float64(10.0), np.float64(6.0))
    >>> back(2.0)
    (np.float64(30.0), np.float64(20.0), np.float64(12.0))
    """
    check_function(f, 'pullback', args)
    spec = Args(args, 'pullback')
    y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)

    def back_y(dy: Any = None) -> tuple[Any, ...]:
        return spec.gradients(back(dy))
    # The arrays of y that f computed may be saved by the entries that back() sweeps
    # (np.exp keeps its output): read-only while back_y lives, so that y[...] = 0
    # before back(dy) fails instead of changing the gradient.
    back_y.owner = _protect_outputs(back.out, back.level)  # type: ignore[attr-defined]
    return y, back_y


def _protect_outputs(out: Any, level: int) -> Owner | None:
    computed = [box.unboxed(t) for t in (leaves(out, box.is_box) if is_node(out) else [out])
                if isinstance(t, Tracked) and box.level(t) == level
                and box.node(t).prim is not None and type(box.unboxed(t)) is np.ndarray]
    if not computed:
        return None
    owner = Owner()
    protect(owner, computed)
    return owner


def withgradient(f: Callable[..., Any], *args: Any, zero: bool = True) -> WithGradient:
    """``withgradient(f, *args) -> (val, grad)``: the value of ``f`` and its gradient tuple.

    If ``f`` returns a tuple, named tuple or dict, its first element is the scalar
    that is differentiated and ``val`` is the whole return value (auxiliary outputs).
    A backend may follow ``f``: ``withgradient(f, tr.AutoFiniteDifferences(), *args)``.
    With ``tr.Duplicated`` arguments the gradient is stored there (``zero=False`` adds
    to it; see tracked/duplicated.py).

    >>> import numpy as np, tracked as tr
    >>> tr.withgradient(lambda x, y: x / y, 1, 2)
    WithGradient(val=np.float64(0.5), grad=(np.float64(0.5), np.float64(-0.25)))
    >>> val, (g,) = tr.withgradient(lambda x: (np.sum(1 / x), 1 / x), np.array([1., 2., 4.]))
    >>> val[0], g
    (np.float64(1.75), array([-1.    , -0.25  , -0.0625]))
    """
    check_function(f, 'gradient')
    backend, args = split_backend(args)
    if not zero or is_annotated(args):
        return WithGradient(*annotated_withgradient(f, backend, args, zero))
    if backend is None:             # EAGER.withgradient, without the hop (per call, ~1 µs)
        return eager_withgradient(f, args)
    val, grads = backend.withgradient(f, *args)
    return WithGradient(val, grads)


def gradient(f: Callable[..., Any], *args: Any, zero: bool = True) -> tuple[Any, ...]:
    """``gradient(f, *args)``: the gradient of scalar ``f`` with respect to each argument.

    One entry per argument, mirroring its structure (a model gives a model of the
    same types holding gradients); None where there is no gradient.  Arrays and
    numbers are differentiated, also inside dicts, lists, tuples and objects; an
    integer scalar stays usable as an index; strings, None, bools, functions give None.
    ``tr.Duplicated`` arguments store their gradient (``zero=False`` adds to it).

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)
    (np.float64(15.0), np.float64(10.0), np.float64(6.0))
    >>> tr.gradient(lambda x: np.sum(x ** 2), np.array([7., 11., 13.]))
    (array([14., 22., 26.]),)
    """
    return withgradient(f, *args, zero=zero).grad
