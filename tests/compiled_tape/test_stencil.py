"""Compiled adjoints of stencils (shifted slices of one array, codegen.py): the gradient
contributions of ``x[1:]``, ``x[:-1]``, ... are carried in registers so that each
gradient element is updated once per loop, and fused float sums may be reassociated.
Checked against the eager tape, on lengths where the loop runs once or twice."""
import re

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape.buffers import Storage
from tracked.compiled_tape.loops import carry_clusters


def rosen(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def three_point(x):
    return np.sum((x[2:] - 2.0 * x[1:-1] + x[:-2]) ** 2 * x[1:-1])


def gapped(x):                       # regions at offsets 0 and 3 of length 2: not joined
    return np.sum(x[:2] ** 2 * 3.0 + x[3:] ** 3)


def rows(X):                         # 2-d: shifted rows are 3 elements apart
    return np.sum(np.tanh(X[1:] - X[:-1]) * X[1:])


def _check(f, shape, seeds=(0, 1)):
    ctape = tr.compile(tr.GradientTape(f, np.ones(shape)), background=False)
    for s in seeds:
        x = np.random.default_rng(s).standard_normal(shape)
        val, (g,) = ctape.withgradient(x)
        ev, (eg,) = tr.withgradient(f, x)
        np.testing.assert_allclose(val, ev, rtol=1e-12)
        np.testing.assert_allclose(g, eg, rtol=1e-12, atol=1e-14)
        out = (np.full(shape, np.nan),)            # the gradient buffer starts as garbage
        ctape.gradient(x, out=out)
        np.testing.assert_allclose(out[0], eg, rtol=1e-12, atol=1e-14)
    assert ctape.fallbacks == []
    return ctape


def _sources(ctape):
    return [k.source for k in ctape.compiled.kernels]


def _width(src):
    """The widest carried window of a kernel's source (0: none)."""
    return max([int(j) for j in re.findall(r'\bw\d+_(\d+) = ', src)], default=0)


@pytest.mark.parametrize('n', [2, 41])
def test_rosenbrock_gradient_is_carried_and_exact(n):
    ctape = _check(rosen, (n,))
    # one fused loop updates the gradient through a carried register, once per element
    fused = [s for s in _sources(ctape) if _width(s)]
    assert len(fused) == 1 and _width(fused[0]) == 1 and 'RADD(' in fused[0]
    assert fused[0].count('+=') == 2             # in the loop, and the last element


@pytest.mark.parametrize('n', [3, 9])
def test_three_point_stencil(n):
    ctape = _check(three_point, (n,))
    assert max(map(_width, _sources(ctape))) == 2


def test_regions_with_a_gap_are_separate_updates():
    ctape = _check(gapped, (5,))
    assert max(map(_width, _sources(ctape))) == 0


def test_shifted_rows_of_a_matrix():
    ctape = _check(rows, (4, 3))
    assert max(map(_width, _sources(ctape))) == 3     # rows are 3 elements apart


def test_clusters_keep_regions_apart_from_other_operands_of_the_buffer():
    def reg(off):
        return (Storage('mem', np.float64, 2, off, (10,)), ['t0'])
    a, b, far = reg(0), reg(1), reg(40)
    assert carry_clusters([a, b, far], (10,), False, []) == [[a, b], [far]]
    # the buffer is also read in the loop where a and b are updated: plain updates
    read = [(0, Storage('mem', np.float64, 2, 5, (10,)))]
    assert carry_clusters([a, b], (10,), False, read) == [[a], [b]]
    other_slot = [(0, Storage('mem', np.float64, 1, 5, (10,)))]
    assert carry_clusters([a, b], (10,), False, other_slot) == [[a, b]]
    assert carry_clusters([a, b], (10,), True, []) == [[a], [b]]        # strided loop
    ints = [(Storage('mem', np.int64, 2, off, (10,)), ['t0']) for off in (0, 1)]
    assert carry_clusters(ints, (10,), False, []) == [[r] for r in ints]
