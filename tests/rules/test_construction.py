"""Construction and selection rules: finite-difference cases, NumPy's values, masks and
orders recomputed on recorded tapes, in-place writers, keyword forms."""
import numpy as np
import pytest

import tracked as tr

from .harness import arg, case, const, parametrize

M = np.random.default_rng(7).standard_normal((3, 4))
IDX = np.array([0, 2, 2, 1, 0])
DATA = np.random.default_rng(8).standard_normal(20)


def joined(outs):
    return np.concatenate([np.ravel(o) * (k + 1.0) for k, o in enumerate(outs)])


def _writers(m):
    a = m * 1.0
    np.put(a, [0, 5], m[0, :2] * 3.0)
    np.place(a, M > 1, m[1, :1])
    np.putmask(a, M < -1, m * 3)
    np.copyto(a, m ** 2, where=M > 0.8)
    b = a[:, :3] * 1.0
    np.fill_diagonal(b, m[2, 0])
    np.put_along_axis(a, np.array([[1], [0], [3]]), m[:, :1] * 7, axis=1)
    return np.concatenate([a.ravel(), b.ravel()])


def _cover(fn, caller, *specs, name, **kw):
    return case(caller, *specs, covers=fn, name=name, **kw)


CASES = [
    case(np.linspace, (2,), (2,), const(5)), case(np.linspace, (), (), const(4), const(False)),
    case(np.linspace, (2,), (), kwargs=dict(num=3, axis=1)), case(np.linspace, (), (), const(1)),
    _cover(np.linspace, lambda a, b: joined(np.linspace(a, b, 4, retstep=True)), (), (),
           name='linspace(retstep)'),
    case(np.logspace, (2,), (2,), const(4)),
    case(np.logspace, (), (), kwargs=dict(num=3, base=2.0)),
    case(np.geomspace, arg((2,), 0.5, 2.0), arg((2,), 3.0, 5.0), const(4)),
    case(np.geomspace, arg((), -2.0, -0.5), arg((), -5.0, -3.0), const(3), const(False)),
    _cover(np.meshgrid, lambda a, b: joined(np.meshgrid(a, b)), (3,), (4,), name='meshgrid(xy)'),
    _cover(np.meshgrid, lambda a, b, c: joined(np.meshgrid(a, b, c, indexing='ij', sparse=True)),
           (2,), (3,), (2,), name='meshgrid(ij, sparse)'),
    _cover(np.select, lambda m: np.select([M > 0.5, M < -0.5], [m ** 2, m * 3], m), (3, 4),
           name='select'),
    _cover(np.select, lambda m: np.select([M > 0], [m]), (3, 4), name='select(default 0)'),
    _cover(np.piecewise, lambda m: np.piecewise(m, [M < 0, M >= 0], [lambda v: -v ** 3, np.exp]),
           (3, 4), name='piecewise'),
    _cover(np.piecewise, lambda m: np.piecewise(m, [M < 0], [lambda v: v ** 2, 1.5]), (3, 4),
           name='piecewise(otherwise)'),
    _cover(np.choose, lambda a, b: np.choose(np.array([0, 1, 1]), [a, b]), (3,), (3,),
           name='choose'),
    case(np.partition, (3, 4), const(2)), case(np.partition, (3, 4), const((0, 2)), const(None)),
    case(np.partition, (6,), kwargs=dict(kth=-1)),
    case(np.nan_to_num, arg(None, values=[1.0, np.nan, np.inf, -np.inf, -2.0])),
    case(np.nan_to_num, (3, 4), kwargs=dict(nan=1.0)),
    case(np.rollaxis, (2, 3, 4), const(2)), case(np.rollaxis, (2, 3, 4), const(0), const(2)),
    _cover(np.dsplit, lambda m: joined(np.dsplit(m, 2)), (2, 3, 4), name='dsplit'),
    _cover(np.block, lambda m, c: np.block([[m, c], [c.T, m[:1, :1]]]), (3, 3), (3, 1),
           name='block'),
    case(np.diagflat, (3,)), case(np.diagflat, (2, 2), const(1)),
    case(np.resize, (3, 4), const((5, 3))), case(np.resize, (3,), const(7)),
    case(np.delete, (3, 4), const([0, 2]), const(1)), case(np.delete, (5,), const(1)),
    case(np.insert, (3, 4), const(1), (4,), const(0)),
    case(np.insert, (5,), const([0, 2, 2]), (3,)),
    case(np.insert, (3, 4), const([1, 3]), (), const(1)),
    case(np.insert, (5,), const(-1), const(2.0)),
    case(np.insert, (3, 4), const(slice(1, 3)), (3, 1), const(1)),
    case(np.insert, (2, 3), const(4), ()),
    case(np.compress, const([True, False, True]), (3, 4), const(0)),
    case(np.extract, const(M > 0), (3, 4)),
    _cover(np.apply_along_axis, lambda m: np.apply_along_axis(
        lambda r: np.stack([np.sum(r ** 2), r[0]]), 1, m), (3, 4), name='apply_along_axis(1)'),
    _cover(np.apply_along_axis, lambda m: np.apply_along_axis(lambda r: r[::-1] * r, 0, m),
           (3, 4), name='apply_along_axis(0)'),
    _cover(np.apply_over_axes, lambda m: np.apply_over_axes(np.sum, m, [0, 1]), (3, 4),
           name='apply_over_axes'),
    case(np.bincount, const(IDX), (5,)), case(np.bincount, const(IDX), (5,), const(6)),
    _cover(np.histogram, lambda w: np.histogram(DATA, 4, weights=w)[0], (20,),
           name='histogram(weights)'),
    _cover(np.histogram, lambda w: np.histogram(DATA, [-1.0, 0.0, 0.5, 2.0], weights=w,
                                                density=True)[0], arg((20,), 0.5, 1.5),
           name='histogram(weights, density)'),
    _cover(np.histogram2d, lambda s: np.histogram2d(s[:, 0], s[:, 1], 3)[0] + np.sum(s), (6, 2),
           name='histogram2d'),
    _cover(np.histogramdd, lambda s: np.histogramdd(s, 2)[0] + np.sum(s), (6, 2),
           name='histogramdd'),
    _cover(np.histogram2d, lambda w: np.histogram2d(DATA, DATA[::-1] ** 2, [3, 4], weights=w)[0],
           (20,), name='histogram2d(weights)'),
    _cover(np.histogram2d, lambda w: np.histogram2d(
        DATA, DATA[::-1], np.linspace(-1.0, 1.0, 4), density=True, weights=w)[0],
        arg((20,), 0.5, 1.5), name='histogram2d(weights, density)'),
    _cover(np.histogramdd, lambda w: np.histogramdd(
        np.stack([DATA, DATA ** 2, DATA[::-1]], 1), (2, 3, 2), weights=w)[0], (20,),
        name='histogramdd(weights)'),
] + [_cover(fn, _writers, (3, 4), name=f'{fn.__name__}(in place)')
     for fn in (np.put, np.place, np.putmask, np.copyto, np.fill_diagonal, np.put_along_axis)]


@parametrize(CASES)
def test_construction_against_finite_differences(c):
    c.check()


@pytest.mark.parametrize('f', [
    lambda a, b: np.linspace(a, b, 7), lambda a, b: np.linspace(a, b, 5, endpoint=False, axis=1),
    lambda a, b: np.logspace(a, b, 4, base=3.0), lambda a, b: np.geomspace(a + 3, b + 9, 6),
    lambda a, b: np.meshgrid(a, b)[0], lambda a, b: np.nan_to_num(a / 0.0),
    lambda a, b: np.partition(np.concatenate([a, b]), 2), lambda a, b: np.block([a, b]),
    lambda a, b: np.bincount([0, 2], weights=a), lambda a, b: np.histogram(a, 3, weights=b)[0],
    lambda a, b: np.histogram2d(a, b, [2, 3], weights=a + b)[0],
    lambda a, b: np.insert(a, [0, 1], b[:2]), lambda a, b: np.insert(a, 1, b[0]),
    lambda a, b: np.histogramdd(np.stack([a, b], 1), 2, weights=b, density=True)[0],
])
def test_values_are_numpys(f):
    a, b = np.array([0.5, 1.5]), np.array([2.0, 3.5])
    with np.errstate(divide='ignore', invalid='ignore'):
        np.testing.assert_allclose(tr.data(f(tr.param(a), tr.param(b))), f(a, b))


def test_piecewise_functions_see_only_their_elements():
    x = np.array([-4.0, -1.0, 0.25, 4.0])
    g = tr.gradient(lambda v: np.sum(np.piecewise(v, [v < 0, v >= 0], [0.0, np.sqrt])), x)[0]
    np.testing.assert_allclose(g, [0.0, 0.0, 1.0, 0.25])        # no nan from sqrt(-4)


def test_orders_and_masks_are_recomputed_on_a_tape():
    rng = np.random.default_rng(9)
    f = lambda m: np.sum(np.partition(m, 1, axis=1)[:, 1] ** 2
                         + np.select([m > 0.5], [m ** 2], m).sum(1))
    tape = tr.GradientTape(f, rng.standard_normal((3, 4)))
    ctape = tr.compile(tape, background=False)
    for _ in range(3):
        x2 = rng.standard_normal((3, 4))
        np.testing.assert_allclose(tape.gradient(x2)[0], tr.gradient(f, x2)[0])
        np.testing.assert_allclose(ctape.gradient(x2)[0], tr.gradient(f, x2)[0])
    # piecewise selects by masks, whose counts set shapes: a new count is a guard
    g = lambda m: np.sum(np.piecewise(m, [m < 0], [lambda v: v ** 2, np.exp]))
    tape = tr.GradientTape(g, np.array([-1.0, 2.0, 3.0]))
    np.testing.assert_allclose(tape.gradient(np.array([-2.0, 1.0, 0.5]))[0],
                               tr.gradient(g, np.array([-2.0, 1.0, 0.5]))[0])
    with pytest.raises(tr.TapeGuardError):
        tape.gradient(np.array([-2.0, -1.0, 0.5]))


def test_writers_refuse_a_plain_destination():
    with pytest.raises(TypeError, match='plain array'):
        np.copyto(np.zeros(3), tr.param(np.ones(3)))


def test_keyword_arguments():
    w = np.linspace(0.5, 1.5, 20)
    assert tr.gradcheck(lambda a, b: np.linspace(start=a, stop=b, num=4), 0.5, 2.0)
    assert tr.gradcheck(lambda ww: np.bincount(IDX, weights=ww[:5], minlength=4), w)
    assert tr.gradcheck(lambda ww: np.histogram(DATA, bins=5, weights=ww)[0], w)
    assert tr.gradcheck(lambda m: np.select(condlist=[M > 0], choicelist=[m], default=1.0), M)
