"""Linear algebra rules: products (matmul, dot, einsum, ...) and np.linalg.

Every pullback is ``vjp(g, ans, *args, **kwargs)`` written with NumPy operations
(matmul, einsum, solve, inv, reshape, transpose, ...), so it is recorded -- and
differentiable -- when ``g`` or the saved arguments are tracked at an outer level.
Batch dimensions broadcast; pullbacks return cotangents of the broadcast shape and
the tape sums them back.  Constants built inside pullbacks (identity matrices,
triangle masks) take the cotangent's dtype, so float32 stays float32.

Primitives own the numerics: matmul, einsum, inv, det, solve, cholesky, pinv, and
the multi-output slogdet and eigh (one entry each, returning NumPy's own named
tuples; their pullbacks get one cotangent per output, None where unused).
dot, vdot, inner, outer, tensordot, kron and cross are composites: written with
those primitives (and reshape/transpose/multiply), their derivatives fall out.  So
are the other spellings: np.linalg.matmul/tensordot/outer/cross/vecdot, the
vecdot/matvec/vecmat ufuncs, multi_dot, matrix_power and eigvalsh.

Conventions where NumPy's functions read only part of their input:

- cholesky and eigh (and pinv with ``hermitian=True``) read one triangle of the
  input (the lower one, or the upper for ``upper=True`` / ``UPLO='U'``).  The
  gradient is that of the function NumPy computes: the symmetric "standard"
  gradient S folded onto the triangle read, ``diag(S) + 2 * tril(S, -1)``.  It
  agrees with finite differences of the NumPy call for every input, and with the
  symmetric gradient along every symmetric direction.
- eigh assumes distinct eigenvalues for eigenvector cotangents; exactly repeated
  eigenvalues contribute nothing (instead of 0 * inf = nan), so losses of the
  eigenvalues alone stay finite at degenerate points such as the identity.
- slogdet's sign is returned tracked with a zero derivative (it is locally
  constant), so replayed tapes recompute it instead of baking in a constant.
"""
import functools
import operator
import string

import numpy as np

from ..registry import Primitive, defcomposite, defvjp
from ..values import Tracked, apply



# --------------------------------------------------------------------------
# Helpers (work on plain arrays and on values tracked at an outer level)
# --------------------------------------------------------------------------

def _arr(x):
    """``x`` as an array-like with ``.shape``/``.ndim``; tracked values untouched."""
    return x if isinstance(x, (np.ndarray, Tracked)) else np.asarray(x)


def _shape(x):
    s = getattr(x, 'shape', None)
    return np.shape(x) if s is None else s


def _dtype(x):
    d = getattr(x, 'dtype', None)
    return np.result_type(x) if d is None else d


def _mT(x):
    """Swap the last two axes (a transpose per matrix of a stack)."""
    nd = len(_shape(x))
    if nd == 2:
        return x.T                 # a view for arrays, np.transpose for tracked values
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    return np.transpose(x, perm)


def _is_complex(x):
    return _dtype(x).kind == 'c'


def _mH(x):
    """The conjugate transpose of each matrix (the transpose for real ones)."""
    return np.conj(_mT(x)) if _is_complex(x) else _mT(x)


def _col(x):
    """Append an axis: ``x[..., None]``."""
    return np.reshape(x, tuple(_shape(x)) + (1,))


def _row(x):
    """Insert an axis before the last: ``x[..., None, :]``."""
    s = tuple(_shape(x))
    return np.reshape(x, s[:-1] + (1,) + s[-1:])


def _moveaxis(x, src, dst):
    nd = len(_shape(x))
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return np.transpose(x, tuple(perm))


def _fold_triangle(s, lower=True):
    """Gradient of a function of the symmetric (Hermitian) matrix that one triangle of
    the input stands for: ``diag(s) + tril(s + s^H, -1)`` (``triu`` when not ``lower``);
    LAPACK reads only the real part of a complex diagonal."""
    n = _shape(s)[-1]
    dt = _dtype(s)
    eye = np.eye(n, dtype=dt)
    strict = np.tri(n, k=-1, dtype=dt)
    if not lower:
        strict = strict.T
    diag = s * eye
    if _is_complex(s):
        diag = np.real(diag) * (1.0 + 0.0j)
    return diag + (s + _mH(s)) * strict


def _reject_out(name, out):
    if out is not None:
        raise TypeError(f'{name}(..., out=...) cannot write a tracked result into an '
                        f'array; use y = {name}(...) instead')


# --------------------------------------------------------------------------
# matmul (a ufunc in NumPy 2, reached through __array_ufunc__ and the @ operator)
# --------------------------------------------------------------------------

def _matmul(a, b, **kwargs):
    if 'axes' in kwargs or 'axis' in kwargs:
        raise TypeError('np.matmul(..., axes=...) is not supported on tracked values; '
                        'move the axes with np.moveaxis and use the default layout')
    return np.matmul(a, b, **kwargs)


def _matmul_vjp_a(g, ans, a, b, **kwargs):
    a, b = _arr(a), _arr(b)
    if b.ndim == 1:
        return g * b if a.ndim == 1 else _col(g) * b        # outer product per row
    if a.ndim == 1:
        if b.ndim == 2:
            return b @ g                                     # (k,) directly: no sum entry
        return _row(g) @ _mT(b)                              # (..., 1, k): summed to (k,)
    return g @ _mT(b)


def _matmul_vjp_b(g, ans, a, b, **kwargs):
    a, b = _arr(a), _arr(b)
    if a.ndim == 1:
        return g * a if b.ndim == 1 else _col(a) * _row(g)
    if b.ndim == 1:
        if a.ndim == 2:
            return g @ a                                     # (k,) directly: no sum entry
        return _row(g) @ a                                   # (..., 1, k): summed to (k,)
    return _mT(a) @ g


def _matmul_batched(ts, ans, a, b, **kwargs):
    # Tangents stacked along a leading axis: matmul broadcasts batch axes, once the
    # tangent of a matrix operand gets size-1 axes for the other's batch axes, and a
    # batch of vectors on the right is made a stack of columns.  A vector against a
    # stack of matrices is left to the one-at-a-time path.
    ta, tb = ts
    a, b = _arr(a), _arr(b)
    if (a.ndim == 1 and b.ndim > 2) or (b.ndim == 1 and a.ndim > 2):
        return NotImplemented
    nd = len(_shape(ans))
    out = None
    if ta is not None:
        out = np.matmul(_pad_batch(ta, nd - a.ndim) if b.ndim > 1 else ta, b)
    if tb is not None:
        if b.ndim == 1:
            term = np.reshape(np.matmul(a, _col(tb)), _shape(tb)[:1] + tuple(_shape(ans)))
        else:
            term = np.matmul(a, _pad_batch(tb, nd - b.ndim if a.ndim > 1 else 0))
        out = term if out is None else out + term
    return out


def _pad_batch(t, extra):
    """Size-1 axes after the leading (batch) axis of ``t``."""
    if extra <= 0:
        return t
    s = tuple(_shape(t))
    return np.reshape(t, s[:1] + (1,) * extra + s[1:])


defvjp(np.matmul, _matmul_vjp_a, _matmul_vjp_b, fn=_matmul, kernel='matmul', linear='each',
       batched=_matmul_batched)


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
    size = {}
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
    shapes = tuple(tuple(_shape(o)) for o in ops)
    k = positions.index(pos)
    spec, eyes, mid, broadcast = _einsum_plan(subs, shapes, k)
    dt = _dtype(g)
    extra = [np.eye(n, dtype=dt) for n in eyes]
    opt = kwargs.get('optimize', False)
    if not isinstance(opt, (bool, str)):   # an einsum_path for the forward operands
        opt = True
    r = np.einsum(spec, g, *(o for i, o in enumerate(ops) if i != k), *extra, optimize=opt)
    if mid is not None:
        r = np.reshape(r, mid)
    if broadcast:
        r = np.broadcast_to(r, shapes[k])
    return r


def _einsum(*operands, out=None, **kwargs):
    _reject_out('np.einsum', out)
    return np.einsum(*operands, **kwargs)


# einsum is variadic: one pullback per argument position.  NumPy allows at most 64
# operands, so 2 * 64 + 1 positions cover the interleaved (operand, sublist) form.
defvjp(np.einsum, *(functools.partial(_einsum_vjp, i) for i in range(2 * 64 + 1)), fn=_einsum, linear='each')


# --------------------------------------------------------------------------
# Products written with matmul: dot, vdot, inner, outer, tensordot, kron
# --------------------------------------------------------------------------

def _dot(a, b, out=None):
    _reject_out('np.dot', out)
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    if a.ndim == 1 or b.ndim == 1 or (a.ndim == 2 and b.ndim == 2):
        return np.matmul(a, b)
    return _tensordot(a, b, ([a.ndim - 1], [b.ndim - 2]))   # sum over a[-1], b[-2]


def _vdot(a, b):
    return np.matmul(np.reshape(a, (-1,)), np.reshape(b, (-1,)))


def _inner(a, b):
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    return _tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def _outer(a, b, out=None):
    _reject_out('np.outer', out)
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


def _axes_list(ax, nd):
    ax = [ax] if np.ndim(ax) == 0 else list(ax)
    return [operator.index(i) % nd if nd else operator.index(i) for i in ax]


def _tensordot(a, b, axes=2):
    """NumPy's own algorithm: transpose and reshape both to matrices, one matmul."""
    a, b = _arr(a), _arr(b)
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
    a, b = _arr(a), _arr(b)
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

# g . (da x b) = da . (b x g) and g . (a x db) = db . (g x a)
_cross_last = Primitive(np.cross, (lambda g, ans, a, b: np.cross(b, g),
                                   lambda g, ans, a, b: np.cross(g, a)),
                        name='np.cross', linear='each')


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _moveaxis(_arr(a), axisa, -1), _moveaxis(_arr(b), axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(f'np.cross on tracked values needs 3-vectors, got vector lengths '
                         f'{a.shape[-1]} and {b.shape[-1]} (2-vectors are deprecated in NumPy 2; '
                         f'pad them with a zero third component)')
    c = apply(_cross_last, (a, b), {})
    return _moveaxis(c, -1, axisc)


defcomposite(np.cross, _cross)


# --------------------------------------------------------------------------
# np.linalg: inv, det, slogdet, solve
# --------------------------------------------------------------------------

def _inv_vjp(g, ans, a):
    at = _mT(ans)
    return -(at @ g @ at)


def _det_vjp(g, ans, a):
    # d det(A) = det(A) tr(A^-1 dA): for invertible A.
    return _col(_col(g * ans)) * _mT(np.linalg.inv(a))


def _slogdet_vjp(g, ans, a):
    # d log|det A| = Re tr(A^-1 dA); a complex A's sign (its phase e^{i t}) moves too:
    # dt = Im tr(A^-1 dA).  A real A's sign is locally constant: no gradient.
    gsign, glog = g
    sign = ans[0]
    coef = 0.0 if glog is None else glog
    if gsign is not None and _is_complex(sign):
        coef = coef + 1j * np.real(np.conj(gsign) * 1j * sign)
    return _col(_col(coef)) * _mH(np.linalg.inv(a))


defvjp(np.linalg.slogdet, _slogdet_vjp, multi=True)


def _solve_vjp_b(g, ans, a, b):
    at = _mT(a)
    if _arr(b).ndim == 1:          # NumPy 2: only a 1-d b is a vector
        return np.reshape(np.linalg.solve(at, _col(g)), _shape(g))
    return np.linalg.solve(at, g)


def _solve_vjp_a(g, ans, a, b):
    gb = _solve_vjp_b(g, ans, a, b)
    if _arr(b).ndim == 1:
        return -(_col(gb) * _row(ans))
    return -(gb @ _mT(ans))


defvjp(np.linalg.inv, _inv_vjp)
defvjp(np.linalg.det, _det_vjp)
defvjp(np.linalg.solve, _solve_vjp_a, _solve_vjp_b)


# --------------------------------------------------------------------------
# np.linalg: cholesky, eigh, pinv
# --------------------------------------------------------------------------

def _cholesky_vjp(g, ans, a, upper=False):
    # Murray (2016): with A = L L^T, S = L^-T Phi(L^T Lbar) L^-1, where Phi keeps the
    # lower triangle and halves the diagonal.  Triangular solves as general solves.
    if upper:
        low, gl = _mT(ans), _mT(g)
    else:
        low, gl = ans, g
    n = _shape(low)[-1]
    dt = _dtype(gl)
    phi = np.tri(n, dtype=dt) - 0.5 * np.eye(n, dtype=dt)
    lt = _mT(low)
    p = (lt @ gl) * phi
    x = np.linalg.solve(lt, p)                 # L^-T P
    s = _mT(np.linalg.solve(lt, _mT(x)))       # L^-T P L^-1
    return _fold_triangle(s, lower=not upper)


defvjp(np.linalg.cholesky, _cholesky_vjp)


def _eigh_vjp(g, ans, a, UPLO='L'):
    # A = V diag(w) V^H: S = V (diag(gw) + F o (V^H gV)) V^H with F[i, j] = 1/(w_j - w_i),
    # then folded onto the triangle NumPy read.
    gw, gv = g
    w, v = ans
    n = _shape(w)[-1]
    vh = _mH(v)
    inner = 0.0
    if gw is not None:
        inner = _row(gw) * np.eye(n, dtype=_dtype(w))
    if gv is not None:
        diff = _row(w) - _col(w)                  # diff[i, j] = w_j - w_i
        same = diff == 0                          # the diagonal, and repeated eigenvalues
        f = ~same / (diff + same)                 # 1 / (w_j - w_i), 0 where undefined
        inner = inner + f * (vh @ gv)
    return _fold_triangle(v @ inner @ vh, lower=UPLO.upper() == 'L')


defvjp(np.linalg.eigh, _eigh_vjp, multi=True)


def _pinv_vjp(g, ans, a, *args, hermitian=False, **kwargs):
    # Golub & Pereyra, for a constant rank: with P = pinv(A),
    # dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P.
    if len(args) > 1:
        hermitian = args[1]
    if hermitian:     # NumPy read only the lower triangle: A is the matrix it stands for
        n = _shape(a)[-1]
        strict = np.tri(n, k=-1, dtype=_dtype(g))
        a = a * (strict + np.eye(n, dtype=_dtype(g))) + _mT(a * strict)
    p, pt, gt = ans, _mT(ans), _mT(g)
    m, n = _shape(a)[-2], _shape(a)[-1]
    dt = _dtype(g)
    left = np.eye(m, dtype=dt) - a @ p         # I - A P  (m x m)
    right = np.eye(n, dtype=dt) - p @ a        # I - P A  (n x n)
    s = -(pt @ g @ pt) + left @ gt @ (p @ pt) + (pt @ p) @ gt @ right
    return _fold_triangle(s) if hermitian else s


defvjp(np.linalg.pinv, _pinv_vjp)


# --------------------------------------------------------------------------
# Other spellings, written with the rules above: the array-API names in
# np.linalg, the vecdot/matvec/vecmat ufuncs, multi_dot, matrix_power, eigvalsh
# --------------------------------------------------------------------------

def _check_gufunc_kwargs(name, kwargs):
    for k in kwargs:
        if k not in ('axis', 'keepdims'):
            raise TypeError(f'{name}(..., {k}=...) is not supported on tracked values')


def _vecdot(a, b, axis=-1, keepdims=False, **kwargs):
    _check_gufunc_kwargs('np.vecdot', kwargs)
    a, b = _moveaxis(_arr(a), axis, -1), _moveaxis(_arr(b), axis, -1)
    r = np.sum(a * b, axis=-1, keepdims=keepdims)
    return _moveaxis(r, -1, axis) if keepdims else r


def _linalg_outer(a, b):
    a, b = _arr(a), _arr(b)
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
    r = np.matmul(m, _col(_arr(v)))                   # (..., m, 1)
    return np.reshape(r, _shape(r)[:-1])


def _vecmat(v, m, **kwargs):
    if kwargs:
        raise TypeError(f'np.vecmat(..., {", ".join(kwargs)}=...) is not supported on tracked '
                        f'values; move the axes with np.moveaxis first')
    r = np.matmul(_row(_arr(v)), m)                   # (..., 1, m)
    s = _shape(r)
    return np.reshape(r, s[:-2] + s[-1:])


def _multi_dot(arrays, *, out=None):
    _reject_out('np.linalg.multi_dot', out)
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError('np.linalg.multi_dot needs at least two arrays')
    r = arrays[0]
    for x in arrays[1:]:          # matmul treats a 1-d first/last array as multi_dot does
        r = np.matmul(r, x)
    return r


def _matrix_power(a, n):
    a = _arr(a)
    n = operator.index(n)
    if n == 0:
        return a * 0.0 + np.eye(a.shape[-1], dtype=a.dtype)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    result = None
    base = a
    while n:                      # binary powering, as NumPy does
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def _eigvalsh(a, UPLO='L'):
    return np.linalg.eigh(a, UPLO=UPLO)[0]


defcomposite(np.linalg.matmul, lambda a, b: np.matmul(a, b))
defcomposite(np.linalg.tensordot, lambda a, b, axes=2: _tensordot(a, b, axes))
defcomposite(np.linalg.outer, _linalg_outer)
defcomposite(np.linalg.cross, lambda a, b, axis=-1: _cross(a, b, axis=axis))
defcomposite(np.linalg.vecdot, _linalg_vecdot)
defcomposite(np.vecdot, _vecdot)
defcomposite(np.matvec, _matvec)
defcomposite(np.vecmat, _vecmat)
defcomposite(np.linalg.multi_dot, _multi_dot)
defcomposite(np.linalg.matrix_power, _matrix_power)
defcomposite(np.linalg.eigvalsh, _eigvalsh)
