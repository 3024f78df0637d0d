"""One meaning for trees at every level (issue 23, causes A, C, D, E, and Hessians of trees).

Ties are identity of arrays; numbers (Python and NumPy scalars, 0-d values, tracked or
not) are values, never tied; a tuple or list is always a container; integer leaves are
never mapped by ``fmap`` nor taken by ``destructure``.  The invariant tested throughout:
a function's value and its derivatives are the same whether or not its arguments are
differentiated at an outer level.
"""
import numpy as np
import pytest

import tracked as tr


def outer_values(f, *args):
    """``f(*args)`` computed plainly, under an outer reverse differentiation and under an
    outer forward one: the invariant says all three are equal."""
    plain = f(*args)
    rev = tr.withgradient(lambda *a: f(*a), *args).val
    fwd = tr.jvp(f, args, tuple(np.zeros_like(np.asarray(a, float)) for a in args))[0]
    return plain, rev, fwd


def central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


# -- A: a number occurring twice is two leaves --------------------------------------

def tied_number(x):
    return tr.gradient(lambda y: y[0] * y[1], (x, x))[0][0]


@pytest.mark.parametrize('wrap', [lambda x: (x, x), lambda x: [x, x], lambda x: {'a': x, 'b': x}],
                         ids=['tuple', 'list', 'dict'])
def test_a_number_twice_is_not_tied_at_any_level(wrap):
    def f(x):
        g = tr.gradient(lambda t: np.prod(np.stack(list(t.values() if isinstance(t, dict)
                                                       else t))), wrap(x))[0]
        first = g['a'] if isinstance(g, dict) else g[0]
        return first * 1.0
    assert outer_values(f, 5.0) == (5.0, 5.0, 5.0)
    val, (g,) = tr.withgradient(f, 5.0)
    assert (val, g) == (5.0, 1.0)
    assert tr.jvp(f, (5.0,), (1.0,)) == (5.0, 1.0)


@pytest.mark.parametrize('x', [5.0, np.float64(5.0), np.array(5.0)], ids=type)
def test_issue_example_a(x):
    assert tied_number(x) == 5.0
    assert tr.withgradient(tied_number, x) == (5.0, (1.0,))
    assert tr.jvp(tied_number, (x,), (1.0,)) == (5.0, 1.0)


def test_a_number_twice_through_jacobian_and_hvp():
    f = lambda x: tr.jacobian(lambda y: y[0] * y[1], (x, x))[0][0][0]  # noqa: E731
    assert f(5.0) == 5.0
    assert tr.withgradient(f, 5.0) == (5.0, (1.0,))
    h = lambda x: tr.hvp(lambda y: y[0] ** 2 * y[1], (x, x), (1.0, 0.0))[0]  # noqa: E731
    assert h(3.0) == 6.0                           # d/dy0 (2 y0 y1) = 2 y1
    assert tr.withgradient(h, 3.0) == (6.0, (2.0,))


def test_an_array_twice_is_tied_at_every_level():
    W = np.array([1.0, 2.0])

    def f(W):
        g = tr.gradient(lambda t: np.sum(t[0] * t[1]), (W, W))[0]
        assert g[0] is g[1] or np.array_equal(tr.data(g[0]), tr.data(g[1]))
        return np.sum(g[0] ** 2)
    plain = f(W)                                   # tied: the total 2W in both places
    assert plain == np.sum((2 * W) ** 2)
    val, (gW,) = tr.withgradient(f, W)
    assert val == plain
    np.testing.assert_allclose(gW, 8 * W)


# -- C: destructure never takes numbers -----------------------------------------------

def test_issue_example_c_destructure_skips_numbers_when_tracked():
    f = lambda s: np.sum(tr.destructure((np.ones(2), s))[0])  # noqa: E731
    assert f(3.0) == 2.0
    assert tr.withgradient(f, 3.0) == (2.0, (None,))
    assert tr.jvp(f, (3.0,), (1.0,)) == (2.0, 0.0)


def test_destructure_skips_0d_arrays_like_numbers():
    flat, re = tr.destructure({'w': np.ones(2), 't': np.array(0.5), 'n': 3})
    assert flat.shape == (2,)
    assert re(np.zeros(2))['t'] == 0.5


# -- D: fmap never maps integer leaves ------------------------------------------------

def test_issue_example_d_fmap_keeps_ints_when_tracked():
    f = lambda x, t: x * tr.fmap(lambda leaf: 2.0 * leaf, t)[1]  # noqa: E731
    assert f(1.5, (2.0, 3)) == 4.5
    val, (gx, gt) = tr.withgradient(f, 1.5, (2.0, 3))
    assert (val, gx) == (4.5, 3.0)
    assert gt == (None, 1.5)                       # t[1] is an int argument: differentiated
    assert tr.jvp(f, (1.5, (2.0, 3)), (1.0, (0.0, 0)))[0] == 4.5


def test_maml_step_on_a_model_holding_an_int():
    lr = 0.1
    model = {'w': np.array([1.0, -2.0]), 'steps': 3}

    def loss(m, x):
        return np.sum((m['w'] * x) ** 2) * m['steps']

    def maml(m, x):
        grads = tr.gradient(loss, m, x)[0]
        fast = tr.fmap(lambda p, g: p - lr * g, m, grads)
        assert fast['steps'] == 3
        return loss(fast, x)

    x = np.array([0.5, 1.5])
    plain = maml(model, x)
    val, (gm, gx) = tr.withgradient(maml, model, x)
    assert val == pytest.approx(plain, rel=1e-14)
    fd = np.array([central(lambda h: maml({'w': model['w'] + h * e, 'steps': 3}, x), 0.0)
                   for e in np.eye(2)])
    np.testing.assert_allclose(gm['w'], fd, rtol=1e-6)


def test_fmap_of_a_0d_int_array_keeps_it():
    n = np.array(4)
    assert tr.fmap(lambda a: a * 0.5, {'n': n, 'x': 2.0}) == {'n': n, 'x': 1.0}


# -- E: a tuple or list is always a container -----------------------------------------

def test_issue_example_e_jacobian_of_a_tuple_is_per_element():
    f = lambda x: np.sum(tr.jacobian(lambda t: t[0] * t[1], (x, 2.0))[0][0])  # noqa: E731
    assert f(3.0) == 2.0
    assert tr.withgradient(f, 3.0) == (2.0, (0.0,))
    J = tr.jacobian(lambda t: t[0] * t[1], [3.0, 2.0])[0]
    assert type(J) is list and len(J) == 2
    np.testing.assert_array_equal(J[0], [2.0])
    np.testing.assert_array_equal(J[1], [3.0])


def test_issue_example_e_jvp_with_a_list_argument():
    y, t = tr.jvp(lambda x, lst: x * lst[2], (np.ones(2), [1, 1, 3.0]), (np.ones(2), None))
    np.testing.assert_array_equal(y, [3.0, 3.0])
    np.testing.assert_array_equal(t, [3.0, 3.0])


def test_issue_example_e_jacobian_with_an_index_list():
    J = tr.jacobian(lambda x, idx: x[idx[0]], np.array([1., 2.]), [1, 0])
    np.testing.assert_array_equal(J[0], [[0.0, 1.0]])
    g = tr.gradient(lambda x, idx: x[idx[0]], np.array([1., 2.]), [1, 0])
    np.testing.assert_array_equal(g[0], [0.0, 1.0])


# -- Hessians and hvp over several arguments and trees --------------------------------

def test_hessian_takes_args_like_gradient():
    g = lambda a, b: a * b * b  # noqa: E731
    H = tr.hessian(g, 1.0, 2.0)
    assert H == ((0.0, 4.0), (4.0, 2.0))
    assert tr.hessian_reverse(g, 1.0, 2.0) == H


def test_hessian_of_a_dict_returns_blocks_in_its_structure():
    f = lambda d: d['a'] ** 2 * d['b']  # noqa: E731
    H = tr.hessian(f, {'a': 1.0, 'b': 2.0})
    assert H == {'a': {'a': 4.0, 'b': 2.0}, 'b': {'a': 2.0, 'b': 0.0}}
    assert tr.hessian_reverse(f, {'a': 1.0, 'b': 2.0}) == H


def test_hessian_blocks_of_arrays_match_the_flat_hessian():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 6))
    w, v, s = rng.standard_normal(3), rng.standard_normal(2), 0.7

    def f(p):
        z = np.concatenate([p['w'], p['v'], p['s'] * np.ones(1)])
        return np.sum(np.tanh(A @ z) ** 2) + p['s'] * np.sum(p['w'] ** 3)

    def flat(z):
        return f({'w': z[:3], 'v': z[3:5], 's': z[5]})
    Hflat = tr.hessian(flat, np.concatenate([w, v, [s]]))
    for mode in (tr.hessian, tr.hessian_reverse):
        H = mode(f, {'w': w, 'v': v, 's': s})
        np.testing.assert_allclose(H['w']['w'], Hflat[:3, :3], rtol=1e-12)
        np.testing.assert_allclose(H['w']['v'], Hflat[:3, 3:5], rtol=1e-12)
        np.testing.assert_allclose(H['v']['s'], Hflat[3:5, 5], rtol=1e-12)
        np.testing.assert_allclose(H['s']['w'], Hflat[5, :3], rtol=1e-12)
        assert H['s']['s'] == pytest.approx(Hflat[5, 5], rel=1e-12)
        assert np.shape(H['s']['s']) == ()


def test_hessian_of_a_tree_with_constants_and_ints():
    f = lambda m: m['x'] ** 3 * m['n'] if m['act'] == 'cube' else 0.0  # noqa: E731
    H = tr.hessian(f, {'x': 2.0, 'n': 2, 'act': 'cube'})
    assert H['act'] is None
    assert H['x']['x'] == 24.0 and H['x']['n'] == 12.0 and H['n']['n'] == 0.0


def test_hvp_of_trees_and_several_arguments():
    f = lambda a, b: np.sum(a ** 2) * b ** 2  # noqa: E731
    a, b = np.array([1.0, 2.0]), 3.0
    ha, hb = tr.hvp(f, a, b, (np.array([1.0, 0.0]), 1.0))
    H = tr.hessian(lambda z: f(z[:2], z[2]), np.array([1.0, 2.0, 3.0]))
    expect = H @ np.array([1.0, 0.0, 1.0])
    np.testing.assert_allclose(ha, expect[:2])
    assert hb == pytest.approx(expect[2])
    hv = tr.hvp(lambda p: f(p['a'], p['b']), {'a': a, 'b': b},
                {'a': np.array([1.0, 0.0]), 'b': 1.0})
    np.testing.assert_allclose(hv['a'], expect[:2])
    assert hv['b'] == pytest.approx(expect[2])


def test_hvp_with_a_mismatched_tangent_tuple_is_refused():
    with pytest.raises(ValueError, match='tuple of 2 tangents'):
        tr.hvp(lambda a, b: a * b, 1.0, 2.0, 1.0)


def test_augmented_assignment_on_a_number_argument_rebinds():
    # numbers are values: n += 1 on a differentiated int or float argument rebinds it,
    # as Python does, instead of refusing an in-place change of a leaf
    def f(x, n):
        m = n
        m += 1
        x += 2.0
        x *= 1.5
        return x * m
    assert f(1.5, 2) == pytest.approx(15.75)
    val, (gx, gn) = tr.withgradient(f, 1.5, 2)
    assert val == pytest.approx(15.75) and gx == pytest.approx(4.5) and gn == pytest.approx(5.25)
    assert tr.jvp(f, (1.5, 2), (1.0, 0))[1] == pytest.approx(4.5)
    W = np.ones(2)
    with pytest.raises(ValueError, match='leaf'):     # an array argument still refuses
        tr.gradient(lambda w: (w.__iadd__(1.0), np.sum(w))[1], W)


def test_one_array_as_the_tangent_of_two_leaves():
    # tangent trees are read by position: (v, v) mirrors (x, y) though v is one array
    v = np.ones(2)
    y, t = tr.jvp(lambda p: np.sum(p[0] * p[1]), ((np.ones(2), np.zeros(2)),), ((v, v),))
    assert (y, t) == (0.0, 2.0)
    y, t = tr.jvp(lambda d: d['a'] * d['b'], ({'a': 2.0, 'b': 3.0},), ({'a': 1.0, 'b': None},))
    assert (y, t) == (6.0, 3.0)
    with pytest.raises(ValueError, match='mirror'):
        tr.jvp(lambda d: d['a'], ({'a': 2.0},), ({'c': 1.0},))


def test_an_array_in_two_arguments_gets_each_arguments_partial():
    # ties are within one argument (a model); arguments are differentiated one by one,
    # as Zygote's gradient(f, x, x) and JAX's argnums do, at every level
    W = np.array([0.5, -1.0])
    f = lambda a, b: np.sum(np.sin(b['e']) * a)  # noqa: E731
    ga, gb = tr.gradient(f, W, {'e': W})
    np.testing.assert_allclose(ga, np.sin(W))
    np.testing.assert_allclose(gb['e'], np.cos(W) * W)
    outer = tr.gradient(lambda w: np.sum(tr.gradient(f, w, {'e': w})[0]), W)[0]
    np.testing.assert_allclose(outer, np.cos(W))


def test_ignore_derivatives_gives_a_new_array_at_every_level():
    # found by the program fuzzer (seed 1002901): plainly, ignore_derivatives(x) was x
    # itself, so a tree holding both tied them; under an outer differentiation it was
    # another array, and they were not tied: the value changed with the level
    def f(a0):
        v0 = tr.ignore_derivatives(a0[0])
        g = tr.gradient(lambda p, q: np.sum(q['x']) + 0.1 * np.sum(np.sin(q['v'])),
                        (), {'v': a0[0], 'x': v0})[1]['v']
        return np.sum(g)
    args = ((np.array([[0.6, 1.41, 1.36], [1.5, 0.99, -1.29]]),),)
    assert outer_values(f, *args)[0] == pytest.approx(tr.withgradient(f, *args).val, rel=1e-14)
    x = np.ones(3)
    assert tr.ignore_derivatives(x) is not x
    np.testing.assert_array_equal(tr.ignore_derivatives(x), x)
