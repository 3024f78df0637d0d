"""The documented examples of API.md and of the Flux/Zygote docs, in Python, each a test;
and the doctests of every module of the package, so that the docstrings stay true."""
import doctest
import importlib
import pathlib

import numpy as np
import pytest

import tracked as tr

# Every module of the package, from its files: a new module is collected as it is added,
# and one that fails to import fails here (pkgutil's walk would skip a subpackage).
PACKAGE = pathlib.Path(tr.__file__).parent
MODULES = sorted('.'.join(('tracked',) + p.relative_to(PACKAGE).with_suffix('').parts)
                 .removesuffix('.__init__') for p in PACKAGE.rglob('*.py'))
# Optional dependencies: a module that needs one is skipped where it is not installed
# (the floors' environment has neither SciPy nor Dask).
OPTIONAL = {'scipy', 'dask', 'distributed', 'sklearn'}


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        err = e
        while err is not None:
            missing = (getattr(err, 'name', None) or '').split('.')[0]
            if isinstance(err, ModuleNotFoundError) and missing in OPTIONAL:
                pytest.skip(f'{name} needs {missing}, an optional dependency not installed')
            err = err.__cause__
        raise


def _testmod(name):
    return doctest.testmod(_import(name), optionflags=doctest.NORMALIZE_WHITESPACE)


@pytest.mark.parametrize('name', MODULES)
def test_doctests(name):
    assert _testmod(name).failed == 0


def test_every_module_is_collected():
    assert {'tracked', 'tracked.__main__', 'tracked.values', 'tracked.testing',
            'tracked.compiled_tape.tapes', 'tracked.compiled_tape.backend',
            'tracked.rules.indexing', 'tracked.scipy.stats'} <= set(MODULES)
    assert len(MODULES) == len(list(PACKAGE.rglob('*.py')))


def test_the_public_modules_have_examples():
    for name in ('tracked.api', 'tracked.jacobians', 'tracked.tree_util', 'tracked.custom',
                 'tracked.checkpoint', 'tracked.values', 'tracked.box', 'tracked.dispatch',
                 'tracked.testing', 'tracked.numpy', 'tracked.forward',
                 'tracked.registry', 'tracked.nn', 'tracked.optimise',
                 'tracked.compiled_tape.tapes', 'tracked.compiled_tape.backend',
                 'tracked.rules.indexing'):
        assert _testmod(name).attempted > 0, name


def test_gradient_of_product():
    assert tr.gradient(lambda a, b, c: a * b * c, 2.0, 3.0, 5.0) == (15.0, 10.0, 6.0)


def test_gradient_of_sum_of_squares():
    g, = tr.gradient(lambda x: np.sum(x ** 2), np.array([7., 11., 13.]))
    np.testing.assert_array_equal(g, [14., 22., 26.])


def test_integer_arguments_as_power_and_index():
    gx, gy, gd = tr.gradient(lambda x, y, d: np.sum(x ** x.shape[d] + y),
                             np.array([7, 11]), 0, 0)
    np.testing.assert_array_equal(gx, [14., 22.])
    assert gx.dtype == np.float64
    assert gy == 2.0 and isinstance(gy, float)
    assert gd is None


def test_withgradient_of_division():
    res = tr.withgradient(lambda x, y: x / y, 1, 2)
    assert res == (0.5, (0.5, -0.25))
    assert res.val == 0.5 and res.grad == (0.5, -0.25)


def test_withgradient_with_auxiliary_output():
    val, (g,) = tr.withgradient(lambda x: (np.sum(1 / x), 1 / x), np.array([1., 2., 4.]))
    assert val[0] == 1.75
    np.testing.assert_array_equal(val[1], [1., .5, .25])
    np.testing.assert_array_equal(g, [-1., -0.25, -0.0625])


def test_jacobian_of_slice_squared():
    J, = tr.jacobian(lambda a: 100 * a[:3] ** 2, np.arange(1, 8))
    assert J.shape == (3, 7)
    expected = np.zeros((3, 7))
    expected[[0, 1, 2], [0, 1, 2]] = [200., 400., 600.]
    np.testing.assert_array_equal(J, expected)


def test_withjacobian_of_cumsum():
    x = np.array([1, 2, 3])
    val, (J,) = tr.withjacobian(np.cumsum, x)
    np.testing.assert_array_equal(val, [1, 3, 6])
    np.testing.assert_array_equal(J, np.tril(np.ones((3, 3))))
    np.testing.assert_array_equal(tr.jacobian(np.cumsum, x)[0], np.tril(np.ones((3, 3))))


def test_jacobian_of_a_list_is_one_block_per_element():
    # a list is a container (API.md section 3), never read as one array
    J, = tr.jacobian(lambda t: np.cumsum(np.stack(t)), [1.0, 2.0, 3.0])
    assert type(J) is list
    for k in range(3):
        np.testing.assert_array_equal(J[k], np.tril(np.ones((3, 3)))[:, k])


def test_hessian_of_sin():
    assert tr.hessian(np.sin, np.pi / 2) == -1.0


def test_diaghessian_of_arctan2():
    d = tr.diaghessian(np.arctan2, 1, 2)
    np.testing.assert_allclose(d, (-0.16, 0.16))
    assert all(np.ndim(v) == 0 for v in d)


def test_pullback_reusable():
    y, back = tr.pullback(lambda a, b, c: a * b * c, 2., 3., 5.)
    assert y == 30.0
    assert back(1.0) == (15, 10, 6)
    assert back(2.0) == (30, 20, 12)
    assert back(1.0) == (15, 10, 6)


def test_value_from_outside_gives_none():
    x0 = np.array([3.0, 4.0])
    y = np.sin(x0)                                   # computed outside gradient
    assert tr.gradient(lambda x: np.sum(y), x0) == (None,)
    W = tr.param(np.array([1.0, 2.0]))
    s = np.sum(W * W)                                # tracked, but on the outer tape
    val, grads = tr.withgradient(lambda x: s, x0)
    assert grads == (None,) and tr.data(val) == 5.0
    outside = np.array([1.0, 2.0])
    assert tr.gradient(lambda x: np.sum(outside), np.array([3.0, 4.0])) == (None,)
    val, grads = tr.withgradient(lambda x: np.sum(outside), np.array([3.0, 4.0]))
    assert val == 3.0 and grads == (None,)


def test_shared_array_gets_total_gradient_everywhere():
    a = b = np.array([2.0])
    c = np.array([2.0])
    g, = tr.gradient(lambda m: np.sum((m[0] + 2 * m[1] + 3 * m[2]) ** 2), [a, b, c])
    assert isinstance(g, list) and len(g) == 3
    for gi in g:
        np.testing.assert_array_equal(gi, [72.0])
    assert g[0] is g[1]


def test_nested_gradient_without_perturbation_confusion():
    assert tr.gradient(lambda x: x * tr.gradient(lambda y: x + y, 1.0)[0], 1.0) == (1.0,)


def test_api_md_low_level_then_convenience():
    model = {'W': np.ones((3, 4)), 'b': np.zeros(3), 'act': 'tanh'}
    x = np.linspace(-1, 1, 4)

    def loss(m):
        return np.sum(np.tanh(m['W'] @ x + m['b']) ** 2)
    tracked_model = tr.fmap(tr.param, model)
    tr.back(loss(tracked_model))
    g_tree = tr.grad(tracked_model)
    g, = tr.gradient(loss, model)
    assert g['act'] is None and g_tree['act'] is None
    np.testing.assert_allclose(g['W'], g_tree['W'])
    np.testing.assert_allclose(g['b'], g_tree['b'])
