"""Signal rules: finite-difference cases, NumPy's values for every mode, keyword forms,
recorded tapes looking new points up."""
import numpy as np
import pytest

import tracked as tr

from .harness import arg, case, const, parametrize

swv = np.lib.stride_tricks.sliding_window_view
XP = np.array([-1.5, -0.7, 0.1, 0.4, 1.3, 2.0])
XS = arg(None, values=[-2.0, -1.1, -0.2, 0.25, 0.9, 1.7, 2.6])    # no sample point hit
COORDS = np.array([0.0, 0.5, 1.3, 1.6, 2.4])

CASES = (
    [case(np.convolve, (6,), (3,), const(m)) for m in ('full', 'same', 'valid')]
    + [case(np.convolve, (2,), (5,), kwargs=dict(mode=m)) for m in ('full', 'same', 'valid')]
    + [case(np.correlate, (6,), (3,), const(m)) for m in ('full', 'same', 'valid')]
    + [case(np.correlate, (3,), (4,), kwargs=dict(mode=m)) for m in ('full', 'same', 'valid')]
    + [
        case(np.convolve, (1,), (1,)),
        case(np.convolve, arg((4,), dtype=np.complex128), arg((3,), dtype=np.complex128)),
        case(np.interp, XS, const(XP), (6,)),
        case(np.interp, XS, arg(None, values=XP), (6,)),
        case(np.interp, arg((2, 3), -1.4, 1.9), const(XP), (6,)),
        case(np.interp, (), const(XP), (6,), kwargs=dict(left=-3.0, right=4.0)),
        case(np.interp, XS, const(XP), (6,), kwargs=dict(period=2.7)),
        case(np.diff, (6,)), case(np.diff, (4, 5), const(2), const(0)),
        case(np.diff, (4, 5), kwargs=dict(prepend=0.5, append=np.ones((4, 1)))),
        case(np.ediff1d, (3, 2)), case(np.ediff1d, (5,), kwargs=dict(to_end=[1.0], to_begin=2.0)),
        case(np.trapezoid, (6,)), case(np.trapezoid, (4, 5), kwargs=dict(dx=0.3, axis=0)),
        case(np.trapezoid, (4, 5), arg(None, values=COORDS)),
        *([case(np.trapz, (4, 5), kwargs=dict(dx=0.3, axis=0))] if hasattr(np, 'trapz') else []),
        case(lambda y: np.stack(np.gradient(y)), (4, 5), covers=np.gradient, name='gradient(4,5)'),
        case(np.gradient, (6,), const(0.5), kwargs=dict(edge_order=2)),
        case(np.gradient, (4, 5), arg(None, values=COORDS), kwargs=dict(axis=1)),
        case(np.gradient, (4, 5), arg(None, values=COORDS), kwargs=dict(axis=-1, edge_order=2)),
        case(np.unwrap, arg((7,), -6.0, 6.0)),
        case(np.unwrap, arg((3, 4), -6.0, 6.0), kwargs=dict(axis=0)),
        case(swv, (6,), const(3), covers=np.lib.stride_tricks.sliding_window_view),
        case(swv, (4, 5), const((2, 3)), covers=np.lib.stride_tricks.sliding_window_view),
        case(swv, (4, 5), const(2), kwargs=dict(axis=0),
             covers=np.lib.stride_tricks.sliding_window_view),
    ]
)


@parametrize(CASES)
def test_signal_against_finite_differences(c):
    c.check()


@pytest.mark.parametrize('mode', ['full', 'same', 'valid'])
@pytest.mark.parametrize('n,m', [(6, 3), (3, 6), (4, 4), (1, 2)])
def test_convolve_values_are_numpys(mode, n, m):
    rng = np.random.default_rng(n * 10 + m)
    a, v = rng.standard_normal(n), rng.standard_normal(m)
    for fn in (np.convolve, np.correlate):
        np.testing.assert_allclose(tr.data(fn(tr.param(a), tr.param(v), mode)), fn(a, v, mode))


def test_interp_values_and_slopes():
    fp = np.array([0.0, 1.0, 4.0])
    xp = np.array([0.0, 1.0, 2.0])
    x = np.array([-1.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    np.testing.assert_array_equal(tr.data(np.interp(tr.param(x), xp, fp)), np.interp(x, xp, fp))
    g = tr.gradient(lambda v: np.sum(np.interp(v, xp, fp)), x)[0]
    np.testing.assert_array_equal(g, [0.0, 1.0, 3.0, 3.0, 0.0, 0.0])   # right-hand slopes


def test_gradient_and_window_values_are_numpys():
    y = np.random.default_rng(4).standard_normal((4, 5))
    for kw in ({}, {'edge_order': 2}):
        for got, want in zip(np.gradient(tr.param(y), 0.5, COORDS, **kw),
                             np.gradient(y, 0.5, COORDS, **kw)):
            np.testing.assert_allclose(tr.data(got), want)
    np.testing.assert_array_equal(tr.data(swv(tr.param(y), (2, 3))), swv(y, (2, 3)))
    np.testing.assert_allclose(tr.data(np.unwrap(tr.param(4 * y))), np.unwrap(4 * y))


def test_recorded_tape_looks_new_points_up():
    rng = np.random.default_rng(5)
    fp = rng.standard_normal(6)
    f = lambda x, fp: np.sum(np.interp(x, XP, fp) ** 2) + np.sum(np.convolve(x, fp, 'same'))
    tape = tr.GradientTape(f, rng.uniform(-2, 2, 6), fp)
    ctape = tr.compile(tape, background=False)
    for _ in range(3):
        x2 = rng.uniform(-2, 2, 6)
        for t in (tape, ctape):
            for a, b in zip(t.gradient(x2, fp), tr.gradient(f, x2, fp)):
                np.testing.assert_allclose(a, b)


def test_keyword_arguments():
    rng = np.random.default_rng(6)
    x, fp = rng.uniform(-1, 1.9, 4), rng.standard_normal(6)
    assert tr.gradcheck(lambda x, fp: np.interp(x, xp=XP, fp=fp), x, fp)
    assert tr.gradcheck(lambda a, v: np.convolve(a=a, v=v, mode='same'), fp, x)
    assert tr.gradcheck(lambda y: np.trapezoid(y=y, x=COORDS[:4]), x)
    assert tr.gradcheck(lambda y: np.diff(y, n=2, prepend=y[:1]), fp)
