"""The convenience API (Zygote/Flux style), each operator a few lines over ``vjp``.

``vjp`` is the one primitive: it records ``f`` at a fresh trace level (above every
level that exists, so calls nest without perturbation confusion) and returns the
value and a reusable ``back``.  ``pullback`` adds argument trees; ``gradient``,
``withgradient``, ``jacobian``, ``hessian``, ``diaghessian``, ``jvp`` and ``hvp`` are
a few lines each over ``pullback``.  Values returned are plain relative to the
call's level: at the top level NumPy values, under nesting possibly tracked at an
outer level, which is what makes derivatives of derivatives work.
"""
from collections import namedtuple

import numpy as np

from .arguments import (Args, check_scalar, differentiable, first_output, float_dtype,
                        is_number_list, split_backend)
from .registry import Primitive
from .tape import backward, new_level, new_node
from .tree_util import is_node, tree_map
from .values import Tracked, as_value, leaf, plain

__all__ = ['vjp', 'pullback', 'gradient', 'withgradient', 'jacobian', 'withjacobian',
           'hessian', 'hessian_reverse', 'diaghessian', 'jvp', 'hvp']

WithGradient = namedtuple('WithGradient', ['val', 'grad'])
WithJacobian = namedtuple('WithJacobian', ['val', 'grad'])


# --------------------------------------------------------------------------
# The core: vjp over flat arguments
# --------------------------------------------------------------------------

def _leaf_value(x):
    """The value a leaf holds for argument ``x``: integer arrays become float64, an
    integer scalar stays an integer (usable as an index or size), a tracked value
    of an outer level is kept as it is (that is what nests)."""
    if isinstance(x, Tracked):
        return x
    return as_value(x, int_to_float=isinstance(x, np.ndarray))


def vjp(f, *args):
    """``vjp(f, *args) -> (y, back)``: the core of every operator; ``back(dy)`` returns
    one cotangent per argument (``None`` where ``y`` does not depend on it).

    Arguments are array-likes (``pullback`` adds trees and non-numeric arguments).
    ``y`` may be a tree (tuple, dict, ...) of outputs; ``dy`` then mirrors it, with
    ``None`` for outputs that get no cotangent.  ``back`` may be called many times;
    ``back(dy, last=True)`` promises it is the last call, and frees the recorded
    values as it goes (a smaller working set on large arrays).

    >>> import numpy as np, tracked as tr
    >>> y, back = tr.api.vjp(lambda x: np.sin(x) * 2, np.array([0.0, 1.0]))
    >>> back(np.ones(2))[0]
    array([2.        , 1.08060461])
    >>> back(np.ones(2), last=True)[0]     # the last call: frees the graph as it goes
    array([2.        , 1.08060461])
    """
    level = new_level()
    boxed = [leaf(_leaf_value(a), level) for a in args]
    out = f(*boxed)
    y = _unbox(out, level)

    def back(dy=None, *, last=False):
        # ``last``: the caller will not call back again (gradient, withgradient), so
        # the graph, private to this call, is released while it is swept.
        if isinstance(out, Tracked) and out._node.level == level:
            cts = backward(out._node, _seed(dy, out, single=True), retain=True, private=last)
        else:
            roots = _roots(out, dy, level)
            if not roots:
                return tuple(None for _ in boxed)
            cts = backward(_joint_root(roots, level), np.float64(1.0), retain=True,
                           private=last)
        return tuple(_cast_like(cts.get(b._node), b._value) for b in boxed)
    return y, back


def _cast_like(g, x):
    """Cotangent ``g`` in float argument ``x``'s dtype (a float32 input gets a float32
    gradient even where the tape promoted); integer arguments keep a float gradient."""
    dtype = getattr(x, 'dtype', None)
    if g is None or dtype is None or dtype.kind != 'f' or getattr(g, 'dtype', None) == dtype:
        return g
    return g.astype(dtype) if hasattr(g, 'astype') else np.asarray(g, dtype=dtype)[()]


def _at_level(y, level):
    """``y`` seen from outside ``level``: its value if tracked there, else ``y`` itself."""
    return y._value if isinstance(y, Tracked) and y._node.level == level else y


def _is_tracked(x):
    return isinstance(x, Tracked)


def _unbox(out, level):
    if isinstance(out, Tracked):
        return _at_level(out, level)
    if not is_node(out):
        return out
    return tree_map(lambda t: _at_level(t, level), out, is_leaf=_is_tracked, shared=False)


def _roots(out, dy, level):
    """(node, seed) for each output tracked at ``level`` whose cotangent is given
    (``back`` itself serves a single output tracked there)."""
    if isinstance(out, Tracked) or not is_node(out):
        return []
    pairs = []

    def take(o, d):
        if o._node.level == level and d is not None:
            pairs.append((o._node, _seed(d, o)))
    try:
        # shared=False: an output that occurs twice is seeded in each place
        tree_map(take, out, dy, is_leaf=_is_tracked, shared=False)
    except (IndexError, KeyError, AttributeError, TypeError) as e:
        raise ValueError(f'back(dy): dy must mirror the structure of the output '
                         f'({type(out).__name__}), with None for outputs without a '
                         f'cotangent; could not match it ({e})') from None
    return pairs


def _seed(dy, out, single=False):
    """``dy`` as a cotangent for output ``out``: its shape, a float dtype."""
    ans = out._value
    shape = ans.shape
    if (type(dy) is np.ndarray and dy.shape == shape and dy.dtype == ans.dtype
            and dy.dtype.kind == 'f'):
        return dy                      # the common case, e.g. Jacobian rows
    if dy is None and single:
        if shape != ():
            raise ValueError(f'back(dy) needs dy for an output of shape {shape}')
        dtype = ans.dtype           # the output's value dtype, also when it is tracked
        return dtype.type(1.0) if dtype.kind == 'f' else np.float64(1.0)
    if isinstance(dy, Tracked):
        seed = dy
    else:
        dtype = plain(ans).dtype
        seed = np.asarray(dy, dtype=dtype if dtype.kind == 'f' else np.float64)
        if seed.ndim == 0:
            seed = seed[()]
    if seed.shape != shape:
        raise ValueError(f'back(dy): dy has shape {seed.shape}, the output has shape {shape}')
    return seed


def _constant(seed):
    return lambda g, ans: seed


def _joint_root(roots, level):
    """One entry whose parents are all seeded outputs, so one backward pass serves them."""
    prim = Primitive(None, [_constant(s) for _, s in roots], name='outputs')
    return new_node(prim, (), {}, np.float64(0.0), tuple((i, n) for i, (n, _) in enumerate(roots)),
                level)


# --------------------------------------------------------------------------
# pullback, gradient, withgradient
# --------------------------------------------------------------------------

def pullback(f, *args):
    """``pullback(f, *args) -> (y, back)``: the value of ``f`` and a function mapping an
    output cotangent ``dy`` to the gradient tuple (one entry per argument, mirroring
    its structure; None where there is no gradient).

    ``back`` may be called many times.  For a tuple (or dict) output, ``dy`` mirrors
    it and may hold None; for a scalar output ``dy`` defaults to 1.

    >>> import tracked as tr
    >>> y, back = tr.pullback(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)
    >>> y, back(1.0), back(2.0)
    (np.float64(30.0), (np.float64(15.0), np.float64(10.0), np.float64(6.0)), (np.float64(30.0), np.float64(20.0), np.float64(12.0)))
    """
    y, back = _pullback(f, args)
    return y, lambda dy=None: back(dy)


def _pullback(f, args):
    """``pullback`` whose ``back`` also takes ``last=True`` (see ``vjp``)."""
    spec = Args(args)
    y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)
    return y, lambda dy=None, last=False: spec.gradients(back(dy, last=last))


def withgradient(f, *args):
    """``withgradient(f, *args) -> (val, grad)``: the value of ``f`` and its gradient tuple.

    If ``f`` returns a tuple, named tuple or dict, its first element is the scalar
    that is differentiated and ``val`` is the whole return value (auxiliary outputs).
    A backend may follow ``f``: ``withgradient(f, tr.AutoFiniteDifferences(), *args)``.

    >>> import numpy as np, tracked as tr
    >>> tr.withgradient(lambda x, y: x / y, 1, 2)
    WithGradient(val=np.float64(0.5), grad=(np.float64(0.5), np.float64(-0.25)))
    >>> val, (g,) = tr.withgradient(lambda x: (np.sum(1 / x), 1 / x), np.array([1., 2., 4.]))
    >>> val[0], g
    (np.float64(1.75), array([-1.    , -0.25  , -0.0625]))
    """
    backend, args = split_backend(args)
    if backend is not None:
        val, grads = backend.withgradient(f, *args)
        return WithGradient(val, grads)
    y, back = _pullback(f, args)
    first, dy = first_output(y)
    check_scalar(first, 'gradient')
    return WithGradient(y, back(dy, last=True))


def gradient(f, *args):
    """``gradient(f, *args)``: the gradient of scalar ``f`` with respect to each argument.

    One entry per argument, mirroring its structure (a model gives a model of the
    same types holding gradients); None where there is no gradient.  Arrays and
    numbers are differentiated, also inside dicts, lists, tuples and objects; an
    integer scalar stays usable as an index; strings, None, bools, functions give None.

    >>> import numpy as np, tracked as tr
    >>> tr.gradient(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0)
    (np.float64(15.0), np.float64(10.0), np.float64(6.0))
    >>> tr.gradient(lambda x: np.sum(x ** 2), np.array([7., 11., 13.]))
    (array([14., 22., 26.]),)
    """
    return withgradient(f, *args).grad


# --------------------------------------------------------------------------
# Jacobians and Hessians
# --------------------------------------------------------------------------

def _array_arg(x):
    """Jacobian-style operators take array-likes: a list of numbers is an array."""
    return np.asarray(x) if is_number_list(x) else x


def _as_is(value, leaf):
    return value


def _rows_to_matrix(rows, a, m):
    """``J[k, i]`` from the row cotangents of one argument leaf ``a``."""
    n = int(np.size(a)) if not isinstance(a, Tracked) else a.size
    scalar = np.ndim(a) == 0 if not isinstance(a, Tracked) else a.ndim == 0
    dtype = float_dtype(a)
    if any(isinstance(r, Tracked) for r in rows):
        zero = np.zeros(() if scalar else (n,), dtype)
        return np.stack([zero if r is None else (r if scalar else np.reshape(r, (n,)))
                         for r in rows])
    J = np.zeros((m,) if scalar else (m, n), dtype)
    for k, r in enumerate(rows):
        if r is not None:
            J[k] = r if scalar else np.ravel(r)
    return J


def withjacobian(f, *args):
    """``withjacobian(f, *args) -> (val, grad)``: the value of ``f`` and, per argument,
    ``J[k, i] = d y.ravel()[k] / d a.ravel()[i]``.

    ``f`` runs once; each row is one reverse sweep over the recorded tape.  A
    scalar argument gives a vector, a scalar ``y`` one row; non-numeric arguments give None.

    >>> import numpy as np, tracked as tr
    >>> val, (J,) = tr.withjacobian(np.cumsum, np.array([1, 2, 3]))
    >>> val, J
    (array([1., 3., 6.]), array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]]))
    """
    spec = Args(tuple(_array_arg(a) for a in args))
    y, back = vjp(lambda *ls: f(*spec.rebuild(ls)), *spec.flat)
    if not differentiable(y):
        raise ValueError(f'jacobian needs f to return one array or number; f returned '
                         f'{type(y).__name__}. Use pullback(f, ...) for other outputs.')
    shape = np.shape(y) if not isinstance(y, Tracked) else y.shape
    m = int(np.prod(shape))
    dtype = float_dtype(y)
    basis = np.eye(m, dtype=dtype).reshape((m,) + shape)
    rows = [back(basis[k]) for k in range(m)]
    jacs = [_rows_to_matrix([r[j] for r in rows], a, m) for j, a in enumerate(spec.flat)]
    return WithJacobian(y, spec.gradients(jacs, _as_is))


def jacobian(f, *args):
    """``jacobian(f, *args)``: per argument the matrix ``J[k, i] = d y.ravel()[k] / d a.ravel()[i]``.

    >>> import numpy as np, tracked as tr
    >>> J, = tr.jacobian(lambda a: 100 * a[:3] ** 2, np.arange(1, 8))
    >>> J.shape, np.diag(J)
    ((3, 7), array([200., 400., 600.]))
    """
    return withjacobian(f, *args).grad


def _zeros_if_none(g, x):
    if g is not None:
        return g
    return np.zeros(np.shape(plain(x)))


def _grad_of(f):
    """``x -> gradient(f, x)[0]`` (zeros where ``f`` does not depend on ``x``)."""
    return lambda x: _zeros_if_none(gradient(f, x)[0], x)


def hessian(f, x):
    """``hessian(f, x)``: ``H[i, j] = d^2 f / d x.ravel()[i] d x.ravel()[j]``; a scalar for scalar ``x``.

    The Jacobian of the gradient: ``f`` and its backward pass are recorded once, then
    each row is one reverse sweep over that recording.

    >>> import numpy as np, tracked as tr
    >>> tr.hessian(np.sin, np.pi / 2)
    np.float64(-1.0)
    >>> tr.hessian(lambda x: x[0] ** 2 * x[1], np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    """
    x = _array_arg(x)
    H = jacobian(_grad_of(f), x)[0]
    return H[0] if np.ndim(plain(x)) == 0 else H


def hessian_reverse(f, x):
    """``hessian_reverse(f, x)``: the Hessian, each row by its own reverse-over-reverse pass.

    Same result as ``hessian``, without sharing one recording between rows: slower,
    and an independent check of it.

    >>> import numpy as np, tracked as tr
    >>> tr.hessian_reverse(lambda x: x[0] ** 2 * x[1], np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    """
    x = _array_arg(x)
    n = int(np.size(plain(x)))
    shape = np.shape(plain(x))
    g = _grad_of(f)
    rows = [_zeros_if_none(gradient(lambda x, k=k: np.reshape(g(x), (n,))[k], x)[0], x)
            for k in range(n)]
    if not shape:
        return rows[0]
    return np.stack([np.reshape(r, (n,)) for r in rows])


def diaghessian(f, *args):
    """``diaghessian(f, *args)``: per argument an array shaped like it, the Hessian's diagonal.

    >>> import numpy as np, tracked as tr
    >>> np.round(tr.diaghessian(np.arctan2, 1, 2), 2)
    array([-0.16,  0.16])
    """
    spec = Args(tuple(_array_arg(a) for a in args))
    nflat = len(spec.flat)

    def grads(*ls):
        return tuple(_zeros_if_none(g, x) for g, x in zip(
            gradient(lambda *l2: f(*spec.rebuild(l2)), *ls), ls))
    _, back = vjp(grads, *spec.flat)
    diags = []
    for j, a in enumerate(spec.flat):
        shape = np.shape(plain(a))
        n = int(np.prod(shape))
        entries = []
        for k in range(n):
            e = np.zeros(n)
            e[k] = 1
            seed = (None,) * j + (e.reshape(shape),) + (None,) * (nflat - j - 1)
            col = back(seed)[j]
            entries.append(0.0 if col is None else np.reshape(col, (n,))[k])
        diags.append(_assemble(entries, shape, a))
    return spec.gradients(diags, _as_is)


def _assemble(entries, shape, a):
    dtype = float_dtype(a)
    if any(isinstance(v, Tracked) for v in entries):
        d = np.stack([v if isinstance(v, Tracked) else np.asarray(v, dtype) for v in entries])
        return np.reshape(d, shape)
    d = np.array(entries, dtype).reshape(shape)
    return d if isinstance(a, np.ndarray) else d[()]


# --------------------------------------------------------------------------
# Products without matrices
# --------------------------------------------------------------------------

def jvp(f, args, tangents):
    """``jvp(f, args, tangents) -> (y, J @ v)``: the value of ``f(*args)`` and its
    directional derivative along ``tangents`` (one per argument, mirroring it), without
    forming ``J``.

    Reverse over reverse (the double-vjp trick): ``u -> J^T u`` is linear, and its
    pullback along ``v`` is ``J v``; no forward mode is needed.

    >>> import numpy as np, tracked as tr
    >>> tr.jvp(lambda x, y: x * y, (np.array([1., 2.]), 3.0), (np.array([1., 0.]), 1.0))
    (array([3., 6.]), array([4., 2.]))
    """
    if not isinstance(args, tuple):
        args, tangents = (args,), (tangents,)
    y, back = pullback(f, *args)
    if not differentiable(y):
        raise ValueError(f'jvp needs f to return one array or number; f returned '
                         f'{type(y).__name__}')
    u0 = np.zeros(np.shape(plain(y)), float_dtype(y))
    u0 = u0 if u0.ndim else u0[()]
    _, back_linear = pullback(back, u0)
    Jv = back_linear(tuple(tangents))[0]
    return y, u0 if Jv is None else Jv


def hvp(f, x, v):
    """``hvp(f, x, v)``: the Hessian of scalar ``f`` at ``x`` times ``v``, without forming it.

    One recording of the gradient and one reverse sweep over it.

    >>> import numpy as np, tracked as tr
    >>> tr.hvp(lambda x: np.sum(x ** 3), np.array([1., 2.]), np.array([1., 1.]))
    array([ 6., 12.])
    """
    x = _array_arg(x)
    _, back = pullback(_grad_of(f), x)
    Hv = back(v)[0]
    return _zeros_if_none(Hv, x)
