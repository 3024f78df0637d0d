"""Linear algebra rules: products, einsum and np.linalg, to order 2, plus targeted tests."""
import operator

import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp

from .harness import arg, case, const, parametrize

# --------------------------------------------------------------------------
# Well-conditioned inputs (fixed values, so that finite differences are accurate)
# --------------------------------------------------------------------------


def _rng(shape):
    return np.random.default_rng(abs(hash(shape)) % 2**32)


def dd(*shape):
    """A (stack of) diagonally dominant matrices: invertible, well conditioned."""
    n = shape[-1]
    return arg(shape, values=_rng(shape).uniform(-1, 1, shape) + (n + 1) * np.eye(n))


def dd_negdet(n):
    """Diagonally dominant with two rows swapped: determinant < 0."""
    m = _rng((n, n)).uniform(-1, 1, (n, n)) + (n + 1) * np.eye(n)
    return arg((n, n), values=m[[1, 0] + list(range(2, n))])


def spd(*shape, upper_noise=False):
    """Symmetric positive definite (with well separated eigenvalues 1, 2, ..., n).

    ``upper_noise`` perturbs the strict upper triangle: cholesky and eigh read only
    the lower one, so the input stays valid and the test checks that the gradient
    is the one of the function NumPy computes.
    """
    n = shape[-1]
    rng = _rng(shape)
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    m = (q * np.arange(1.0, n + 1)) @ np.swapaxes(q, -1, -2)
    if upper_noise:
        m = m + np.triu(rng.uniform(-1, 1, shape), 1)
    return arg(shape, values=m)


def full_rank(*shape):
    """A (stack of) full-rank rectangular matrices with singular values near 1..3."""
    rng = _rng(shape)
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, k)))
    v, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, k)))
    return arg(shape, values=(u * np.linspace(1.0, 3.0, k)) @ np.swapaxes(v, -1, -2))


def _w(r):        # eigenvalues of an eigh result
    return r[0]


def _vv(r):       # sign-invariant function of the eigenvectors
    return r.eigenvectors * r.eigenvectors


EIGH = np.linalg.eigh
CASES = [
    # ---- matmul: every ndim combination, broadcasting batch dims, the @ operator
    case(np.matmul, (3,), (3,)),
    case(np.matmul, (3,), (3, 4)),
    case(np.matmul, (2, 3), (3,)),
    case(np.matmul, (2, 3), (3, 4)),
    case(np.matmul, (1, 1), (1, 1)),
    case(np.matmul, (5, 2, 3), (3, 4)),
    case(np.matmul, (2, 3), (5, 3, 4)),
    case(np.matmul, (2, 1, 3, 4), (5, 4, 2)),
    case(np.matmul, (3,), (2, 3, 4)),
    case(np.matmul, (2, 3, 4), (4,)),
    case(np.matmul, const(np.arange(6.0).reshape(2, 3)), (3, 2)),
    case(np.matmul, (4, 2), const(np.arange(6.0).reshape(2, 3))),
    case(operator.matmul, (2, 3), (3, 2), covers=np.matmul, name='operator.matmul((2,3),(3,2))'),

    # ---- dot: scalars, vectors, matrices, n-d
    case(np.dot, (), ()),
    case(np.dot, (), (3,)),
    case(np.dot, (2, 3), ()),
    case(np.dot, (3,), (3,)),
    case(np.dot, (2, 3), (3,)),
    case(np.dot, (3,), (3, 2)),
    case(np.dot, (2, 3), (3, 4)),
    case(np.dot, (2, 3, 4), (4,)),
    case(np.dot, (4,), (2, 4, 3)),
    case(np.dot, (2, 3, 4), (5, 4, 2)),
    case(np.dot, (2, 3), (4, 3, 5)),
    case(np.dot, const(np.ones(3)), (3, 2)),

    # ---- vdot, inner, outer
    case(np.vdot, (3,), (3,)),
    case(np.vdot, (2, 3), (6,)),
    case(np.vdot, (2, 2), (2, 2)),
    case(np.inner, (), (3,)),
    case(np.inner, (3,), (3,)),
    case(np.inner, (2, 3), (3,)),
    case(np.inner, (2, 3), (4, 3)),
    case(np.inner, (2, 3, 4), (5, 4)),
    case(np.outer, (3,), (4,)),
    case(np.outer, (2, 2), (3,)),
    case(np.outer, (), (3,)),
    case(np.outer, const(np.arange(3.0)), (2,)),

    # ---- tensordot: int axes, pairs of sequences, pairs of ints, negative axes
    case(np.tensordot, (2, 3, 4), (3, 4, 5)),
    case(np.tensordot, (2, 3), (3, 4), kwargs={'axes': 1}),
    case(np.tensordot, (2,), (3,), kwargs={'axes': 0}),
    case(np.tensordot, (3, 4, 5), (4, 3, 2), kwargs={'axes': ([1, 0], [0, 1])}),
    case(np.tensordot, (3, 4), (2, 4), kwargs={'axes': (1, 1)}),
    case(np.tensordot, (2, 3), (3, 2), kwargs={'axes': ([-1], [0])}),
    case(np.tensordot, (2, 3), (2, 3), kwargs={'axes': 2}),

    # ---- einsum: explicit and implicit outputs, ellipses, diagonals, 3+ operands
    case(np.einsum, const('ij,jk->ik'), (2, 3), (3, 4)),
    case(np.einsum, const('ij,jk'), (2, 3), (3, 4)),
    case(np.einsum, const('ba'), (2, 3)),
    case(np.einsum, const('ijk->kji'), (2, 3, 4)),
    case(np.einsum, const('ii->i'), (3, 3)),
    case(np.einsum, const('ii'), (3, 3)),
    case(np.einsum, const('iii->i'), (2, 2, 2)),
    case(np.einsum, const('iij->ij'), (3, 3, 2)),
    case(np.einsum, const('ii,i->'), (3, 3), (3,)),
    case(np.einsum, const('ij->i'), (2, 3)),
    case(np.einsum, const('ij->'), (2, 3)),
    case(np.einsum, const('ij->j'), (2, 3)),
    case(np.einsum, const('i,j->ij'), (2,), (3,)),
    case(np.einsum, const('i,i'), (3,), (3,)),
    case(np.einsum, const(',i->i'), (), (3,)),
    case(np.einsum, const('ij,ij->ij'), (1, 3), (2, 3)),
    case(np.einsum, const('bij,bjk->bik'), (2, 3, 4), (2, 4, 2)),
    case(np.einsum, const('...ij,...jk->...ik'), (2, 3, 4), (4, 5)),
    case(np.einsum, const('...ij,...jk->...ik'), (5, 1, 2, 3), (4, 3, 2)),
    case(np.einsum, const('...i,...i'), (2, 3), (3,)),
    case(np.einsum, const('...ii->...i'), (2, 3, 3)),
    case(np.einsum, const('a...,a->...'), (3, 2, 2), (3,)),
    case(np.einsum, const('ij,jk,kl->il'), (2, 3), (3, 4), (4, 2)),
    case(np.einsum, const('i,i,i->'), (3,), (3,), (3,)),
    case(np.einsum, const('ij,jk,kl->il'), (2, 3), (3, 4), (4, 2), kwargs={'optimize': True}),
    case(np.einsum, const('ij,j->i'), (2, 3), const(np.arange(3.0))),
    case(lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), (2, 3), (3, 4),
         covers=np.einsum, name='einsum(sublists (2,3),(3,4))'),
    case(lambda a: np.einsum(a, [Ellipsis, 0, 0]), (2, 3, 3),
         covers=np.einsum, name='einsum(sublists ...ii (2,3,3))'),

    # ---- kron
    case(np.kron, (2,), (3,)),
    case(np.kron, (2, 2), (3, 2)),
    case(np.kron, (2,), (2, 3)),
    case(np.kron, (2, 1, 2), (2, 2)),
    case(np.kron, (), (3,)),

    # ---- cross: 3-vectors, batched and broadcast, axis arguments
    case(np.cross, (3,), (3,)),
    case(np.cross, (4, 3), (3,)),
    case(np.cross, (2, 1, 3), (4, 3)),
    case(np.cross, (3, 4), (3, 4), kwargs={'axis': 0}),
    case(np.cross, (3, 2), (2, 3), kwargs={'axisa': 0, 'axisb': -1, 'axisc': 0}),

    # ---- inv, det, slogdet, solve
    case(np.linalg.inv, dd(3, 3)),
    case(np.linalg.inv, dd(1, 1)),
    case(np.linalg.inv, dd(2, 3, 3)),
    case(np.linalg.det, dd(3, 3)),
    case(np.linalg.det, dd(1, 1)),
    case(np.linalg.det, dd_negdet(3)),
    case(np.linalg.det, dd(2, 2, 3, 3)),
    case(lambda a: np.linalg.slogdet(a).logabsdet, dd(3, 3),
         covers=np.linalg.slogdet, name='slogdet.logabsdet(3,3)'),
    case(lambda a: np.linalg.slogdet(a)[1], dd_negdet(3),
         covers=np.linalg.slogdet, name='slogdet[1](negative det)'),
    case(lambda a: np.linalg.slogdet(a)[1], dd(2, 4, 4),
         covers=np.linalg.slogdet, name='slogdet[1](2,4,4)'),
    case(lambda a: (lambda s, l: s * np.exp(l))(*np.linalg.slogdet(a)), dd_negdet(3),
         covers=np.linalg.slogdet, name='slogdet sign*exp(logabsdet)(negative det)'),
    case(np.linalg.solve, dd(3, 3), (3,)),
    case(np.linalg.solve, dd(3, 3), (3, 2)),
    case(np.linalg.solve, dd(2, 3, 3), (3,)),
    case(np.linalg.solve, dd(2, 3, 3), (2, 3, 4)),
    case(np.linalg.solve, dd(2, 3, 3), (3, 4)),
    case(np.linalg.solve, dd(2, 1, 3, 3), (4, 3, 2)),
    case(np.linalg.solve, dd(3, 3), const(np.arange(3.0))),

    # ---- cholesky (reads the lower triangle; upper=True reads the upper one)
    case(np.linalg.cholesky, spd(3, 3)),
    case(np.linalg.cholesky, spd(1, 1)),
    case(np.linalg.cholesky, spd(2, 4, 4)),
    case(np.linalg.cholesky, spd(3, 3, upper_noise=True)),
    case(np.linalg.cholesky, spd(3, 3), kwargs={'upper': True}),
    case(lambda a: np.linalg.cholesky(a @ a.T + 3 * np.eye(3)), (3, 3),
         covers=np.linalg.cholesky, name='cholesky(a a^T + 3I)'),

    # ---- eigh: gauge-invariant losses (eigenvalues, v*v, v diag(f(w)) v^T)
    case(lambda a: _w(EIGH(a)), spd(3, 3), covers=EIGH, name='eigh.w(3,3)'),
    case(lambda a: _w(EIGH(a)), spd(2, 4, 4), covers=EIGH, name='eigh.w(2,4,4)'),
    case(lambda a: _w(EIGH(a)), spd(1, 1), covers=EIGH, name='eigh.w(1,1)'),
    case(lambda a: _vv(EIGH(a)), spd(3, 3), covers=EIGH, name='eigh.v*v(3,3)'),
    case(lambda a: _vv(EIGH(a)), spd(2, 3, 3, upper_noise=True), covers=EIGH,
         name='eigh.v*v(2,3,3 upper noise)'),
    case(lambda a: _vv(EIGH(a, UPLO='U')), spd(3, 3), covers=EIGH, name='eigh.v*v(UPLO=U)'),
    case(lambda a: (lambda w, v: (v * w ** 3) @ v.T)(*EIGH(a)), spd(3, 3), covers=EIGH,
         name='eigh v diag(w^3) v^T(3,3)'),
    case(lambda a: (lambda w, v: (v * np.exp(w)[..., None, :]) @ np.swapaxes(v, -1, -2))(
        *EIGH(a + np.swapaxes(a, -1, -2))), (2, 3, 3), covers=EIGH,
         name='eigh expm(a + a^T)(2,3,3)'),

    # ---- pinv: full rank, tall, wide, batched, hermitian
    case(np.linalg.pinv, full_rank(3, 2)),
    case(np.linalg.pinv, full_rank(2, 3)),
    case(np.linalg.pinv, full_rank(3, 3)),
    case(np.linalg.pinv, full_rank(2, 4, 3)),
    case(np.linalg.pinv, spd(3, 3, upper_noise=True), kwargs={'hermitian': True}),

    # ---- other spellings: array-API names, vecdot/matvec/vecmat, multi_dot, ...
    case(np.linalg.matmul, (2, 3), (3, 4)),
    case(np.linalg.matmul, (5, 2, 3), (3,)),
    case(np.linalg.tensordot, (2, 3, 4), (3, 4, 2)),
    case(np.linalg.tensordot, (2, 3), (3, 4), kwargs={'axes': 1}),
    case(np.linalg.outer, (3,), (2,)),
    case(np.linalg.cross, (4, 3), (3,)),
    case(np.linalg.cross, (3, 2), (3, 2), kwargs={'axis': 0}),
    case(np.linalg.vecdot, (2, 3), (3,)),
    case(np.linalg.vecdot, (3, 2), (3, 1), kwargs={'axis': 0}),
    case(np.vecdot, (3,), (3,)),
    case(np.vecdot, (2, 3), (4, 1, 3)),
    case(np.vecdot, (3, 2), (3, 2), kwargs={'axis': 0, 'keepdims': True}),
    case(np.matvec, (2, 3), (3,)),
    case(np.matvec, (4, 2, 3), (1, 3)),
    case(np.vecmat, (3,), (3, 2)),
    case(np.vecmat, (4, 3), (2, 1, 3, 2)),
    case(lambda a, b, c: np.linalg.multi_dot([a, b, c]), (2, 3), (3, 4), (4, 2),
         covers=np.linalg.multi_dot, name='multi_dot((2,3),(3,4),(4,2))'),
    case(lambda a, b, c: np.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4,),
         covers=np.linalg.multi_dot, name='multi_dot((3,),(3,4),(4,))'),
    case(np.linalg.matrix_power, (3, 3), const(3)),
    case(np.linalg.matrix_power, (2, 3, 3), const(2)),
    case(np.linalg.matrix_power, (3, 3), const(1)),
    case(np.linalg.matrix_power, (3, 3), const(0)),
    case(np.linalg.matrix_power, dd(3, 3), const(-2)),
    case(np.linalg.eigvalsh, spd(3, 3, upper_noise=True)),
    case(np.linalg.eigvalsh, spd(2, 3, 3), kwargs={'UPLO': 'U'}),
]


# --------------------------------------------------------------------------
# Targeted tests
# --------------------------------------------------------------------------

@parametrize(CASES)
def test_case(c):
    c.check()


def _grads(f, *xs):
    ps = [tr.param(x) for x in xs]
    tr.back(f(*ps))
    return [p.grad for p in ps]


@pytest.mark.parametrize('spelling', [
    lambda a, b: np.einsum('ij,jk->ik', a, b),
    lambda a, b: np.einsum('ij,jk', a, b),
    lambda a, b: np.einsum('xy,yz->xz', a, b),
    lambda a, b: np.einsum('ik,kj->ij', a, b),
    lambda a, b: np.einsum('ji,jk->ik', a.T, b),
    lambda a, b: np.einsum('...j,jk->...k', a, b),
    lambda a, b: np.einsum('ij,jk->ik', a, b, optimize=True),
    lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
    lambda a, b: np.einsum(a, [0, 1], b, [1, 2]),
    lambda a, b: np.dot(a, b),
    lambda a, b: np.tensordot(a, b, 1),
    lambda a, b: a @ b,
])
def test_product_spellings_match_matmul(spelling):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    w = rng.standard_normal((3, 2))
    expected = _grads(lambda x, y: np.sum(np.matmul(x, y) * w), a, b)
    got = _grads(lambda x, y: np.sum(spelling(x, y) * w), a, b)
    np.testing.assert_allclose(got[0], w @ b.T)
    np.testing.assert_allclose(got[1], a.T @ w)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_einsum_trace_and_diagonal_gradients():
    a = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(_grads(lambda x: np.einsum('ii', x), a)[0], np.eye(3))
    w = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(
        _grads(lambda x: np.sum(np.einsum('ii->i', x) * w), a)[0], np.diag(w))
    np.testing.assert_array_equal(_grads(lambda x: np.einsum('ij->', x), a)[0], np.ones((3, 3)))


@pytest.mark.parametrize('f', [
    lambda a, b: np.sum(a @ b),
    lambda a, b: np.sum(np.matmul(a[0], b)),
    lambda a, b: np.sum(np.einsum('ij,jk->ik', a, b)),
    lambda a, b: np.sum(np.dot(a, b)),
])
def test_float32_preserved(f):
    a = np.ones((3, 4), dtype=np.float32)
    b = np.ones((4, 2), dtype=np.float32)
    y, back = vjp(f, a, b)
    assert y.dtype == np.float32
    ga, gb = back(np.float32(1.0))
    assert ga.dtype == np.float32 and gb.dtype == np.float32
    A, B = tr.param(a), tr.param(b)
    out = A @ B
    assert out.dtype == np.float32
    tr.back(np.sum(out))
    assert A.grad.dtype == np.float32
    np.testing.assert_array_equal(A.grad, np.full((3, 4), 2.0, np.float32))


def test_float32_preserved_linalg():
    a = (np.eye(3) * 4 + 0.1).astype(np.float32)
    for f in (np.linalg.inv, np.linalg.cholesky, lambda x: np.linalg.eigh(x)[1] ** 2,
              lambda x: np.einsum('ii->i', x)):
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
    assert float(sign) == -1.0 and float(res.sign) == -1.0
    np.testing.assert_allclose(float(logabsdet), expected.logabsdet)
    np.testing.assert_allclose(float(res.logabsdet), expected.logabsdet)
    tr.back(logabsdet)
    np.testing.assert_allclose(x.grad, np.linalg.inv(a).T)


def test_slogdet_sign_has_zero_gradient():
    a = dd_negdet(3).make(None)
    x = tr.param(a)
    tr.back(np.linalg.slogdet(x).sign * 2.0)
    np.testing.assert_array_equal(x.grad, np.zeros((3, 3)))


def test_det_gradient_is_cofactor_matrix():
    a = dd(3, 3).make(None)
    x = tr.param(a)
    tr.back(np.linalg.det(x))
    np.testing.assert_allclose(x.grad, np.linalg.det(a) * np.linalg.inv(a).T)


def test_eigh_result_like_numpy():
    a = spd(2, 3, 3).make(None)
    expected = np.linalg.eigh(a)
    res = np.linalg.eigh(tr.param(a))
    assert type(res) is type(expected)
    w, v = res
    np.testing.assert_allclose(w.data, expected.eigenvalues)
    np.testing.assert_allclose(res.eigenvectors.data, expected.eigenvectors)
    assert w.shape == (2, 3) and v.shape == (2, 3, 3)


def test_eigh_repeated_eigenvalues_finite():
    # sum(w**2) is the squared Frobenius norm of the symmetric matrix eigh reads from
    # the lower triangle: d/dx_ii = 2 x_ii, d/dx_ij (i > j) = 4 x_ij, upper part 0.
    a = 2.0 * np.eye(3)
    x = tr.param(a)
    tr.back(np.sum(np.linalg.eigh(x)[0] ** 2))
    np.testing.assert_allclose(x.grad, 4.0 * np.eye(3))


def test_eigh_and_cholesky_gradients_live_on_the_lower_triangle():
    a = spd(3, 3).make(None)
    for f in (lambda x: np.sum(np.linalg.eigh(x)[0] ** 3),
              lambda x: np.sum(np.linalg.cholesky(x))):
        g = _grads(f, a)[0]
        assert np.all(np.triu(g, 1) == 0)
        assert np.any(np.tril(g, -1) != 0)
    g = _grads(lambda x: np.sum(np.linalg.cholesky(x, upper=True)), a)[0]
    assert np.all(np.tril(g, -1) == 0)


def test_inv_and_solve_agree():
    a, b = dd(3, 3).make(None), np.arange(3.0)
    g_inv = _grads(lambda x: np.sum(np.linalg.inv(x) @ b), a)[0]
    g_solve = _grads(lambda x: np.sum(np.linalg.solve(x, b)), a)[0]
    np.testing.assert_allclose(g_solve, g_inv, rtol=1e-12)


def test_pinv_matches_inv_for_square():
    a = dd(3, 3).make(None)
    w = np.arange(9.0).reshape(3, 3)
    g_pinv = _grads(lambda x: np.sum(np.linalg.pinv(x) * w), a)[0]
    g_inv = _grads(lambda x: np.sum(np.linalg.inv(x) * w), a)[0]
    np.testing.assert_allclose(g_pinv, g_inv, rtol=1e-10, atol=1e-12)


def test_mixed_tracked_and_plain_operands():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3,))
    x = tr.param(b)
    y = np.dot(a, x) + np.inner(a, x) + a @ x + np.einsum('ij,j->i', a, x)
    tr.back(np.sum(y))
    np.testing.assert_allclose(x.grad, 4 * a.sum(axis=0))
    x = tr.param(b)
    tr.back(np.sum(np.outer([1.0, 2.0], x)))
    np.testing.assert_allclose(x.grad, np.full(3, 3.0))


def test_second_order_quadratic_form():
    # f(x) = x^T A x has Hessian A + A^T; check d/dx of (grad . v) through matmul.
    a = np.arange(9.0).reshape(3, 3)
    v = np.array([1.0, -1.0, 2.0])

    def grad_dot_v(x):
        _, back = vjp(lambda z: z @ a @ z, x)
        return back(1.0)[0] @ v
    _, back2 = vjp(grad_dot_v, np.ones(3))
    np.testing.assert_allclose(back2(1.0)[0], (a + a.T) @ v)


def test_errors():
    x = tr.param(np.ones((3, 3)))
    with pytest.raises(TypeError, match='out='):
        np.einsum('ij->i', x, out=np.zeros(3))
    with pytest.raises(TypeError, match='out='):
        np.dot(x, x, out=np.zeros((3, 3)))
    with pytest.raises(TypeError, match='axes'):
        np.matmul(x, x, axes=[(0, 1), (0, 1), (0, 1)])
    with pytest.raises(ValueError, match='3-vectors'):
        np.cross(tr.param(np.ones(2)), np.ones(2))
    with pytest.raises(ValueError):
        x @ np.ones(4)
    with pytest.raises(ValueError, match='shape-mismatch'):
        np.tensordot(x, np.ones((2, 2)), 1)
