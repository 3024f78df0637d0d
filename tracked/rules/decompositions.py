"""Matrix decompositions: eigh, eig, svd and qr, each one multi-output primitive
returning NumPy's named tuple (their pullbacks get one cotangent per output, None
where unused), with an explicit tangent rule; eigvalsh, eigvals, svdvals, svd's
``compute_uv=False`` and ``hermitian=True`` forms and qr's ``mode='r'`` are
composites over them.  Real and complex (Hermitian) inputs alike.  eig's primitive
always returns complex arrays; NumPy's real result for a real spectrum is taken
from them behind a test that a recorded tape keeps as a guard.

Where a decomposition is not unique, its derivative is defined for losses that do
not depend on the arbitrary part (the published convention; finite differences of
NumPy's outputs agree on such losses):

- Eigen- and singular vectors have an arbitrary sign (real) or phase (complex):
  losses should be invariant to it (``|v|^2``, ``v v^H``, ``U diag(f(s)) V^H``).
  The tangent rules fix the gauge by ``Im diag(V^H dV) = 0`` (split evenly between U
  and V for the SVD); eig's eigenvectors keep unit norm, as NumPy returns them.
- Exactly repeated eigenvalues (singular values) make the eigenvector (singular
  vector) derivative undefined; those pairs contribute nothing instead of
  0 * inf = nan, so first derivatives of the eigenvalues (singular values) alone,
  and of quantities invariant under rotations within the repeated subspace, stay
  finite and correct at degenerate points such as the identity.  The SVD keeps the
  part that stays defined (singular values equal to rounding count as repeated), so
  second derivatives of functions of the singular values are right there too; for
  other losses the result at such points is a documented choice, not a derivative.
- svd with ``full_matrices=True`` and qr with ``mode='complete'`` return columns
  (rows of Vh) spanning the complement of the range, determined only up to a
  rotation among themselves.  Their derivative is the one that keeps that rotation
  fixed (``U_perp^H dU_perp = 0``): right for losses of the subspace (projectors
  such as ``U_perp U_perp^H``).
- The singular-vector derivative of a rectangular matrix divides by the singular
  values: U and V cotangents need full rank (singular values alone do not).
  qr needs the leading square block of a wide matrix (all of a tall one) to have
  full rank.
- eigh reads one triangle of the input (``UPLO``) and only the real part of its
  diagonal; its gradient is folded onto that triangle (``matrices.fold_triangle``).
"""
import numpy as np

from ..registry import Primitive, defcomposite, defvjp
from ..dispatch import apply
from .matrices import (arr, col, conj, diag_embed, diag_part, dtype_of, fold_triangle,
                       hermitian_part, inverse_gaps, is_complex, mH, real_dtype, right_solve, row,
                       shape_of, solve)


# --------------------------------------------------------------------------
# eigh: A = V diag(w) V^H, A Hermitian
# --------------------------------------------------------------------------

def _eigh_vjp(g, ans, a, UPLO='L'):
    # S = V (diag(gw) + F o (V^H gV)) V^H with F[i, j] = 1/(w_j - w_i), then folded
    # onto the triangle NumPy read.
    gw, gv = g
    w, v = ans
    vh = mH(v)
    inner = 0.0 if gw is None else diag_embed(gw)
    if gv is not None:
        inner = inner + inverse_gaps(w) * (vh @ gv)
    return fold_triangle(v @ inner @ vh, lower=UPLO.upper() == 'L')


def _eigh_jvp(t, ans, a, UPLO='L'):
    w, v = ans
    p = mH(v) @ hermitian_part(t[0], lower=UPLO.upper() == 'L') @ v
    return np.real(diag_part(p)), v @ (inverse_gaps(w) * p)


defvjp(np.linalg.eigh, _eigh_vjp, multi=True, jvp=_eigh_jvp, batched=_eigh_jvp)
defcomposite(np.linalg.eigvalsh, lambda a, UPLO='L': np.linalg.eigh(a, UPLO=UPLO)[0])


# --------------------------------------------------------------------------
# eig: A V = V diag(w), eigenvectors of unit norm
# --------------------------------------------------------------------------
# With P = V^-1 dA V: dw = diag(P), dV = V C where C = F o P off the diagonal
# (F[i, j] = 1/(w_j - w_i)) and C_ii = -Re (V^H V C)_ii keeps each column's norm.
# The pullback is its adjoint (the form PyTorch uses):
# Abar = V^-H (diag(wbar) + conj(F) o (V^H Vbar - V^H V Re diag(V^H Vbar))) V^H.

def _eig_vjp(g, ans, a):
    gw, gv = g
    w, v = ans
    vh = mH(v)
    inner = 0.0 if gw is None else diag_embed(gw)
    if gv is not None:
        vhg = vh @ gv
        inner = inner + conj(inverse_gaps(w)) * (vhg - (vh @ v) * row(np.real(diag_part(vhg))))
    return solve(vh, inner @ vh)


def _eig_jvp(t, ans, a):
    w, v = ans
    p = solve(v, t[0] @ v)
    c = inverse_gaps(w) * p
    c = c - diag_embed(np.real(diag_part(mH(v) @ v @ c)))
    return diag_part(p), v @ c


def _eig_fwd(a):
    """eig with complex outputs always (NumPy's are real when every eigenvalue is)."""
    w, v = np.linalg.eig(a)
    return _EigResult(w.astype(np.result_type(w, 1j)), v.astype(np.result_type(v, 1j)))


_EigResult = type(np.linalg.eig(np.eye(1)))
_eig_prim = Primitive(_eig_fwd, (_eig_vjp,), name='np.linalg.eig', multi=True, jvp=_eig_jvp,
                      batched=_eig_jvp)


def _eig(a):
    # NumPy returns real arrays when a real matrix has only real eigenvalues: the same
    # test here is a guard on a recorded tape, which a replay where they turn complex
    # fails instead of reusing the real entries' gradient.
    res = apply(_eig_prim, (a,), {})
    if not is_complex(a) and np.all(np.imag(res[0]) == 0):
        return _EigResult(np.real(res[0]), np.real(res[1]))
    return res


defcomposite(np.linalg.eig, _eig)
defcomposite(np.linalg.eigvals, lambda a: _eig(a)[0])


# --------------------------------------------------------------------------
# svd: A = U diag(s) V^H
# --------------------------------------------------------------------------
# For the first k = min(m, n) columns, with dP = U^H dA V and F[i, j] = 1/(s_j^2 - s_i^2):
#   ds = Re diag(dP),  U^H dU = F o (dP S + S dP^H) + i Im diag(dP) / 2S,
#   V^H dV = F o (S dP + dP^H S) - i Im diag(dP) / 2S,
#   plus (I - U U^H) dA V S^-1 in dU and (I - V V^H) dA^H U S^-1 in dV.
# Extra columns of a full U (rows of Vh): dU_perp = -U S^-1 V^H dA^H U_perp (and
# dV_perp = -V S^-1 U^H dA V_perp).  The pullback is the adjoint of all of it.
# F o (X S + S Y) is computed as (X + Y)/2 o 1/(s_j - s_i) + (X - Y)/2 o 1/(s_j + s_i):
# the first term alone is undefined at repeated singular values (dropped there), the
# second stays exact, which is all that losses of the singular values need (the
# nuclear norm's Hessian at an orthogonal matrix, say).  F o (X S + S Y) directly
# would lose the second term at exact repeats and cancel catastrophically near them.

def _svd_fwd(a, full_matrices=True):
    return np.linalg.svd(a, full_matrices=full_matrices)


def _svd_split(u, s, vh):
    """``(u, v, u_perp, v_perp, tall, wide)``: the first k columns of U and V, the rest
    (None if there are none), and whether U (V) has rows beyond the first k."""
    k = shape_of(s)[-1]
    m, n = shape_of(u)[-2], shape_of(vh)[-1]
    up = u[..., :, k:] if shape_of(u)[-1] > k else None
    vp = mH(vh[..., k:, :]) if shape_of(vh)[-2] > k else None
    return u[..., :, :k], mH(vh[..., :k, :]), up, vp, m > k, n > k


def _gap_products(s, x, y):
    """``F o (x S + S y)`` and ``F o (S x + y S)``, F[i, j] = 1/(s_j^2 - s_i^2), 0 on the
    diagonal; a pair of singular values equal to rounding contributes only its
    well-defined part (see above)."""
    diff = row(s) - col(s)
    tol = 8 * np.finfo(real_dtype(s)).eps * np.max(s, axis=-1, keepdims=True)[..., None]
    same = np.abs(diff) <= tol                    # the diagonal, and repeats
    total = row(s) + col(s)
    zero = total == 0
    minus = (x + y) * (0.5 * ~same / (diff + same))
    plus = (x - y) * (0.5 * ~(zero | np.eye(shape_of(s)[-1], dtype=bool)) / (total + zero))
    return minus + plus, minus - plus


def _svd_vjp(g, ans, a, full_matrices=True):
    gu, gs, gvh = g
    u, v, up, vp, tall, wide = _svd_split(*ans)
    s = ans[1]
    k = shape_of(s)[-1]
    gup = gvp = None
    if gu is not None and up is not None:
        gu, gup = gu[..., :, :k], gu[..., :, k:]
    gv = None
    if gvh is not None:
        gv = mH(gvh[..., :k, :])
        if vp is not None:
            gvp = mH(gvh[..., k:, :])
    inner = 0.0 if gs is None else diag_embed(gs)
    sc = row(s)                                   # X * sc = X S; col(s) * X = S X
    skew_u = skew_v = 0.0                         # J - J^H, K - K^H
    phase = 0.0                                   # Im diag(J - K), complex only
    if gu is not None:
        j = mH(u) @ gu                            # J
        skew_u = j - mH(j)
        if is_complex(j):
            phase = np.imag(diag_part(j))
    if gv is not None:
        j = mH(v) @ gv                            # K
        skew_v = j - mH(j)
        if is_complex(j):
            phase = phase - np.imag(diag_part(j))
    if gu is not None or gv is not None:          # F o ((J - J^H) S + S (K - K^H))
        inner = inner + _gap_products(s, skew_u, skew_v)[0]
    if not isinstance(phase, float):
        inner = inner + diag_embed(1j * phase / (2 * s))
    ga = u @ inner @ mH(v)
    if gu is not None and tall:                   # (I - U U^H) gU S^-1 V^H
        ga = ga + ((gu - u @ (mH(u) @ gu)) / sc) @ mH(v)
    if gv is not None and wide:                   # U S^-1 gV^H (I - V V^H)
        ga = ga + (u / sc) @ mH(gv - v @ (mH(v) @ gv))
    if gup is not None:
        ga = ga - up @ (mH(gup) @ u / sc) @ mH(v)
    if gvp is not None:
        ga = ga - (u / sc) @ (mH(v) @ gvp) @ mH(vp)
    return ga


def _svd_jvp(t, ans, a, full_matrices=True):
    ta = t[0]
    u, v, up, vp, tall, wide = _svd_split(*ans)
    s = ans[1]
    sc = row(s)
    dp = mH(u) @ ta @ v
    dph = mH(dp)
    ou, ov = _gap_products(s, dp, dph)
    if is_complex(dp):
        half = diag_embed(1j * np.imag(diag_part(dp)) / (2 * s))
        ou, ov = ou + half, ov - half
    du = u @ ou
    dv = v @ ov
    if tall:
        du = du + (ta @ v - u @ dp) / sc
    if wide:
        dv = dv + (mH(ta) @ u - v @ dph) / sc
    if up is not None:
        du = np.concatenate([du, -(u / sc) @ mH(mH(up) @ ta @ v)], axis=-1)
    if vp is not None:
        dv = np.concatenate([dv, -(v / sc) @ (mH(u) @ ta @ vp)], axis=-1)
    return du, np.real(diag_part(dp)), mH(dv)


_svd_prim = Primitive(_svd_fwd, (_svd_vjp,), name='np.linalg.svd', multi=True, jvp=_svd_jvp,
                      batched=_svd_jvp)
_SVDResult = type(np.linalg.svd(np.eye(1)))


def _svd_hermitian(a, compute_uv):
    """NumPy's algorithm for ``hermitian=True``: from eigh, signs moved into V."""
    w, u = np.linalg.eigh(a)
    s = np.abs(w)
    idx = np.argsort(s, axis=-1)[..., ::-1]       # plain: argsort is not differentiable
    s = np.take_along_axis(s, idx, axis=-1)
    if not compute_uv:
        return s
    sgn = np.take_along_axis(np.where(w < 0, -1.0, 1.0), idx, axis=-1)
    u = np.take_along_axis(u, idx[..., None, :], axis=-1)
    return _SVDResult(u, s, mH(u * row(sgn)))


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        return _svd_hermitian(a, compute_uv)
    if not compute_uv:
        return apply(_svd_prim, (a,), {'full_matrices': False})[1]
    return apply(_svd_prim, (a,), {'full_matrices': full_matrices})


defcomposite(np.linalg.svd, _svd)
defcomposite(np.linalg.svdvals, lambda x, /: _svd(x, compute_uv=False))


# --------------------------------------------------------------------------
# qr: A = Q R, R upper triangular with a real diagonal
# --------------------------------------------------------------------------
# Tall or square (m >= n), with X = Q^H dA R^-1 and Omega = tril(X, -1) - tril(X, -1)^H
# + i Im diag(X) (skew-Hermitian): dR = (X - Omega) R, dQ = dA R^-1 - Q (X - Omega).
# Pullback: Abar = (Qbar + Q herm(Rbar R^H - Q^H Qbar)) R^-H, herm() the Hermitian
# matrix of the upper triangle.  Wide: A = [X | Y] = Q [R1 | R2] with X = Q R1
# square and R2 = Q^H Y.  mode='complete' of a tall A: dQ_perp = -Q R^-H dA^H Q_perp.

def _qr_fwd(a, mode='reduced'):
    return np.linalg.qr(a, mode)


def _qr_square_vjp(q, r, gq, gr):
    """Abar for A = Q R with R square, given the cotangents (None: zero)."""
    m = 0.0
    if gr is not None:
        m = gr @ mH(r)
    if gq is not None:
        m = m - mH(q) @ gq
    b = q @ hermitian_part(m, lower=False)
    if gq is not None:
        b = gq + b
    return right_solve(b, mH(r))


def _qr_vjp(g, ans, a, mode='reduced'):
    gq, gr = g
    q, r = ans
    m, n = shape_of(a)[-2:]
    if m < n:                                     # wide: split off Y = A[:, m:]
        y = a[..., :, m:]
        gy = None
        if gr is not None:
            gy = q @ gr[..., :, m:]
            gq = y @ mH(gr[..., :, m:]) if gq is None else gq + y @ mH(gr[..., :, m:])
            gr = gr[..., :, :m]
        gx = _qr_square_vjp(q, r[..., :, :m], gq, gr)
        if gy is None:
            gy = np.zeros(shape_of(y), dtype_of(gx))
        return np.concatenate([gx, gy], axis=-1)
    if shape_of(q)[-1] > n:                       # mode='complete' of a tall matrix
        qp, q, r = q[..., :, n:], q[..., :, :n], r[..., :n, :]
        if gr is not None:
            gr = gr[..., :n, :]
        if gq is not None:
            gq, gqp = gq[..., :, :n], gq[..., :, n:]
            gq = gq - qp @ (mH(gqp) @ q)
    return _qr_square_vjp(q, r, gq, gr)


def _qr_square_jvp(q, r, ta):
    x = right_solve(mH(q) @ ta, r)                # Q^H dA R^-1
    low = np.tril(x, -1)
    omega = low - mH(low)
    if is_complex(x):
        omega = omega + diag_embed(1j * np.imag(diag_part(x)))
    xo = x - omega
    return right_solve(ta, r) - q @ xo, xo @ r


def _qr_jvp(t, ans, a, mode='reduced'):
    ta = t[0]
    q, r = ans
    m, n = shape_of(a)[-2:]
    if m < n:
        dq, dr1 = _qr_square_jvp(q, r[..., :, :m], ta[..., :, :m])
        dr2 = mH(dq) @ a[..., :, m:] + mH(q) @ ta[..., :, m:]
        return dq, np.concatenate([dr1, dr2], axis=-1)
    if shape_of(q)[-1] > n:                       # mode='complete' of a tall matrix
        qp, q1, r1 = q[..., :, n:], q[..., :, :n], r[..., :n, :]
        dq, dr = _qr_square_jvp(q1, r1, ta)
        dqp = -(q1 @ mH(right_solve(mH(qp) @ ta, r1)))
        return (np.concatenate([dq, dqp], axis=-1),
                np.concatenate([dr, np.zeros(shape_of(dr)[:-2] + (m - n, n), dtype_of(dr))],
                               axis=-2))
    return _qr_square_jvp(q, r, ta)


_qr_prim = Primitive(_qr_fwd, (_qr_vjp,), name='np.linalg.qr', multi=True, jvp=_qr_jvp,
                     batched=_qr_jvp)


def _qr(a, mode='reduced'):
    if mode == 'r':
        return apply(_qr_prim, (a,), {'mode': 'reduced'})[1]
    if mode not in ('reduced', 'complete'):
        raise TypeError(f"np.linalg.qr(..., mode={mode!r}) is not differentiable; use "
                        f"mode='reduced', 'complete' or 'r'")
    return apply(_qr_prim, (arr(a),), {'mode': mode})


defcomposite(np.linalg.qr, _qr)
