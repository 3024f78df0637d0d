"""np.linalg solvers and functions of one matrix: inv, det, slogdet, solve, cholesky,
pinv, lstsq (primitives), and matrix_power, tensorsolve, tensorinv, cond and the
array-API names trace, diagonal, matrix_transpose, matrix_norm, vector_norm
(composites); matrix_rank is non-differentiable.  The decompositions (eigh, eig,
svd, qr) are in ``decompositions.py``.

Each primitive has its pullback and an explicit tangent rule (``jvp=``), both written
with NumPy operations (solve, inv, matmul, ...), so they are recorded -- and
differentiable -- when ``g`` or the arguments are tracked at an outer level.  Batch
dimensions broadcast; pullbacks return cotangents of the broadcast shape.  Complex
matrices follow ChainRules' convention: pullbacks use conjugate transposes.

Conventions where NumPy's functions read only part of their input, or where the
derivative exists only generically:

- cholesky (and pinv with ``hermitian=True``) read one triangle of the input (the
  lower one, or the upper for ``upper=True``) and only the real part of its diagonal.
  The gradient is that of the function NumPy computes: the "standard" gradient folded
  onto the triangle read (``matrices.fold_triangle``).
- slogdet's sign is returned tracked; a real matrix's sign is locally constant (zero
  derivative), a complex one's is the phase of the determinant and moves.
- pinv and lstsq assume the rank stays constant near the input (as every framework
  does): singular values cut off by ``rcond`` are treated as exactly zero.
- det, inv and solve need an invertible matrix; det's gradient at a singular one
  raises LinAlgError from the inverse it uses.
"""
import operator

import numpy as np

from ..registry import Primitive, defcomposite, defvjp, nondifferentiable
from ..dispatch import apply
from .matrices import (arr, col, conj, dtype_of, eye, fold_triangle, hermitian_part,
                       is_complex, mH, pad_batch, right_solve, row, shape_of, solve, trace)


# --------------------------------------------------------------------------
# inv, det, slogdet, solve
# --------------------------------------------------------------------------

def _inv_vjp(g, ans, a):
    ah = mH(ans)
    return -(ah @ g @ ah)


def _inv_jvp(t, ans, a):
    return -(ans @ t[0] @ ans)


defvjp(np.linalg.inv, _inv_vjp, jvp=_inv_jvp, batched=_inv_jvp)


def _det_vjp(g, ans, a):
    # d det(A) = det(A) tr(A^-1 dA), for an invertible A
    return col(col(g * conj(ans))) * mH(np.linalg.inv(a))


def _det_jvp(t, ans, a):
    return ans * trace(solve(a, t[0]))


defvjp(np.linalg.det, _det_vjp, jvp=_det_jvp, batched=_det_jvp)


def _slogdet_vjp(g, ans, a):
    # d log|det A| = Re tr(A^-1 dA); a complex A's sign (its phase e^{i t}) moves too:
    # dt = Im tr(A^-1 dA).  A real A's sign is locally constant: no gradient.
    gsign, glog = g
    sign = ans[0]
    coef = 0.0 if glog is None else glog
    if gsign is not None and is_complex(sign):
        coef = coef + 1j * np.real(np.conj(gsign) * 1j * sign)
    return col(col(coef)) * mH(np.linalg.inv(a))


def _slogdet_jvp(t, ans, a):
    c = trace(solve(a, t[0]))
    sign = ans[0]
    dsign = sign * (1j * np.imag(c)) if is_complex(sign) else None
    return dsign, np.real(c)


defvjp(np.linalg.slogdet, _slogdet_vjp, multi=True, jvp=_slogdet_jvp, batched=_slogdet_jvp)


def _solve_vjp_b(g, ans, a, b):
    ah = mH(a)
    if arr(b).ndim == 1:          # NumPy 2: only a 1-d b is a vector
        return np.reshape(solve(ah, col(g)), shape_of(g))
    return solve(ah, g)


def _solve_vjp_a(g, ans, a, b):
    gb = _solve_vjp_b(g, ans, a, b)
    if arr(b).ndim == 1:
        return -(col(gb) * row(conj(ans)))
    return -(gb @ mH(ans))


def _solve_jvp(t, ans, a, b):
    # dx = A^-1 (db - dA x)
    ta, tb = t
    vector = arr(b).ndim == 1
    x = col(ans) if vector else ans
    rhs = 0.0 if tb is None else (col(tb) if vector else tb)
    if ta is not None:
        rhs = rhs - ta @ x
    dx = solve(a, rhs)
    return np.reshape(dx, shape_of(dx)[:-1]) if vector else dx


def _solve_batched(t, ans, a, b):
    core_b = 1 if arr(b).ndim == 1 else 2
    nb = len(shape_of(ans)) - core_b              # the output's batch axes
    ta, tb = t
    ta = None if ta is None else pad_batch(ta, nb - (len(shape_of(a)) - 2))
    tb = None if tb is None else pad_batch(tb, nb - (len(shape_of(b)) - core_b))
    return _solve_jvp((ta, tb), ans, a, b)


defvjp(np.linalg.solve, _solve_vjp_a, _solve_vjp_b, jvp=_solve_jvp, batched=_solve_batched)


# --------------------------------------------------------------------------
# cholesky
# --------------------------------------------------------------------------
# A = L L^H.  With X = L^-1 dA L^-H (dA the Hermitian matrix of the triangle read),
# dL = L Phi(X), Phi keeping the strict lower triangle and half the (real) diagonal;
# the pullback is its adjoint (Murray 2016): S = L^-H Phi(L^H Lbar) L^-1, folded.

def _phi(n, like):
    return np.tri(n, dtype=dtype_of(like)) - 0.5 * eye(n, like)


def _cholesky_vjp(g, ans, a, upper=False):
    low, gl = (mH(ans), mH(g)) if upper else (ans, g)
    lh = mH(low)
    p = (lh @ gl) * _phi(shape_of(low)[-1], gl)
    s = right_solve(solve(lh, p), low)         # L^-H P L^-1
    return fold_triangle(s, lower=not upper)


def _cholesky_jvp(t, ans, a, upper=False):
    low = mH(ans) if upper else ans
    th = hermitian_part(t[0], lower=not upper)
    x = right_solve(solve(low, th), mH(low))   # L^-1 dA L^-H
    dl = low @ (x * _phi(shape_of(low)[-1], x))
    return mH(dl) if upper else dl


defvjp(np.linalg.cholesky, _cholesky_vjp, jvp=_cholesky_jvp, batched=_cholesky_jvp)


# --------------------------------------------------------------------------
# pinv
# --------------------------------------------------------------------------
# Golub & Pereyra, for a constant rank: with P = pinv(A),
# dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P.

def _pinv_hermitian(args, hermitian):
    return args[1] if len(args) > 1 else hermitian


def _pinv_vjp(g, ans, a, *args, hermitian=False, **kwargs):
    hermitian = _pinv_hermitian(args, hermitian)
    if hermitian:     # NumPy read one triangle: A is the matrix it stands for
        a = hermitian_part(a)
    p, ph, gh = ans, mH(ans), mH(g)
    m, n = shape_of(a)[-2:]
    left = eye(m, g) - a @ p                   # I - A P  (m x m)
    right = eye(n, g) - p @ a                  # I - P A  (n x n)
    s = -(ph @ g @ ph) + left @ gh @ (p @ ph) + (ph @ p) @ gh @ right
    return fold_triangle(s) if hermitian else s


def _pinv_jvp(t, ans, a, *args, hermitian=False, **kwargs):
    ta = t[0]
    if _pinv_hermitian(args, hermitian):
        a, ta = hermitian_part(a), hermitian_part(ta)
    p, ph, th = ans, mH(ans), mH(ta)
    m, n = shape_of(a)[-2:]
    left = eye(m, p) - a @ p
    right = eye(n, p) - p @ a
    return -(p @ ta @ p) + (p @ ph) @ th @ left + right @ th @ (ph @ p)


defvjp(np.linalg.pinv, _pinv_vjp, jvp=_pinv_jvp, batched=_pinv_jvp)


# --------------------------------------------------------------------------
# lstsq: x = A^+ b, residuals |b - A x|^2, rank, singular values
# --------------------------------------------------------------------------
# With r = b - A x, dx = A^+ (db - dA x) + A^+ A^+H dA^H r + (I - A^+ A) dA^H A^+H x
# (the derivative of the pseudo-inverse applied to b; terms vanish for full rank but
# are kept: they are exact for any constant rank).  A^+ z and A^+H z are themselves
# least-squares solutions, so the rules call lstsq (recorded, hence nesting).

def _lstsq(a, b, rcond=None):
    return np.linalg.lstsq(a, b, rcond=rcond)


def _pinv_apply(a, z, rcond):
    return np.linalg.lstsq(a, z, rcond=rcond)[0]


def _as_columns(b, *xs):
    """1-d right-hand sides (and the matching vectors) as one-column matrices."""
    if arr(b).ndim == 1:
        return tuple(None if x is None else col(x) for x in xs)
    return xs


def _has_residuals(res):
    return shape_of(res)[-1] != 0


def _lstsq_gb(g, ans, a, b, rcond):
    """b's cotangent as columns: A^+H xbar + 2 r resbar."""
    gx, gres, _, _ = g
    x, res, _, _ = ans
    xx, bb, gxx = _as_columns(b, x, b, gx)
    gb = None if gxx is None else _pinv_apply(mH(a), gxx, rcond)
    if gres is not None and _has_residuals(res):
        rg = 2.0 * (bb - a @ xx) * gres                           # gres: one per column
        gb = rg if gb is None else gb + rg
    return gb


def _lstsq_vjp_b(g, ans, a, b, rcond=None):
    gb = _lstsq_gb(g, ans, a, b, rcond)
    if gb is None:
        return None
    return np.reshape(gb, shape_of(b)) if arr(b).ndim == 1 else gb


def _lstsq_vjp_a(g, ans, a, b, rcond=None):
    # Abar = -bbar x^H + r (A^+ bbar)^H + A^+H x ((I - A^+ A) xbar)^H; bbar's residual
    # part adds nothing to the middle term (A^+ r = 0)
    gx, _, _, gsv = g
    x = ans[0]
    xx, bb, gxx = _as_columns(b, x, b, gx)
    gb = _lstsq_gb(g, ans, a, b, rcond)
    ga = 0.0 if gb is None else -(gb @ mH(xx))
    if gxx is not None:
        r = bb - a @ xx
        w = _pinv_apply(mH(a), xx, rcond)                         # A^+H x
        gx_perp = gxx - _pinv_apply(a, a @ gxx, rcond)            # (I - A^+ A) xbar
        ga = ga + r @ mH(_pinv_apply(a, gb, rcond)) + w @ mH(gx_perp)
    if gsv is not None:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        ga = ga + (u * row(gsv)) @ vh
    return ga


def _lstsq_jvp(t, ans, a, b, rcond=None):
    ta, tb = t
    x, res, _, _ = ans
    xx, bb, tbb = _as_columns(b, x, b, tb)
    r = bb - a @ xx
    rhs = 0.0 if tbb is None else tbb
    dx = dres = dsv = None
    if ta is not None:
        rhs = rhs - ta @ xx
        th = mH(ta)
        z = th @ _pinv_apply(mH(a), xx, rcond)                     # dA^H A^+H x
        dx = (_pinv_apply(a, _pinv_apply(mH(a), th @ r, rcond), rcond)
              + z - _pinv_apply(a, a @ z, rcond))
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        dsv = np.real(np.sum(conj(u) * (ta @ mH(vh)), axis=-2))     # Re diag(U^H dA V)
    d = _pinv_apply(a, rhs, rcond)
    dx = d if dx is None else dx + d
    if _has_residuals(res):
        dres = 2.0 * np.real(np.sum(conj(r) * rhs, axis=-2))
    if arr(b).ndim == 1:
        dx = np.reshape(dx, shape_of(x))
    return dx, dres, None, dsv


defvjp(np.linalg.lstsq, _lstsq_vjp_a, _lstsq_vjp_b, fn=_lstsq, multi=True, jvp=_lstsq_jvp)


# --------------------------------------------------------------------------
# norm
# --------------------------------------------------------------------------
# Vector orders None/2, 1, inf, -inf, 0, p; matrix orders 'fro', 'nuc', 2, -2, 1, -1,
# inf, -inf.  'nuc' and +-2 are functions of the singular values: a composite over
# svd.  The rest is one primitive of a real array; a complex one enters through
# abs() (every such norm is a norm of |x|), except the 2-norm and 'fro', which the
# primitive differentiates directly (x / |x|).  The 2-norm and 'fro' have gradient
# 0 at 0 (a subgradient; x/|x| would be nan); ties of the max/min orders split
# the gradient equally, as max does.

def _norm_plan(ndim, ord, axis):
    """('vector' or 'matrix', axes, ord) the way np.linalg.norm reads its arguments."""
    if axis is None:
        if ord is None or ndim not in (1, 2):
            return 'vector', tuple(range(ndim)), None      # 2-norm of the flattened array
        return ('vector', (0,), ord) if ndim == 1 else ('matrix', (0, 1), ord)
    if isinstance(axis, (tuple, list)):
        axes = tuple(operator.index(a) % ndim for a in axis)
        if len(axes) == 1:
            return 'vector', axes, ord
        return 'matrix', axes, 'fro' if ord is None else ord
    return 'vector', (operator.index(axis) % ndim,), ord


def _kept(g, shape, axes, keepdims):
    """A reduced value shaped to broadcast against the input (keepdims form)."""
    if keepdims or len(axes) == len(shape):
        return g
    return np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _split_ties(hit, axes):
    """``hit`` (a mask of the elements that reach a max/min) divided by their count."""
    n = np.sum(hit, axis=axes, keepdims=True)
    return hit / np.maximum(n, 1)


def _norm_grad(x, r, ord=None, axis=None, keepdims=False):
    """d norm / dx with the norm ``r`` in keepdims form (a constant where x is 0)."""
    shape = shape_of(x)
    kind, axes, ord = _norm_plan(len(shape), ord, axis)
    rk = _kept(r, shape, axes, keepdims)
    if (kind == 'vector' and ord in (None, 2)) or (kind == 'matrix' and ord == 'fro'):
        return x / (rk + (rk == 0))
    s = np.sign(x)                     # plain: the sign of a real array is a constant
    if kind == 'vector':
        if ord == 0:
            return np.zeros(shape, dtype=dtype_of(x))
        if ord == 1:
            return s
        if ord in (np.inf, -np.inf):
            return s * _split_ties(x * s == rk, axes).astype(dtype_of(x))
        p = float(ord)
        return s * np.power(x * s, p - 1.0) / np.power(rk + (rk == 0), p - 1.0)
    if ord in (1, -1, np.inf, -np.inf):
        # ord=+-1: max/min over columns of the column sums of |x|; +-inf: rows
        summed, chosen = axes if ord in (1, -1) else axes[::-1]
        sums = np.sum(x * s, axis=summed, keepdims=True)
        return s * _split_ties(sums == rk, chosen).astype(dtype_of(x))
    raise ValueError(f'np.linalg.norm: invalid norm order {ord!r} for matrices')


def _norm_vjp(g, ans, x, ord=None, axis=None, keepdims=False):
    shape = shape_of(x)
    _, axes, _ = _norm_plan(len(shape), ord, axis)
    return _kept(g, shape, axes, keepdims) * _norm_grad(x, ans, ord, axis, keepdims)


def _norm_jvp(t, ans, x, ord=None, axis=None, keepdims=False):
    nd = len(shape_of(x))
    _, axes, _ = _norm_plan(nd, ord, axis)
    d = np.real(conj(_norm_grad(x, ans, ord, axis, keepdims)) * t[0])
    return np.sum(d, axis=tuple(a - nd for a in axes), keepdims=keepdims)   # batches lead


def _norm_fwd(x, ord=None, axis=None, keepdims=False):
    return np.linalg.norm(x, ord, axis, keepdims)


_norm_prim = Primitive(_norm_fwd, (_norm_vjp,), name='np.linalg.norm', jvp=_norm_jvp,
                       batched=_norm_jvp, structure='reduce')


def _norm(x, ord=None, axis=None, keepdims=False):
    x = arr(x)
    kind, axes, order = _norm_plan(x.ndim, ord, axis)
    if kind == 'matrix' and order in ('nuc', 2, -2):
        s = np.linalg.svd(np.moveaxis(x, axes, (-2, -1)), compute_uv=False)
        r = np.sum(s, axis=-1) if order == 'nuc' else s[..., 0] if order == 2 else s[..., -1]
        if keepdims:
            r = np.reshape(r, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
        return r
    if is_complex(x) and order not in (None, 2, 'fro'):
        x = np.abs(x)
    return apply(_norm_prim, (x,), {'ord': ord, 'axis': axis, 'keepdims': keepdims})


defcomposite(np.linalg.norm, _norm)


# --------------------------------------------------------------------------
# Composites: matrix_power, tensorinv, tensorsolve, cond, array-API names
# --------------------------------------------------------------------------

def _matrix_power(a, n):
    a = arr(a)
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


def _tensorinv(a, ind=2):
    a = arr(a)
    if ind <= 0:
        raise ValueError('Invalid ind argument.')
    old = tuple(a.shape)
    prod = int(np.prod(old[ind:]))
    ia = np.linalg.inv(np.reshape(a, (prod, -1)))
    return np.reshape(ia, old[ind:] + old[:ind])


def _tensorsolve(a, b, axes=None):
    a, b = arr(a), arr(b)
    an = a.ndim
    if axes is not None:
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        a = np.transpose(a, tuple(order))
    old = tuple(a.shape[-(an - b.ndim):])
    prod = int(np.prod(old))
    if a.size != prod ** 2:
        raise np.linalg.LinAlgError('Input arrays must satisfy the requirement '
                                    'prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])')
    x = np.linalg.solve(np.reshape(a, (prod, prod)), np.reshape(b, (-1,)))
    return np.reshape(x, old)


def _cond(x, p=None):
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    return (np.linalg.norm(x, p, axis=(-2, -1))
            * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1)))


def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = arr(x)
    full = tuple(x.shape)
    if axis is None:
        r = np.linalg.norm(np.reshape(x, (-1,)), ord=ord, axis=0)
        axes = tuple(range(len(full)))
    elif isinstance(axis, tuple):
        axes = tuple(a % len(full) for a in axis)
        rest = tuple(i for i in range(len(full)) if i not in axes)
        moved = np.transpose(x, axes + rest)
        r = np.linalg.norm(np.reshape(moved, (-1,) + tuple(full[i] for i in rest)),
                           ord=ord, axis=0)
    else:
        axes = (operator.index(axis) % len(full),)
        r = np.linalg.norm(x, ord=ord, axis=axis)
    if keepdims:
        r = np.reshape(r, tuple(1 if i in axes else n for i, n in enumerate(full)))
    return r


defcomposite(np.linalg.matrix_power, _matrix_power)
defcomposite(np.linalg.tensorinv, _tensorinv)
defcomposite(np.linalg.tensorsolve, _tensorsolve)
defcomposite(np.linalg.cond, _cond)
defcomposite(np.linalg.trace,
             lambda x, /, *, offset=0, dtype=None: np.trace(x, offset, -2, -1, dtype))
defcomposite(np.linalg.diagonal, lambda x, /, *, offset=0: np.diagonal(x, offset, -2, -1))
defcomposite(np.linalg.matrix_transpose, lambda x, /: np.swapaxes(x, -1, -2))
defcomposite(np.linalg.matrix_norm, lambda x, /, *, keepdims=False, ord='fro':
             np.linalg.norm(x, ord, (-2, -1), keepdims))
defcomposite(np.linalg.vector_norm, _vector_norm)
nondifferentiable(np.linalg.matrix_rank)
