"""Decompositions (eigh, eig, svd, qr and their value-only forms): cases to order 2 on
losses that do not depend on the arbitrary sign/phase of eigen- and singular
vectors, real and complex, batched; closed forms and an independent QR."""
import numpy as np
import pytest

import tracked as tr
from tracked.rules import decompositions

from .harness import case, grad, parametrize
from .matrix_args import C, distinct_eigs, full_rank, spd, with_spectrum

LA = np.linalg
EIGH, EIG, SVD, QR = LA.eigh, LA.eig, LA.svd, LA.qr


def mH(x):
    return np.conj(np.swapaxes(x, -1, -2))


def abs2(x):
    """|x|^2 elementwise: invariant to the sign or phase of each vector."""
    return np.real(x * np.conj(x))


# ---- losses of the outputs that are well defined (gauge invariant)

def eigh_fun(w, v):            # V diag(w^3) V^H
    return (v * (w ** 3)[..., None, :]) @ mH(v)


def eig_fun(w, v):             # V diag(exp(w)) V^-1 = expm(A): any column scaling cancels
    return np.linalg.solve(np.swapaxes(v, -1, -2), np.swapaxes(v * np.exp(w)[..., None, :],
                                                                 -1, -2))


def svd_fun(u, s, vh):         # U diag(s^2 + s) V^H on the first k columns
    k = s.shape[-1]
    return (u[..., :, :k] * (s * s + s)[..., None, :]) @ vh[..., :k, :]


def svd_perp(u, s, vh):        # projectors on the complements of the range and row space
    k = s.shape[-1]
    up, vp = u[..., :, k:], mH(vh[..., k:, :])
    return np.real(np.sum(up @ mH(up))) + np.real(np.sum(vp @ mH(vp) * 2.0))


def qr_perp(q, r):
    n = r.shape[-1]
    qp = q[..., :, n:]
    return np.real(qp @ mH(qp))[..., :, :n] + np.real(q[..., :, :n] * 2.0)


def on(fun, decomposition, **kw):
    return lambda a: fun(*decomposition(a, **kw))


def part(k, decomposition, **kw):
    return lambda a: decomposition(a, **kw)[k]


CASES = [
    # ---- eigh (Hermitian: eigenvalues, |V|^2, V f(w) V^H), reads one triangle
    case(part(0, EIGH), spd(3, 3), covers=EIGH, name='eigh.w(3,3)'),
    case(part(0, EIGH), spd(2, 4, 4), covers=EIGH, name='eigh.w(2,4,4)'),
    case(part(0, EIGH), spd(1, 1), covers=EIGH, name='eigh.w(1,1)'),
    case(lambda a: abs2(EIGH(a)[1]), spd(3, 3), covers=EIGH, name='eigh.|v|^2(3,3)'),
    case(lambda a: abs2(EIGH(a)[1]), spd(2, 3, 3, upper_noise=True), covers=EIGH,
         name='eigh.|v|^2(2,3,3 upper noise)'),
    case(lambda a: abs2(EIGH(a, UPLO='U')[1]), spd(3, 3), covers=EIGH, name='eigh.|v|^2(UPLO=U)'),
    case(on(eigh_fun, EIGH), spd(3, 3), covers=EIGH, name='eigh v w^3 v^H(3,3)'),
    case(lambda a: on(eigh_fun, EIGH)(a + np.swapaxes(a, -1, -2)), (2, 3, 3), covers=EIGH,
         name='eigh v w^3 v^H(a + a^T)(2,3,3)'),
    case(part(0, EIGH), spd(3, 3, dtype=C), covers=EIGH, name='eigh.w(complex)'),
    case(lambda a: abs2(EIGH(a)[1]), spd(2, 3, 3, upper_noise=True, dtype=C), covers=EIGH,
         name='eigh.|v|^2(complex, upper noise)'),
    case(on(eigh_fun, EIGH, UPLO='U'), spd(3, 3, upper_noise=False, dtype=C), covers=EIGH,
         name='eigh v w^3 v^H(complex, UPLO=U)'),
    case(LA.eigvalsh, spd(3, 3, upper_noise=True)),
    case(LA.eigvalsh, spd(2, 3, 3), kwargs={'UPLO': 'U'}),
    case(LA.eigvalsh, spd(3, 3, upper_noise=True, dtype=C)),

    # ---- eig: real (real spectrum, complex pairs), complex, batched
    case(part(0, EIG), distinct_eigs(3), covers=EIG, name='eig.w(3,3)'),
    case(part(0, EIG), distinct_eigs(3, complex_pairs=True), covers=EIG,
         name='eig.w(3,3 complex pair)'),
    case(part(0, EIG), distinct_eigs(3, dtype=C), covers=EIG, name='eig.w(complex)'),
    case(part(0, EIG), distinct_eigs(1), covers=EIG, name='eig.w(1,1)'),
    case(lambda a: abs2(EIG(a)[1]), distinct_eigs(3), covers=EIG, name='eig.|v|^2(3,3)'),
    case(lambda a: abs2(EIG(a)[1]), distinct_eigs(3, complex_pairs=True), covers=EIG,
         name='eig.|v|^2(complex pair)'),
    case(lambda a: abs2(EIG(a)[1]), distinct_eigs(3, batch=(2,), dtype=C), covers=EIG,
         name='eig.|v|^2(2,3,3 complex)'),
    case(on(eig_fun, EIG), distinct_eigs(3, complex_pairs=True), covers=EIG,
         name='eig V exp(w) V^-1(complex pair)'),
    case(on(eig_fun, EIG), distinct_eigs(3, batch=(2,)), covers=EIG,
         name='eig V exp(w) V^-1(2,3,3)'),
    case(LA.eigvals, distinct_eigs(4)),
    case(LA.eigvals, distinct_eigs(3, complex_pairs=True)),
    case(LA.eigvals, distinct_eigs(3, batch=(2,), dtype=C)),

    # ---- svd: singular values, U f(s) V^H, |U|^2, |Vh|^2; square, tall, wide, batched
    case(part(1, SVD), full_rank(3, 3), covers=SVD, name='svd.s(3,3)'),
    case(part(1, SVD), full_rank(4, 2), covers=SVD, name='svd.s(4,2)'),
    case(part(1, SVD), full_rank(2, 3, 4, dtype=C), covers=SVD, name='svd.s(2,3,4 complex)'),
    case(part(1, SVD), full_rank(1, 1), covers=SVD, name='svd.s(1,1)'),
    case(on(svd_fun, SVD), full_rank(3, 3), covers=SVD, name='svd U f(s) V^H(3,3)'),
    case(on(svd_fun, SVD, full_matrices=False), full_rank(4, 3), covers=SVD,
         name='svd U f(s) V^H(4,3 reduced)'),
    case(on(svd_fun, SVD), full_rank(2, 4, 3), covers=SVD, name='svd U f(s) V^H(2,4,3 full)'),
    case(on(svd_fun, SVD), full_rank(2, 4), covers=SVD, name='svd U f(s) V^H(2,4 full)'),
    case(on(svd_fun, SVD, full_matrices=False), full_rank(3, 4, dtype=C), covers=SVD,
         name='svd U f(s) V^H(3,4 complex)'),
    case(on(svd_fun, SVD), full_rank(2, 3, 2, dtype=C), covers=SVD,
         name='svd U f(s) V^H(2,3,2 complex full)'),
    case(lambda a: abs2(SVD(a, full_matrices=False)[0]), full_rank(4, 3), covers=SVD,
         name='svd.|U|^2(4,3)'),
    case(lambda a: abs2(SVD(a, full_matrices=False)[2]), full_rank(2, 4, dtype=C), covers=SVD,
         name='svd.|Vh|^2(2,4 complex)'),
    case(lambda a: abs2(SVD(a)[0]), full_rank(3, 3, dtype=C), covers=SVD,
         name='svd.|U|^2(3,3 complex)'),
    case(on(svd_perp, SVD), full_rank(4, 2), covers=SVD, name='svd U_perp U_perp^T(4,2)'),
    case(on(svd_perp, SVD), full_rank(2, 4, dtype=C), covers=SVD,
         name='svd V_perp V_perp^H(2,4 complex)'),
    case(SVD, full_rank(4, 3), kwargs={'compute_uv': False}, name='svd(compute_uv=False)'),
    case(SVD, full_rank(2, 2, 3), kwargs={'compute_uv': False, 'full_matrices': False},
         name='svd(2,2,3 compute_uv=False)'),
    case(part(1, SVD, hermitian=True), with_spectrum(3, 3), covers=SVD,
         name='svd.s(hermitian)'),
    case(lambda a: part(1, SVD, hermitian=True)(a + mH(a)), (3, 3), covers=SVD,
         name='svd.s(hermitian, indefinite)'),
    case(lambda a: on(svd_fun, SVD, hermitian=True)(a + mH(a)), (2, 3, 3), covers=SVD,
         name='svd U f(s) V^H(hermitian)'),
    case(SVD, spd(3, 3, dtype=C), kwargs={'compute_uv': False, 'hermitian': True},
         name='svd(hermitian, compute_uv=False, complex)'),
    case(LA.svdvals, full_rank(3, 4)),
    case(LA.svdvals, full_rank(2, 3, 3, dtype=C)),

    # ---- qr: Q and R themselves (unique for full rank); reduced, complete, r, wide
    case(part(0, QR), full_rank(3, 3), covers=QR, name='qr.Q(3,3)'),
    case(part(1, QR), full_rank(3, 3), covers=QR, name='qr.R(3,3)'),
    case(part(0, QR), full_rank(4, 3), covers=QR, name='qr.Q(4,3)'),
    case(part(1, QR), full_rank(2, 4, 3), covers=QR, name='qr.R(2,4,3)'),
    case(part(0, QR), full_rank(3, 5), covers=QR, name='qr.Q(3,5)'),
    case(part(1, QR), full_rank(3, 5), covers=QR, name='qr.R(3,5)'),
    case(part(1, QR), full_rank(1, 1), covers=QR, name='qr.R(1,1)'),
    case(part(0, QR), full_rank(4, 3, dtype=C), covers=QR, name='qr.Q(4,3 complex)'),
    case(part(1, QR), full_rank(2, 3, 3, dtype=C), covers=QR, name='qr.R(2,3,3 complex)'),
    case(part(0, QR), full_rank(2, 4, dtype=C), covers=QR, name='qr.Q(2,4 complex)'),
    case(part(1, QR), full_rank(2, 4, dtype=C), covers=QR, name='qr.R(2,4 complex)'),
    case(part(0, QR, mode='complete'), full_rank(3, 4), covers=QR, name='qr.Q(complete, wide)'),
    case(part(1, QR, mode='complete'), full_rank(5, 3), covers=QR, name='qr.R(complete, tall)'),
    case(on(qr_perp, QR, mode='complete'), full_rank(5, 2), covers=QR,
         name='qr Q_perp Q_perp^T(complete)'),
    case(on(qr_perp, QR, mode='complete'), full_rank(2, 4, 2, dtype=C), covers=QR,
         name='qr Q_perp Q_perp^H(complete, complex)'),
    case(QR, full_rank(4, 3), kwargs={'mode': 'r'}, name="qr(mode='r')"),
]


@parametrize(CASES)
def test_case(c):
    c.check()


# --------------------------------------------------------------------------
# Results like NumPy's
# --------------------------------------------------------------------------

@pytest.mark.parametrize('call', [
    lambda a: LA.eigh(a), lambda a: LA.eig(a), lambda a: LA.svd(a),
    lambda a: LA.svd(a, full_matrices=False), lambda a: LA.svd(a, hermitian=True),
    lambda a: LA.qr(a), lambda a: LA.qr(a, 'complete'),
])
def test_results_like_numpy(call):
    a = spd(2, 3, 3).make(None)
    expected = call(a)
    got = call(tr.param(a))
    assert type(got) is type(expected)
    for g, e in zip(got, expected):
        assert tr.istracked(g)
        np.testing.assert_allclose(tr.data(g), e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('call', [
    lambda a: LA.svd(a, compute_uv=False), lambda a: LA.svd(a, compute_uv=False, hermitian=True),
    LA.svdvals, LA.eigvals, LA.eigvalsh, lambda a: LA.qr(a, 'r'),
])
def test_value_forms_like_numpy(call):
    a = spd(3, 3).make(None)
    got = call(tr.param(a))
    assert tr.istracked(got)
    np.testing.assert_allclose(tr.data(got), call(a), rtol=1e-12, atol=1e-12)


def test_qr_raw_mode_is_refused():
    with pytest.raises(TypeError, match="mode='raw'"):
        LA.qr(tr.param(np.eye(3)), 'raw')


def test_multi_output_primitives_have_tangent_rules():
    for prim in (decompositions._svd_prim, decompositions._qr_prim, decompositions._eig_prim):
        assert prim.jvp is not None and prim.batched is not None


def test_eig_of_a_real_matrix_is_real_when_numpy_s_is_and_guarded():
    real, pair = np.array([[2.0, 1.0], [0.5, 3.0]]), np.array([[1.0, 2.0], [-2.0, 1.0]])
    assert LA.eig(tr.param(real))[0].dtype == np.float64
    assert LA.eig(tr.param(pair))[0].dtype == np.complex128
    f = lambda a: np.sum(np.abs(LA.eig(a)[0]) ** 2)
    with pytest.raises(tr.TapeGuardError):
        tr.GradientTape(f, real).withgradient(pair)      # real eigenvalues turn complex
    tape = tr.GradientTape(f, real, on_guard='retrace')
    np.testing.assert_allclose(tape.withgradient(pair)[1][0], tr.gradient(f, pair)[0])


# --------------------------------------------------------------------------
# Published closed forms, on well separated spectra
# --------------------------------------------------------------------------

def test_singular_value_gradient_is_u_v():
    # d s_i = Re(u_i^H dA v_i): the gradient of sum(c * s) is U diag(c) V^H
    for a in (with_spectrum(4, 3).make(None), with_spectrum(3, 3, dtype=C).make(None)):
        c = np.array([1.0, -2.0, 0.5])
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        np.testing.assert_allclose(grad(lambda x: np.sum(c * np.linalg.svd(x)[1]), a),
                                   (u * c) @ vh, rtol=1e-10, atol=1e-12)


def test_eigenvalue_gradient_is_left_right_product():
    # d w_i = (V^-1 dA V)_ii: the gradient of Re sum(c * w) is V^-H diag(conj c) V^H
    a = distinct_eigs(3, complex_pairs=True).make(None)
    c = np.array([1.0 + 0.5j, -2.0, 0.5j])
    w, v = np.linalg.eig(a)
    expected = np.real(np.linalg.inv(v).conj().T @ np.diag(np.conj(c)) @ v.conj().T)
    np.testing.assert_allclose(grad(lambda x: np.real(np.sum(c * np.linalg.eig(x)[0])), a),
                               expected, rtol=1e-10, atol=1e-12)


def test_hermitian_eigenvalue_gradient_is_v_v():
    a = spd(3, 3, dtype=C).make(None)
    w, v = np.linalg.eigh(a)
    c = np.array([1.0, 2.0, -1.0])
    s = (v * c) @ v.conj().T          # the symmetric gradient, folded onto the lower triangle
    expected = np.diag(np.real(np.diag(s))) + np.tril(s + s.conj().T, -1)
    np.testing.assert_allclose(grad(lambda x: np.sum(c * np.linalg.eigh(x)[0]), a),
                               expected, rtol=1e-10, atol=1e-12)


def _gram_schmidt(a):
    """QR by modified Gram-Schmidt in NumPy operations: an independent oracle."""
    n = a.shape[-1]
    qs, rs = [], []
    for j in range(n):
        v = a[:, j]
        r = []
        for q in qs:
            c = np.vdot(q, v)
            r.append(c)
            v = v - c * q
        nv = np.sqrt(np.real(np.vdot(v, v)))
        r.append(nv)
        qs.append(v / nv)
        rs.append(r + [0.0] * (n - j - 1))
    return np.stack(qs, axis=1), np.stack([np.stack(r) for r in rs], axis=1)


@pytest.mark.parametrize('dtype', [np.float64, C])
def test_qr_gradient_matches_gram_schmidt(dtype):
    # Householder and Gram-Schmidt differ by a diagonal of signs D (Q D, D R); the
    # loss below is invariant to it, so both must give the same gradient.
    a = full_rank(4, 3, dtype=dtype).make(None)
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))

    def loss(qr):
        def f(x):
            q, r = qr(x)
            d = np.real(np.diagonal(r)) if np.iscomplexobj(r) else np.diagonal(r)
            return np.real(np.sum(w1 * q * d) + np.sum(w2 * r * d[:, None]))
        return f
    g_lapack = grad(loss(np.linalg.qr), a)
    g_oracle = grad(loss(_gram_schmidt), a)
    np.testing.assert_allclose(g_lapack, g_oracle, rtol=1e-9, atol=1e-12)


def test_repeated_singular_values_stay_finite():
    # at an orthogonal matrix every singular value is 1: sum(s) still has gradient U V^T
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    np.testing.assert_allclose(grad(lambda x: np.sum(np.linalg.svd(x)[1]), q), q, atol=1e-12)
    np.testing.assert_allclose(grad(lambda x: np.linalg.norm(x, 'nuc'), q), q, atol=1e-12)


def test_eigh_repeated_eigenvalues_finite():
    # sum(w**2) is the squared Frobenius norm of the symmetric matrix eigh reads from
    # the lower triangle: d/dx_ii = 2 x_ii, d/dx_ij (i > j) = 4 x_ij, upper part 0.
    np.testing.assert_allclose(grad(lambda x: np.sum(np.linalg.eigh(x)[0] ** 2), 2.0 * np.eye(3)),
                               4.0 * np.eye(3))
