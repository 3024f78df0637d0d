"""``scipy.sparse`` rules (``tracked.rules.scipy_sparse``): the sparse-dense product, the
sampled product, the direct and the Krylov solves, through ``tracked.scipy.sparse``'s
matrices and SciPy's own, in every format, vector and matrix operands, rectangular,
with repeated coordinates, complex; finite differences to second order and forward
mode here, the recorded and compiled paths in test_systematic.  Skipped when SciPy is
not installed."""
import numpy as np
import pytest

sp = pytest.importorskip('scipy.sparse')

from tracked.rules import scipy_sparse as rules        # noqa: E402
from tracked.scipy import sparse as tsp                # noqa: E402
from tracked.scipy.sparse import linalg as tsl         # noqa: E402

from .harness import arg, case, parametrize            # noqa: E402

# A 4 x 3 pattern with a repeated coordinate (3, 0), rows in order (so also CSR's), and
# the same matrix's CSC arrays (values in column order: positions CSC_ORDER of the rows').
ROW = np.array([0, 0, 1, 2, 3, 3])
COL = np.array([0, 2, 1, 1, 0, 0])
INDPTR = np.array([0, 2, 3, 4, 6])
CSC_INDICES, CSC_INDPTR = np.array([0, 3, 3, 1, 2, 0]), np.array([0, 3, 5, 6])
# SciPy's constant matrices of the same pattern, one of each format
_VALUES = np.array([1.5, -2.0, 0.5, 3.0, 1.0, -0.5])
_DENSE = sp.coo_array((_VALUES, (ROW, COL)), shape=(4, 3)).toarray()
CONST = {f'{fmt}_{kind}': getattr(sp, f'{fmt}_{kind}')(_DENSE)
         for fmt in ('csr', 'csc', 'coo') for kind in ('matrix', 'array')}

# A 4 x 4 pattern for solves; BOOST makes its diagonal dominant (a well-posed solve at
# every sample), IND_BOOST symmetric-indefinite once symmetrised.
S_ROW = np.array([0, 1, 2, 3, 0, 2, 3, 1])
S_COL = np.array([0, 1, 2, 3, 2, 1, 0, 3])
BOOST = np.array([4.0, 4.0, 4.0, 4.0, 0.0, 0.0, 0.0, 0.0])
IND_BOOST = np.array([4.0, -4.0, 4.0, -4.0, 0.0, 0.0, 0.0, 0.0])
RTOL = 1e-12                       # Krylov solves: tight enough for finite differences


def carg(shape, low=-1.0, high=1.0):
    return arg(shape, low, high, dtype=np.complex128)


def csr(d):
    return tsp.csr_array((d, COL, INDPTR), shape=(4, 3))


def square(d, boost=BOOST):
    return tsp.csc_array((d + boost, (S_ROW, S_COL)), shape=(4, 4))


def product(fun, *specs, name):
    return case(fun, *specs, covers=rules.coo_matmul, name=name)


def solve(fun, *specs, name, covers=rules.coo_solve):
    return case(fun, *specs, covers=covers, name=name)


def krylov(method, boost, symmetric):
    def fun(d, b):
        a = square(d, boost)
        return getattr(tsl, method)(a + a.T if symmetric else a, b, rtol=RTOL)[0]
    return solve(fun, arg((8,), -1.0, 1.0), (4,), covers=rules.coo_krylov,
                 name=f'{method}((8,),(4,))')


CASES = [
    # A @ x with tracked values, x a vector or a matrix, from either side, each format
    product(lambda d, x: csr(d) @ x, (6,), (3,), name='csr_array(6) @ (3,)'),
    product(lambda d, x: csr(d) @ x, (6,), (3, 2), name='csr_array(6) @ (3,2)'),
    product(lambda d, x: tsp.csc_matrix((d, CSC_INDICES, CSC_INDPTR), shape=(4, 3)).dot(x),
            (6,), (3,), name='csc_matrix(6).dot((3,))'),
    product(lambda d, y: y @ tsp.coo_array((d, (ROW, COL)), shape=(4, 3)), (6,), (4,),
            name='(4,) @ coo_array(6)'),
    product(lambda d, y: y @ tsp.coo_matrix((d, (ROW, COL)), shape=(4, 3)), (6,), (2, 4),
            name='(2,4) @ coo_matrix(6)'),
    product(lambda d, y: csr(d).T @ y, (6,), (4, 3), name='csr_array(6).T @ (4,3)'),
    product(lambda d: csr(d) @ np.array([1.0, -2.0, 0.5]), (6,), name='csr_array(6) @ const'),
    product(lambda d, x: csr(d) @ x, carg((6,)), carg((3, 2)), name='csr_array(c6) @ c(3,2)'),
    product(lambda d, x: x @ csr(d), (6,), carg((2, 4)), name='c(2,4) @ csr_array(6)'),
    # SciPy's constant matrices, unmodified code
    *[product(lambda x, a=a: a @ x, (3,), name=f'{key} @ (3,)') for key, a in CONST.items()],
    product(lambda x: CONST['csr_matrix'] @ x, (3, 2), name='csr_matrix @ (3,2)'),
    product(lambda y: y @ CONST['csc_array'], (2, 4), name='(2,4) @ csc_array'),
    product(lambda y: CONST['coo_array'].T @ y, (4,), name='coo_array.T @ (4,)'),
    product(lambda x: CONST['csr_matrix'].dot(x), carg((3,)), name='csr_matrix.dot(c(3,))'),
    # the sampled product (the values' cotangent), on its own
    case(lambda u, v: rules.sample(u, v, ROW, COL), (4,), (3,), covers=rules.coo_sample,
         name='sample((4,),(3,))'),
    case(lambda u, v: rules.sample(u, v, ROW, COL), (4, 2), (3, 2), covers=rules.coo_sample,
         name='sample((4,2),(3,2))'),
    case(lambda u, v: rules.sample(u, v, ROW, COL), carg((4, 2)), (3, 2),
         covers=rules.coo_sample, name='sample(c(4,2),(3,2))'),
    # direct solves: spsolve and splu(...).solve in every trans
    solve(lambda d, b: tsl.spsolve(square(d), b), arg((8,), -1.0, 1.0), (4,),
          name='spsolve((8,),(4,))'),
    solve(lambda d, b: tsl.spsolve(square(d).tocsr(), b), arg((8,), -1.0, 1.0), (4, 2),
          name='spsolve((8,),(4,2))'),
    solve(lambda b: tsl.spsolve(sp.csc_array(np.diag([2.0, 3.0, 4.0, 5.0]) + 0.5), b), (4, 1),
          name='spsolve(scipy constant,(4,1))'),
    *[solve(lambda d, b, t=t: tsl.splu(square(d)).solve(b, t), arg((8,), -1.0, 1.0), (4, 2),
            name=f'splu((8,)).solve((4,2),{t})') for t in ('N', 'T', 'H')],
    *[solve(lambda d, b, t=t: tsl.splu(square(d)).solve(b, t), carg((8,)), carg((4,)),
            name=f'splu(c(8,)).solve(c(4,),{t})') for t in ('N', 'T', 'H')],
    solve(lambda d, b: tsl.spsolve(square(d), b), carg((8,)), (4,), name='spsolve(c(8,),(4,))'),
    # Krylov solvers, differentiated at their solution
    krylov('cg', BOOST, True), krylov('gmres', BOOST, False), krylov('minres', IND_BOOST, True),
]


@parametrize(CASES)
def test_case(c):
    c.check()


def test_the_constants_are_the_matrix_they_claim():
    dense = _DENSE
    csc = tsp.csc_array((_VALUES[[0, 4, 5, 2, 3, 1]], CSC_INDICES, CSC_INDPTR), shape=(4, 3))
    np.testing.assert_array_equal(csc.toarray(), dense)
    np.testing.assert_array_equal(csr(_VALUES).toarray(), dense)
    for a in CONST.values():
        np.testing.assert_array_equal(a.toarray(), dense)
