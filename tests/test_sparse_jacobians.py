"""Sparse Jacobians and Hessians by colouring (tracked/sparse_jacobians.py): equal to the
dense ones, eager and on recorded (and compiled) tapes, and where users meet them:
scipy.optimize.least_squares and minimize(method='trust-constr')."""
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tracked as tr

sp = pytest.importorskip('scipy.sparse')
optimize = pytest.importorskip('scipy.optimize')

TOL = dict(rtol=1e-12, atol=1e-12)
N2 = 6                                         # grid side of the 2-d problems
H2 = 1.0 / (N2 + 1)
C5 = np.array([[1.0, 0, 2, 0, 0], [0, 3, 0, 0, 4], [0, 0, 0, 5, 0]])


def bratu(u, lam=6.0):
    """The residual of -Laplace(u) = lam exp(u) on the unit square, u = 0 on the border."""
    U = np.pad(u.reshape(N2, N2), 1)
    lap = (U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:] - 4 * U[1:-1, 1:-1]) / H2 ** 2
    return (lap + lam * np.exp(U[1:-1, 1:-1])).ravel()


def bratu_energy(u, lam=6.0):
    U = np.pad(u.reshape(N2, N2), 1)
    grad2 = np.sum(np.diff(U, axis=0) ** 2) + np.sum(np.diff(U, axis=1) ** 2)
    return 0.5 * grad2 - lam * H2 ** 2 * np.sum(np.exp(U))


JACOBIANS = {
    'bratu': (bratu, (N2 * N2,)),
    'stencil': (lambda u: u[2:] - 2 * u[1:-1] + u[:-2] + u[1:-1] ** 3, (9,)),
    'constant @ x': (lambda x: np.tanh(C5 @ x), (5,)),
    'wide output': (lambda x: np.concatenate([np.sin(x), np.cumsum(x), x[:2] * x[2:4]]), (4,)),
    'scalar output': (lambda x: np.sum(x ** 2), (4,)),
    'complex output': (lambda x: np.exp(1j * x[1:]) * x[:-1], (5,)),
    'rows fewer than columns': (lambda x: x.reshape(2, 6).sum(axis=1) * x[:2], (12,)),
}


def _x(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


@pytest.mark.parametrize('mode', ['auto', 'forward', 'reverse'])
@pytest.mark.parametrize('name', list(JACOBIANS))
def test_coloured_jacobian_equals_dense(name, mode):
    f, shape = JACOBIANS[name]
    for seed in range(2):
        x = _x(shape, seed)
        J, = tr.jacobian(f, x, sparsity='auto', mode=mode)
        assert sp.issparse(J) and J.format == 'csr'
        np.testing.assert_allclose(J.toarray(), tr.jacobian(f, x)[0].reshape(J.shape), **TOL)


def test_a_coloring_is_reused_at_every_point():
    c = tr.coloring(tr.jacobian_sparsity(bratu, np.zeros(N2 * N2)))
    assert c.kind == 'column' and c.ncolors <= 8
    for seed in range(3):
        x = _x(N2 * N2, seed)
        val, (J,) = tr.withjacobian(bratu, x, sparsity=c)
        np.testing.assert_allclose(val, bratu(x), **TOL)
        np.testing.assert_allclose(J.toarray(), tr.jacobian(bratu, x)[0], **TOL)
    P = tr.jacobian_sparsity(bratu, np.zeros(N2 * N2))
    J, = tr.jacobian(bratu, _x(N2 * N2), sparsity=P)            # a pattern: coloured here
    np.testing.assert_allclose(J.toarray(), tr.jacobian(bratu, _x(N2 * N2))[0], **TOL)


def test_row_colouring_sweeps_back_once_per_colour():
    f = lambda x: np.array([1.0, 2.0]) * np.sum(x ** 2) + x[:2]     # 2 dense rows
    c = tr.coloring(tr.jacobian_sparsity(f, np.ones(50)))
    assert c.kind == 'row' and c.ncolors == 2
    x = _x(50)
    np.testing.assert_allclose(tr.jacobian(f, x, sparsity=c)[0].toarray(),
                               tr.jacobian(f, x)[0], **TOL)


def test_several_arguments_and_trees_give_blocks():
    f = lambda p, s: np.concatenate([p['w'] * s, p['b'][1:] ** 2])
    p, s = {'w': _x(3), 'b': _x(4, 1), 'act': 'tanh'}, 1.5
    (Jp, Js) = tr.jacobian(f, p, s, sparsity='auto')
    dense = tr.jacobian(f, p, s)
    assert Jp['act'] is None
    np.testing.assert_allclose(Jp['w'].toarray(), dense[0]['w'], **TOL)
    np.testing.assert_allclose(Jp['b'].toarray(), dense[0]['b'], **TOL)
    np.testing.assert_allclose(Js.toarray().ravel(), dense[1], **TOL)


def test_no_dependence_needs_no_pass():
    val, (J,) = tr.withjacobian(lambda x: np.ones(3) * 2.0, np.ones(4), sparsity='auto')
    np.testing.assert_array_equal(val, [2.0, 2.0, 2.0])
    assert J.shape == (3, 4) and J.nnz == 0


def test_errors():
    c = tr.coloring(tr.jacobian_sparsity(bratu, np.zeros(N2 * N2)), kind='column')
    with pytest.raises(ValueError, match='has 36 columns but the arguments have 4 elements'):
        tr.jacobian(np.sin, np.ones(4), sparsity=c)
    with pytest.raises(ValueError, match='pattern is 36x36 but the Jacobian here is 35x36'):
        tr.jacobian(lambda u: bratu(u)[1:], np.ones(36), sparsity=c)
    with pytest.raises(ValueError, match="mode='reverse'"):
        tr.jacobian(bratu, np.zeros(N2 * N2), sparsity=c, mode='reverse')
    with pytest.raises(ValueError, match="sparsity='dense'"):
        tr.jacobian(np.sin, np.ones(3), sparsity='dense')
    with pytest.raises(ValueError, match='complex argument'):
        tr.jacobian(np.sin, np.ones(3) + 1j, sparsity='auto')


# --------------------------------------------------------------------------
# Hessians
# --------------------------------------------------------------------------

HESSIANS = {
    'bratu energy': (bratu_energy, (N2 * N2,)),
    'chain': (lambda x: np.sum(x[1:] * x[:-1] ** 2) + np.sum(np.cos(x)), (8,)),
    'nonlinear of linear': (lambda x: np.sum(np.exp(C5 @ x)), (5,)),
    'arrow': (lambda x: x[0] * np.sum(x[1:] ** 3), (7,)),
    'linear': (lambda x: np.sum(3.0 * x), (4,)),
    'scalar': (lambda x: x ** 3, ()),
}


@pytest.mark.parametrize('name', list(HESSIANS))
def test_coloured_hessian_equals_dense(name):
    f, shape = HESSIANS[name]
    for seed in range(2):
        x = _x(shape, seed)
        H = tr.hessian(f, x, sparsity='auto')
        assert sp.issparse(H) and H.format == 'csr'
        np.testing.assert_allclose(H.toarray(), np.reshape(tr.hessian(f, x), H.shape), **TOL)


def test_hessian_colourings():
    f, shape = HESSIANS['arrow']
    P = tr.hessian_sparsity(f, np.ones(shape))
    star = tr.coloring(P, kind='symmetric')
    columns = tr.coloring(P, kind='column')
    assert star.ncolors == 2 and columns.ncolors == 7
    x = _x(shape)
    for c in (star, columns, P):
        np.testing.assert_allclose(tr.hessian(f, x, sparsity=c).toarray(), tr.hessian(f, x),
                                   **TOL)
    with pytest.raises(ValueError, match='row colouring cannot give a Hessian'):
        tr.hessian(f, x, sparsity=tr.coloring(P, kind='row'))
    with pytest.raises(ValueError, match='one array'):
        tr.hessian(lambda a, b: a * b, 1.0, 2.0, sparsity='auto')


# --------------------------------------------------------------------------
# Recorded and compiled tapes
# --------------------------------------------------------------------------

def test_jacobian_tape_holds_the_colouring():
    x0 = np.zeros(N2 * N2)
    tape = tr.JacobianTape(bratu, x0, sparsity='auto')
    assert tape.coloring.kind == 'column'
    for seed in range(2):
        x = _x(N2 * N2, seed)
        J, = tape.jacobian(x)
        np.testing.assert_allclose(J.toarray(), tr.jacobian(bratu, x)[0], **TOL)
        np.testing.assert_allclose(tape(x), bratu(x), **TOL)
    row = tr.JacobianTape(bratu, x0, sparsity=tr.coloring(tape.coloring.pattern, kind='row'))
    assert row.coloring.kind == 'row'
    x = _x(N2 * N2, 5)
    np.testing.assert_allclose(row.jacobian(x)[0].toarray(), tr.jacobian(bratu, x)[0], **TOL)
    again = pickle.loads(pickle.dumps(tape))
    np.testing.assert_allclose(again.jacobian(x)[0].toarray(), tr.jacobian(bratu, x)[0], **TOL)


def test_compiled_jacobian_tape():
    tape = tr.compile(tr.JacobianTape(bratu, np.zeros(N2 * N2), sparsity='auto'),
                      background=False)
    x = _x(N2 * N2, 3)
    np.testing.assert_allclose(tape.jacobian(x)[0].toarray(), tr.jacobian(bratu, x)[0], **TOL)


def test_jacobian_tape_with_wrt_and_a_data_argument():
    f = lambda x, a: a * np.sin(x[1:]) * x[:-1]
    tape = tr.JacobianTape(f, np.ones(5), 2.0, wrt=0, sparsity='auto')
    J, none = tape.jacobian(_x(5), 3.0)
    assert none is None
    np.testing.assert_allclose(J.toarray(), tr.jacobian(f, _x(5), 3.0)[0], **TOL)


def _kinked(u):
    if np.sum(u) > 0:                       # a branch on a value: a guard of the tape
        return u[1:] * u[:-1]
    return u[1:] - u[:-1] ** 3


def test_a_branch_that_changes_is_a_guard_error_or_a_new_detection():
    tape = tr.JacobianTape(_kinked, np.ones(4), sparsity='auto')
    with pytest.raises(tr.TapeGuardError):
        tape.jacobian(-np.ones(4))
    retrace = tr.JacobianTape(_kinked, np.ones(4), sparsity='auto', on_guard='retrace')
    x = -np.arange(1.0, 5.0)
    np.testing.assert_allclose(retrace.jacobian(x)[0].toarray(), tr.jacobian(_kinked, x)[0],
                               **TOL)


def test_hessian_tape_holds_the_colouring():
    tape = tr.HessianTape(bratu_energy, np.zeros(N2 * N2), sparsity='auto')
    assert tape.coloring.kind == 'symmetric' and tape.coloring.ncolors <= 6
    x = _x(N2 * N2, 4)
    np.testing.assert_allclose(tape.hessian(x).toarray(), tr.hessian(bratu_energy, x), **TOL)
    np.testing.assert_allclose(tape.gradient(x), tr.gradient(bratu_energy, x)[0], **TOL)
    with pytest.raises(ValueError, match='dense Hessian'):
        tape.hessian(x, out=np.zeros((N2 * N2, N2 * N2)))


# --------------------------------------------------------------------------
# Where users meet them: SciPy's optimisers
# --------------------------------------------------------------------------

def test_least_squares_with_the_sparse_jacobian():
    c = tr.coloring(tr.jacobian_sparsity(bratu, np.zeros(N2 * N2)))
    calls = []

    def jac(u):
        calls.append(1)
        return tr.jacobian(bratu, u, sparsity=c)[0]
    res = optimize.least_squares(bratu, np.zeros(N2 * N2), jac=jac, method='trf',
                                 xtol=1e-12, ftol=1e-12, gtol=1e-12)
    assert res.success and calls
    assert sp.issparse(res.jac)
    assert np.max(np.abs(bratu(res.x))) < 1e-8
    fd = optimize.least_squares(bratu, np.zeros(N2 * N2), jac_sparsity=c.pattern, method='trf',
                                xtol=1e-12, ftol=1e-12, gtol=1e-12)
    np.testing.assert_allclose(res.x, fd.x, atol=1e-8)
    assert res.nfev <= fd.nfev


def test_trust_constr_with_the_sparse_hessian():
    c = tr.coloring(tr.hessian_sparsity(bratu_energy, np.zeros(N2 * N2)), kind='symmetric')
    grad = lambda u: tr.gradient(bratu_energy, u)[0]
    hess = lambda u: tr.hessian(bratu_energy, u, sparsity=c)
    res = optimize.minimize(bratu_energy, np.zeros(N2 * N2), jac=grad, hess=hess,
                            method='trust-constr', options={'gtol': 1e-10})
    assert res.status in (1, 2) and sp.issparse(hess(res.x))
    # the minimiser of the energy solves the Bratu equation (scaled by h^2)
    assert np.max(np.abs(bratu(res.x))) * H2 ** 2 < 1e-8


def test_without_scipy_the_names_say_which_extra():
    code = ("import sys; sys.modules['scipy'] = None\n"
            "import numpy as np, tracked as tr\n"
            "for call in (lambda: tr.coloring(np.eye(2)),\n"
            "             lambda: tr.jacobian(np.sin, np.ones(2), sparsity='auto')):\n"
            "    try:\n"
            "        call()\n"
            "    except ImportError as e:\n"
            "        assert \"tracked[scipy]\" in str(e), e\n"
            "    else:\n"
            "        raise AssertionError('no ImportError')\n"
            "print(tr.jacobian(np.sin, np.zeros(1))[0])\n")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '[[1.]]'


def test_an_outer_differentiation_is_refused_not_dropped():
    for mode in ('forward', 'reverse'):
        loss = lambda x: np.sum(tr.jacobian(np.sin, x, sparsity='auto', mode=mode)[0].toarray())
        with pytest.raises(TypeError, match='outer level'):
            tr.gradient(loss, np.ones(3))
    with pytest.raises(TypeError, match='outer level'):
        tr.gradient(lambda x: tr.hessian(lambda v: np.sum(v ** 3), x, sparsity='auto').sum(),
                    np.ones(3))
