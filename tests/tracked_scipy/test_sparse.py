"""SciPy's sparse matrices in differentiated code (``tracked.scipy.sparse``): the four
calls of issue 27 that failed, and matrices whose stored values are differentiated, on
every path -- eager against central differences (to second order) and against the same
computation with dense matrices, forward mode, Hessians, recorded tapes and compiled
tapes -- for each format, vector and matrix operands, rectangular matrices.  Skipped
when SciPy is not installed."""
import numpy as np
import pytest

sp = pytest.importorskip('scipy.sparse')

import scipy.sparse.linalg as spla                      # noqa: E402

import tracked as tr                                    # noqa: E402
from tracked.conversions import ConversionError         # noqa: E402
from tracked.scipy import sparse as tsp                 # noqa: E402
from tracked.scipy.sparse import linalg as tsl          # noqa: E402

FORMATS = ['csr_matrix', 'csc_matrix', 'coo_matrix', 'csr_array', 'csc_array', 'coo_array']
RNG = np.random.default_rng(27)


def scipy_matrix(fmt, shape, seed=0, diagonal=0.0):
    """SciPy's sparse matrix of format ``fmt``: half its entries stored, plus
    ``diagonal`` times the identity (a well-posed solve)."""
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal(shape) * (rng.uniform(size=shape) < 0.5)
    dense[np.arange(min(shape)), np.arange(min(shape))] += diagonal
    return getattr(sp, fmt)(dense)


def close(got, want, what=''):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-11,
                               err_msg=what)


def assert_trees_close(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        close(g, w, f'{what}[{k}]')


def check_every_path(f, dense_f, args, compiled=False):
    """``f`` against central differences (order 2) and against ``dense_f`` (the same
    computation with dense matrices) on every path; the second point of the recorded
    paths moves every argument.  Returns the compiled tape when ``compiled``."""
    assert tr.gradcheck(f, *args)
    assert_trees_close(tr.gradient(f, *args), tr.gradient(dense_f, *args), 'gradient')
    tangents = tuple(RNG.standard_normal(np.shape(a)) for a in args)
    assert_trees_close(tr.jvp(f, args, tangents), tr.jvp(dense_f, args, tangents), 'jvp')
    rest = args[1:]
    close(tr.hessian(lambda x: f(x, *rest), args[0]),
          tr.hessian(lambda x: dense_f(x, *rest), args[0]), 'hessian')
    args2 = tuple(a * 1.1 + 0.05 for a in args)
    tape = tr.GradientTape(f, *args)
    want = tr.withgradient(dense_f, *args2)
    for t, what in [(tape, 'tape')] + ([(tr.compile(tape, background=False), 'compiled')]
                                        if compiled else []):
        assert what == 'tape' or t.compiled is not None
        val, grads = t.withgradient(*args2)
        close(val, want[0], f'{what}: value')
        assert_trees_close(grads, want[1], f'{what}: gradient')
    return t if compiled else None


# --------------------------------------------------------------------------
# The calls of issue 27 with SciPy's constant matrices, unmodified
# --------------------------------------------------------------------------

@pytest.mark.parametrize('fmt', FORMATS)
@pytest.mark.parametrize('rhs', [(), (2,)], ids=['vector', 'matrix'])
@pytest.mark.parametrize('line', ['A @ x', 'A.dot(x)', 'x @ A', 'A.T @ x'])
def test_constant_sparse_products(line, rhs, fmt):
    A = scipy_matrix(fmt, (5, 3), seed=FORMATS.index(fmt))
    D = A.toarray()
    n = {'A @ x': 3, 'A.dot(x)': 3, 'x @ A': 5, 'A.T @ x': 5}[line]
    x = RNG.standard_normal((n,) + rhs if line != 'x @ A' else rhs + (n,))
    forms = {'A @ x': lambda a, x: a @ x, 'A.dot(x)': lambda a, x: a.dot(x),
             'x @ A': lambda a, x: x @ a, 'A.T @ x': lambda a, x: a.T @ x}
    op = forms[line]
    dense_op = forms['A @ x'] if line == 'A.dot(x)' else op    # (ndarray.dot converts x)
    compiled = fmt == FORMATS[(list(forms).index(line) + len(rhs)) % len(FORMATS)]
    ct = check_every_path(lambda x: np.sum(op(A, x) ** 2),
                          lambda x: np.sum(dense_op(D, x) ** 2), (x,), compiled=compiled)
    if compiled:     # the products run in numba, not as NumPy steps
        assert not [fb for fb in ct.fallbacks if 'sparse' in fb.instr.name]


@pytest.mark.parametrize('fmt', ['csr_matrix', 'csc_array', 'coo_matrix'])
@pytest.mark.parametrize('rhs', [(), (2,)], ids=['vector', 'matrix'])
def test_spsolve_with_a_tracked_right_hand_side(fmt, rhs):
    A = scipy_matrix(fmt, (4, 4), seed=3, diagonal=4.0)
    b = RNG.standard_normal((4,) + rhs)
    with pytest.raises(ConversionError, match='scipy.sparse.linalg.spsolve converts its '
                       'arguments .* Use tracked.scipy.sparse.linalg.spsolve instead'):
        tr.gradient(lambda b: np.sum(spla.spsolve(A.tocsc(), b) ** 2), b)
    check_every_path(lambda b: np.sum(tsl.spsolve(A.tocsc(), b) ** 2),
                     lambda b: np.sum(np.linalg.solve(A.toarray(), b) ** 2), (b,),
                     compiled=fmt == 'csr_matrix')


def test_the_value_of_each_product_is_scipys():
    for fmt in FORMATS:
        A = scipy_matrix(fmt, (5, 3))
        x, y = RNG.standard_normal(3), RNG.standard_normal((2, 5))
        close(tr.data(A @ tr.param(x)), A @ x)
        close(tr.data(tr.param(y) @ A), y @ A)
        close(tr.data(A.T.dot(tr.param(y.T))), A.T.dot(y.T))


def test_star_is_the_product_for_matrices_and_elementwise_for_arrays():
    x = RNG.standard_normal(3)
    M, Arr = scipy_matrix('csr_matrix', (3, 3), 1), scipy_matrix('csr_array', (3, 3), 1)
    D = M.toarray()
    check_every_path(lambda x: np.sum((M * x) ** 2), lambda x: np.sum((D @ x) ** 2), (x,))
    check_every_path(lambda x: np.sum((x * M) ** 2), lambda x: np.sum((x @ D) ** 2), (x,))
    # sparray: elementwise, a sparse result on A's pattern (as SciPy's)
    for prod in (lambda x: Arr * x, lambda x: x * Arr):
        out = prod(tr.param(x))
        assert isinstance(out, tsp.SparseMatrix) and out.nnz == Arr.nnz
        close(tr.data(out.toarray()), (Arr * x).toarray())
        check_every_path(lambda x: np.sum(prod(x).toarray() ** 2),
                         lambda x: np.sum((D * x) ** 2), (x,))


def test_sums_with_a_constant_sparse_matrix_are_dense():
    A = scipy_matrix('csc_array', (3, 4), 2)
    X = RNG.standard_normal((3, 4))
    check_every_path(lambda x: np.sum((A + x) ** 2 + (x - A) ** 3),
                     lambda x: np.sum((A.toarray() + x) ** 2 + (x - A.toarray()) ** 3), (X,))


# --------------------------------------------------------------------------
# Matrices whose stored values are differentiated
# --------------------------------------------------------------------------

# A 4 x 3 matrix with a repeated coordinate (3, 0); rows in order, so also CSR's arrays.
ROW, COL = np.array([0, 0, 1, 2, 3, 3]), np.array([0, 2, 1, 1, 0, 0])
INDPTR = np.array([0, 2, 3, 4, 6])
UNITS = np.zeros((6, 4, 3))
UNITS[np.arange(6), ROW, COL] = 1.0          # dense(d) = sum_k d[k] E_k, with no sparse code


def dense(d):
    return np.einsum('k,kij->ij', d, UNITS)


def build(fmt, d):
    """The 4 x 3 matrix with values ``d`` at (ROW, COL), built the way ``fmt`` builds one."""
    ctor = getattr(tsp, fmt)
    if fmt.startswith('csr'):
        return ctor((d, COL, INDPTR), shape=(4, 3))
    if fmt.startswith('csc'):         # (data, (row, col)) form: csc takes it too
        return ctor((d, (ROW, COL)), shape=(4, 3))
    return ctor((d, (ROW, COL)))      # the shape from the coordinates


@pytest.mark.parametrize('fmt', FORMATS)
def test_gradient_with_respect_to_the_stored_values(fmt):
    d = RNG.standard_normal(6)
    x, y, X = RNG.standard_normal(3), RNG.standard_normal(4), RNG.standard_normal((3, 2))

    def f(d, x, y, X):
        A = build(fmt, d)
        return (np.sum((A @ x) ** 2) + np.sum((y @ A) * x) + np.sum(A.T @ y) + np.sum(
            A.dot(X) ** 2) + np.sum(A.toarray() ** 3) + A.sum() + np.sum(A.multiply(X[:, 0]
                                                                                    ).toarray()))

    def f_dense(d, x, y, X):
        A = dense(d)
        return (np.sum((A @ x) ** 2) + np.sum((y @ A) * x) + np.sum(A.T @ y) + np.sum(
            (A @ X) ** 2) + np.sum(A ** 3) + np.sum(A) + np.sum(A * X[:, 0]))

    check_every_path(f, f_dense, (d, x, y, X), compiled=fmt == 'csr_matrix')


def test_a_csc_matrix_keeps_its_values_in_column_order():
    d = RNG.standard_normal(6)
    order = [0, 4, 5, 2, 3, 1]                # the entries of the CSR order, by column
    A = tsp.csc_matrix((d[order], np.array([0, 3, 3, 1, 2, 0]), np.array([0, 3, 5, 6])),
                       shape=(4, 3))
    close(A.toarray(), dense(d))
    g, = tr.gradient(lambda v: np.sum(tsp.csc_matrix((v, A.row, np.array([0, 3, 5, 6])),
                                                     shape=(4, 3)).toarray() ** 2), d[order])
    close(g, 2 * d[order] + 2 * np.where(np.isin(order, [4, 5]), d[[5, 4]].sum() - d[order],
                                         0.0) * np.isin(order, [4, 5]))


def test_sums_along_axes_are_scipys_shapes():
    d = RNG.standard_normal(6)
    for fmt in FORMATS:
        A, S = build(fmt, d), sp.coo_array((d, (ROW, COL)), shape=(4, 3))
        matrix = fmt.endswith('matrix')
        for axis in (0, 1, -1):
            want = np.asarray(S.sum(axis=axis))
            got = A.sum(axis=axis)
            assert got.shape == ((1, 3) if axis == 0 else (4, 1)) if matrix else want.shape
            close(np.ravel(got), np.ravel(want))
        close(A.mean(axis=0), np.asarray(S.mean(axis=0)).reshape(np.shape(A.mean(axis=0))))
        close(np.sum(A), S.sum())
    check_every_path(lambda d: np.sum(build('csr_matrix', d).sum(axis=0) ** 2)
                     + np.sum(build('coo_array', d).mean(axis=1) ** 3),
                     lambda d: np.sum(np.sum(dense(d), axis=0) ** 2)
                     + np.sum(np.mean(dense(d), axis=1) ** 3), (d,))


def test_sparse_sums_differences_and_scalings():
    d, e = RNG.standard_normal(6), RNG.standard_normal(6)
    B = sp.csr_array(np.eye(4, 3))

    def f(d, e):
        A, C = build('csr_array', d), build('coo_matrix', e)
        return np.sum(((A + C - B) * 2.0 / 3.0 - C).toarray() ** 2) + np.sum((-A).T.toarray())

    def f_dense(d, e):
        A, C = dense(d), dense(e)
        return np.sum(((A + C - B.toarray()) * 2.0 / 3.0 - C) ** 2) + np.sum(-A.T)
    check_every_path(f, f_dense, (d, e))


def test_complex_values_follow_the_complex_convention():
    d = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
    x = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)

    def f(d, x):
        return np.sum(np.abs(build('csr_array', d).conj() @ x) ** 2)
    g = tr.gradient(f, d, x)
    want = tr.gradient(lambda d, x: np.sum(np.abs(np.conj(dense(d)) @ x) ** 2), d, x)
    assert_trees_close(g, want, 'complex gradient')
    assert tr.gradcheck(f, d, x)


def test_float32_values_stay_float32_and_compile():
    d, x = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal((3, 2)).astype(np.float32)
    f = lambda d, x: np.sum((build('csr_array', d) @ x) ** 2)            # noqa: E731
    g = tr.gradient(f, d, x)
    assert [a.dtype for a in g] == [np.float32, np.float32]
    ct = tr.compile(tr.GradientTape(f, d, x), background=False)
    assert not [fb for fb in ct.fallbacks if 'sparse' in fb.instr.name]
    assert_trees_close(ct.gradient(d, x), g, 'compiled float32')


def test_products_with_strided_operands_compile():
    d, X = RNG.standard_normal(6), RNG.standard_normal((4, 6))

    def f(d, X):
        A = build('csr_matrix', d)
        return np.sum((A @ X[1:, ::2])[:3] * (X[:, 1::2].T @ A).T)
    ct = check_every_path(f, lambda d, X: np.sum((dense(d) @ X[1:, ::2])[:3] * (
        X[:, 1::2].T @ dense(d)).T), (d, X), compiled=True)
    assert not [fb for fb in ct.fallbacks if 'sparse' in fb.instr.name]


# --------------------------------------------------------------------------
# Solvers with tracked values: direct and Krylov
# --------------------------------------------------------------------------

S_ROW = np.array([0, 1, 2, 3, 0, 2, 3, 1])
S_COL = np.array([0, 1, 2, 3, 2, 1, 0, 3])
S_UNITS = np.zeros((8, 4, 4))
S_UNITS[np.arange(8), S_ROW, S_COL] = 1.0
BOOST = np.array([4.0, 4.0, 4.0, 4.0, 0.0, 0.0, 0.0, 0.0])


def square(d):
    return tsp.csc_matrix((d + BOOST, (S_ROW, S_COL)), shape=(4, 4))


def square_dense(d):
    return np.einsum('k,kij->ij', d + BOOST, S_UNITS)


@pytest.mark.parametrize('rhs', [(), (3,), (1,)], ids=['vector', 'matrix', 'column'])
def test_spsolve_in_the_values_and_the_right_hand_side(rhs):
    d, b = RNG.uniform(-1, 1, 8), RNG.standard_normal((4,) + rhs)
    x = tsl.spsolve(square(d), b)
    assert x.shape == spla.spsolve(sp.csc_array(square_dense(d)), b).shape
    check_every_path(lambda d, b: np.sum(tsl.spsolve(square(d), b) ** 2),
                     lambda d, b: np.sum(np.linalg.solve(square_dense(d), b) ** 2
                                         ) if b.shape[1:] != (1,) else
                     np.sum(np.linalg.solve(square_dense(d), b[:, 0]) ** 2), (d, b),
                     compiled=rhs == ())


@pytest.mark.parametrize('trans', ['N', 'T', 'H'])
def test_splu_solves_in_every_trans(trans):
    d = RNG.uniform(-1, 1, 8) + 1j * RNG.uniform(-1, 1, 8)
    b = RNG.standard_normal((4, 2)) + 1j * RNG.standard_normal((4, 2))
    op = {'N': lambda a: a, 'T': lambda a: a.T, 'H': lambda a: np.conj(a).T}[trans]

    def f(d, b):
        return np.sum(np.abs(tsl.splu(square(d)).solve(b, trans)) ** 2)
    want = tr.gradient(lambda d, b: np.sum(np.abs(np.linalg.solve(op(square_dense(d)), b)) ** 2),
                       d, b)
    assert_trees_close(tr.gradient(f, d, b), want, f'splu trans={trans}')
    assert tr.gradcheck(f, d, b)
    lu = tsl.splu(square(d))
    close(lu.solve(b, trans), spla.splu(sp.csc_array(square_dense(d))).solve(b, trans))


def test_splu_of_plain_values_is_scipys_factorisation_too():
    lu = tsl.splu(sp.csc_array(square_dense(np.zeros(8))))
    assert lu.shape == (4, 4) and lu.nnz > 0 and lu.perm_r.shape == (4,)
    with pytest.raises(AttributeError, match='use solve'):
        tsl.splu(square(tr.param(np.zeros(8)))).L


@pytest.mark.parametrize('method', ['cg', 'gmres', 'minres'])
def test_krylov_solvers_at_their_solution(method):
    d, b = RNG.uniform(-1, 1, 8), RNG.standard_normal(4)

    def matrix(d, dense=False):
        a = square_dense(d) if dense else square(d)
        return a if method == 'gmres' else a + a.T       # cg, minres: symmetric
    sign = -1.0 if method == 'minres' else 1.0                # minres: indefinite

    def f(d, b):
        x, info = getattr(tsl, method)(matrix(d) * sign, b, rtol=1e-13)
        assert info == 0
        return np.sum(x ** 2)
    check_every_path(f, lambda d, b: np.sum(np.linalg.solve(matrix(d, True) * sign, b) ** 2),
                     (d, b), compiled=method == 'cg')
    x, info = getattr(tsl, method)(sp.csr_array(matrix(d, True)), b, rtol=1e-13)
    close(x, np.linalg.solve(matrix(d, True), b))


def test_krylov_options_reach_the_adjoint_solve():
    d, b = RNG.uniform(-1, 1, 8), RNG.standard_normal(4)
    M = sp.diags_array(1.0 / np.diag(square_dense(d)))      # a Jacobi preconditioner
    seen = []
    g = tr.gradient(lambda b: np.sum(tsl.gmres(square(d), b, rtol=1e-13, M=M,
                                               callback=seen.append, callback_type='x')[0]), b)
    close(g[0], np.linalg.solve(square_dense(d).T, np.ones(4)))
    assert seen                                             # the forward solve's callback
    shifted = tr.gradient(lambda b: np.sum(tsl.minres(square(d) + square(d).T, b, shift=0.5,
                                                      rtol=1e-13)[0]), b)
    a = square_dense(d) + square_dense(d).T - 0.5 * np.eye(4)
    close(shifted[0], np.linalg.solve(a.T, np.ones(4)))


def test_plain_values_go_to_scipy_itself():
    A, b = sp.csc_array(square_dense(np.zeros(8))), np.ones(4)
    assert isinstance(tsl.spsolve(A, sp.csc_array(np.ones((4, 2)))), sp.sparray)  # SciPy's
    x, info = tsl.cg(A + A.T, b)
    assert info == 0 and x.shape == (4,)


# --------------------------------------------------------------------------
# Errors that name the operation and the fix
# --------------------------------------------------------------------------

def test_methods_of_scipys_matrices_name_the_fix():
    A, x = scipy_matrix('csr_array', (3, 3)), tr.param(np.ones(3))
    with pytest.raises(ConversionError, match=r"scipy.sparse.csr_array.multiply converts"
                       r".* tracked.scipy.sparse.csr_array\(A\).multiply\(...\)"):
        A.multiply(x)
    out = tsp.csr_array(A).multiply(x)                # the fix
    close(tr.data(out.toarray()), A.multiply(np.ones(3)).toarray())
    with pytest.raises(ConversionError, match='Use tracked.scipy.sparse.linalg.cg instead'):
        spla.cg(A, x)


def test_what_is_refused():
    d = tr.param(np.ones(6))
    A = build('csr_array', d)
    with pytest.raises(TypeError, match='products of two sparse matrices'):
        A @ build('coo_array', d).T
    with pytest.raises(TypeError, match='products of two sparse matrices'):
        A @ sp.eye_array(3)
    with pytest.raises(ValueError, match='dimension mismatch'):
        A @ np.ones(4)
    with pytest.raises(ValueError, match='Scalar operands'):
        A @ tr.param(2.0)
    with pytest.raises(ValueError, match='3-d operand'):
        A @ np.ones((3, 2, 2))
    with pytest.raises(TypeError, match='pattern of a sparse matrix is a constant'):
        tsp.coo_array((d, (tr.param(np.zeros(6)), COL)))
    with pytest.raises(TypeError, match='read its pattern of non-zeros'):
        tsp.csr_array(tr.param(np.eye(3)))
    with pytest.raises(ValueError, match='one value per stored coordinate'):
        tsp.coo_array((np.ones(5), (ROW, COL)))
    with pytest.raises(TypeError, match='x0 must be plain'):
        tsl.cg(square(np.zeros(8)), np.ones(4), x0=tr.param(np.zeros(4)))
    with pytest.raises(TypeError, match='A must be a sparse matrix'):
        tsl.cg(spla.aslinearoperator(np.eye(4)), tr.param(np.ones(4)))
    with pytest.raises(ValueError, match='must be square'):
        tsl.spsolve(A, np.ones(4))
    with pytest.raises(ConversionError):
        np.asarray(A)


def test_an_operand_with_its_own_operators_gets_its_turn_in_forward_mode_too():
    class Twice:
        __array_ufunc__ = None

        def __rmatmul__(self, x):
            return x * 2.0
    y, t = tr.jvp(lambda x: np.sum(x @ Twice()), (np.ones(3),), (np.ones(3),))
    assert (y, t) == (6.0, 6.0)


def test_a_constant_of_the_sparse_pattern_keeps_scipys_index_order():
    A = scipy_matrix('csc_matrix', (4, 4), 5)
    B = tsp.csr_matrix(A)                    # a SciPy matrix given to a constructor
    assert (B.format, B.shape, B.nnz) == ('csr', (4, 4), A.nnz)
    close(B.toarray(), A.toarray())
    assert 'constant values' in repr(B) and 'tracked values' in repr(
        tsp.csr_matrix((tr.param(np.ones(6)), COL, INDPTR)))
