"""``scipy.linalg`` rules (``tracked.scipy.linalg``): finite-difference cases to second
order and forward mode, complex and batched matrices, values against SciPy, and the
recorded and compiled paths.  Skipped when SciPy is not installed."""
import numpy as np
import pytest

sla = pytest.importorskip('scipy.linalg')

import tracked as tr                                    # noqa: E402
from tracked.rules import scipy_linalg as rules         # noqa: E402
from tracked.scipy import linalg as tla                 # noqa: E402
from tracked.scipy import stats as tst                  # noqa: E402

from .harness import arg, case, parametrize     # noqa: E402

RNG = np.random.default_rng(7)
B3 = RNG.standard_normal((3, 2))


def carg(shape, low=-1.0, high=1.0):
    return arg(shape, low, high, dtype=np.complex128)


def spd(a):
    """A well-conditioned symmetric positive definite matrix (of each of a stack)."""
    return a @ np.swapaxes(a, -1, -2) + 3 * np.eye(np.shape(a)[-1])


# Complex cases to second order too (their pullbacks run complex matmuls on tracked values).
COMPLEX_ORDER = 2


def _spec(s):
    return str(s) if isinstance(s, tuple) else \
        f'{"c" if np.dtype(s.dtype).kind == "c" else ""}{s.shape}'


def st(*args, **kw):
    """A solve_triangular case; the diagonal of ``a`` is kept away from zero."""
    cplx = any(not isinstance(s, tuple) and np.dtype(s.dtype).kind == 'c' for s in args)
    return case(lambda a, b: tla.solve_triangular(a + 3 * np.eye(np.shape(a)[-1]), b, **kw),
                *args, covers=sla.solve_triangular, order=COMPLEX_ORDER if cplx else 2,
                name=f'solve_triangular({",".join(map(_spec, args))},{kw})')


def small(s):
    return arg(s, -1.0, 1.0) if isinstance(s, tuple) else s


def sylvester(*args):
    args = tuple(map(small, args))
    cplx = any(not isinstance(s, tuple) and np.dtype(s.dtype).kind == 'c' for s in args)
    # b's eigenvalues kept away from -a's (the equation is singular where they meet)
    return case(lambda a, b, q: tla.solve_sylvester(a, b + 3 * np.eye(np.shape(b)[-1]), q),
                *args, covers=sla.solve_sylvester, order=COMPLEX_ORDER if cplx else 2,
                name=f'solve_sylvester({",".join(map(_spec, args))})')


def banded(l_and_u, ab, b):
    """A solve_banded case; the stored diagonal (row u of ab) is kept away from zero."""
    lower, upper = l_and_u
    ab = small(ab)
    shift = np.zeros(ab.shape[-2:])
    shift[upper] = 4.0
    return case(lambda ab, b: tla.solve_banded(l_and_u, ab + shift, b), ab, b,
                covers=sla.solve_banded, name=f'solve_banded({l_and_u},{_spec(ab)},{_spec(b)})')


CASES = [
    # solve_triangular: every trans, both triangles, unit diagonal, vector and matrix b
    *[st((3, 3), b, trans=t, lower=lo) for t in (0, 1, 2, 'T') for lo in (True, False)
      for b in ((3,), (3, 2))],
    st((3, 3), (3,), lower=True, unit_diagonal=True),
    st((4, 4), (4, 3), trans='C', unit_diagonal=True),
    st((2, 3, 3), (2, 3, 2), lower=True), st((2, 3, 3), (2, 3, 1), trans=1),
    *[st(carg((3, 3)), carg(b), trans=t, lower=lo) for t in (0, 1, 2) for lo in (True, False)
      for b in ((3,), (3, 2))],
    st((3, 3), carg((3,)), trans=1), st(carg((3, 3)), (3, 2), lower=True),
    # matrix functions
    case(tla.expm, arg((3, 3), -1.0, 1.0), covers=sla.expm),
    case(tla.expm, arg((1, 1)), covers=sla.expm),
    case(tla.expm, arg((2, 3, 3), -1.0, 1.0), covers=sla.expm),
    case(tla.expm, carg((3, 3)), covers=sla.expm, order=COMPLEX_ORDER),
    case(lambda a: tla.sqrtm(spd(a)), (3, 3), covers=sla.sqrtm, name='sqrtm(spd(3,3))'),
    case(lambda a: tla.sqrtm(np.eye(3) * 2 + 0.3 * a), (3, 3), covers=sla.sqrtm,
         name='sqrtm(nonsymmetric(3,3))'),
    case(lambda a: tla.sqrtm(spd(a)), (2, 3, 3), covers=sla.sqrtm, name='sqrtm(spd(2,3,3))'),
    case(lambda a: tla.logm(spd(a)), (3, 3), covers=sla.logm, name='logm(spd(3,3))'),
    case(lambda a: tla.logm(np.eye(3) * 2 + 0.3 * a), (3, 3), covers=sla.logm,
         name='logm(nonsymmetric(3,3))'),
    case(lambda a: tla.logm(np.eye(2) * 2 + 0.3 * a), carg((2, 2)), covers=sla.logm,
         name='logm(complex(2,2))', order=COMPLEX_ORDER),
    # factorisations and their solvers
    case(lambda a: tla.lu_factor(a)[0], (4, 4), covers=sla.lu_factor, name='lu_factor(4,4)'),
    case(lambda a: tla.lu_factor(a)[0], carg((3, 3)), covers=sla.lu_factor,
         name='lu_factor(complex(3,3))', order=COMPLEX_ORDER),
    *[case(lambda a, b, t=t: tla.lu_solve(tla.lu_factor(a), b, trans=t), (4, 4), b,
           covers=sla.lu_solve, name=f'lu_solve((4,4),{b},trans={t})')
      for t in (0, 1, 2) for b in ((4,), (4, 2))],
    case(lambda a, b: tla.lu_solve(tla.lu_factor(a), b, trans=2), carg((3, 3)), carg((3,)),
         covers=sla.lu_solve, name='lu_solve(complex,trans=2)', order=COMPLEX_ORDER),
    *[case(lambda a, lower=lo: tla.cho_factor(spd(a), lower=lower)[0], (3, 3),
           covers=sla.cho_factor, name=f'cho_factor((3,3),lower={lo})') for lo in (True, False)],
    *[case(lambda a, b, lower=lo: tla.cho_solve(tla.cho_factor(spd(a), lower=lower), b),
           (3, 3), b, covers=sla.cho_solve, name=f'cho_solve((3,3),{b},lower={lo})')
      for lo in (True, False) for b in ((3,), (3, 2))],
    case(lambda a: tla.cho_solve(tla.cho_factor(spd(a)), B3), (3, 3), covers=sla.cho_solve,
         name='cho_solve((3,3),constant b)'),
    # solve_sylvester: real, complex, mixed, batched, a 1x1 trailing matrix
    *[sylvester(a, b, q) for a, b, q in [
        ((3, 3), (2, 2), (3, 2)), ((2, 2), (2, 2), (2, 2)), ((3, 3), (1, 1), (3, 1)),
        (carg((3, 3)), carg((2, 2)), carg((3, 2))), ((3, 3), (2, 2), carg((3, 2))),
        (carg((2, 2)), (3, 3), (2, 3)), ((2, 3, 3), (2, 2), (3, 2)),
        ((2, 3, 3), (2, 2, 2), (2, 3, 2))]],
    # solve_banded: tridiagonal (LAPACK's gtsv), general bands (gbsv), diagonal, 1x1,
    # vector and matrix b, complex, a stack of bands
    *[banded(lu, (sum(lu) + 1, n), b) for lu, n, b in [
        ((1, 1), 5, (5,)), ((1, 1), 4, (4, 2)), ((2, 1), 6, (6,)), ((0, 2), 5, (5, 3)),
        ((2, 0), 4, (4,)), ((0, 0), 3, (3, 2)), ((1, 2), 1, (1,))]],
    banded((1, 1), carg((3, 5)), carg((5,))), banded((2, 1), carg((4, 4)), (4, 2)),
    banded((1, 1), (3, 5), carg((5, 2))), banded((1, 1), (2, 3, 4), (2, 4, 2)),
    # the pseudo-determinant (scipy.stats' _PSD) through multivariate_normal: cov = F F^T
    # keeps its rank (r = F's columns) for every F, so differences along F are exact
    *[case(lambda f: tst.multivariate_normal.entropy(cov=f @ f.T), s, covers=rules.psd_log_pdet,
           name=f'multivariate_normal.entropy(F F^T, F {s})') for s in ((3, 3), (3, 2), (4, 1))],
    *[case(lambda f, m, z: tst.multivariate_normal.logpdf(m + z @ f.T, m, f @ f.T,
                                                          allow_singular=True),
           (d, r), (d,), (n, r), covers=rules.psd_log_pdet,
           name=f'multivariate_normal.logpdf(allow_singular, rank {r} of {d}, {n} points)')
      for d, r, n in ((3, 2, 4), (3, 3, 2), (4, 1, 3))],
]


@parametrize(CASES)
def test_case(c):
    c.check()


# --------------------------------------------------------------------------
# Values against SciPy
# --------------------------------------------------------------------------

A = RNG.standard_normal((4, 4))
S = spd(A)


@pytest.mark.parametrize('trans', [0, 1, 2, 'N', 'T', 'C'])
@pytest.mark.parametrize('lower', [True, False])
@pytest.mark.parametrize('unit', [True, False])
def test_solve_triangular_matches_scipy(trans, lower, unit):
    a = A + 1j * RNG.standard_normal((4, 4)) + 4 * np.eye(4)
    b = RNG.standard_normal((4, 2))
    np.testing.assert_allclose(
        tla.solve_triangular(tr.param(a), tr.param(b), trans=trans, lower=lower,
                             unit_diagonal=unit).data,
        sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit), rtol=1e-12)


def test_solve_triangular_gradient_lives_on_its_triangle():
    (g,) = tr.gradient(lambda a: np.sum(tla.solve_triangular(a, np.ones(3), lower=True,
                                                            unit_diagonal=True)), A[:3, :3])
    assert np.all(np.triu(g) == 0)
    (g,) = tr.gradient(lambda a: np.sum(tla.solve_triangular(a, np.ones(3))),
                       A[:3, :3] + 3 * np.eye(3))
    assert np.all(np.tril(g, -1) == 0) and np.all(np.diag(g) != 0)


def test_matrix_functions_match_scipy():
    x = tr.param(S)
    for mine, theirs in ((tla.expm, sla.expm), (tla.sqrtm, sla.sqrtm), (tla.logm, sla.logm)):
        np.testing.assert_allclose(mine(x).data, theirs(S), rtol=1e-10)


def test_expm_gradient_is_the_frechet_derivative():
    E = RNG.standard_normal((4, 4))
    G = RNG.standard_normal((4, 4))
    (g,) = tr.gradient(lambda a: np.sum(tla.expm(a) * G), A)
    # <G, L(A, E)> = <L(A^T, G), E>
    np.testing.assert_allclose(np.sum(g * E), np.sum(G * sla.expm_frechet(A, E)[1]), rtol=1e-10)


def test_factorisations_solve_like_scipy():
    b = RNG.standard_normal(4)
    lu, piv = tla.lu_factor(tr.param(A))
    np.testing.assert_allclose(lu.data, sla.lu_factor(A)[0], rtol=1e-12)
    np.testing.assert_array_equal(piv, sla.lu_factor(A)[1])
    for t in (0, 1):
        np.testing.assert_allclose(tla.lu_solve((lu, piv), b, trans=t).data,
                                   sla.lu_solve(sla.lu_factor(A), b, trans=t), rtol=1e-12)
    for lower in (True, False):
        c = tla.cho_factor(S, lower=lower)
        np.testing.assert_allclose(tla.cho_solve(c, b), sla.cho_solve(sla.cho_factor(S, lower), b),
                                   rtol=1e-12)


def test_lu_gradient_follows_a_new_pivoting_order_on_a_replayed_tape():
    def f(a):
        return np.sum(tla.lu_solve(tla.lu_factor(a), np.arange(1.0, 4.0)) ** 2)
    a1 = np.array([[3.0, 1.0, 0.5], [1.0, 2.0, 0.1], [0.2, 0.3, 1.5]])
    a2 = a1[[2, 0, 1]]                  # other rows first: another pivoting order
    tape = tr.GradientTape(f, a1)
    for a in (a1, a2):
        np.testing.assert_allclose(tape.gradient(a)[0], tr.gradient(f, a)[0], rtol=1e-10)


@pytest.mark.parametrize('f', [
    lambda a: np.sum(tla.expm(0.5 * a) ** 2),
    lambda a: np.sum(tla.sqrtm(spd(a))),
    lambda a: np.trace(tla.logm(spd(a))),
    lambda a: np.sum(tla.solve_triangular(a + 3 * np.eye(3), np.ones(3), lower=True)),
    lambda a: np.sum(tla.cho_solve(tla.cho_factor(spd(a)), np.ones(3)) ** 2),
], ids=['expm', 'sqrtm', 'logm', 'solve_triangular', 'cho_solve'])
def test_recorded_and_compiled_tapes(f):
    a1, a2 = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3))
    tape = tr.GradientTape(f, a1)
    ctape = tr.compile(tape, background=False)
    for a in (a1, a2):
        val, (g,) = tr.withgradient(f, a)
        tv, (tg,) = tape.withgradient(a)
        cv, (cg,) = ctape.withgradient(a)
        np.testing.assert_allclose([tv, cv], [val, val], rtol=1e-10)
        np.testing.assert_allclose(tg, g, rtol=1e-8)
        np.testing.assert_allclose(cg, g, rtol=1e-8)


def test_hessian_of_a_gaussian_log_likelihood_through_cholesky():
    # -1/2 logdet(C) - 1/2 y^T C^{-1} y for C = s^2 I: d^2/ds^2 checked against
    # the closed form n/s^2 - 3 |y|^2 / s^4
    y = np.array([0.5, -1.0, 2.0])

    def loglik(s):
        c = tla.cho_factor(s * s * np.eye(3), lower=True)
        return -np.sum(np.log(np.diagonal(c[0]))) - 0.5 * y @ tla.cho_solve(c, y)
    s = 1.3
    np.testing.assert_allclose(tr.hessian(loglik, s), 3 / s ** 2 - 3 * (y @ y) / s ** 4,
                               rtol=1e-10)


# --------------------------------------------------------------------------
# SciPy's spellings of np.linalg
# --------------------------------------------------------------------------

def _has_rule(fn):
    from tracked import registry
    return fn in registry.RULES


WRAPPERS = [
    case(tla.solve, (3, 3), (3,)), case(tla.solve, (3, 3), (3, 2)),
    case(lambda a, b: tla.solve(a, b, transposed=True), (3, 3), (3, 2), name='solve(transposed)'),
    case(lambda a, b: tla.solve(spd(a), b, assume_a='pos'), (3, 3), (3,), name='solve(pos)'),
    case(tla.inv, (3, 3)), case(tla.det, (3, 3)),
    case(lambda a: tla.cholesky(spd(a)), (3, 3), name='cholesky(upper)'),
    case(lambda a: tla.cholesky(spd(a), lower=True), (3, 3), name='cholesky(lower)'),
    case(lambda a: tla.eigh(spd(a))[0], (3, 3), name='eigh values'),
    case(lambda a: tla.eigh(spd(a), eigvals_only=True), (3, 3), name='eigh(eigvals_only)'),
    case(tla.norm, (3, 3)), case(lambda a: tla.norm(a, 1), (4,), name='norm(ord=1)'),
    case(tla.pinv, (4, 3)),
]


@parametrize(WRAPPERS)
def test_scipy_spellings(c):
    c.check()


def test_scipy_spellings_match_scipy():
    b = RNG.standard_normal((4, 2))
    for name, args, kw in [('solve', (S, b), {}), ('solve', (A, b), {'transposed': True}),
                           ('inv', (A,), {}), ('det', (A,), {}), ('cholesky', (S,), {}),
                           ('cholesky', (S,), {'lower': True}), ('norm', (A,), {'ord': 'fro'}),
                           ('pinv', (A,), {})]:
        np.testing.assert_allclose(tr.data(getattr(tla, name)(tr.param(args[0]), *args[1:], **kw)),
                                   getattr(sla, name)(*args, **kw), rtol=1e-10, err_msg=name)
    w, v = tla.eigh(tr.param(S))
    np.testing.assert_allclose(w.data, sla.eigh(S)[0], rtol=1e-12)
    np.testing.assert_allclose(np.abs(v.data), np.abs(sla.eigh(S)[1]), rtol=1e-10)


@pytest.mark.skipif(not all(map(_has_rule, (np.linalg.svd, np.linalg.qr, np.linalg.lstsq))),
                    reason='svd, qr and lstsq rules come with the linalg branch')
def test_svd_qr_lstsq_spellings():
    m = RNG.standard_normal((4, 3))
    assert tr.gradcheck(lambda a: tla.svd(a, compute_uv=False), m)
    assert [q.shape for q in tla.qr(m, mode='economic')] == [(4, 3), (3, 3)]
    assert tr.gradcheck(lambda a: tla.qr(a, mode='r')[0], m)
    np.testing.assert_allclose(tla.lstsq(m, np.ones(4))[0], sla.lstsq(m, np.ones(4))[0], rtol=1e-10)


# --------------------------------------------------------------------------
# solve_sylvester and solve_banded
# --------------------------------------------------------------------------

def _complex(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


@pytest.mark.parametrize('dtype', [float, complex])
def test_solve_sylvester_matches_scipy_and_its_adjoint(dtype):
    a, b, q = (RNG.standard_normal(s).astype(dtype) for s in ((3, 3), (2, 2), (3, 2)))
    b = b + 3 * np.eye(2)
    x = tla.solve_sylvester(tr.param(a), b, q)
    np.testing.assert_allclose(x.data, sla.solve_sylvester(a, b, q), rtol=1e-12)
    # <G, X(Q)> = <Y, Q> with Y the solution of a^H Y + Y b^H = G
    g = RNG.standard_normal((3, 2))
    (gq,) = tr.gradient(lambda q: np.real(np.sum(g * tla.solve_sylvester(a, b, q))), q)
    np.testing.assert_allclose(gq, sla.solve_sylvester(a.conj().T, b.conj().T, g), rtol=1e-12)
    np.testing.assert_allclose(tla.solve_sylvester(a[None], b, np.stack([q, 2 * q])),
                               np.stack([sla.solve_sylvester(a, b, q)] * 2) * [[[1]], [[2]]],
                               rtol=1e-12)


def test_solve_sylvester_of_real_matrices_and_a_complex_right_hand_side():
    # SciPy 1.17 gets this wrong when a real matrix has complex eigenvalues (its real
    # Schur form meets LAPACK's complex solver); tracked solves it in complex numbers
    a, b, q = np.array([[0.0, -1.0], [1.0, 0.0]]), np.array([[3.0]]), np.array([[1j], [0.0]])
    x = tla.solve_sylvester(tr.param(a), b, q).data
    np.testing.assert_allclose(a @ x + x @ b, q, atol=1e-14)
    assert tr.gradcheck(lambda a, b, q: np.abs(tla.solve_sylvester(a, b, q)) ** 2, a, b,
                        _complex(2, 1))


@pytest.mark.parametrize('l_and_u, n, b', [((1, 1), 5, (5,)), ((2, 1), 6, (6, 2)),
                                            ((0, 3), 5, (5,)), ((0, 0), 1, (1, 3))])
def test_solve_banded_matches_scipy_and_zeroes_the_unused_corners(l_and_u, n, b):
    lower, upper = l_and_u
    ab, rhs = _complex(lower + upper + 1, n), _complex(*b)
    ab[upper] += 5
    np.testing.assert_allclose(tla.solve_banded(l_and_u, tr.param(ab), rhs).data,
                               sla.solve_banded(l_and_u, ab, rhs), rtol=1e-12)
    (g,) = tr.gradient(lambda ab: np.sum(np.abs(tla.solve_banded(l_and_u, ab, rhs)) ** 2), ab)
    i = np.arange(n) + np.arange(lower + upper + 1)[:, None] - upper      # ab[r, j] is A[i, j]
    unused = (i < 0) | (i >= n)
    assert np.all(g[unused] == 0) and np.all(g[~unused] != 0)
    # the gradient at the stored entries is the dense one: -(A^-H gx) x^H at A[i, j]
    dense = np.zeros((n, n), complex)
    rows, cols = np.nonzero(~unused)
    dense[i[rows, cols], cols] = ab[rows, cols]
    (gd,) = tr.gradient(lambda a: np.sum(np.abs(np.linalg.solve(a, rhs)) ** 2), dense)
    np.testing.assert_allclose(g[rows, cols], gd[i[rows, cols], cols], rtol=1e-10)


def test_solve_banded_second_order_and_tapes():
    ab = RNG.standard_normal((4, 6))
    ab[1] += 5

    def f(ab, b):
        return np.sum(tla.solve_banded((2, 1), ab, b) ** 3)
    b = RNG.standard_normal(6)
    assert tr.gradcheck(f, ab, b, order=3)
    hb = tr.hessian(lambda b: f(ab, b), b)
    np.testing.assert_allclose(hb, tr.hessian_reverse(lambda b: f(ab, b), b), rtol=1e-10)
    tape = tr.GradientTape(f, ab, b)
    ctape = tr.compile(tape, background=False)
    ab2, b2 = ab + 0.1 * RNG.standard_normal((4, 6)), RNG.standard_normal(6)
    for t in (tape, ctape):
        for got, want in zip(t.gradient(ab2, b2), tr.gradient(f, ab2, b2)):
            np.testing.assert_allclose(got, want, rtol=1e-10)
