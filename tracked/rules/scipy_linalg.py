"""SciPy's linear algebra: rules keyed on the ``scipy.linalg`` functions.

SciPy converts its arguments with ``np.asarray`` first, so these are reached through
``tracked.scipy.linalg`` (which imports this module), not by NumPy's protocols; the
registry entries key them on SciPy's functions all the same (one entry per
primitive, named ``scipy.linalg.*``).  Not imported by ``import tracked``: importing
``scipy.linalg`` there would cost every user of tracked its import time.

- ``solve_triangular``: the triangle it reads gets the gradient (the other one, and
  the diagonal under ``unit_diagonal=True``, get zeros: SciPy never reads them).
- ``expm``, ``sqrtm``, ``logm``: primary matrix functions with real coefficients,
  whose pullback is ``conj(L_f(A^T, conj G))`` (the Fréchet derivative on A's own
  branch, also for a real matrix with a negative eigenvalue) and whose tangent is
  ``L_f(A, E)``, both by the block-matrix identity
  ``f([[A, E], [0, A]]) = [[f(A), L_f(A, E)], [0, f(A)]]`` (Higham, *Functions of
  Matrices*, 3.2).  Written with the function itself, so derivatives nest to any
  order; ``scipy.linalg.expm_frechet`` was rejected because its result is not
  differentiable again.
- ``lu_factor``: the packed ``L`` (strictly lower) and ``U`` of ``A[perm] = L U``.
  The row permutation is recomputed from ``A`` by a non-differentiable function, so
  a recorded tape follows a new pivoting order instead of freezing the recorded one.
- ``cho_factor``/``cho_solve``/``lu_solve``: composites of the above and
  ``np.linalg.cholesky``.
- ``solve_sylvester``: ``A X + X B = Q`` differentiated: ``A dX + dX B = dQ - dA X - X dB``
  is another Sylvester equation, and the adjoint one is that of ``A^H``, ``B^H``.
  SciPy (1.17) solves a complex ``Q`` with a real ``A`` or ``B`` wrongly when that
  one has complex eigenvalues (its real Schur form is not triangular, which the
  complex LAPACK solver assumes): the forward makes all three complex then.
- ``solve_banded``: the banded storage ``ab`` (``ab[u + i - j, j] = A[i, j]``) gets the
  gradient of the entries it stores; the corners SciPy never reads get zeros.  The
  adjoint solve takes the band of ``A^H``, made from ``ab`` by shifting its rows (never
  a dense matrix: a banded system may be large).
- ``psd_log_pdet``: the log pseudo-determinant of a Hermitian positive semidefinite
  matrix with SciPy's cutoff for negligible eigenvalues (``scipy.stats``' ``_PSD``:
  ``multivariate_normal(..., allow_singular=True)``).  Its derivative is
  ``tr(pinv(A) dA)``, exact along directions that keep the rank (pinv's own rule,
  Golub & Pereyra, gives the higher orders there).
"""
import numpy as np
import scipy.linalg as sla

from ..registry import Primitive, defcomposite, defvjp, nondifferentiable
from ..dispatch import apply, call
from .matrices import fold_triangle, hermitian_part


# Own helpers rather than linalg.py's private ones (that module is being reorganised).
def _shape(x):
    return np.shape(x)


def _dtype(x):
    d = getattr(x, 'dtype', None)
    return np.result_type(x) if d is None else d


def _is_complex(x):
    return _dtype(x).kind == 'c'


def _conj(x):
    return np.conj(x) if _is_complex(x) else x


def _mH(x):
    """The conjugate transpose of each matrix (the transpose for real ones)."""
    return _conj(np.swapaxes(x, -1, -2))


_TRANS = {0: 0, 1: 1, 2: 2, 'N': 0, 'T': 1, 'C': 2, 'n': 0, 't': 1, 'c': 2}


def _trans(trans):
    try:
        return _TRANS[trans]
    except (KeyError, TypeError):
        raise ValueError(f"trans={trans!r}: expected 0, 1, 2 or 'N', 'T', 'C'") from None


# --------------------------------------------------------------------------
# solve_triangular
# --------------------------------------------------------------------------

def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, **kwargs):
    """``op(a)^{-1} b`` (op: 0 none, 1 transpose, 2 conjugate transpose) as a primitive."""
    return call(sla.solve_triangular, a, b, trans=trans, lower=lower,
                unit_diagonal=unit_diagonal)


def _triangle(x, lower, unit_diagonal):
    """The part of ``x`` that ``solve_triangular`` reads."""
    k = -1 if unit_diagonal else 0
    return np.tril(x, k) if lower else np.triu(x, -k)


def _op(m, trans):
    return m if trans == 0 else np.swapaxes(m, -1, -2) if trans == 1 else _mH(m)


def _outer_h(u, v, matrix):
    """``u v^H``: an outer product for vectors, a matrix product for matrices."""
    if matrix:
        return np.matmul(u, _mH(v))
    return np.expand_dims(u, -1) * np.expand_dims(np.conj(v) if _is_complex(v) else v, -2)


def _st_vjp_b(g, ans, a, b, trans=0, lower=False, unit_diagonal=False, **kwargs):
    # op(A)^{-H} g: A^{-H} for trans 0, conj(A)^{-1} for 1, A^{-1} for 2
    trans = _trans(trans)
    if trans == 0:
        return solve_triangular(a, g, 2, lower, unit_diagonal)
    if trans == 1 and (_is_complex(a) or _is_complex(g)):
        return np.conj(solve_triangular(a, np.conj(g), 0, lower, unit_diagonal))
    return solve_triangular(a, g, 0, lower, unit_diagonal)


def _st_vjp_a(g, ans, a, b, trans=0, lower=False, unit_diagonal=False, **kwargs):
    t = _trans(trans)
    gm = -_outer_h(_st_vjp_b(g, ans, a, b, t, lower, unit_diagonal), ans, np.ndim(b) > 1)
    return _triangle(gm if t == 0 else np.swapaxes(gm, -1, -2) if t == 1 else _mH(gm),
                     lower, unit_diagonal)


def _st_jvp(tangents, ans, a, b, trans=0, lower=False, unit_diagonal=False, **kwargs):
    ta, tb = tangents
    t = _trans(trans)
    rhs = tb
    if ta is not None:
        dm = _op(_triangle(ta, lower, unit_diagonal), t)
        prod = np.matmul(dm, ans)
        rhs = -prod if rhs is None else rhs - prod
    return solve_triangular(a, rhs, t, lower, unit_diagonal)


defvjp(sla.solve_triangular, _st_vjp_a, _st_vjp_b, name='scipy.linalg.solve_triangular',
       jvp=_st_jvp)


# --------------------------------------------------------------------------
# expm, sqrtm, logm: the block-matrix Fréchet derivative
# --------------------------------------------------------------------------

def _block(x, e):
    """``[[x, e], [0, x]]`` (for stacks of matrices too)."""
    zeros = np.zeros(_shape(x), np.result_type(_dtype(x), _dtype(e)))
    return np.concatenate([np.concatenate([x, e], axis=-1),
                           np.concatenate([zeros, x], axis=-1)], axis=-2)


def _cut_angle(a):
    """The angle by which to turn the branch cut of sqrt and log (the negative real
    axis) clockwise, per matrix: halfway between the eigenvalues of ``a`` nearest to it
    from above and from below, when one lies within 0.1 rad of it; else 0.

    The Fréchet block ``[[A, E], [0, A]]`` holds each eigenvalue of A twice, which
    rounding splits by ~1e-8 off the real axis: copies of a real matrix's negative
    eigenvalue land on both sides of the cut and f of the block is garbage (1e22).
    f(A) is on the branch above the cut (SciPy's choice: sqrtm gives +i).
    """
    w = np.linalg.eigvals(a)
    dist = np.pi - np.abs(np.angle(w))
    above = np.min(np.where(np.imag(w) >= 0, dist, np.pi), axis=-1)
    below = np.min(np.where(np.imag(w) < 0, dist, np.pi), axis=-1)
    return np.where(np.minimum(above, below) < 0.1, (below - above) / 2, 0.0)


nondifferentiable(_cut_angle)


def _matrix_function(fun, name, turned=None):
    """The primitive of a primary matrix function ``fun`` with real coefficients;
    ``turned(phi)`` is the factor with ``f(z) = turned(phi) * f(exp(-i phi) z) + const``
    for a function with a branch cut on the negative real axis."""
    def frechet(a, e):               # L_f(a, e), written with the primitive itself
        n = _shape(a)[-1]
        b = _block(a, e)
        if turned is not None:
            phi = call(_cut_angle, a)
            if np.any(phi != 0):
                phi = np.expand_dims(phi, (-1, -2))
                return turned(phi) * apply(prim, (np.exp(-1j * phi) * b,), {})[..., :n, n:]
        return apply(prim, (b,), {})[..., :n, n:]

    def vjp(g, ans, a):
        # The adjoint of E -> L_f(A, E) is conj(L_f(A^T, conj(G))): A^T has A's
        # eigenvalues, so f is taken on A's branch.  L_f(A^H, G), equal elsewhere, puts a
        # real matrix's negative eigenvalue (sqrtm, logm) on the other side of the cut
        # and gives the conjugate of the right gradient.
        return _conj(frechet(np.swapaxes(a, -1, -2), _conj(g)))

    def jvp(tangents, ans, a):
        return frechet(a, tangents[0])
    prim = defvjp(fun, vjp, name=f'scipy.linalg.{name}', jvp=jvp)
    return prim


_matrix_function(sla.expm, 'expm')
_matrix_function(sla.sqrtm, 'sqrtm', lambda phi: np.exp(0.5j * phi))
_matrix_function(sla.logm, 'logm', lambda phi: 1.0)    # (+ i phi I, off the block read)


# --------------------------------------------------------------------------
# LU factorisation
# --------------------------------------------------------------------------

def _lu_perm(a):
    """The row permutation of ``lu_factor(a)``: ``a[perm] = L U`` (non-differentiable)."""
    return _perm_of_piv(sla.lu_factor(a)[1])


def _perm_of_piv(piv):
    """LAPACK's row interchanges (row i swapped with row piv[i], in turn) as a permutation."""
    perm = np.arange(np.shape(piv)[-1])
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


def _lu_pivots(a):
    return sla.lu_factor(a)[1]


nondifferentiable(_lu_perm, _perm_of_piv, _lu_pivots)


def _permute_fwd(x, perm):
    return np.take(x, perm, axis=0)


# x[perm] for a permutation: its adjoint is the inverse permutation (no scatter), and
# ``perm`` may be a recorded value (np.take does not dispatch on its indices).
_PERMUTE = Primitive(_permute_fwd, (lambda g, ans, x, perm: _permute(g, np.argsort(perm)), None),
                     name='permute rows', linear='joint')


def _permute(x, perm):
    """The rows of ``x`` in the order ``perm`` (a permutation)."""
    return apply(_PERMUTE, (x, perm), {})


def _lu_packed(a):
    return sla.lu_factor(a)[0]


def _lu_parts(lu):
    n = _shape(lu)[-1]
    return np.tril(lu, -1) + np.eye(n, dtype=_dtype(lu)), np.triu(lu)


def _lu_vjp(g, ans, a):
    # A[perm] = L U; with F = L^{-1} dA[perm] U^{-1}: dL = L stril(F), dU = triu(F) U, so
    # the cotangent of F is stril(L^H gL) + triu(gU U^H), and dA[perm]'s is
    # L^{-H} Fbar U^{-H}.
    lo, up = _lu_parts(ans)
    fbar = np.tril(np.matmul(_mH(lo), np.tril(g, -1)), -1) + np.triu(np.matmul(np.triu(g), _mH(up)))
    left = solve_triangular(ans, fbar, 2, True, True)                     # L^{-H} Fbar
    gperm = _mH(solve_triangular(ans, _mH(left), 0, False, False))        # ... U^{-H}
    return _permute(gperm, np.argsort(call(_lu_perm, a)))


def _lu_jvp(tangents, ans, a):
    lo, up = _lu_parts(ans)
    perm = call(_lu_perm, a)
    f = solve_triangular(ans, _permute(tangents[0], perm), 0, True, True)
    f = _mH(solve_triangular(ans, _mH(f), 2, False, False))               # L^{-1} dA_p U^{-1}
    return np.matmul(lo, np.tril(f, -1)) + np.matmul(np.triu(f), up)


_lu_prim = Primitive(_lu_packed, (_lu_vjp,), name='scipy.linalg.lu_factor', jvp=_lu_jvp)


def lu_factor(a, overwrite_a=False, check_finite=True):
    if np.ndim(a) != 2 or _shape(a)[0] != _shape(a)[1]:
        raise ValueError(f'tracked.scipy.linalg.lu_factor: expected a square matrix, got '
                         f'shape {_shape(a)}')
    return apply(_lu_prim, (a,), {}), call(_lu_pivots, a)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    perm = call(_perm_of_piv, piv)
    t = _trans(trans)
    if t == 0:                               # L U x = b[perm]
        y = solve_triangular(lu, _permute(b, perm), 0, True, True)
        return solve_triangular(lu, y, 0, False, False)
    # A^T x = b (A^H for 2): U^T L^T (x[perm]) = b
    y = solve_triangular(lu, b, t, False, False)
    return _permute(solve_triangular(lu, y, t, True, True), np.argsort(perm))


defcomposite(sla.lu_factor, lu_factor)
defcomposite(sla.lu_solve, lu_solve)


# --------------------------------------------------------------------------
# Cholesky factorisation
# --------------------------------------------------------------------------

def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    # SciPy leaves arbitrary values in the other triangle; here they are zeros
    return np.linalg.cholesky(a, upper=not lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    if lower:                                 # A = L L^H
        return solve_triangular(c, solve_triangular(c, b, 0, True), 2, True)
    return solve_triangular(c, solve_triangular(c, b, 2, False), 0, False)   # A = U^H U


defcomposite(sla.cho_factor, cho_factor)
defcomposite(sla.cho_solve, cho_solve)


# --------------------------------------------------------------------------
# solve_sylvester: A X + X B = Q
# --------------------------------------------------------------------------

def solve_sylvester(a, b, q):
    """``X`` with ``a X + X b = q`` (of each of a stack) as a primitive."""
    return call(sla.solve_sylvester, a, b, q)


def _sylvester(a, b, q):
    if any(np.iscomplexobj(m) for m in (a, b, q)):       # see the module docstring
        dtype = np.result_type(a, b, q, np.complex64)
        a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    return sla.solve_sylvester(a, b, q)


def _sylvester_vjp_q(g, ans, a, b, q):
    return solve_sylvester(_mH(a), _mH(b), g)


def _sylvester_vjp_a(g, ans, a, b, q):
    return -np.matmul(_sylvester_vjp_q(g, ans, a, b, q), _mH(ans))


def _sylvester_vjp_b(g, ans, a, b, q):
    return -np.matmul(_mH(ans), _sylvester_vjp_q(g, ans, a, b, q))


def _sylvester_jvp(tangents, ans, a, b, q):
    ta, tb, tq = tangents
    terms = [t for t in (tq, None if ta is None else -np.matmul(ta, ans),
                         None if tb is None else -np.matmul(ans, tb)) if t is not None]
    return solve_sylvester(a, b, sum(terms[1:], terms[0]))


defvjp(sla.solve_sylvester, _sylvester_vjp_a, _sylvester_vjp_b, _sylvester_vjp_q,
       fn=_sylvester, name='scipy.linalg.solve_sylvester', jvp=_sylvester_jvp)


# --------------------------------------------------------------------------
# solve_banded: A x = b with A in diagonal ordered form
# --------------------------------------------------------------------------
# Row r of ab holds the diagonal of offset u - r: ab[r, j] = A[j + r - u, j].  Every
# helper below shifts rows or right-hand sides (zeros shifted in), so a pullback costs
# O((l + u) n) per column of b, as the solve does.

def solve_banded(l_and_u, ab, b):
    """``A^{-1} b`` for the band matrix ``A`` stored in ``ab`` (``(l, u)`` diagonals)."""
    return call(sla.solve_banded, l_and_u, ab, b)


def _shift(x, k, axis):
    """``y[j] = x[j + k]`` along ``axis`` (negative), zero where ``j + k`` is outside."""
    n = _shape(x)[axis]
    if k == 0:
        return x
    k = max(-n, min(n, k))
    rest = (slice(None),) * (-axis - 1)
    kept = x[(Ellipsis, slice(k, None) if k > 0 else slice(None, n + k)) + rest]
    zero_shape = list(_shape(x))
    zero_shape[axis] = abs(k)
    zeros = np.zeros(zero_shape, _dtype(x))
    return np.concatenate([kept, zeros] if k > 0 else [zeros, kept], axis=axis)


def _band_transpose(ab, lower, upper):
    """The band of ``A^T`` (``upper`` diagonals below, ``lower`` above) from ``A``'s."""
    rows = [_shift(ab[..., r, :], upper - r, -1) for r in range(lower + upper, -1, -1)]
    return np.stack(rows, axis=-2)


def _band_matmul(ab, x, upper):
    """``A x`` for ``x`` of shape ``(..., n, m)``."""
    rows = _shape(ab)[-2]
    return sum(_shift(np.expand_dims(ab[..., r, :], -1) * x, upper - r, -2)
               for r in range(rows))


def _columns(x, b):
    """``x`` as a stack of columns ``(..., n, m)``: SciPy reads only a 1-d ``b`` as a vector."""
    return np.expand_dims(x, -1) if np.ndim(b) == 1 else x


def _banded_vjp_b(g, ans, l_and_u, ab, b):
    lower, upper = l_and_u
    abh = _band_transpose(ab, lower, upper)
    if _is_complex(abh):
        abh = np.conj(abh)
    y = solve_banded((upper, lower), abh, _columns(g, b))      # A^{-H} g
    return y[..., 0] if np.ndim(b) == 1 else y


def _banded_vjp_ab(g, ans, l_and_u, ab, b):
    # -(A^{-H} g) x^H, at the entries the band stores: ab[r, j] is A[j + r - u, j]
    lower, upper = l_and_u
    y, x = _columns(_banded_vjp_b(g, ans, l_and_u, ab, b), b), _columns(ans, b)
    xc = np.conj(x) if _is_complex(x) else x
    return -np.stack([np.sum(_shift(y, r - upper, -2) * xc, axis=-1)
                      for r in range(lower + upper + 1)], axis=-2)


def _banded_jvp(tangents, ans, l_and_u, ab, b):
    _, tab, tb = tangents
    lower, upper = l_and_u
    rhs = None if tb is None else _columns(tb, b)
    if tab is not None:
        prod = _band_matmul(tab, _columns(ans, b), upper)
        rhs = -prod if rhs is None else rhs - prod
    dx = solve_banded(l_and_u, ab, rhs)
    return dx[..., 0] if np.ndim(b) == 1 else dx


defvjp(sla.solve_banded, None, _banded_vjp_ab, _banded_vjp_b, name='scipy.linalg.solve_banded',
       jvp=_banded_jvp)


# --------------------------------------------------------------------------
# The pseudo-determinant of a positive semidefinite matrix (scipy.stats' _PSD)
# --------------------------------------------------------------------------

# SciPy's cutoff for float64 (scipy.stats converts a covariance to float64 first)
PSD_RTOL = 1e6 * np.finfo(np.float64).eps


def _psd_eigh(a):
    """Eigenvalues and vectors as ``scipy.stats`` computes them (the lower triangle), and
    the magnitude below which an eigenvalue counts as zero."""
    s, u = sla.eigh(a, lower=True)
    return s, u, PSD_RTOL * np.max(np.abs(s))


def psd_rank(a, allow_singular=True):
    """The rank SciPy's ``_PSD`` gives ``a``, raising as it does for a matrix that is not
    positive semidefinite (or singular, unless ``allow_singular``)."""
    s, _, eps = _psd_eigh(a)
    if np.min(s) < -eps:
        raise ValueError('The input matrix must be symmetric positive semidefinite.')
    rank = int(np.sum(s > eps))
    if rank < len(s) and not allow_singular:
        raise np.linalg.LinAlgError('When `allow_singular is False`, the input matrix must '
                                    'be symmetric positive definite.')
    return rank


def psd_outside(a, dev):
    """Whether each point ``dev`` (along the last axis) is off the support ``range(a)``,
    with ``scipy.stats``' tolerance."""
    s, u, eps = _psd_eigh(a)
    return np.linalg.norm(np.asarray(dev) @ u[:, s <= eps], axis=-1) >= 1e3 * eps


nondifferentiable(psd_rank, psd_outside)


def _log_pdet(a):
    s, _, eps = _psd_eigh(a)
    return np.sum(np.log(s[s > eps]))


def psd_pinv(a):
    """The pseudo-inverse with the cutoff of ``psd_rank`` (pinv's rule differentiates it)."""
    return np.linalg.pinv(a, rtol=PSD_RTOL, hermitian=True)


def _log_pdet_vjp(g, ans, a):
    return g * fold_triangle(psd_pinv(a))


def _log_pdet_jvp(tangents, ans, a):
    return np.sum(np.swapaxes(psd_pinv(a), -1, -2) * hermitian_part(tangents[0]),
                  axis=(-2, -1))


def psd_log_pdet(a):
    """``log`` of the product of the eigenvalues of the Hermitian matrix that ``a``'s
    lower triangle stands for, those SciPy counts as non-zero (``psd_rank``)."""
    return call(psd_log_pdet, a)


defvjp(psd_log_pdet, _log_pdet_vjp, fn=_log_pdet, name='log pseudo-determinant (scipy.stats)',
       jvp=_log_pdet_jvp)
