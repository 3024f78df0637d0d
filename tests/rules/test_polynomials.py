"""Polynomial rules: finite-difference cases, NumPy's values, poly1d, keyword forms."""
import numpy as np

import tracked as tr

from .harness import arg, case, const, parametrize

X = np.linspace(-1.0, 1.5, 7)

CASES = [
    case(np.polyval, (4,), (3, 2)), case(np.polyval, (3,), ()), case(np.polyval, (1,), (5,)),
    case(lambda c, x: np.poly1d(np.array([1.0, -2.0, 0.5]))(x) * np.polyval(c, 2.0), (3,), (4,),
         covers=np.polyval, name='poly1d(x)'),
    case(np.vander, (4,)), case(np.vander, (3,), const(5)),
    case(np.vander, (4,), kwargs=dict(N=2, increasing=True)),
    case(np.polyfit, const(X), (7,), const(2)),
    case(np.polyfit, arg(None, values=X), (7,), const(1)),
    case(np.polyfit, const(X), (7, 2), const(3), kwargs=dict(w=np.linspace(0.5, 1.5, 7))),
    case(lambda y: np.polyfit(X, y, 2, full=True)[1], (7,), covers=np.polyfit,
         name='polyfit(full)[1]'),
    case(lambda y: np.polyfit(X, y, 2, cov=True)[1], (7,), covers=np.polyfit,
         name='polyfit(cov)[1]'),
    case(np.polyadd, (3,), (5,)), case(np.polyadd, (4,), (2,)), case(np.polysub, (2,), (4,)),
    case(np.polysub, (3,), (3,)), case(np.polymul, (3,), (4,)),
    case(np.polyder, (5,)), case(np.polyder, (5,), const(2)), case(np.polyint, (4,)),
    case(np.polyint, (4,), const(2), const([1.0, -2.0])),   # (NumPy dispatches on p alone)
    case(lambda u, v: np.concatenate(np.polydiv(u, v)), (5,), arg((3,), 0.5, 2.0),
         covers=np.polydiv, name='polydiv'),
    case(np.poly, (3,)),
    case(np.roots, arg(None, values=np.array([1.0, -3.0, 2.0]))),
    case(np.roots, arg(None, values=np.array([2.0, 0.5, 1.0, -1.0]))),    # complex roots
    case(lambda c: np.roots(np.concatenate([np.zeros(1), c, np.zeros(2)])),
         arg(None, values=np.array([1.0, 0.5, -2.0])), covers=np.roots,
         name='roots(leading and trailing zeros)'),
    case(lambda v: np.trim_zeros(v * np.array([0.0, 0.0, 1.0, 2.0, 0.0])), arg((5,), 0.5, 2.0),
         covers=np.trim_zeros, name='trim_zeros'),
]


@parametrize(CASES)
def test_polynomials_against_finite_differences(c):
    c.check()


def test_values_are_numpys():
    rng = np.random.default_rng(0)
    c, y = rng.standard_normal(4), rng.standard_normal(7)
    np.testing.assert_array_equal(tr.data(np.polyval(tr.param(c), X)), np.polyval(c, X))
    np.testing.assert_allclose(tr.data(np.polyfit(X, tr.param(y), 3)), np.polyfit(X, y, 3))
    for a, b in zip(np.polyfit(X, tr.param(y), 2, cov=True), np.polyfit(X, y, 2, cov=True)):
        np.testing.assert_allclose(tr.data(a), b)
    np.testing.assert_array_equal(tr.data(np.vander(tr.param(c))), np.vander(c))
    for a, b in zip(np.polydiv(tr.param(y), tr.param(c)), np.polydiv(y, c)):
        np.testing.assert_allclose(tr.data(a), b)


def test_poly1d_of_tracked_coefficients():
    g = tr.gradient(lambda c: np.poly1d(c)(2.0), np.array([1.0, -1.0, 3.0, 0.5]))[0]
    np.testing.assert_array_equal(g, [8.0, 4.0, 2.0, 1.0])


def test_keyword_arguments():
    c = np.array([0.5, -1.0, 2.0])
    assert tr.gradcheck(lambda p, x: np.polyval(p=p, x=x), c, X)
    assert tr.gradcheck(lambda y: np.polyfit(x=X, y=y, deg=2), np.sin(X))
