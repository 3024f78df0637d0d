"""A SciPy function wrapped in @tr.rule nests like an autograd primitive (issue 28 item 2):
its forward runs on plain values, its pullback (NumPy and other rules) is rebuilt over
each level's tracked arguments and output."""
import numpy as np
import pytest

import tracked as tr

special = pytest.importorskip('scipy.special')


@tr.rule
def ellipeinc(phi, m):
    y = special.ellipeinc(phi, m)
    return y, lambda g: (g * np.sqrt(1 - m * np.sin(phi) ** 2),
                         g * (y - ellipkinc(phi, m)) / (2 * m))


@tr.rule
def ellipkinc(phi, m):
    y = special.ellipkinc(phi, m)

    def pullback(g):
        s = np.sqrt(1 - m * np.sin(phi) ** 2)
        dm = (ellipeinc(phi, m) / (2 * m * (1 - m)) - y / (2 * m)
              - np.sin(2 * phi) / (4 * (1 - m) * s))
        return g / s, g * dm
    return y, pullback


def test_scipy_rule_gradchecks_at_its_default_order_and_beyond():
    assert tr.gradcheck(lambda p, m: ellipkinc(p, m) ** 2, 0.7, 0.3)
    assert tr.gradcheck(lambda p, m: ellipkinc(p, m) ** 2, 0.7, 0.3, order=3)
    v = np.array([0.7, 0.3])
    f = lambda v: ellipkinc(v[0], v[1])  # noqa: E731
    g = lambda v: tr.gradient(f, v)[0]  # noqa: E731
    h = 1e-6
    fd = np.array([(g(v + h * e) - g(v - h * e)) / (2 * h) for e in np.eye(2)])
    for H in (tr.hessian(f, v), tr.hessian_reverse(f, v)):
        np.testing.assert_allclose(H, fd, rtol=1e-6)
    # forward over reverse and reverse over forward agree
    hv = tr.hvp(f, v, np.array([1.0, -1.0]))
    rf = tr.gradient(lambda v: tr.jvp(f, (v,), (np.array([1.0, -1.0]),))[1], v)[0]
    np.testing.assert_allclose(hv, fd @ np.array([1.0, -1.0]), rtol=1e-6)
    np.testing.assert_allclose(rf, hv, rtol=1e-12)
