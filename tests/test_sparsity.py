"""Sparsity detection (tracked/sparsity.py) against dense derivatives.

A pattern never misses a non-zero: checked against the dense Jacobian (Hessian) at
several random points, for a set of programs and for every case of every rule
(``tests/rules``).  Where the structure is exact the pattern equals the union of the
non-zeros over those points; the cases listed as ``EXTRA`` have extra entries on
purpose (the module docstring says why), each named with the reason.
"""
import warnings

import numpy as np
import pytest

import tracked as tr
from tests.rules.harness import _joined
from tests.rules.test_systematic import ALL_CASES

sp = pytest.importorskip('scipy.sparse')

POINTS = 3
A = np.array([[1.0, 0, 2, 0], [0, 0, 3, 0], [4, 0, 0, 5]])       # a constant with zeros
MASK = np.array([True, False, True, True, False, False])


def _points(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.uniform(0.5, 1.5, s) * rng.choice([-1, 1], s) for s in shapes]
            for _ in range(POINTS)]


def _dense_support(f, points):
    """The union over ``points`` of the dense Jacobian's non-zeros (all leaves joined)."""
    support = None
    for xs in points:
        blocks = tr.jacobian(f, *xs, mode='reverse')
        J = np.hstack([np.reshape(b, (-1, np.size(x))) for b, x in zip(blocks, xs)])
        nz = J != 0
        support = nz if support is None else support | nz
    return support


def _softplus(x):
    return np.logaddexp(0.0, x), lambda g: (g / (1.0 + np.exp(-x)),)


softplus = tr.rule(_softplus)


def _branchy(x):
    if np.sum(x) > 0:                   # a Python branch on a value: a guard
        return x * 2.0
    return x[::-1]


def _set(x):
    y = x * 1.0
    y[1:3] = 0.0
    y[0] = x[4]
    return y


# name -> (f, argument shapes); the pattern must equal the dense support
EXACT = {
    'elementwise': (lambda x: np.sin(x) * x + np.exp(x) / (1 + x ** 2), [(6,)]),
    'broadcasting': (lambda x, y: x[:, None] * y[None, :] + x[:, None], [(3,), (4,)]),
    'broadcast_to': (lambda x: np.broadcast_to(x, (2, 3)) * 2.0, [(3,)]),
    'sum axis': (lambda x: np.sum(x.reshape(3, 4) ** 2, axis=0), [(12,)]),
    'mean keepdims': (lambda x: np.mean(x.reshape(3, 4), axis=1, keepdims=True), [(12,)]),
    'prod': (lambda x: np.prod(x.reshape(4, 3), axis=1), [(12,)]),
    'std': (lambda x: np.std(x.reshape(3, 4), axis=1), [(12,)]),
    'norm': (lambda x: np.linalg.norm(x.reshape(3, 4), axis=0), [(12,)]),
    'sum all': (lambda x: np.sum(np.tanh(x)), [(5,)]),
    'stencil': (lambda u: u[2:] - 2 * u[1:-1] + u[:-2], [(8,)]),
    '2-d stencil': (lambda u: (lambda U: U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:]
                               - 4 * U[1:-1, 1:-1])(u.reshape(5, 5)), [(25,)]),
    'fancy index': (lambda x: x[[3, 1, 1, 0]] * x[0], [(5,)]),
    'constant mask': (lambda x: x[MASK] ** 2, [(6,)]),
    'negative step': (lambda x: x[::-2] - x[:3], [(6,)]),
    'reshape transpose': (lambda x: x.reshape(3, 4).T.ravel() * np.arange(1, 13), [(12,)]),
    'moveaxis flip roll': (lambda x: np.roll(np.flip(np.moveaxis(x.reshape(2, 3, 2), 0, -1), 1),
                                             2).ravel(), [(12,)]),
    'triu diagonal trace': (lambda x: np.concatenate([np.triu(x.reshape(3, 3)).ravel(),
                                                      np.diagonal(x.reshape(3, 3)),
                                                      np.trace(x.reshape(3, 3))[None]]), [(9,)]),
    'constant @ x': (lambda x: A @ x, [(4,)]),
    'x @ constant': (lambda x: x.reshape(2, 3) @ A[:, :2], [(6,)]),
    'x @ y': (lambda x, y: x.reshape(2, 3) @ y.reshape(3, 2), [(6,), (6,)]),
    'dot': (lambda x: np.dot(A, np.sin(x)), [(4,)]),
    'cumsum': (lambda x: np.cumsum(x.reshape(2, 3), axis=1), [(6,)]),
    'cumsum flat': (lambda x: np.cumsum(x), [(5,)]),
    'cumprod': (lambda x: np.cumprod(x.reshape(3, 2), axis=0), [(6,)]),
    'diff': (lambda x: np.diff(x, n=2), [(6,)]),
    'convolve constant': (lambda x: np.convolve(x, [1.0, 0.0, -1.0]), [(5,)]),
    'convolve both': (lambda x, k: np.convolve(x, k, 'same'), [(5,), (3,)]),
    'where computed, same places': (lambda x: np.where(x > 0, x ** 2, -x), [(5,)]),
    'where constant mask': (lambda x: np.where(MASK, x, x[::-1]), [(6,)]),
    'concatenate': (lambda x: np.concatenate([x[:2] * 3, np.zeros(3), x[::-1]]), [(4,)]),
    'stack': (lambda x, y: np.stack([x, 2 * y, x * y], axis=1), [(3,), (3,)]),
    'pad constant': (lambda x: np.pad(x.reshape(2, 2), 1, constant_values=7.0), [(4,)]),
    'pad edge': (lambda x: np.pad(x, (2, 1), mode='edge'), [(3,)]),
    'tile repeat': (lambda x: np.concatenate([np.tile(x, 2), np.repeat(x, [1, 0, 2])]), [(3,)]),
    'take': (lambda x: np.take(x.reshape(2, 3), [2, 0], axis=1).ravel(), [(6,)]),
    'setitem': (_set, [(5,)]),
    'solve (dense)': (lambda x: np.linalg.solve(np.eye(3) * 2 + x.reshape(3, 3), np.ones(3)),
                      [(9,)]),
    'scalar output': (lambda x: np.sum(x[:3] ** 2), [(5,)]),
    'no dependence': (lambda x: np.zeros(3) + 1.0, [(4,)]),
}

# name -> (f, shapes, why the pattern has entries the Jacobian lacks)
EXTRA = {
    'where computed, other places': (lambda x: np.where(x > -9, x, x[::-1]), [(5,)],
                                     'both branches of a condition computed from x'),
    'max axis': (lambda x: np.max(x.reshape(2, 3, 2), axis=(0, 2)), [(12,)],
                 'the element max picks depends on the point: all it reduces'),
    'sort': (lambda x: np.sort(x), [(5,)],
             'an index computed from x (argsort) may read any element'),
    'rule without structure': (lambda x: softplus(x), [(4,)],
                               'a @tr.rule says nothing of its structure'),
    'einsum': (lambda x: np.einsum('ij,j->i', x.reshape(2, 2), np.array([1.0, 0.0])), [(4,)],
               'einsum has no structure: every element'),
    'multiply by a constant zero': (lambda x: np.array([1.0, 0.0, 2.0]) * x, [(3,)],
                                    "an elementwise operation does not read its constants' zeros"),
    'multi-output': (lambda x: np.modf(x)[0], [(4,)],
                     'outputs of a multi-output rule depend on all its operands'),
}


@pytest.mark.parametrize('name', list(EXACT))
def test_exact_patterns(name):
    f, shapes = EXACT[name]
    P = tr.jacobian_sparsity(f, *[np.ones(s) for s in shapes])
    assert P.dtype == bool and sp.issparse(P) and P.format == 'csr'
    support = _dense_support(f, _points(shapes))
    assert P.shape == support.shape
    np.testing.assert_array_equal(P.toarray(), support)


@pytest.mark.parametrize('name', list(EXTRA))
def test_conservative_patterns(name):
    f, shapes, _ = EXTRA[name]
    P = tr.jacobian_sparsity(f, *[np.ones(s) for s in shapes]).toarray()
    support = _dense_support(f, _points(shapes))
    assert not (support & ~P).any(), 'missed a non-zero'
    assert (P & ~support).any(), 'no extra entry: move the case to EXACT'


def test_extra_entries_are_where_documented():
    P = tr.jacobian_sparsity(lambda x: np.where(x > -9, x, x[::-1]), np.ones(5)).toarray()
    np.testing.assert_array_equal(P, np.eye(5, dtype=bool) | np.eye(5, dtype=bool)[::-1])
    P = tr.jacobian_sparsity(softplus, np.ones(3)).toarray()
    assert P.all()


def test_columns_follow_the_argument_leaves_in_order():
    f = lambda p, s: np.concatenate([p['b'] * s, p['a'][:1]])
    P = tr.jacobian_sparsity(f, {'a': np.ones(2), 'b': np.ones(3), 'name': 'x'}, 2.0)
    J = tr.jacobian(f, {'a': np.ones(2), 'b': np.ones(3), 'name': 'x'}, 2.0)
    dense = np.hstack([J[0]['a'], J[0]['b'], J[1][:, None]])
    np.testing.assert_array_equal(P.toarray(), dense != 0)
    assert P.shape == (4, 6)


def test_integer_arguments_are_columns_as_in_jacobian():
    P = tr.jacobian_sparsity(lambda x: x * 2, np.arange(3))
    np.testing.assert_array_equal(P.toarray(), np.eye(3, dtype=bool))


def test_value_dependent_branches_warn_and_follow_the_point():
    with pytest.warns(UserWarning, match='branches on the values'):
        P = tr.jacobian_sparsity(_branchy, np.ones(3))
    np.testing.assert_array_equal(P.toarray(), np.eye(3, dtype=bool))
    with pytest.warns(UserWarning, match='same branches'):
        P = tr.jacobian_sparsity(_branchy, -np.ones(3))
    np.testing.assert_array_equal(P.toarray(), np.eye(3, dtype=bool)[::-1])


def test_no_warning_without_branches():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        tr.jacobian_sparsity(lambda x, n: np.where(x > 0, x, 0.0)[:n], np.ones(4), 3)
        tr.jacobian_sparsity(lambda x: x[x > 0], np.array([1.0, -1.0, 2.0]))


def test_output_must_be_one_array():
    with pytest.raises(ValueError, match='one array or number'):
        tr.jacobian_sparsity(lambda x: (x, x), np.ones(2))


# --------------------------------------------------------------------------
# Every rule: the pattern holds the non-zeros of the case's Jacobian
# --------------------------------------------------------------------------

def _real_cases():
    out = []
    for c in ALL_CASES:
        values = c.sample(0)
        if any(np.iscomplexobj(values[i]) for i in c.diff):
            continue
        out.append(c)
    return out


REAL_CASES = _real_cases()


def _case_function(c):
    base = c.sample(0)

    def f(*xs):
        full = list(base)
        for i, x in zip(c.diff, xs):
            full[i] = x
        y = _joined(c.fun(*full, **c.kwargs))
        return np.real(y) if np.iscomplexobj(y) else y
    return f


@pytest.mark.parametrize('c', REAL_CASES, ids=[c.id for c in REAL_CASES])
def test_every_rule_misses_no_entry(c):
    f = _case_function(c)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')         # guards of a case at its own points
        P = tr.jacobian_sparsity(f, *[c.sample(0)[i] for i in c.diff]).toarray()
    for k in range(2):
        xs = [c.sample(k)[i] for i in c.diff]
        blocks = tr.jacobian(f, *xs, mode='reverse')
        J = np.hstack([np.reshape(b, (-1, np.size(x))) for b, x in zip(blocks, xs)])
        missed = (J != 0) & ~P
        assert not missed.any(), f'missed entries at {np.argwhere(missed)[:5].tolist()}'


# --------------------------------------------------------------------------
# Hessians
# --------------------------------------------------------------------------

def _dense_hessian_support(f, shape, seed=0):
    support = None
    for (x,) in _points([shape], seed):
        nz = tr.hessian(f, x) != 0
        support = nz if support is None else support | nz
    return support


C5 = np.diag(np.full(5, 2.0)) + np.diag(np.full(4, -1.0), 1) + np.diag(np.full(4, -1.0), -1)


def _energy(u):
    U = u.reshape(4, 4)
    return 0.5 * np.sum(np.diff(U, axis=0) ** 2) + 0.5 * np.sum(np.diff(U, axis=1) ** 2) \
        - np.sum(np.exp(U))


HESSIANS = {
    'chain products': (lambda x: np.sum(x[1:] * x[:-1]) + np.exp(x[0]), (6,)),
    'squares of sines': (lambda x: np.sum(np.sin(x) ** 2), (5,)),
    'nonlinear of linear': (lambda x: np.sum(np.exp(C5 @ x)), (5,)),
    'quadratic form, elementwise': (lambda x: np.sum(x * (C5 @ x)), (5,)),
    'division and power': (lambda x: np.sum(x[:3] / x[3:] ** 2) + (x[0] ** 2 + 1) ** x[1], (6,)),
    'bratu energy': (_energy, (16,)),
    'linear': (lambda x: np.sum(3.0 * x[::2]) - x[1], (5,)),
    'where': (lambda x: np.sum(np.where(x > 0, x ** 2, x)), (5,)),
    'cumsum then square': (lambda x: np.sum(np.cumsum(x)[::2] ** 2), (5,)),
}
HESSIANS_EXTRA = {
    'x @ (C x)': (lambda x: x @ (C5 @ x), (5,), 'a product inside @ pairs every element'),
    'max': (lambda x: np.max(x) * 1.0, (4,), 'max reads its operand: self-interaction'),
}


@pytest.mark.parametrize('name', list(HESSIANS))
def test_exact_hessian_patterns(name):
    f, shape = HESSIANS[name]
    P = tr.hessian_sparsity(f, np.ones(shape))
    assert P.dtype == bool and P.format == 'csr'
    np.testing.assert_array_equal(P.toarray(), P.toarray().T)
    np.testing.assert_array_equal(P.toarray(), _dense_hessian_support(f, shape))


@pytest.mark.parametrize('name', list(HESSIANS_EXTRA))
def test_conservative_hessian_patterns(name):
    f, shape, _ = HESSIANS_EXTRA[name]
    P = tr.hessian_sparsity(f, np.ones(shape)).toarray()
    support = _dense_hessian_support(f, shape)
    assert not (support & ~P).any()
    assert (P & ~support).any()


def test_hessian_needs_a_scalar():
    with pytest.raises(ValueError, match='scalar'):
        tr.hessian_sparsity(lambda x: x ** 2, np.ones(3))


@pytest.mark.parametrize('c', REAL_CASES[::4], ids=[c.id for c in REAL_CASES[::4]])
def test_every_fourth_rule_case_misses_no_hessian_entry(c):
    f = _case_function(c)
    rng = np.random.default_rng(7)
    w = rng.standard_normal(np.shape(f(*[c.sample(0)[i] for i in c.diff])))

    def loss(*xs):                              # the quadratic loss of the rule tests
        y = f(*xs)
        return np.sum(w * y + y * y / 2)
    xs0 = [np.asarray(c.sample(0)[i], float) for i in c.diff]
    joined = lambda v: loss(*_split(v, xs0))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        P = tr.hessian_sparsity(joined, np.concatenate([np.ravel(x) for x in xs0])).toarray()
    for k in range(2):
        v = np.concatenate([np.ravel(c.sample(k)[i]) for i in c.diff]).astype(float)
        missed = (tr.hessian(joined, v) != 0) & ~P
        assert not missed.any(), f'missed entries at {np.argwhere(missed)[:5].tolist()}'


def _split(v, like):
    out, off = [], 0
    for x in like:
        out.append(np.reshape(v[off:off + np.size(x)], np.shape(x)))
        off += np.size(x)
    return out
