"""Products: matmul, einsum, dot, vdot, inner, outer, tensordot, kron, cross, and
their other spellings (np.linalg.matmul/tensordot/outer/cross/vecdot, the vecdot/
matvec/vecmat ufuncs, multi_dot).

matmul, einsum and cross are primitives, linear in each operand (``linear='each'``:
the tangent is the sum of the products with one operand replaced by its tangent).
Their pullbacks multiply the cotangent by the conjugates of the other operands, the
adjoint under ChainRules' convention (for real operands the conjugate is skipped).
The rest are composites written with them, reshape/transpose and multiply, so their
derivatives fall out; vdot, vecdot and vecmat conjugate their first operand, as
NumPy does.
"""
import functools
import operator
import string
import warnings

import numpy as np

from ..registry import RULES, Primitive, defcomposite, defvjp
from ..dispatch import apply
from .matrices import (arr, col, conj, dtype_of, moveaxis, mT, pad_batch, reject_out, row,
                       shape_of)


# --------------------------------------------------------------------------
# matmul (a ufunc in NumPy 2, reached through __array_ufunc__ and the @ operator)
# --------------------------------------------------------------------------

_ndarray = np.ndarray


def matmul_forward(a, b, **kwargs):
    """``np.matmul`` as the rule runs it: refuses the axes= NumPy takes (tangents and
    pullbacks assume the default layout)."""
    if 'axes' in kwargs or 'axis' in kwargs:
        raise TypeError('np.matmul(..., axes=...) is not supported on tracked values; '
                        'move the axes with np.moveaxis and use the default layout')
    return np.matmul(a, b, **kwargs)


def _matmul_vjp_a(g, ans, a, b, **kwargs):
    if type(b) is _ndarray and b.ndim == 2 and b.dtype.kind != 'c' and type(a) is _ndarray \
            and a.ndim == 2:
        return g @ b.T      # a layer's matrices: the general path's helpers cost ~2 µs
    a, b = arr(a), arr(b)
    b = conj(b)
    if b.ndim == 1:
        return g * b if a.ndim == 1 else col(g) * b         # outer product per row
    if a.ndim == 1:
        if b.ndim == 2:
            return b @ g                                     # (k,) directly: no sum entry
        return row(g) @ mT(b)                                # (..., 1, k): summed to (k,)
    return g @ mT(b)


def _matmul_vjp_b(g, ans, a, b, **kwargs):
    if type(a) is _ndarray and a.ndim == 2 and a.dtype.kind != 'c' and type(b) is _ndarray \
            and b.ndim == 2:
        return a.T @ g
    a, b = arr(a), arr(b)
    a = conj(a)
    if a.ndim == 1:
        return g * a if b.ndim == 1 else col(a) * row(g)
    if b.ndim == 1:
        if a.ndim == 2:
            return g @ a                                     # (k,) directly: no sum entry
        return row(g) @ a                                    # (..., 1, k): summed to (k,)
    return mT(a) @ g


def _matmul_batched(ts, ans, a, b, **kwargs):
    # Tangents stacked along a leading axis: matmul broadcasts batch axes, once the
    # tangent of a matrix operand gets size-1 axes for the other's batch axes, and a
    # batch of vectors on the right is made a stack of columns.  A vector against a
    # stack of matrices is left to the one-at-a-time path.
    ta, tb = ts
    a, b = arr(a), arr(b)
    if (a.ndim == 1 and b.ndim > 2) or (b.ndim == 1 and a.ndim > 2):
        return NotImplemented
    nd = len(shape_of(ans))
    out = None
    if ta is not None:
        out = np.matmul(pad_batch(ta, nd - a.ndim) if b.ndim > 1 else ta, b)
    if tb is not None:
        if b.ndim == 1:
            term = np.reshape(np.matmul(a, col(tb)), shape_of(tb)[:1] + shape_of(ans))
        else:
            term = np.matmul(a, pad_batch(tb, nd - b.ndim if a.ndim > 1 else 0))
        out = term if out is None else out + term
    return out


def _matmul_structure(varying, ans, a, b, **kwargs):
    """out[i, j] reads a[i, s] and b[s, j] where the other factor is not a structural
    zero: a constant operand's zeros are (A @ x with a sparse stencil A); a varying
    one's are not.  Stacks of matrices: every element (None)."""
    a, b = arr(a), arr(b)
    if a.ndim > 2 or b.ndim > 2:
        return None
    A = np.reshape(a, (1, -1)) if a.ndim == 1 else a            # (m, k)
    B = np.reshape(b, (-1, 1)) if b.ndim == 1 else b            # (k, p)
    (m, k), p = np.shape(A), np.shape(B)[1]
    out = {}
    if 1 in varying:
        i, s = np.nonzero(np.ones((m, k), bool) if 0 in varying else A != 0)
        j = np.arange(p)
        out[1] = ((i[:, None] * p + j).ravel(), (s[:, None] * p + j).ravel())
    if 0 in varying:
        s, j = np.nonzero(np.ones((k, p), bool) if 1 in varying else B != 0)
        i = np.arange(m)[:, None]
        out[0] = ((i * p + j).ravel(), (i * k + s).ravel())
    return out


defvjp(np.matmul, _matmul_vjp_a, _matmul_vjp_b, fn=matmul_forward, kernel='matmul', linear='each',
       batched=_matmul_batched, structure=_matmul_structure)
# Both pullbacks return a new product: the backward pass may compute the next pullback
# (tanh's, say) in it instead of in another new array.
RULES[np.matmul].fresh = (True, True)


# --------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------
# The pullback of operand k is one einsum of g with the other operands, written to
# k's labels.  Three things need care: a label repeated in operand k ('ii') is a
# diagonal, rebuilt by renaming the repeats and adding identity matrices as extra
# operands; a label only operand k has (summed out, 'ij->i') is missing from every
# other input, so the result is broadcast along it; a size-1 axis of operand k that
# broadcast against a longer one is summed.  Ellipses become explicit labels.

_LETTERS = string.ascii_letters


def _sublist_labels(sub):
    return ''.join('...' if s is Ellipsis else _LETTERS[operator.index(s)] for s in sub)


def _einsum_call(args):
    """``(subscripts, operand positions)`` of an einsum call in either NumPy form."""
    if isinstance(args[0], str):
        return args[0].replace(' ', ''), tuple(range(1, len(args)))
    n = len(args)
    positions = tuple(range(0, n - 1 if n % 2 else n, 2))
    subs = ','.join(_sublist_labels(args[p + 1]) for p in positions)
    if n % 2:
        subs += '->' + _sublist_labels(args[-1])
    return subs, positions


@functools.lru_cache(maxsize=1024)
def _einsum_plan(subs, shapes, k):
    """How to compute operand ``k``'s cotangent: ``(spec, eye sizes, mid shape, broadcast)``."""
    inputs, arrow, out = subs.partition('->')
    inputs = inputs.split(',')
    used = set(c for c in subs if c.isalpha())
    fresh = (c for c in _LETTERS if c not in used)
    ell_nd = [len(shape) - (len(s) - 3) if '...' in s else 0 for s, shape in zip(inputs, shapes)]
    n_ell = max(ell_nd, default=0)
    ell = ''.join(next(fresh) for _ in range(n_ell))
    labels = [s.replace('...', ell[n_ell - e:]) for s, e in zip(inputs, ell_nd)]
    if arrow:
        out_labels = out.replace('...', ell)
    else:   # implicit output: the ellipsis, then labels seen once, in character order
        flat = ''.join(s.replace('...', '') for s in inputs)
        out_labels = ell + ''.join(sorted(c for c in set(flat) if flat.count(c) == 1))
    size: dict[str, int] = {}
    for lab, shape in zip(labels, shapes):
        for c, n in zip(lab, shape):
            size[c] = max(size.get(c, 1), n)

    own, shape_k = labels[k], shapes[k]
    renamed, eyes, seen = [], [], set()
    for c, n in zip(own, shape_k):
        if c in seen:                     # a diagonal: new label tied to c by an identity
            f = next(fresh)
            eyes.append((c + f, n))
            renamed.append(f)
        else:
            seen.add(c)
            renamed.append(c)
    others = [lab for i, lab in enumerate(labels) if i != k]
    operands = [out_labels] + others + [e for e, _ in eyes]
    available = set(''.join(operands))
    keep, mid = [], []
    broadcast = False
    for c, orig, n in zip(renamed, own, shape_k):
        if c not in available:            # summed out and only here: broadcast along it
            mid.append(1)
            broadcast = broadcast or n != 1
        elif n == 1 and size[orig] != 1:  # a size-1 axis that broadcast: summed
            mid.append(1)
        else:
            keep.append(c)
            mid.append(n)
    spec = ','.join(operands) + '->' + ''.join(keep)
    reshape = tuple(mid) if len(keep) != len(mid) else None
    return spec, tuple(n for _, n in eyes), reshape, broadcast


def _einsum_vjp(pos, g, ans, *args, **kwargs):
    subs, positions = _einsum_call(args)
    ops = [args[p] for p in positions]
    shapes = tuple(shape_of(o) for o in ops)
    k = positions.index(pos)
    spec, eyes, mid, broadcast = _einsum_plan(subs, shapes, k)
    dt = dtype_of(g)
    extra = [np.eye(n, dtype=dt) for n in eyes]
    opt = kwargs.get('optimize', False)
    if not isinstance(opt, (bool, str)):   # an einsum_path for the forward operands
        opt = True
    others = (conj(o) for i, o in enumerate(ops) if i != k)
    r = np.einsum(spec, g, *others, *extra, optimize=opt)
    if mid is not None:
        r = np.reshape(r, mid)
    if broadcast:
        r = np.broadcast_to(r, shapes[k])
    return r


def _einsum(*operands, out=None, **kwargs):
    reject_out('np.einsum', out)
    return np.einsum(*operands, **kwargs)


# einsum is variadic: one pullback per argument position.  NumPy allows at most 64
# operands, so 2 * 64 + 1 positions cover the interleaved (operand, sublist) form.
defvjp(np.einsum, *(functools.partial(_einsum_vjp, i) for i in range(2 * 64 + 1)), fn=_einsum,
       linear='each')


# --------------------------------------------------------------------------
# Products written with matmul: dot, vdot, inner, outer, tensordot, kron
# --------------------------------------------------------------------------

def _dot(a, b, out=None):
    reject_out('np.dot', out)
    a, b = arr(a), arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    if a.ndim == 1 or b.ndim == 1 or (a.ndim == 2 and b.ndim == 2):
        return np.matmul(a, b)
    return _tensordot(a, b, ([a.ndim - 1], [b.ndim - 2]))   # sum over a[-1], b[-2]


def _vdot(a, b):
    return np.matmul(conj(np.reshape(a, (-1,))), np.reshape(b, (-1,)))


def _inner(a, b):
    a, b = arr(a), arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    return _tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def _outer(a, b, out=None):
    reject_out('np.outer', out)
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


def _axes_list(ax, nd):
    ax = [ax] if np.ndim(ax) == 0 else list(ax)
    return [operator.index(i) % nd if nd else operator.index(i) for i in ax]


def _tensordot(a, b, axes=2):
    """NumPy's own algorithm: transpose and reshape both to matrices, one matmul."""
    a, b = arr(a), arr(b)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if np.ndim(axes) == 0:
        n = operator.index(axes)
        ax_a, ax_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        ax_a, ax_b = axes
        ax_a, ax_b = _axes_list(ax_a, a.ndim), _axes_list(ax_b, b.ndim)
    if len(ax_a) != len(ax_b) or any(sa[i] != sb[j] for i, j in zip(ax_a, ax_b)):
        raise ValueError(f'np.tensordot: shape-mismatch for sum: axes {ax_a} of a shape '
                         f'{sa} and axes {ax_b} of b shape {sb} must have equal lengths')
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    k = int(np.prod([sa[i] for i in ax_a]))
    perm_a, perm_b = tuple(free_a + ax_a), tuple(ax_b + free_b)
    at = a if perm_a == tuple(range(a.ndim)) else np.transpose(a, perm_a)
    bt = b if perm_b == tuple(range(b.ndim)) else np.transpose(b, perm_b)
    at = np.reshape(at, (-1, k))
    bt = np.reshape(bt, (k, -1))
    return np.reshape(at @ bt, tuple(sa[i] for i in free_a) + tuple(sb[i] for i in free_b))


def _kron(a, b):
    """Interleave the axes of a and b in one broadcast product, then merge pairs."""
    a, b = arr(a), arr(b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    if nd == 0:
        return np.multiply(a, b)
    a2 = np.reshape(a, tuple(x for n in sa for x in (n, 1)))
    b2 = np.reshape(b, tuple(x for n in sb for x in (1, n)))
    return np.reshape(a2 * b2, tuple(m * n for m, n in zip(sa, sb)))


defcomposite(np.dot, _dot)
defcomposite(np.vdot, _vdot)
defcomposite(np.inner, _inner)
defcomposite(np.outer, _outer)
defcomposite(np.tensordot, _tensordot)
defcomposite(np.kron, _kron)


# --------------------------------------------------------------------------
# cross: a composite moving the vector axes last around one primitive
# --------------------------------------------------------------------------

# Re <g, da x b> = Re <conj(b) x g, da> and Re <g, a x db> = Re <g x conj(a), db>
def _cross_batched(ts, ans, a, b):
    """The tangent of a batch: each tangent aligned with the output's axes first."""
    nd = len(shape_of(ans))
    ta, tb = (None if t is None else pad_batch(t, nd - len(shape_of(x)))
              for t, x in zip(ts, (a, b)))
    out = None if ta is None else np.cross(ta, b)
    if tb is not None:
        out = np.cross(a, tb) if out is None else out + np.cross(a, tb)
    return out


_cross_last = Primitive(np.cross, (lambda g, ans, a, b: np.cross(conj(b), g),
                                   lambda g, ans, a, b: np.cross(g, conj(a))),
                        name='np.cross', linear='each', batched=_cross_batched)


def _numpy_takes_2_vectors():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        try:
            np.cross(np.ones(2), np.ones(2))
        except ValueError:
            return False
    return True


CROSS_OF_2_VECTORS = _numpy_takes_2_vectors()      # removed in NumPy 2.5


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(arr(a), axisa, -1), moveaxis(arr(b), axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError('incompatible dimensions for cross product\n'
                         '(dimension must be 2 or 3)')
    if a.shape[-1] == 2 or b.shape[-1] == 2:
        if not CROSS_OF_2_VECTORS:
            raise ValueError(f'Both input arrays must be (arrays of) 3-dimensional vectors, '
                             f'but they are {a.shape[-1]} and {b.shape[-1]} dimensional '
                             f'instead.')
        # NumPy 2.0-2.4 still take 2-vectors (deprecated): as 3-vectors with a zero third
        # component, and only that component of the product when both are 2-vectors
        warnings.warn('Arrays of 2-dimensional vectors are deprecated. Use arrays of '
                      '3-dimensional vectors instead. (deprecated in NumPy 2.0)',
                      DeprecationWarning, stacklevel=3)
        both = a.shape[-1] == b.shape[-1] == 2
        a, b = _as_3_vectors(a), _as_3_vectors(b)
        if both:
            return apply(_cross_last, (a, b), {})[..., 2]
    c = apply(_cross_last, (a, b), {})
    return moveaxis(c, -1, axisc)


def _as_3_vectors(v):
    if v.shape[-1] == 3:
        return v
    return np.concatenate([v, np.zeros(v.shape[:-1] + (1,), dtype_of(v))], axis=-1)


defcomposite(np.cross, _cross)


# --------------------------------------------------------------------------
# Other spellings, written with the rules above: the array-API names in
# np.linalg, the vecdot/matvec/vecmat ufuncs, multi_dot
# --------------------------------------------------------------------------

def _check_gufunc_kwargs(name, kwargs):
    for k in kwargs:
        if k not in ('axis', 'keepdims'):
            raise TypeError(f'{name}(..., {k}=...) is not supported on tracked values')


def _vecdot(a, b, axis=-1, keepdims=False, **kwargs):
    _check_gufunc_kwargs('np.vecdot', kwargs)
    a, b = moveaxis(arr(a), axis, -1), moveaxis(arr(b), axis, -1)
    r = np.sum(conj(a) * b, axis=-1, keepdims=keepdims)
    return moveaxis(r, -1, axis) if keepdims else r


def _linalg_outer(a, b):
    a, b = arr(a), arr(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f'np.linalg.outer needs 1-d arrays, got {a.ndim}-d and {b.ndim}-d; '
                         f'np.outer flattens its inputs')
    return _outer(a, b)


def _linalg_vecdot(a, b, axis=-1):
    return _vecdot(a, b, axis=axis)


def _matvec(m, v, **kwargs):
    if kwargs:
        raise TypeError(f'np.matvec(..., {", ".join(kwargs)}=...) is not supported on tracked '
                        f'values; move the axes with np.moveaxis first')
    r = np.matmul(m, col(arr(v)))                   # (..., m, 1)
    return np.reshape(r, shape_of(r)[:-1])


def _vecmat(v, m, **kwargs):
    if kwargs:
        raise TypeError(f'np.vecmat(..., {", ".join(kwargs)}=...) is not supported on tracked '
                        f'values; move the axes with np.moveaxis first')
    r = np.matmul(row(conj(arr(v))), m)             # (..., 1, m)
    s = shape_of(r)
    return np.reshape(r, s[:-2] + s[-1:])


def _multi_dot(arrays, *, out=None):
    reject_out('np.linalg.multi_dot', out)
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError('np.linalg.multi_dot needs at least two arrays')
    r = arrays[0]
    for x in arrays[1:]:          # matmul treats a 1-d first/last array as multi_dot does
        r = np.matmul(r, x)
    return r


defcomposite(np.linalg.matmul, lambda a, b: np.matmul(a, b))
defcomposite(np.linalg.tensordot, lambda a, b, axes=2: _tensordot(a, b, axes))
defcomposite(np.linalg.outer, _linalg_outer)
defcomposite(np.linalg.cross, lambda a, b, axis=-1: _cross(a, b, axis=axis))
defcomposite(np.linalg.vecdot, _linalg_vecdot)
defcomposite(np.vecdot, _vecdot)
if hasattr(np, 'matvec'):                 # NumPy >= 2.2
    defcomposite(np.matvec, _matvec)
    defcomposite(np.vecmat, _vecmat)
defcomposite(np.linalg.multi_dot, _multi_dot)
