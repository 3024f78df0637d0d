"""Custom rules and control of differentiation (section 4 of API.md): @rule,
ignore_derivatives, @non_differentiable, gradcheck (checkpoint: test_checkpoint.py)."""
import math

import numpy as np
import pytest

import tracked as tr
from tracked.tape import reachable


@tr.rule
def softplus(x):
    y = np.logaddexp(0.0, x)
    return y, lambda dy: (dy / (1 + np.exp(-x)),)


CALLS = {'pullback': 0}


@tr.rule
def scaled_product(a, b, scale=1.0):
    """a * b * scale with a pullback that counts its calls."""
    def back(dy):
        CALLS['pullback'] += 1
        return dy * b * scale, dy * a * scale
    return a * b * scale, back


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --------------------------------------------------------------------------
# @rule
# --------------------------------------------------------------------------

def test_rule_value_and_gradient():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(softplus(x), np.logaddexp(0.0, x))
    assert not tr.istracked(softplus(x))
    g, = tr.gradient(lambda x: np.sum(softplus(x)), x)
    np.testing.assert_allclose(g, _sigmoid(x))


def test_rule_records_one_entry_and_is_discoverable():
    x = tr.param(np.array([0.5, 1.5]))
    y = softplus(x)
    nodes = reachable(y._node)
    assert len(nodes) == 2                       # the rule's entry and the leaf
    prim = y._node.prim
    assert prim.name == 'softplus' and prim.fn.function is softplus.__wrapped__
    assert softplus.forward.function is softplus.__wrapped__
    tr.back(np.sum(y))
    np.testing.assert_allclose(x.grad, _sigmoid(np.array([0.5, 1.5])))


def test_rule_pullback_runs_once_per_backward_step():
    CALLS['pullback'] = 0
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ga, gb = tr.gradient(lambda a, b: np.sum(scaled_product(a, b, scale=2.0)), a, b)
    np.testing.assert_array_equal(ga, 2 * b)
    np.testing.assert_array_equal(gb, 2 * a)
    assert CALLS['pullback'] == 1
    _, back = tr.pullback(lambda a, b: scaled_product(a, b), a, b)
    back(np.ones(2))
    back(np.full(2, 2.0))
    assert CALLS['pullback'] == 3


def test_rule_with_constant_argument_and_broadcasting():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    ga, = tr.gradient(lambda a: np.sum(scaled_product(a, 3.0)), a)
    np.testing.assert_array_equal(ga, np.full((2, 2), 3.0))
    gs, = tr.gradient(lambda s: np.sum(scaled_product(a, s)), 2.0)   # cotangent unbroadcast
    assert gs == 10.0


def test_rule_second_order_under_nesting():
    x = np.array([-0.7, 0.1, 1.3])
    assert tr.gradcheck(lambda x: np.sum(softplus(x) ** 2), x, order=2)
    H = tr.hessian(lambda x: np.sum(softplus(x)), x)
    s = _sigmoid(x)
    np.testing.assert_allclose(H, np.diag(s * (1 - s)), rtol=1e-12)
    d3 = tr.gradient(lambda z: tr.gradient(lambda y: tr.gradient(softplus, y)[0], z)[0], 0.3)[0]
    s = _sigmoid(0.3)
    assert d3 == pytest.approx(s * (1 - s) * (1 - 2 * s))


def test_rule_pullback_errors_and_single_cotangent():
    @tr.rule
    def bad(x, y):
        return x * y, lambda dy: (dy,)

    @tr.rule
    def bare(x):
        return 2 * x, lambda dy: 2 * dy          # not a tuple: fine for one argument

    @tr.rule
    def partial(x, y):
        return x + y, lambda dy: (dy, None)       # no gradient for y

    with pytest.raises(ValueError, match='one per positional argument'):
        tr.gradient(lambda x: bad(x, x), 1.0)
    assert tr.gradient(lambda x: bare(x), 3.0) == (2.0,)
    assert tr.gradient(lambda x, y: partial(x, y), 1.0, 2.0) == (1.0, None)


def test_rule_that_returns_no_pullback_is_an_error():
    @tr.rule
    def wrong(x):
        return x, None
    with pytest.raises(TypeError, match='pullback'):
        tr.gradient(lambda x: wrong(x), 1.0)


# --------------------------------------------------------------------------
# ignore_derivatives and non_differentiable
# --------------------------------------------------------------------------

def test_ignore_derivatives_value_form():
    assert tr.gradient(lambda x: x * tr.ignore_derivatives(x), 3.0) == (3.0,)
    x = tr.param(np.array([1.0, 2.0]))
    v = tr.ignore_derivatives(x * 2)
    assert not tr.istracked(v)
    np.testing.assert_array_equal(v, [2.0, 4.0])
    tree = tr.ignore_derivatives({'a': x, 'b': [x * 3, 'text']})
    assert not tr.istracked(tree) and tree['b'][1] == 'text'
    # strips every level: no derivative of any order flows through it (stripping only the
    # inner level would leave d/dx [d/dy y * x] = 1)
    g = tr.gradient(lambda x: tr.gradient(lambda y: y * tr.ignore_derivatives(x), 2.0)[0], 3.0)
    assert g == (None,)
    g = tr.gradient(lambda x: tr.gradient(lambda y: y * x + tr.ignore_derivatives(x * y),
                                          2.0)[0], 3.0)
    assert g == (1.0,)


def test_ignore_derivatives_function_form():
    g, = tr.gradient(lambda x: tr.ignore_derivatives(lambda: np.sum(x ** 2)) + np.sum(x),
                     np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [1.0, 1.0])
    x = tr.param(np.ones(2))
    out = tr.ignore_derivatives(lambda: (x * 2, np.sin(x)))
    assert not tr.istracked(out)


def test_non_differentiable_decorator():
    seen = []

    @tr.non_differentiable
    def pick(x, options):
        seen.append((tr.istracked(x), tr.istracked(options)))
        return int(np.argmax(x)), np.max(x) * options['w'][0]

    def f(x):
        i, m = pick(x, {'w': x * 2})
        assert not tr.istracked(m)
        return x[i] * 3 + m
    g, = tr.gradient(f, np.array([1.0, 5.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 3.0, 0.0])        # m carries no gradient
    assert seen == [(False, False)]
    assert pick(np.array([1.0, 2.0]), {'w': [1.0]}) == (1, 2.0)


# --------------------------------------------------------------------------
# gradcheck
# --------------------------------------------------------------------------

def test_gradcheck_reports_a_wrong_rule():
    @tr.rule
    def wrong_sin(x):
        return np.sin(x), lambda dy: (dy * np.sin(x),)      # should be cos
    with pytest.raises(AssertionError, match='reverse mode gives .* finite differences give'):
        tr.gradcheck(lambda x: np.sum(wrong_sin(x)), np.array([0.3, 0.9]), order=1)


def test_gradcheck_on_trees_and_constants():
    model = {'W': np.array([[0.5, -1.0], [2.0, 0.1]]), 'b': 0.3, 'name': 'layer'}
    assert tr.gradcheck(lambda m, x, n: np.sum(np.tanh(m['W'][:n] @ x + m['b'])),
                        model, np.array([0.2, -0.4]), 1)
    with pytest.raises(AssertionError):
        tr.gradcheck(lambda m, x: np.sum(softplus(m['W']) * tr.ignore_derivatives(x)),
                     {'W': np.ones(2)}, np.array([1.0, 2.0]), order=1)


# --------------------------------------------------------------------------
# Opaque rules: forwards that cannot run on tracked values (math, SciPy, C code)
# --------------------------------------------------------------------------


SEEN = []                                    # whether each opaque forward saw a tracked x


def _derf(x):
    return 2 / np.sqrt(np.pi) * np.exp(-x ** 2)


@tr.rule
def verf(x):
    """math.erf through np.vectorize: raises on tracked values."""
    SEEN.append(tr.istracked(x))
    return np.vectorize(math.erf)(x), lambda dy: (dy * _derf(x),)


@tr.rule
def merf(x):
    """math.erf of a scalar: float(x) reads the value, so the result is untracked."""
    return math.erf(x), lambda dy: dy * _derf(x)


@tr.rule
def tanh_numpy(x):
    return np.tanh(x), lambda dy: (dy * (1 - np.tanh(x) ** 2),)


@tr.rule
def tanh_opaque(x):
    SEEN.append(tr.istracked(x))
    return np.vectorize(math.tanh)(x), lambda dy: (dy * (1 - np.tanh(x) ** 2),)


X3 = np.array([-0.7, 0.1, 1.3])


def test_opaque_rule_first_order_eager_path_is_unchanged():
    SEEN.clear()
    g, = tr.gradient(lambda x: np.sum(verf(x) * x), X3)
    np.testing.assert_allclose(g, _derf(X3) * X3 + np.vectorize(math.erf)(X3), rtol=1e-12)
    assert SEEN == [False]                   # called once, on plain values
    assert tr.gradient(merf, 0.3)[0] == pytest.approx(_derf(0.3), rel=1e-12)
    x = tr.param(X3.copy())
    y = verf(x)
    assert [n.prim.name if n.prim else 'leaf' for n in reachable(y._node)] == ['verf', 'leaf']


def test_opaque_rule_under_nesting_is_exact_at_first_order_of_every_level():
    # the forward runs on plain values at the inner level, and is recorded as the
    # primitive verf[opaque] at the outer level: d/dx of the inner value is exact
    SEEN.clear()
    g, = tr.gradient(lambda x: tr.withgradient(lambda z: np.sum(verf(z) ** 2), x).val, X3)
    np.testing.assert_allclose(g, 2 * np.vectorize(math.erf)(X3) * _derf(X3), rtol=1e-12)
    assert SEEN == [True, False]             # tried on tracked values, then called plain
    assert tr.gradient(lambda x: tr.withgradient(merf, x).val * 2, 0.4)[0] == \
        pytest.approx(2 * _derf(0.4), rel=1e-12)


def _d2erf(x):
    return -2 * x * _derf(x)


def test_opaque_rule_nests_level_by_level():
    # issue 28 item 2: the forward runs on plain values, the pullback (NumPy) is rebuilt
    # over the tracked argument at each level, as autograd applies a primitive
    np.testing.assert_allclose(tr.hessian(lambda x: np.sum(verf(x)), X3), np.diag(_d2erf(X3)),
                               rtol=1e-12)
    np.testing.assert_allclose(tr.hessian_reverse(lambda x: np.sum(verf(x)), X3),
                               np.diag(_d2erf(X3)), rtol=1e-12)
    assert tr.gradcheck(lambda x: np.sum(verf(x) ** 2), X3)            # default order 2
    assert tr.gradcheck(lambda x: np.sum(verf(x) ** 2), X3, order=3)
    assert tr.hessian(merf, 0.3) == pytest.approx(_d2erf(0.3), rel=1e-12)
    np.testing.assert_allclose(tr.hvp(lambda x: np.sum(verf(x)), X3, np.ones(3)), _d2erf(X3),
                               rtol=1e-12)
    # third order, reverse over forward over reverse
    d3 = tr.gradient(lambda x: tr.hvp(lambda z: np.sum(verf(z)), x, np.ones(3))[0], X3)[0]
    d3_exact = (4 * X3[0] ** 2 - 2) * _derf(X3[0])
    np.testing.assert_allclose(d3, [d3_exact, 0, 0], rtol=1e-10, atol=1e-14)


@tr.rule
def erf_saved(x):
    """The derivative computed in the forward and closed over: its dependence on x is
    unknown to the outer levels."""
    d = _derf(x)
    return np.vectorize(math.erf)(x), lambda dy: (dy * d,)


@tr.rule
def erf_opaque_pullback(x):
    return np.vectorize(math.erf)(x), lambda dy: (dy * np.vectorize(_derf)(x),)


def test_opaque_rule_second_derivative_raises_a_clear_error_when_it_cannot_nest():
    msg = 'second derivatives through @tr.rule erf_saved need its pullback written with NumPy'
    with pytest.raises(TypeError, match=msg) as err:
        tr.hessian(lambda x: np.sum(erf_saved(x)), X3)
    assert "variable 'd'" in str(err.value) and 'order=1' in str(err.value)
    with pytest.raises(TypeError, match=msg):
        tr.gradcheck(lambda x: np.sum(erf_saved(x) ** 2), X3)
    assert tr.gradcheck(lambda x: np.sum(erf_saved(x) ** 2), X3, order=1)
    with pytest.raises(TypeError, match='its pullback could not run on tracked values'):
        tr.hvp(lambda x: np.sum(erf_opaque_pullback(x)), X3, np.ones(3))
    # the tape is still usable afterwards
    assert tr.gradient(lambda x: np.sum(verf(x)), X3)[0] == pytest.approx(_derf(X3))


def _penalty(rule):
    """F(w) = ||d/dx sum(w * rule(x))||^2 with x tracked at a level of its own, so that
    rule sees lower-level tracked values; F depends on w only through the cotangent."""
    def F(w):
        inner = lambda x: tr.gradient(lambda z: np.sum(w * rule(z)), x)[0]    # noqa: E731
        y, _ = tr.api.vjp(inner, X3)
        return np.sum(y ** 2)
    return F


def test_opaque_rule_nested_is_differentiable_in_the_cotangent():
    w = np.array([0.3, -1.2, 2.0])
    SEEN.clear()
    g, = tr.gradient(_penalty(tanh_opaque), w)
    assert SEEN[:2] == [True, False]         # it did go opaque
    ref, = tr.gradient(_penalty(tanh_numpy), w)
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    np.testing.assert_allclose(g, 2 * w * (1 - np.tanh(X3) ** 2) ** 2, rtol=1e-12)
    # third order through the cotangent: the adjoint of the traced adjoint
    h = tr.hessian(_penalty(tanh_opaque), w)
    np.testing.assert_allclose(h, np.diag(2 * (1 - np.tanh(X3) ** 2) ** 2), rtol=1e-12)


def test_jvp_through_an_opaque_rule_and_a_pullback_that_reads_dy():
    v = np.array([1.0, -2.0, 0.5])
    y, jv = tr.jvp(verf, X3, v)
    np.testing.assert_allclose(jv, _derf(X3) * v, rtol=1e-12)

    @tr.rule
    def log_reads_dy(x):
        return np.log(x), lambda dy: (np.asarray(dy) / x,)
    x = np.array([1.1, 1.5, 0.7])
    np.testing.assert_allclose(tr.gradient(lambda x: np.sum(log_reads_dy(x)), x)[0], 1 / x)
    with pytest.raises(TypeError, match='pullback of @tr.rule log_reads_dy in its cotangent '
                                        r'.* needs the pullback written with NumPy operations'):
        tr.jvp(log_reads_dy, x, v)


def test_pullback_that_cannot_run_on_tracked_values_goes_opaque():
    @tr.rule
    def log_vectorized_pullback(x):
        return np.log(x), lambda dy: (dy * np.vectorize(lambda t: 1 / t)(x),)
    x = np.array([1.1, 1.5, 0.7])
    g, = tr.gradient(lambda x: tr.withgradient(lambda z: np.sum(log_vectorized_pullback(z)),
                                               x).val, x)
    np.testing.assert_allclose(g, 1 / x, rtol=1e-12)
    with pytest.raises(TypeError, match='second derivatives through @tr.rule '
                                        'log_vectorized_pullback'):
        tr.hessian(lambda x: np.sum(log_vectorized_pullback(x)), x)


def test_rule_marked_opaque_never_sees_tracked_values():
    seen = []

    @tr.rule(opaque=True)
    def cube(x):
        seen.append(tr.istracked(x))
        return x ** 3, lambda dy: (dy * 3 * x ** 2,)
    g, = tr.gradient(lambda x: tr.withgradient(lambda z: np.sum(cube(z)), x).val, X3)
    np.testing.assert_allclose(g, 3 * X3 ** 2, rtol=1e-12)
    assert seen == [False]
    # its pullback is rebuilt over the tracked x: second derivatives, forward never traced
    np.testing.assert_allclose(tr.hessian(lambda x: np.sum(cube(x)), X3), np.diag(6 * X3),
                               rtol=1e-12)
    assert not any(seen)
    assert cube.__name__ == 'cube' and cube(2.0) == 8.0


def test_opaque_rule_with_several_arguments_and_keywords():
    @tr.rule
    def scaled_erf(x, s, scale=1.0):
        y = np.vectorize(math.erf)(x) * s * scale
        return y, lambda dy: (dy * _derf(x) * s * scale,
                              np.sum(dy * np.vectorize(math.erf)(x)) * scale)
    f = lambda x, s: np.sum(scaled_erf(x, s, scale=2.0) * x)     # noqa: E731
    got = tr.gradient(lambda x, s: tr.withgradient(f, x, s).val, X3, 0.7)
    ref = tr.gradient(f, X3, 0.7)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    assert got[1] == pytest.approx(ref[1], rel=1e-12)


def test_a_forward_that_really_fails_still_raises_its_error():
    @tr.rule
    def picky(x):
        raise ValueError('picky refuses every input')
    with pytest.raises(ValueError, match='picky refuses'):
        tr.gradient(lambda x: np.sum(picky(x)), X3)
    with pytest.raises(ValueError, match='picky refuses'):
        tr.hessian(lambda x: np.sum(picky(x)), X3)

