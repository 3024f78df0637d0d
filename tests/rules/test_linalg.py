"""np.linalg solvers, norms and functions of one matrix: cases to order 2 (real and
complex), plus closed forms, results like NumPy's and tangent rules."""
import numpy as np
import pytest

import tracked as tr
from tracked import registry
from tracked.api import vjp

from .harness import arg, case, const, grad, parametrize
from .matrix_args import C, dd, dd_negdet, full_rank, spd, with_spectrum

S0, S1, S2, S3 = (), (5,), (3, 4), (2, 3, 4)
LA = np.linalg


def _slogdet(part):
    return lambda a: np.linalg.slogdet(a)[part]


def _lstsq(part, **kw):
    return lambda a, b: np.linalg.lstsq(a, b, **kw)[part]


def _sign_phase(a):          # sign * exp(logabsdet): the determinant again
    sign, logabsdet = np.linalg.slogdet(a)
    return sign * np.exp(logabsdet)


CASES = [
    # ---- inv, det, slogdet, solve
    case(LA.inv, dd(3, 3)),
    case(LA.inv, dd(1, 1)),
    case(LA.inv, dd(2, 3, 3)),
    case(LA.inv, dd(3, 3, dtype=C)),
    case(LA.inv, dd(2, 2, 2, dtype=C)),
    case(LA.det, dd(3, 3)),
    case(LA.det, dd(1, 1)),
    case(LA.det, dd_negdet(3)),
    case(LA.det, dd(2, 2, 3, 3)),
    case(LA.det, dd(3, 3, dtype=C)),
    case(LA.det, dd(2, 3, 3, dtype=C)),
    case(_slogdet(1), dd(3, 3), covers=LA.slogdet, name='slogdet.logabsdet(3,3)'),
    case(_slogdet(1), dd_negdet(3), covers=LA.slogdet, name='slogdet[1](negative det)'),
    case(_slogdet(1), dd(2, 4, 4), covers=LA.slogdet, name='slogdet[1](2,4,4)'),
    case(_sign_phase, dd_negdet(3), covers=LA.slogdet, name='slogdet sign*exp(logabsdet)'),
    case(_slogdet(1), dd(3, 3, dtype=C), covers=LA.slogdet, name='slogdet[1](complex)'),
    case(_slogdet(0), dd(2, 3, 3, dtype=C), covers=LA.slogdet, name='slogdet.sign(complex)'),
    case(_sign_phase, dd(3, 3, dtype=C), covers=LA.slogdet, name='slogdet sign*exp(complex)'),
    case(LA.solve, dd(3, 3), (3,)),
    case(LA.solve, dd(3, 3), (3, 2)),
    case(LA.solve, dd(2, 3, 3), (3,)),
    case(LA.solve, dd(2, 3, 3), (2, 3, 4)),
    case(LA.solve, dd(2, 3, 3), (3, 4)),
    case(LA.solve, dd(2, 1, 3, 3), (4, 3, 2)),
    case(LA.solve, dd(3, 3), const(np.arange(3.0))),
    case(LA.solve, dd(3, 3, dtype=C), arg((3,), dtype=C)),
    case(LA.solve, dd(2, 3, 3, dtype=C), (3, 2)),
    case(LA.solve, dd(3, 3), arg((3, 2), dtype=C)),

    # ---- cholesky (reads the lower triangle; upper=True reads the upper one)
    case(LA.cholesky, spd(3, 3)),
    case(LA.cholesky, spd(1, 1)),
    case(LA.cholesky, spd(2, 4, 4)),
    case(LA.cholesky, spd(3, 3, upper_noise=True)),
    case(LA.cholesky, spd(3, 3), kwargs={'upper': True}),
    case(lambda a: LA.cholesky(a @ a.T + 3 * np.eye(3)), (3, 3),
         covers=LA.cholesky, name='cholesky(a a^T + 3I)'),
    case(LA.cholesky, spd(3, 3, dtype=C)),
    case(LA.cholesky, spd(2, 3, 3, upper_noise=True, dtype=C)),
    case(LA.cholesky, spd(3, 3, upper_noise=True, dtype=C), kwargs={'upper': True}),

    # ---- pinv: full rank, tall, wide, batched, hermitian, complex
    case(LA.pinv, full_rank(3, 2)),
    case(LA.pinv, full_rank(2, 3)),
    case(LA.pinv, full_rank(3, 3)),
    case(LA.pinv, full_rank(2, 4, 3)),
    case(LA.pinv, spd(3, 3, upper_noise=True), kwargs={'hermitian': True}),
    case(LA.pinv, full_rank(3, 2, dtype=C)),
    case(LA.pinv, full_rank(2, 2, 3, dtype=C)),
    case(LA.pinv, spd(3, 3, upper_noise=True, dtype=C), kwargs={'hermitian': True}),
    case(lambda b, c: LA.pinv(b @ c, rcond=1e-10), (4, 2), (2, 3), covers=LA.pinv,
         name='pinv(rank 2 of 4x3)'),

    # ---- lstsq: tall (residuals), square, wide (minimum norm), 1-d and 2-d b, complex
    case(_lstsq(0), full_rank(4, 3), (4,), covers=LA.lstsq, name='lstsq.x(4,3)(4,)'),
    case(_lstsq(0), full_rank(5, 2), (5, 3), covers=LA.lstsq, name='lstsq.x(5,2)(5,3)'),
    case(_lstsq(0), full_rank(3, 3), (3,), covers=LA.lstsq, name='lstsq.x(3,3)(3,)'),
    case(_lstsq(0), full_rank(2, 4), (2,), covers=LA.lstsq, name='lstsq.x(2,4)(2,)'),
    case(_lstsq(0), full_rank(2, 3), (2, 2), covers=LA.lstsq, name='lstsq.x(2,3)(2,2)'),
    case(_lstsq(1), full_rank(4, 3), (4,), covers=LA.lstsq, name='lstsq.residuals(4,3)(4,)'),
    case(_lstsq(1), full_rank(5, 2), (5, 3), covers=LA.lstsq, name='lstsq.residuals(5,2)(5,3)'),
    case(_lstsq(3), full_rank(4, 3), (4,), covers=LA.lstsq, name='lstsq.sv(4,3)'),
    case(_lstsq(0, rcond=1e-10), full_rank(4, 2), const(np.arange(4.0)), covers=LA.lstsq,
         name='lstsq.x(rcond, constant b)'),
    case(_lstsq(0), full_rank(4, 3, dtype=C), arg((4, 2), dtype=C), covers=LA.lstsq,
         name='lstsq.x(complex tall)'),
    case(_lstsq(0), full_rank(2, 3, dtype=C), arg((2,), dtype=C), covers=LA.lstsq,
         name='lstsq.x(complex wide)'),
    case(_lstsq(1), full_rank(4, 2, dtype=C), arg((4,), dtype=C), covers=LA.lstsq,
         name='lstsq.residuals(complex)'),
    case(lambda b, c, y: LA.lstsq(b @ c, y, rcond=1e-10)[0], (4, 2), (2, 3), (4,),
         covers=LA.lstsq, name='lstsq.x(rank 2 of 4x3)'),
    case(lambda b, c, y: LA.lstsq(b @ c, y, rcond=1e-10)[0], (2, 2), (2, 4), (2,),
         covers=LA.lstsq, name='lstsq.x(rank 2 of 2x4)'),

    # ---- norm: vector orders
    case(LA.norm, S0), case(LA.norm, S1), case(LA.norm, S2),
    case(LA.norm, S3),
    case(LA.norm, S3, kwargs=dict(keepdims=True)),
    case(LA.norm, S1, const(2)),
    case(LA.norm, S2, const(None), const(1)),
    case(LA.norm, S3, kwargs=dict(axis=-1, keepdims=True)),
    case(LA.norm, S3, kwargs=dict(ord=2, axis=(1,))),
    case(LA.norm, S1, kwargs=dict(ord=1)),
    case(LA.norm, S2, kwargs=dict(ord=1, axis=0)),
    case(LA.norm, S1, kwargs=dict(ord=np.inf)),
    case(LA.norm, S2, kwargs=dict(ord=-np.inf, axis=1)),
    case(LA.norm, S2, kwargs=dict(ord=0, axis=1)),
    case(LA.norm, S1, kwargs=dict(ord=3)),
    case(LA.norm, S3, kwargs=dict(ord=3, axis=1, keepdims=True)),
    case(LA.norm, arg(S2, 0.5, 2.0), kwargs=dict(ord=0.5, axis=1)),
    case(LA.norm, arg(S1, 0.5, 2.0), kwargs=dict(ord=-1.5)),
    # norm: matrix orders
    case(LA.norm, S2, kwargs=dict(ord='fro')),
    case(LA.norm, S3, kwargs=dict(ord='fro', axis=(0, 2))),
    case(LA.norm, S2, kwargs=dict(ord='nuc')),
    case(LA.norm, (4, 3), kwargs=dict(ord='nuc')),
    case(LA.norm, S3, kwargs=dict(ord='nuc', axis=(2, 1), keepdims=True)),
    case(LA.norm, S2, kwargs=dict(ord=2)),
    case(LA.norm, S3, kwargs=dict(ord=2, axis=(-1, 0))),
    case(LA.norm, (4, 3), kwargs=dict(ord=-2)),
    case(LA.norm, S3, kwargs=dict(ord=-2, axis=(1, 2))),
    case(LA.norm, S2, kwargs=dict(ord=1)),
    case(LA.norm, S2, kwargs=dict(ord=-1)),
    case(LA.norm, S2, kwargs=dict(ord=np.inf)),
    case(LA.norm, S3, kwargs=dict(ord=-np.inf, axis=(2, 0), keepdims=True)),
    # norm: complex, every order
    case(LA.norm, arg(S3, dtype=C)),
    case(LA.norm, arg(S2, dtype=C), kwargs=dict(ord=1, axis=1)),
    case(LA.norm, arg(S1, dtype=C), kwargs=dict(ord=np.inf)),
    case(LA.norm, arg(S1, dtype=C), kwargs=dict(ord=3)),
    case(LA.norm, arg(S2, dtype=C), kwargs=dict(ord='fro')),
    case(LA.norm, arg(S2, dtype=C), kwargs=dict(ord='nuc')),
    case(LA.norm, arg(S3, dtype=C), kwargs=dict(ord=2, axis=(2, 1))),
    case(LA.norm, arg((4, 3), dtype=C), kwargs=dict(ord=-2)),
    case(LA.norm, arg(S2, dtype=C), kwargs=dict(ord=-1)),
    case(LA.norm, arg(S3, dtype=C), kwargs=dict(ord=np.inf, axis=(1, 2), keepdims=True)),

    # ---- array-API names: trace, diagonal, matrix_transpose, matrix_norm, vector_norm
    case(LA.trace, (2, 3, 3)),
    case(LA.trace, (3, 4), kwargs={'offset': 1}),
    case(LA.trace, arg((2, 3, 3), dtype=C)),
    case(LA.diagonal, (2, 3, 4)),
    case(LA.diagonal, arg((3, 3), dtype=C), kwargs={'offset': -1}),
    case(LA.matrix_transpose, (2, 3, 4)),
    case(LA.matrix_norm, (2, 3, 3)),
    case(LA.matrix_norm, (3, 4), kwargs={'ord': 'nuc', 'keepdims': True}),
    case(LA.matrix_norm, arg((2, 3, 3), dtype=C), kwargs={'ord': 1}),
    case(LA.vector_norm, S3),
    case(LA.vector_norm, S3, kwargs={'axis': (0, 2), 'keepdims': True}),
    case(LA.vector_norm, S3, kwargs={'axis': 1, 'ord': 1}),
    case(LA.vector_norm, S2, kwargs={'ord': np.inf, 'keepdims': True}),
    case(LA.vector_norm, arg(S2, dtype=C), kwargs={'axis': (-1,), 'ord': 3}),

    # ---- matrix_power, tensorinv, tensorsolve, cond
    case(LA.matrix_power, (3, 3), const(3)),
    case(LA.matrix_power, (2, 3, 3), const(2)),
    case(LA.matrix_power, (3, 3), const(1)),
    case(LA.matrix_power, (3, 3), const(0)),
    case(LA.matrix_power, dd(3, 3), const(-2)),
    case(LA.matrix_power, dd(2, 2, dtype=C), const(-3)),
    case(LA.tensorinv, arg((2, 3, 6), values=dd(6, 6).make(None).reshape(2, 3, 6))),
    case(LA.tensorinv, arg((6, 2, 3), values=dd(6, 6).make(None).reshape(6, 2, 3)),
         kwargs={'ind': 1}),
    case(LA.tensorinv, arg((2, 2, 4), values=dd(4, 4, dtype=C).make(None).reshape(2, 2, 4),
                           dtype=C)),
    case(LA.tensorsolve, arg((2, 3, 6), values=dd(6, 6).make(None).reshape(2, 3, 6)), (2, 3)),
    case(LA.tensorsolve, arg((6, 2, 3), values=dd(6, 6).make(None).reshape(6, 2, 3)), (2, 3),
         kwargs={'axes': (0,)}),
    case(LA.tensorsolve, arg((2, 2, 4), values=dd(4, 4, dtype=C).make(None).reshape(2, 2, 4),
                             dtype=C), arg((2, 2), dtype=C)),
    case(LA.cond, full_rank(3, 3)),
    case(LA.cond, full_rank(4, 3), const(2)),
    case(LA.cond, full_rank(2, 3, 3), const(-2)),
    case(LA.cond, dd(3, 3), const('fro')),
    case(LA.cond, dd(2, 3, 3), const(1)),
    case(LA.cond, dd(3, 3), const(-np.inf)),
    case(LA.cond, dd(3, 3), const('nuc')),
    case(LA.cond, full_rank(3, 3, dtype=C)),
    case(LA.cond, dd(3, 3, dtype=C), const(np.inf)),
]


@parametrize(CASES)
def test_case(c):
    c.check()


# --------------------------------------------------------------------------
# Closed forms and results like NumPy's
# --------------------------------------------------------------------------

def test_float32_preserved():
    a = (np.eye(3) * 4 + 0.1).astype(np.float32)
    for f in (np.linalg.inv, np.linalg.cholesky, lambda x: np.linalg.eigh(x)[1] ** 2,
              lambda x: np.einsum('ii->i', x), np.linalg.pinv, lambda x: np.linalg.svd(x)[1],
              lambda x: np.linalg.qr(x)[0],
              lambda x: np.linalg.lstsq(x, np.ones(3, np.float32))[0]):
        y, back = vjp(f, a)
        assert y.dtype == np.float32
        assert back(np.ones_like(y))[0].dtype == np.float32


def test_slogdet_result_like_numpy():
    a = dd_negdet(3).make(None)
    expected = np.linalg.slogdet(a)
    x = tr.param(a)
    res = np.linalg.slogdet(x)
    assert type(res) is type(expected)
    sign, logabsdet = res
    assert tr.data(sign) == -1.0 and tr.data(res.sign) == -1.0
    np.testing.assert_allclose(tr.data(logabsdet), expected.logabsdet)
    np.testing.assert_allclose(tr.data(res.logabsdet), expected.logabsdet)
    tr.back(logabsdet)
    np.testing.assert_allclose(x.grad, np.linalg.inv(a).T)


def test_slogdet_sign_has_zero_gradient():
    a = dd_negdet(3).make(None)
    x = tr.param(a)
    tr.back(np.linalg.slogdet(x).sign * 2.0)
    np.testing.assert_array_equal(x.grad, np.zeros((3, 3)))


def test_det_gradient_is_cofactor_matrix():
    a = dd(3, 3).make(None)
    np.testing.assert_allclose(grad(np.linalg.det, a), np.linalg.det(a) * np.linalg.inv(a).T)
    z = dd(3, 3, dtype=C).make(None)
    # ChainRules: the gradient of Re det is conj(d det / dA) = conj(det A^-T)
    np.testing.assert_allclose(grad(lambda x: np.real(np.linalg.det(x)), z),
                               np.conj(np.linalg.det(z) * np.linalg.inv(z).T), rtol=1e-12)


def test_complex_log_abs_det_gradient_is_inverse_hermitian():
    z = dd(3, 3, dtype=C).make(None)
    np.testing.assert_allclose(grad(lambda x: np.linalg.slogdet(x)[1], z),
                               np.linalg.inv(z).conj().T, rtol=1e-12)


def test_inv_and_solve_agree():
    a, b = dd(3, 3).make(None), np.arange(3.0)
    g_inv = grad(lambda x: np.sum(np.linalg.inv(x) @ b), a)
    g_solve = grad(lambda x: np.sum(np.linalg.solve(x, b)), a)
    np.testing.assert_allclose(g_solve, g_inv, rtol=1e-12)


def test_pinv_matches_inv_for_square():
    a = dd(3, 3).make(None)
    w = np.arange(9.0).reshape(3, 3)
    g_pinv = grad(lambda x: np.sum(np.linalg.pinv(x) * w), a)
    g_inv = grad(lambda x: np.sum(np.linalg.inv(x) * w), a)
    np.testing.assert_allclose(g_pinv, g_inv, rtol=1e-10, atol=1e-12)


def test_cholesky_gradient_lives_on_the_read_triangle():
    a = spd(3, 3, dtype=C).make(None)
    g = grad(lambda x: np.real(np.sum(np.linalg.cholesky(x))), a)
    assert np.all(np.triu(g, 1) == 0) and np.any(np.tril(g, -1) != 0)
    assert np.all(np.imag(np.diag(g)) == 0)     # LAPACK reads only the real diagonal
    g = grad(lambda x: np.real(np.sum(np.linalg.cholesky(x, upper=True))), a)
    assert np.all(np.tril(g, -1) == 0)


def test_lstsq_result_like_numpy_and_normal_equations():
    rng = np.random.default_rng(0)
    a, b, w = rng.standard_normal((5, 3)), rng.standard_normal(5), rng.standard_normal(3)
    res = np.linalg.lstsq(tr.param(a), tr.param(b))
    expected = np.linalg.lstsq(a, b)
    for got, want in zip(res, expected):
        np.testing.assert_allclose(tr.data(got), want)
    assert not tr.istracked(res[2]) and res[2] == 3
    # x = (A^T A)^-1 A^T b: the gradient of w . x through the normal equations
    ga, gb = tr.gradient(lambda x, y: w @ np.linalg.lstsq(x, y)[0], a, b)
    ga2, gb2 = tr.gradient(lambda x, y: w @ np.linalg.solve(x.T @ x, x.T @ y), a, b)
    np.testing.assert_allclose(ga, ga2, rtol=1e-10)
    np.testing.assert_allclose(gb, gb2, rtol=1e-10)


def test_lstsq_of_a_polynomial_fit():
    # fit y = c0 + c1 t + c2 t^2: d(sum of squared residuals)/dy = 2 r
    t = np.linspace(-1, 1, 7)
    a = np.stack([np.ones(7), t, t * t], axis=1)
    y = np.sin(3 * t)
    r = y - a @ np.linalg.lstsq(a, y)[0]
    np.testing.assert_allclose(grad(lambda v: np.linalg.lstsq(a, v)[1][0], y), 2 * r, atol=1e-12)


def test_matrix_rank_is_not_differentiated():
    x = tr.param(np.eye(3))
    r = np.linalg.matrix_rank(x)
    assert not tr.istracked(r) and r == 3


def test_norm_inf_ties_split_equally():
    x = np.array([-3.0, 1.0, 3.0])
    np.testing.assert_allclose(grad(lambda v: np.linalg.norm(v, np.inf), x), [-0.5, 0, 0.5])


@pytest.mark.parametrize('kw', [{}, {'ord': 2}, {'ord': 'fro'}, {'axis': 1}, {'axis': (0, 1)}])
def test_norm_at_zero_has_zero_gradient(kw):
    x = np.zeros((2, 3)) if 'ord' not in kw or kw['ord'] == 'fro' else np.zeros(3)
    g = grad(lambda v: np.sum(np.linalg.norm(v, **kw)), x)
    np.testing.assert_array_equal(g, np.zeros_like(x))


def test_norm_at_zero_only_in_one_row():
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    g = grad(lambda v: np.sum(np.linalg.norm(v, axis=1)), x)
    np.testing.assert_allclose(g, [[0, 0], [0.6, 0.8]])


def test_complex_norm_gradient_is_x_over_abs():
    z = np.array([3 + 4j, -1j, 2.0])
    np.testing.assert_allclose(grad(lambda v: np.linalg.norm(v, 1), z), z / np.abs(z))
    np.testing.assert_allclose(grad(np.linalg.norm, z), z / np.linalg.norm(z))


def test_nuclear_norm_gradient_and_third_order():
    a = with_spectrum(3, 3).make(None)
    u, _, vh = np.linalg.svd(a)
    np.testing.assert_allclose(grad(lambda x: np.linalg.norm(x, 'nuc'), a), u @ vh, rtol=1e-10)
    assert tr.gradcheck(lambda x: np.linalg.norm(x, 'nuc'), a, order=3)


def test_nuclear_norm_hessian_at_repeated_singular_values():
    # ||Q + tH||_* = ||I + t Q^T H||_*: the Hessian at an orthogonal Q maps H to
    # Q (Q^T H - H^T Q) / 2, although every singular value there is 1
    rng = np.random.default_rng(3)
    h = rng.standard_normal((3, 3))
    for q in (np.eye(3), np.linalg.qr(rng.standard_normal((3, 3)))[0]):
        expected = q @ (q.T @ h - h.T @ q) / 2
        np.testing.assert_allclose(tr.hvp(lambda x: np.linalg.norm(x, 'nuc'), q, h), expected,
                                   atol=1e-12)
        hr = tr.hessian_reverse(lambda x: np.linalg.norm(x, 'nuc'), q)
        np.testing.assert_allclose(hr @ h.ravel(), expected.ravel(), atol=1e-12)


F32_NORMS = [{}, {'ord': 1, 'axis': 0}, {'ord': 'nuc'}, {'ord': 2}, {'ord': np.inf},
             {'ord': 3, 'axis': 1}, {'ord': -2}]


@pytest.mark.parametrize('kw', F32_NORMS, ids=[str(kw) for kw in F32_NORMS])
def test_norms_float32_preserved(kw):
    x32 = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    p = tr.param(x32)
    y = np.linalg.norm(p, **kw)
    assert y.dtype == np.float32
    tr.back(np.sum(y))
    assert p.grad.dtype == np.float32
    g64 = grad(lambda v: np.sum(np.linalg.norm(v, **kw)), x32.astype(np.float64))
    np.testing.assert_allclose(p.grad, g64, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('f', [np.linalg.cond, np.linalg.svdvals,
                               lambda x: np.linalg.vector_norm(x, ord=3)])
def test_float32_preserved_by_composites(f):
    p = tr.param(np.random.default_rng(0).uniform(0.5, 2.0, (3, 3)).astype(np.float32))
    y = f(p)
    assert y.dtype == np.float32
    tr.back(np.sum(y))
    assert p.grad.dtype == np.float32


# --------------------------------------------------------------------------
# Tangent rules
# --------------------------------------------------------------------------

@pytest.mark.parametrize('fun', [LA.inv, LA.det, LA.slogdet, LA.solve, LA.cholesky, LA.pinv,
                                 LA.lstsq, LA.eigh])
def test_explicit_tangent_rules(fun):
    """Every linear-algebra primitive has an explicit tangent rule, not the double-vjp
    fallback (issue 20)."""
    assert registry.RULES[fun].jvp is not None


def test_forward_mode_jacobian_of_solve_matches_reverse():
    a, b = dd(3, 3).make(None), np.arange(1.0, 4.0)
    jf = tr.jacobian(lambda x: np.linalg.solve(x, b), a, mode='forward')[0]
    jr = tr.jacobian(lambda x: np.linalg.solve(x, b), a, mode='reverse')[0]
    np.testing.assert_allclose(jf, jr, rtol=1e-12)
