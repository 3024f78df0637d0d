"""Products (matmul, einsum, dot, ..., cross and their other spellings): cases to order 2
for real and complex operands, plus targeted tests."""
import operator
import warnings

import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp
from tracked.rules.products import CROSS_OF_2_VECTORS

from .harness import arg, case, const, parametrize

C = np.complex128


def _quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` without NumPy's deprecation warnings (2-vector cross)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        return fn(*args, **kwargs)


def z(*shape):
    """A random complex argument."""
    return arg(shape, dtype=C)


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
    # 2-vectors (deprecated in NumPy 2, still computed): a zero third component
    *([case(lambda a, b: _quiet(np.cross, a, b), (4, 2), (3,), covers=np.cross,
            name='cross(2-vectors (4,2), (3,))'),
       case(lambda a, b: _quiet(np.cross, a, b), (2,), (5, 2), covers=np.cross,
            name='cross(2-vectors (2,), (5,2))'),
       case(lambda a, b: _quiet(np.cross, a, b, axisa=0), (2, 4), (4, 3), covers=np.cross,
            name='cross(2-vectors (2,4) axisa=0, (4,3))')] if CROSS_OF_2_VECTORS else []),

    # ---- complex operands: pullbacks conjugate the other operand; vdot, vecdot and
    #      vecmat conjugate their first
    case(np.matmul, z(2, 3), z(3, 4)),
    case(np.matmul, z(3), z(3)),
    case(np.matmul, z(3), (3, 2)),
    case(np.matmul, (2, 3), z(5, 3, 2)),
    case(np.matmul, z(2, 3), z(3)),
    case(np.einsum, const('ij,jk->ik'), z(2, 3), z(3, 2)),
    case(np.einsum, const('ii->i'), z(3, 3)),
    case(np.einsum, const('i,i'), z(3), (3,)),
    case(np.einsum, const('...ij,...jk->...ik'), z(2, 2, 3), z(3, 2)),
    case(np.dot, z(2, 3), z(3)),
    case(np.dot, z(), z(3)),
    case(np.vdot, z(2, 3), z(6)),
    case(np.vdot, (3,), z(3)),
    case(np.inner, z(2, 3), z(4, 3)),
    case(np.outer, z(3), (2,)),
    case(np.tensordot, z(2, 3, 4), z(3, 4, 2)),
    case(np.kron, z(2, 2), z(2)),
    case(np.cross, z(4, 3), z(3)),
    case(np.cross, (3,), z(3)),
    case(np.vecdot, z(2, 3), z(3)),
    case(np.vecdot, (3,), z(3)),
    case(np.linalg.vecdot, z(3, 2), z(3, 2), kwargs={'axis': 0}),
    *([case(np.matvec, z(2, 3), z(3)),
       case(np.vecmat, z(3), z(3, 2)),
       case(np.vecmat, z(2, 3), (3, 2))] if hasattr(np, 'matvec') else []),
    case(lambda a, b: np.linalg.multi_dot([a, b, a]), z(2, 2), z(2, 2),
         covers=np.linalg.multi_dot, name='multi_dot(complex)'),

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
    *([case(np.matvec, (2, 3), (3,)),
       case(np.matvec, (4, 2, 3), (1, 3)),
       case(np.vecmat, (3,), (3, 2)),
       case(np.vecmat, (4, 3), (2, 1, 3, 2))] if hasattr(np, 'matvec') else []),
    case(lambda a, b, c: np.linalg.multi_dot([a, b, c]), (2, 3), (3, 4), (4, 2),
         covers=np.linalg.multi_dot, name='multi_dot((2,3),(3,4),(4,2))'),
    case(lambda a, b, c: np.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4,),
         covers=np.linalg.multi_dot, name='multi_dot((3,),(3,4),(4,))'),
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


@pytest.mark.parametrize('f', [np.vdot, np.vecdot, np.linalg.vecdot, np.dot, np.inner,
                               np.matmul, np.kron, np.cross]
                         + ([np.vecmat, np.matvec] if hasattr(np, 'matvec') else []))
def test_complex_products_match_numpy(f):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    b = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    if f is getattr(np, 'vecmat', None):
        a = a[0]
    got = f(tr.param(a), tr.param(b))
    np.testing.assert_allclose(tr.data(got), f(a, b), rtol=1e-13)


def test_complex_matmul_gradient_is_conjugate_product():
    # L = Re sum(w * (A @ B)): dL/dA = conj(w @ B^T) in ChainRules' convention
    rng = np.random.default_rng(4)
    a, b, w = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)) for _ in range(3))
    ga, gb = tr.gradient(lambda x, y: np.real(np.sum(w * (x @ y))), a, b)
    np.testing.assert_allclose(ga, np.conj(w @ b.T), rtol=1e-12)
    np.testing.assert_allclose(gb, np.conj(a.T @ w), rtol=1e-12)


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
    with pytest.raises(ValueError, match='must be 2 or 3'):
        np.cross(tr.param(np.ones(4)), np.ones(3))
    with pytest.raises(ValueError):
        x @ np.ones(4)
    with pytest.raises(ValueError, match='shape-mismatch'):
        np.tensordot(x, np.ones((2, 2)), 1)


def test_cross_of_2_vectors_as_numpy():
    a, b = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([3.0, -0.5])
    if not CROSS_OF_2_VECTORS:                     # NumPy >= 2.5 refuses them: so do we
        with pytest.raises(ValueError, match='3-dimensional vectors') as ours:
            np.cross(tr.param(a), b)
        with pytest.raises(ValueError, match='3-dimensional vectors') as numpys:
            np.cross(a, b)
        assert str(ours.value) == str(numpys.value)
        return
    with pytest.warns(DeprecationWarning):
        val, (ga,) = tr.withgradient(lambda a: np.sum(np.cross(a, b) ** 2), a)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        want = np.cross(a, b)
    np.testing.assert_allclose(val, np.sum(want ** 2))
    # z = a0 b1 - a1 b0: dz/da = (b1, -b0)
    np.testing.assert_allclose(ga, 2 * want[:, None] * np.array([b[1], -b[0]]))
