"""Colourings (tracked/colorings.py): valid on random patterns (hypothesis), exact
recovery, the choice of direction, and speed on a large stencil."""
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracked as tr

sp = pytest.importorskip('scipy.sparse')


def _random_pattern(m, n, density, seed):
    rng = np.random.default_rng(seed)
    return rng.random((m, n)) < density


patterns = st.builds(_random_pattern, st.integers(1, 25), st.integers(1, 25),
                     st.floats(0.0, 0.6), st.integers(0, 2 ** 32 - 1))


def _structurally_orthogonal(P, colors):
    """No row holds two columns of one colour."""
    for c in np.unique(colors):
        if (P[:, colors == c].sum(axis=1) > 1).any():
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(patterns)
def test_column_and_row_colorings_are_valid_and_recover(P):
    rng = np.random.default_rng(0)
    J = np.where(P, rng.standard_normal(P.shape), 0.0)
    col = tr.coloring(P, kind='column')
    assert col.kind == 'column' and col.colors.shape == (P.shape[1],)
    assert _structurally_orthogonal(P, col.colors)
    np.testing.assert_array_equal(col.decompress(J @ col.seeds().T).toarray(), J)
    row = tr.coloring(P, kind='row')
    assert row.colors.shape == (P.shape[0],)
    assert _structurally_orthogonal(P.T, row.colors)
    np.testing.assert_array_equal(row.decompress(row.seeds() @ J).toarray(), J)
    best = tr.coloring(P)
    assert best.ncolors == min(col.ncolors, row.ncolors)
    assert best.kind == ('row' if row.ncolors < col.ncolors else 'column')


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.floats(0.0, 0.5), st.integers(0, 2 ** 32 - 1))
def test_symmetric_coloring_recovers_every_symmetric_matrix(n, density, seed):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density)
    P = upper | upper.T
    H = np.triu(np.where(upper, rng.standard_normal((n, n)), 0.0))
    H = H + np.triu(H, 1).T
    col = tr.coloring(P, kind='symmetric')
    adjacent = P & ~np.eye(n, dtype=bool)
    i, j = np.nonzero(adjacent)
    assert (col.colors[i] != col.colors[j]).all()            # a distance-1 colouring
    np.testing.assert_allclose(col.decompress(H @ col.seeds().T).toarray(), H,
                               rtol=0, atol=1e-12)


def test_star_coloring_needs_fewer_colours_than_columns_on_an_arrow():
    n = 50
    P = np.eye(n, dtype=bool)
    P[0, :] = P[:, 0] = True                     # an arrowhead: one dense row and column
    assert tr.coloring(P, kind='column').ncolors == n
    assert tr.coloring(P, kind='symmetric').ncolors == 2


def test_tridiagonal_needs_three_colours_whatever_its_size():
    for n in (10, 1000, 100_000):
        P = sp.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)], offsets=[-1, 0, 1])
        assert tr.coloring(P).ncolors == 3
        assert tr.coloring(P, kind='symmetric').ncolors == 3


def test_an_invalid_plan_is_refused():
    P = np.array([[True, True]])
    with pytest.raises(ValueError, match='cannot read entry'):
        tr.Coloring(sp.csr_array(P), 'column', np.array([0, 0]))


def test_input_forms_and_errors():
    dense = np.array([[1.0, 0.0], [0.0, 2.0]])
    for form in (dense, sp.csr_matrix(dense), sp.coo_array(dense), dense != 0):
        c = tr.coloring(form)
        assert c.ncolors == 1 and c.pattern.dtype == bool and c.pattern.nnz == 2
    with pytest.raises(ValueError, match='kind='):
        tr.coloring(dense, kind='diagonal')
    with pytest.raises(ValueError, match='square'):
        tr.coloring(np.ones((2, 3)), kind='symmetric')
    assert 'column: 1 colours' in repr(tr.coloring(dense))


def test_empty_pattern():
    c = tr.coloring(np.zeros((3, 4), bool))
    assert c.ncolors == 0
    np.testing.assert_array_equal(c.decompress(np.zeros((3, 0))).toarray(), np.zeros((3, 4)))


def test_seeds_are_shared_and_read_only():
    c = tr.coloring(np.eye(3, dtype=bool))
    assert c.seeds() is c.seeds()
    assert not c.seeds().flags.writeable
    assert c.seeds(np.float32).dtype == np.float32


def _five_point(n):
    E = sp.eye_array(n)
    T = sp.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)], offsets=[-1, 0, 1])
    return sp.csr_array(sp.kron(E, T) + sp.kron(T, E))


def test_colouring_a_hundred_thousand_unknowns_takes_well_under_a_second():
    P = _five_point(317)                         # 100,489 unknowns, 5 per row
    tr.coloring(_five_point(4))                  # numba's kernels loaded (cached on disk)
    tr.coloring(_five_point(4), kind='symmetric')
    start = time.perf_counter()
    c = tr.coloring(P)                           # column and row colourings, both plans
    s = tr.coloring(P, kind='symmetric')
    elapsed = time.perf_counter() - start
    assert c.ncolors <= 8 and s.ncolors <= 6
    assert elapsed < 1.0, elapsed               # ~0.1 s on an idle core
