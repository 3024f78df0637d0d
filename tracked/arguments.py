"""The calling convention of every derivative: ``gradient(f, [adtype], *args)`` and the rest.

This module alone decides, for every path (the eager ``gradient``/``withgradient``/
``pullback``, ``jacobian``/``hessian``, the backends ``AutoTracked``, ``AutoCompiled``
and ``AutoFiniteDifferences``, ``GradientTape``/``JacobianTape``/``HessianTape``,
``tr.Duplicated``, ``tracked.distributed``, ``tracked.autograd``):

- **the backend**: an optional ``ADType`` may follow ``f`` (``split_backend``); it
  computes ``withgradient(f, *args)`` (a new backend is a class with that one method).
- **the differentiated leaves** (``differentiable``): arrays of numbers (integer arrays
  as float64), NumPy number scalars and Python numbers of the exact types ``float``,
  ``int`` (it stays usable as an index or size) and ``complex``.  Bools, strings, None,
  functions, ``@tr.leaf`` objects and subclasses of Python numbers (an ``IntEnum``)
  are constants: passed to ``f`` as they are, gradient None.  Each argument is a tree
  (tracked/tree_util.py) flattened on its own (``Args``): an array tied in one argument
  is one leaf, and gets the total gradient in every place.  A recorded tape's inputs
  (``tape_input``) are the same leaves plus bool arrays, whose values may change from
  call to call but which get no gradient either.
- **the annotations** ``tr.Const``/``tr.Duplicated`` (subclasses of ``Annotation``): taken
  by ``gradient``/``withgradient`` only, which hand such a call to the annotation
  (tracked/duplicated.py); only the ``trainable`` arrays of a ``Duplicated`` argument
  are differentiated (``trainable``), plain arguments next to it count as ``Const``.
- **the loss** (``loss_output``): ``f``'s output is the loss if it is a real scalar; if
  it is a tuple, named tuple or dict, its first element is the loss and the rest is
  auxiliary (returned in ``val``, not differentiated).  A list is not a (loss, aux)
  pair: a list of numbers is never read as one value either (tree protocol), so a list
  output is the same ``ValueError`` as an array output, on every path.  ``hessian``
  (and ``HessianTape``) take the loss the same way; ``jacobian`` (and ``JacobianTape``)
  need one array or number (``check_output``).

Nothing here imports a backend or the compiler: ``tracked.api`` builds on this module
and sits below ``tracked.compiled_tape`` (tests/test_layering.py).
"""
from collections.abc import Callable
from typing import Any

import numpy as np

from .tree_util import flatten, is_node, unflatten
from .box import plain
from .boxes import Tracked
from .conversions import object_array_error
from .values import as_value

__all__ = ['ADType', 'split_backend', 'check_function', 'check_output', 'no_complex_inputs',
           'differentiable', 'tape_input', 'trainable', 'Annotation', 'is_annotated',
           'annotated_withgradient', 'refuse_annotation', 'Args', 'match_gradient', 'float_dtype',
           'is_number_list', 'first_output', 'check_scalar', 'loss_output']


class ADType:
    """Base class of the backends; a subclass implements ``withgradient(f, *args)``.

    >>> import tracked as tr
    >>> class Doubled(tr.backends.ADType):         # a toy backend
    ...     def withgradient(self, f, *args):
    ...         val, grads = tr.withgradient(f, *args)
    ...         return val, tuple(2 * g for g in grads)
    >>> tr.gradient(lambda x: x * x, Doubled(), 3.0)
    (np.float64(12.0),)
    """

    def withgradient(self, f: Callable[..., Any], *args: Any) -> tuple[Any, tuple[Any, ...]]:
        raise NotImplementedError

    def gradient(self, f: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
        """``backend.gradient(f, *args)``: the gradient tuple alone."""
        return self.withgradient(f, *args)[1]

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'


def split_backend(args):
    """``split_backend(args) -> (backend or None, args)``: ``gradient(f, adtype, *args)``'s
    backend, if the first argument is one.

    >>> import tracked as tr
    >>> tr.arguments.split_backend((tr.AutoTracked(), 1.0))
    (AutoTracked(), (1.0,))
    """
    if args and type(args[0]) is not np.ndarray:
        if _is_adtype(args[0]):
            return args[0], args[1:]
        if isinstance(args[0], type) and issubclass(args[0], ADType):
            raise TypeError(f'pass a backend instance, tr.{args[0].__name__}(), not the '
                            f'class tr.{args[0].__name__}')
    return None, args


def check_function(f, who, args=()):
    """A ``TypeError`` unless ``f`` is callable: ``who(f, *args)`` takes the function
    first; ``args`` given: also unless they start without a backend, which only
    ``gradient`` and ``withgradient`` take."""
    if not callable(f):
        raise TypeError(f'{who}(f, *args): f must be the function to differentiate, got '
                        f'{type(f).__name__}; pass the function first, then its arguments')
    if args and type(args[0]) is not np.ndarray and (
            _is_adtype(args[0]) or isinstance(args[0], type) and issubclass(args[0], ADType)):
        raise TypeError(f'{who}(f, *args) takes no backend ({getattr(args[0], "__name__", args[0])}'
                        f' was given first): only gradient and withgradient do. Call '
                        f'tr.{who}(f, *args) on the eager tape, or record a tape '
                        f'(tr.JacobianTape, tr.HessianTape) for compiled speed.')


def _is_adtype(x):
    return isinstance(x, ADType) or (type(x).__name__.startswith('Auto')
                                     and callable(getattr(x, 'withgradient', None)))


# --------------------------------------------------------------------------
# Argument trees: which leaves are differentiated, and the structure of gradients
# --------------------------------------------------------------------------

def differentiable(x):
    """``differentiable(x)``: whether an argument leaf is differentiated: arrays and
    scalars of numbers (complex ones get a clear error later); not bools.

    >>> import numpy as np, tracked as tr
    >>> [tr.arguments.differentiable(v) for v in (np.ones(2), 3, True, 'a', np.ones(1, bool))]
    [True, True, False, False, False]
    """
    if isinstance(x, (np.ndarray, Tracked)):
        if x.dtype.kind == 'O' and x.size and all(map(_is_number, x.flat)):
            raise object_array_error(x)     # (one of strings, say, is a constant)
        return x.dtype.kind in 'fiuc'
    return _is_number(x)


def _is_number(x):
    # Python numbers of the exact types (a bool, an IntEnum are labels, not quantities)
    t = type(x)
    return t is float or t is int or t is complex or isinstance(x, np.number)


def tape_input(x):
    """``tape_input(x)``: whether a recorded tape takes ``x`` as an input leaf: the
    differentiated leaves (``differentiable``), and arrays of bools, whose values may
    change between calls but which get no gradient (None, as in ``gradient``).  What is
    not an input is a constant of the tape, compared on every replay.

    >>> import numpy as np, tracked as tr
    >>> [tr.arguments.tape_input(v) for v in (np.ones(2, bool), 3, True, 1j, 'a')]
    [True, True, False, True, False]
    """
    if type(x) is np.ndarray:                  # the common case
        kind = x.dtype.kind
        return kind in 'fiucb' or kind == 'O' and differentiable(x)
    return differentiable(x) or isinstance(x, np.ndarray) and x.dtype.kind == 'b'


def trainable(x: Any) -> bool:
    """``trainable(x)``: whether ``x`` is a parameter: an array (plain or tracked) of
    floating-point or complex numbers with at least one dimension; the leaves of a
    ``tr.Duplicated`` argument (and of ``destructure``, ``nparams``).  Numbers are not,
    0-d arrays included: an outer differentiation makes a Python float a 0-d tracked
    value, and ``destructure`` must take the same leaves whether or not it is
    differentiated.

    >>> import numpy as np, tracked as tr
    >>> [tr.flat.trainable(v) for v in (np.ones(2), np.ones(2, np.float32), np.arange(2), 1.5,
    ...                                 np.array(1.5))]
    [True, True, False, False, False]
    """
    return isinstance(x, (np.ndarray, Tracked)) and x.ndim > 0 and x.dtype.kind in 'fc'


class Annotation:
    """Base class of the argument annotations, ``tr.Const`` and ``tr.Duplicated``
    (tracked/duplicated.py): ``gradient``/``withgradient`` hand a call holding one to
    its ``withgradient`` (``annotated_withgradient``); every other operator refuses them."""

    __slots__ = ()

    def withgradient(self, f: Callable[..., Any], backend: Any, args: tuple[Any, ...],
                     zero: bool) -> Any:
        """``(val, grads)`` of a ``gradient``/``withgradient`` call whose arguments
        ``args`` hold this annotation (``backend``: the ADType given, or None)."""
        raise NotImplementedError


def is_annotated(args: tuple[Any, ...]) -> bool:
    """Whether an argument tuple holds a ``tr.Const`` or a ``tr.Duplicated``."""
    for a in args:
        if isinstance(a, Annotation):
            return True
    return False


def annotated_withgradient(f: Callable[..., Any], backend: Any, args: tuple[Any, ...],
                           zero: bool) -> Any:
    """``gradient``/``withgradient`` of arguments holding ``tr.Const``/``tr.Duplicated``
    (or with ``zero=False``): computed by the annotation's own ``withgradient``."""
    for a in args:
        if isinstance(a, Annotation):
            return a.withgradient(f, backend, args, zero)
    raise TypeError('zero=False adds to the gradient a tr.Duplicated argument stores; '
                    'no argument is Duplicated')


def refuse_annotation(x: Any, who: str) -> None:
    """A ``TypeError`` if ``x`` is a ``tr.Const``/``tr.Duplicated``, which ``who`` does not
    take (only ``gradient`` and ``withgradient`` do)."""
    if isinstance(x, Annotation):
        raise TypeError(f'{who} does not take tr.{type(x).__name__} arguments (only '
                        f'tr.gradient and tr.withgradient do): pass the value itself, '
                        f'x.val')


def check_output(y: Any, who: str = 'jacobian') -> None:
    """A ``ValueError`` unless ``y``, what ``f`` returned, is one array or number (the
    output of a Jacobian, a jvp or a sparsity pattern).

    >>> check_output((1.0, 2.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: jacobian needs f to return one array or number; f returned tuple. ...
    """
    if not differentiable(y):
        raise ValueError(f'{who} needs f to return one array or number; f returned '
                         f'{type(y).__name__}. Use pullback(f, ...) for other outputs.')


def no_complex_inputs(spec: 'Args', who: str) -> None:
    """A ``ValueError`` if a differentiated leaf of ``spec`` is complex: a Jacobian (or
    Hessian) with respect to it is ambiguous; the message says what to pass instead."""
    for a in spec.flat:
        if float_dtype(a).kind == 'c':
            raise ValueError(
                f'{who} with respect to a complex argument is ambiguous (a complex derivative '
                f'exists only for holomorphic functions); pass the real and imaginary parts '
                f'as real arrays, e.g. ' + (
                    f'{who}(lambda x, y: f(x + 1j * y), z.real, z.imag)' if who == 'jacobian'
                    else f'{who}(lambda v: f(v[0] + 1j * v[1]), np.stack([z.real, z.imag]))'))


class Args:
    """``Args(args)``: the differentiated leaves of an argument tuple (``.flat``), and
    the way back to trees.

    Each argument is flattened on its own: a tied array (the same object twice in
    one argument) is one leaf, so its gradient is the total, shared in every place.

    >>> import numpy as np, tracked as tr
    >>> spec = tr.arguments.Args(({'w': np.ones(2), 'act': 'tanh'}, 2.0))
    >>> len(spec.flat), spec.gradients([np.zeros(2), 1.0])
    (2, ({'w': array([0., 0.]), 'act': None}, np.float64(1.0)))
    """

    def __init__(self, args, who='this operator'):
        self.args = args
        self.flat: list[Any] = []
        self.defs: list[Any] = []     # per argument: 'leaf', 'const' or its TreeDef
        for a in args:
            if differentiable(a):
                self.defs.append('leaf')
                self.flat.append(a)
                continue
            refuse_annotation(a, who)
            if not is_node(a):
                self.defs.append('const')
            else:
                ls, d = flatten(a, differentiable)
                self.defs.append(d)
                self.flat.extend(ls)
        self.flat_only = all(d == 'leaf' for d in self.defs)   # no trees, no constants

    def rebuild(self, values):
        """The arguments with their leaves replaced by ``values`` (flat, in order)."""
        if self.flat_only:
            return values
        return self._place(values, True)

    def gradients(self, cts, fn=None):
        """Per argument: the tree of ``fn(cotangent, leaf)`` (default ``match_gradient``);
        None for the rest."""
        fn = fn or match_gradient
        values = [fn(g, a) for g, a in zip(cts, self.flat)]
        if self.flat_only:
            return tuple(values)
        return self._place(values, False)

    def _place(self, values, keep):
        out = []
        pos = 0
        for a, d in zip(self.args, self.defs):
            if d == 'leaf':
                out.append(values[pos])
                pos += 1
            elif d == 'const':
                out.append(a if keep else None)
            else:
                n = d.num_leaves
                out.append(unflatten(d, values[pos:pos + n], keep))
                pos += n
        return tuple(out)


def leaf_value(x):
    """``leaf_value(x)``: the value a leaf holds for argument ``x``: integer arrays become
    float64, an integer scalar stays an integer (usable as an index or size), a
    tracked value of an outer level is kept as it is (that is what nests).

    >>> import numpy as np, tracked as tr
    >>> tr.arguments.leaf_value(np.array([1, 2])), tr.arguments.leaf_value(3)
    (array([1., 2.]), np.int64(3))
    """
    if isinstance(x, Tracked):
        return x
    return as_value(x, int_to_float=isinstance(x, np.ndarray))


def keep_value(value, leaf):
    """``Args.gradients``' ``fn`` that places ``value`` as it is."""
    return value


def match_gradient(g, a):
    """``match_gradient(g, a)``: cotangent ``g`` as the gradient of argument leaf ``a``:
    same shape, a float dtype (``a``'s own if float), an array for an array, a scalar
    for a scalar.

    >>> import numpy as np, tracked as tr
    >>> tr.arguments.match_gradient(np.array(2.0), 3)
    np.float64(2.0)
    >>> tr.arguments.match_gradient(np.ones(2), np.zeros(2, np.float32))
    array([1., 1.], dtype=float32)
    """
    if type(g) is np.ndarray and type(a) is np.ndarray and g.dtype == a.dtype \
            and g.flags.writeable:
        return g                        # the common case: a float array argument
    if g is None or isinstance(g, Tracked):
        return g
    dtype = float_dtype(a)
    if isinstance(a, np.ndarray) or (isinstance(a, Tracked) and a.ndim > 0):
        if type(g) is not np.ndarray or g.dtype != dtype or not g.flags.writeable:
            g = np.array(g, dtype=dtype)    # also copies read-only broadcast views
        return g
    if isinstance(g, np.ndarray):
        g = g[()]
    return g if isinstance(g, (np.floating, np.complexfloating)) else dtype.type(g)


def float_dtype(v):
    """``float_dtype(v)``: ``v``'s dtype if it is a float or complex type, else float64
    (the dtype of its gradient).

    >>> import numpy as np, tracked as tr
    >>> tr.arguments.float_dtype(np.ones(1, np.float32)), tr.arguments.float_dtype(3)
    (dtype('float32'), dtype('float64'))
    >>> tr.arguments.float_dtype(1j)
    dtype('complex128')
    """
    dtype = getattr(plain(v), 'dtype', None)
    if dtype is None and isinstance(v, complex):
        return np.dtype(np.complex128)
    return dtype if dtype is not None and dtype.kind in 'fc' else np.dtype(np.float64)


def is_number_list(x):
    """``is_number_list(x)``: a non-empty list or tuple of numbers, which the API reads as
    an array (``param([1, 2])``, ``jacobian(f, [1.0, 2.0])``).

    >>> import tracked as tr
    >>> tr.arguments.is_number_list([1, 2.5]), tr.arguments.is_number_list([1, 'a'])
    (True, False)
    """
    return type(x) in (list, tuple) and bool(x) and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in x)


# --------------------------------------------------------------------------
# The differentiated output
# --------------------------------------------------------------------------

def loss_output(y, who='gradient', jacobian='jacobian(f, ...)'):
    """``loss_output(y, who) -> (loss, seed)``: the loss among ``f``'s outputs ``y``
    (``first_output``), a ``ValueError`` naming ``who`` unless it is a real scalar
    (``check_scalar``); ``seed`` is the cotangent of the whole output.  Every path that
    differentiates a loss asks this function.

    >>> import tracked as tr
    >>> tr.arguments.loss_output({'loss': 2.0, 'n': 3})
    (2.0, {'loss': 1.0, 'n': None})
    >>> tr.arguments.loss_output([2.0, 3.0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gradient needs f to return a real scalar (or a tuple, named tuple or dict ...
    """
    first, seed = first_output(y)
    check_scalar(first, who, jacobian)
    return first, seed


def first_output(y):
    """``first_output(y) -> (differentiated, seed)``: the element of ``f``'s output that
    is differentiated (the first of a tuple or dict), and the cotangent of the output.
    A list is not a (loss, aux) pair: it is returned whole (``check_scalar`` refuses it).

    >>> import tracked as tr
    >>> tr.arguments.first_output((2.0, 'aux'))
    (2.0, (1.0, None))
    """
    if isinstance(y, tuple) and y:
        return y[0], (1.0,) + (None,) * (len(y) - 1)
    if isinstance(y, dict) and y:
        k0 = next(iter(y))
        return y[k0], {k: (1.0 if k is k0 else None) for k in y}
    return y, 1.0


def check_scalar(v, who, jacobian='jacobian(f, ...)'):
    """``check_scalar(v, who, jacobian='jacobian(f, ...)')``: raise a ``ValueError`` naming
    ``who`` unless ``v`` is a real scalar; the message points to ``jacobian`` for arrays.

    >>> import numpy as np, tracked as tr
    >>> tr.arguments.check_scalar(np.ones(3), 'gradient')
    Traceback (most recent call last):
    ...
    ValueError: gradient needs f to return a real scalar; f returned an array of shape
    (3,). Use jacobian(f, ...) for the derivative of every output, or pullback(f, ...) to
    weight the outputs with a cotangent.
    """
    shape = getattr(v, 'shape', None)
    kind = getattr(getattr(v, 'dtype', None), 'kind', None)
    if shape is None and isinstance(v, (int, float)) and not isinstance(v, bool):
        return
    if shape is None:
        hint = ' (return a tuple (loss, aux) for auxiliary outputs)' if isinstance(v, list) \
            else ''
        raise ValueError(f'{who} needs f to return a real scalar (or a tuple, named tuple '
                         f'or dict whose first element is one); f returned '
                         f'{type(v).__name__}{hint}. Use {jacobian} or pullback(f, ...) '
                         f'for other outputs.')
    if shape != () or kind is None or kind not in 'fiu':
        what = f'an array of shape {shape}' if shape != () else \
            f'a value of dtype {getattr(v, "dtype", None)}'
        raise ValueError(f'{who} needs f to return a real scalar; f returned {what}. '
                         f'Use {jacobian} for the derivative of every output, or '
                         f'pullback(f, ...) to weight the outputs with a cotangent.')
