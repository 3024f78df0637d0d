"""The tape (tracked/tape.py): back, released graphs, unbroadcast, nesting by levels."""
import operator

import numpy as np
import pytest

import tracked as tr
from tracked import registry, tape as tp
from tracked.api import vjp
from tracked.tape import GraphReleasedError



# --------------------------------------------------------------------------
# back
# --------------------------------------------------------------------------

def test_back_function_and_method_give_the_same_gradient():
    x = np.array([0.5, -1.0, 2.0])
    a, b = tr.param(x.copy()), tr.param(x.copy())
    tr.back(np.sum(np.sin(a) * a))
    np.sum(np.sin(b) * b).back()
    expected = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(a.grad, expected)
    np.testing.assert_allclose(b.grad, expected)


def test_gradients_accumulate_across_back_calls():
    x = tr.param(np.array([1.0, 2.0]))
    buf = x.grad
    tr.back(np.sum(x * x))
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
    tr.back(np.sum(x * 3.0))
    np.testing.assert_array_equal(x.grad, [5.0, 7.0])
    assert x.grad is buf                       # accumulated in place (+=)
    s = tr.param(1.0)
    (s * 2.0).back()
    (s * 5.0).back()
    assert s.grad == 7.0


def test_zero_grad_single_value():
    x = tr.param(np.array([1.0, 2.0]))
    buf = x.grad
    tr.back(np.sum(x * x))
    assert tr.zero_grad(x) is x
    assert x.grad is buf
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    tr.back(np.sum(x * 3.0))
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    s = tr.param(np.float32(2.0))
    (s * s).back()
    tr.zero_grad(s)
    assert s.grad == 0 and np.asarray(s.grad).dtype == np.float32
    # values without a gradient buffer are left alone
    y = x * 2.0
    assert tr.zero_grad(y) is y and y.grad is None
    plain = np.ones(2)
    assert tr.zero_grad(plain) is plain
    np.testing.assert_array_equal(plain, [1.0, 1.0])


def test_dy_defaults_to_one_for_scalars():
    x = tr.param(3.0)
    tr.back(x * x)
    assert x.grad == 6.0
    tr.back(x * x, 2.0)
    assert x.grad == 18.0


def test_dy_weights_an_array_output():
    x = tr.param(np.array([1.0, 2.0, 3.0]))
    tr.back(x * x, np.array([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, -6.0])
    x2 = tr.param(np.ones((2, 2)))
    (x2 * 3.0).back([[1.0, 2.0], [3.0, 4.0]])        # nested lists are accepted
    np.testing.assert_array_equal(x2.grad, [[3.0, 6.0], [9.0, 12.0]])


def test_dy_is_required_for_array_outputs():
    x = tr.param(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r'dy.*\(2, 3\)'):
        tr.back(x * 2.0)
    with pytest.raises(ValueError, match='dy'):
        (x * 2.0).back()
    # a one-element array is not a scalar either
    with pytest.raises(ValueError, match='dy'):
        tr.back(tr.param(np.ones(1)) * 2.0)


@pytest.mark.parametrize('dy', [np.ones(3), np.ones((3, 2)), 1.0, np.ones((1, 2, 3))])
def test_dy_with_wrong_shape_raises(dy):
    x = tr.param(np.ones((2, 3)))
    with pytest.raises(ValueError, match='shape'):
        tr.back(x * 2.0, dy)
    assert not x.grad.any()


def test_dy_with_wrong_shape_for_a_scalar_raises():
    x = tr.param(1.0)
    with pytest.raises(ValueError, match='shape'):
        tr.back(x * 2.0, np.ones(2))


@pytest.mark.parametrize('y', [np.ones(3), 1.0, 3, None, [1.0]])
def test_back_on_an_untracked_value_raises(y):
    with pytest.raises(TypeError, match='tracked'):
        tr.back(y)


def test_back_on_a_leaf():
    x = tr.param(np.array([1.0, 2.0]))
    tr.back(x, np.array([3.0, 4.0]))
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


def test_back_twice_through_a_released_graph_raises():
    x = tr.param(np.array([1.0, 2.0]))
    loss = np.sum(np.sin(x) * 2.0)
    tr.back(loss)
    first = x.grad.copy()
    with pytest.raises(GraphReleasedError) as err:
        tr.back(loss)
    msg = str(err.value)
    assert 'retain_graph=True' in msg and 'released' in msg
    np.testing.assert_array_equal(x.grad, first)     # nothing accumulated by the failure
    assert isinstance(err.value, RuntimeError)


def test_shared_intermediate_after_release_raises():
    x = tr.param(np.array([1.0, 2.0]))
    h = np.sin(x) * 2.0
    tr.back(np.sum(h))
    with pytest.raises(GraphReleasedError):
        tr.back(np.sum(h * 3.0))
    # the values stay readable, and the leaves stay usable
    np.testing.assert_allclose(h.data, np.sin([1.0, 2.0]) * 2.0)
    tr.zero_grad(x)
    tr.back(np.sum(x * 3.0))
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_retain_graph_allows_repeating():
    x = tr.param(np.array([1.0, 2.0]))
    loss = np.sum(np.exp(x) * x)
    tr.back(loss, retain_graph=True)
    g1 = x.grad.copy()
    np.testing.assert_allclose(g1, np.exp(x.data) * (x.data + 1))
    loss.back(retain_graph=True)
    np.testing.assert_allclose(x.grad, 2 * g1)
    tr.back(loss)                                     # last use releases
    np.testing.assert_allclose(x.grad, 3 * g1)
    with pytest.raises(GraphReleasedError):
        tr.back(loss)


def test_back_through_a_branching_graph():
    x = tr.param(2.0)
    a = x * 3.0
    b = np.sin(a)
    c = a * b + np.exp(a) - b / x
    tr.back(c)
    xv = 2.0
    av = 3 * xv
    dc = (3 * (np.sin(av) + av * np.cos(av)) + 3 * np.exp(av)
          - (3 * np.cos(av) * xv - np.sin(av)) / xv ** 2)
    assert x.grad == pytest.approx(dc, rel=1e-12)


def test_pieces_of_a_graph_not_leading_to_the_output_are_ignored():
    x = tr.param(np.array([1.0, 2.0]))
    unused = np.exp(x) * 5.0
    y = np.sum(x * 2.0)
    tr.back(y)
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])
    tr.back(np.sum(unused))                           # still usable: it was not released
    np.testing.assert_allclose(x.grad, 2.0 + 5.0 * np.exp(x.data))


def test_output_independent_of_a_param_leaves_its_grad():
    x = tr.param(np.ones(2))
    z = tr.param(np.ones(2))
    tr.back(np.sum(x * 2.0))
    np.testing.assert_array_equal(z.grad, [0.0, 0.0])


def test_tracked_dy_under_nesting():
    # back(y, dy) with dy tracked at an outer level records the backward pass there
    def f(d):
        x = tr.param(np.array([1.0, 2.0]))
        y = x * x
        leaves = tp.backward(y._node, d)
        return np.sum(leaves[x._node] * leaves[x._node])
    y, back = vjp(f, np.array([1.0, 3.0]))
    assert float(y) == 4.0 + 144.0                    # (2 x d)^2 = (2, 12)^2
    np.testing.assert_allclose(back(1.0)[0], [8.0, 96.0])   # 8 x^2 d


# --------------------------------------------------------------------------
# Internals: unbroadcast, reachable, pause_recording
# --------------------------------------------------------------------------

@pytest.mark.parametrize('gshape, shape, expected', [
    ((3, 4), (3, 1), np.full((3, 1), 4.0)),
    ((3, 4), (4,), np.full(4, 3.0)),
    ((3, 4), (), 12.0),
    ((3, 4), (1, 4), np.full((1, 4), 3.0)),
    ((2, 3, 4), (3, 1), np.full((3, 1), 8.0)),
    ((2, 1, 4), (2, 1, 1), np.full((2, 1, 1), 4.0)),
    ((3, 4), (3, 4), np.ones((3, 4))),
])
def test_unbroadcast(gshape, shape, expected):
    g = tp.unbroadcast(np.ones(gshape), shape)
    assert np.shape(g) == shape
    np.testing.assert_array_equal(g, expected)


def test_reachable_is_in_reverse_recording_order():
    x = tr.param(1.0)
    a = x * 2.0
    b = np.sin(a)
    c = a + b
    order = tp.reachable(c._node)
    assert order == [c._node, b._node, a._node, x._node]
    assert [n.seq for n in order] == sorted((n.seq for n in order), reverse=True)
    assert 'leaf' in repr(x._node) and 'level=0' in repr(x._node)


def test_pause_recording():
    x = tr.param(np.array([1.0, 2.0]))
    with tp.pause_recording():
        y = x * 2.0 + np.sin(x)
        assert tp.recording_paused()
    assert not tp.recording_paused()
    assert type(y) is np.ndarray
    np.testing.assert_allclose(y, 2.0 * x.data + np.sin(x.data))
    assert tr.istracked(x * 2.0)
    with pytest.raises(RuntimeError, match='inside'):
        with tp.pause_recording():
            raise RuntimeError('inside')
    assert not tp.recording_paused()
    assert tr.istracked(x * 2.0)
    assert tp.special_threads == 0


# --------------------------------------------------------------------------
# Nesting: trace levels through tracked.api.vjp
# --------------------------------------------------------------------------

def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1
    def f(x):
        return x * vjp(lambda y: x + y, 1.0)[1](1.0)[0]
    y, back = vjp(f, 1.0)
    assert y == 1.0
    assert back(1.0) == (1.0,)
    # the classic variant where the inner function really depends on both
    def g(x):
        return vjp(lambda y: x * y, 2.0)[1](1.0)[0]      # d/dy (x y) = x
    y, back = vjp(g, 3.0)
    assert y == 3.0 and back(1.0)[0] == 1.0


def test_second_derivative_of_a_scalar_function():
    def f(x):
        return np.sin(x) * x

    def df(x):
        return vjp(f, x)[1](1.0)[0]
    x0 = 0.7
    y, back = vjp(df, x0)
    assert y == pytest.approx(np.cos(x0) * x0 + np.sin(x0))
    assert back(1.0)[0] == pytest.approx(2 * np.cos(x0) - x0 * np.sin(x0), rel=1e-12)


def test_second_derivative_elementwise_vector():
    x0 = np.array([0.3, -1.2, 2.0])

    def df(x):
        return vjp(lambda z: np.sum(np.exp(z) * np.sin(z)), x)[1](1.0)[0]
    y, back = vjp(df, x0)
    np.testing.assert_allclose(y, np.exp(x0) * (np.sin(x0) + np.cos(x0)))
    np.testing.assert_allclose(back(np.ones(3))[0], 2 * np.exp(x0) * np.cos(x0))


def test_third_derivative():
    def d(f):
        return lambda x: vjp(f, x)[1](1.0)[0]
    x0 = 0.4
    d3 = d(d(d(np.sin)))
    assert d3(x0) == pytest.approx(-np.cos(x0), rel=1e-12)
    d3exp = d(d(d(lambda x: np.exp(x * 2.0))))
    assert d3exp(x0) == pytest.approx(8 * np.exp(2 * x0), rel=1e-12)


def test_mixed_second_derivative():
    # d/da [d/db (a^2 b^3)] = 6 a b^2
    def inner_grad_b(a, b):
        return vjp(lambda bb: a * a * bb * bb * bb, b)[1](1.0)[0]
    y, back = vjp(inner_grad_b, 2.0, 3.0)
    assert y == pytest.approx(3 * 4 * 9)
    da, db = back(1.0)
    assert da == pytest.approx(6 * 2 * 9)
    assert db == pytest.approx(6 * 4 * 3)


def test_gradient_penalty_with_params_and_back():
    # loss = sum(d/dx sum(tanh(w x))^2) differentiated w.r.t. a param w (level 0)
    w0 = np.array([0.5, -1.5, 2.0])
    x0 = np.array([0.3, 0.2, -0.4])
    w = tr.param(w0.copy())
    gx = vjp(lambda x: np.sum(np.tanh(w * x)), x0)[1](1.0)[0]
    assert tr.istracked(gx)
    t = np.tanh(w0 * x0)
    np.testing.assert_allclose(gx.data, w0 * (1 - t ** 2))
    loss = np.sum(gx * gx)
    tr.back(loss)
    # d/dw [w^2 (1 - t^2)^2] with t = tanh(w x)
    expected = (2 * w0 * (1 - t ** 2) ** 2
                + w0 ** 2 * 2 * (1 - t ** 2) * (-2 * t) * (1 - t ** 2) * x0)
    np.testing.assert_allclose(w.grad, expected, rtol=1e-12)


def test_vjp_back_may_be_called_many_times():
    y, back = vjp(lambda x: np.sum(x * x), np.array([1.0, 2.0]))
    g1 = back(1.0)[0]
    g2 = back(2.0)[0]
    np.testing.assert_array_equal(g1, [2.0, 4.0])
    np.testing.assert_array_equal(g2, [4.0, 8.0])


def test_vjp_of_an_output_independent_of_the_argument():
    y, back = vjp(lambda x: np.ones(2) * 3.0, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(y, [3.0, 3.0])
    assert back(np.ones(2)) == (None,)


def test_vjp_output_is_plain_at_the_outer_level():
    y, _ = vjp(lambda x: x * 2.0, np.array([1.0]))
    assert type(y) is np.ndarray
    w = tr.param(2.0)
    y, back = vjp(lambda x: x * w, 3.0)
    assert tr.istracked(y) and tr.data(y) == 6.0      # still tracked at w's level
    g = back(1.0)[0]
    assert tr.istracked(g) and tr.data(g) == 2.0
    tr.back(g * y)                                  # d/dw (w * 3w) = 6w
    assert w.grad == 12.0


def test_vjp_gradient_has_the_dtype_of_a_float32_argument():
    x32 = np.array([0.5, 1.0, 2.0], dtype=np.float32)
    for f, dy in ((lambda x: np.sum(np.sin(x) * 2.0), 1.0),        # float64 seed
                  (lambda x: np.sum(x * np.ones(3)), 1.0),         # promoting operand
                  (lambda x: x * 2.0, np.ones(3)),
                  (lambda x: x, np.ones(3))):
        g = vjp(f, x32)[1](dy)[0]
        assert g.dtype == np.float32
    g = vjp(lambda x: x * 3.0, np.float32(1.0))[1](1.0)[0]
    assert np.asarray(g).dtype == np.float32 and g == 3.0
    # second order keeps it too
    g2 = vjp(lambda x: vjp(lambda z: np.sum(np.sin(z)), x)[1](1.0)[0], x32)[1](np.ones(3))[0]
    assert g2.dtype == np.float32
    np.testing.assert_allclose(g2, -np.sin(x32), rtol=1e-6)
    # integer arguments get a float gradient
    assert vjp(lambda n: n * 2.5, 3)[1](1.0)[0] == 2.5


def test_second_order_through_broadcasting():
    # unbroadcast is itself recorded when the cotangent is tracked at an outer level
    a0 = np.array([[0.5], [-1.0], [2.0]])                  # (3, 1)
    b0 = np.array([0.1, 0.2, -0.3, 0.4])                    # (4,)

    def grad_a(b):
        return vjp(lambda a: np.sum(np.sin(a * b)), a0)[1](1.0)[0]
    ga, back = vjp(grad_a, b0)
    assert ga.shape == (3, 1)
    np.testing.assert_allclose(ga, np.sum(np.cos(a0 * b0) * b0, axis=1, keepdims=True))
    w = np.array([[1.0], [2.0], [3.0]])
    gb = back(w)[0]
    assert gb.shape == (4,)
    expected = np.sum(w * (np.cos(a0 * b0) - a0 * b0 * np.sin(a0 * b0)), axis=0)
    np.testing.assert_allclose(gb, expected, rtol=1e-12)
    assert tr.gradcheck(lambda a, b: np.sum(np.sin(a * b) * a), a0, b0, order=2)


# --- cotangents of slices: accumulated in place into buffers backward owns -----------

@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_several_slices_and_dense_uses_accumulate_exactly(dtype):
    x0 = np.linspace(-1.0, 1.0, 7).astype(dtype)
    idx = np.array([0, 2, 2, 5])

    def f(x):
        return (np.sum(x[1:] * x[:-1]) + np.sum(x * x) + np.sum(x[idx] * 3.0)
                + np.sum(x[::2]) + np.sum(x[x > 0]))
    x = tr.param(x0)
    tr.back(f(x))
    expected = np.zeros(7)
    expected[:-1] += x0[1:]
    expected[1:] += x0[:-1]
    expected += 2 * x0
    np.add.at(expected, idx, 3.0)
    expected[::2] += 1
    expected[x0 > 0] += 1
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad, expected, rtol=1e-6)


def test_slice_cotangent_is_not_shared_between_parents():
    # add's pullback hands the same array to both operands; in-place accumulation
    # into one of them must not leak into the other
    x0, y0 = np.arange(4.0), np.arange(4.0) * 10
    x, y = tr.param(x0), tr.param(y0)
    s = x + y
    loss = np.sum(s * s) + np.sum(x[1:]) + np.sum(x[:2])
    tr.back(loss)
    np.testing.assert_allclose(y.grad, 2 * (x0 + y0))
    np.testing.assert_allclose(x.grad, 2 * (x0 + y0) + np.array([1, 2, 1, 1]))


# --------------------------------------------------------------------------
# The backward sweep: order, fast-path shapes, private graphs
# --------------------------------------------------------------------------

def _diamond_with_a_late_side_chain(x):
    # branches recorded interleaved, plus a long side chain that rejoins late: an entry
    # visited before all its consumers would miss part of its cotangent
    a = np.sin(x)
    b = a * 3.0
    c = np.exp(a)
    side = x
    for _ in range(50):
        side = side * 1.01 + 0.001
    return np.sum((b * c + side) * a)


def test_back_visits_every_entry_after_all_its_consumers():
    x0 = np.array([0.3, -0.7])
    assert tr.gradcheck(_diamond_with_a_late_side_chain, x0)     # gradient(): private sweep
    x = tr.param(x0)
    tr.back(_diamond_with_a_late_side_chain(x))                   # back(): kept until success
    np.testing.assert_allclose(x.grad, tr.gradient(_diamond_with_a_late_side_chain, x0)[0],
                               rtol=1e-14)


@pytest.mark.parametrize('shape, other', [
    ((), np.ones((2, 3))),            # a scalar param meets an array: not the same shape
    ((3,), np.ones((2, 3))),
    ((2, 1), np.arange(1.0, 4.0)),
    ((3,), 2.0),                      # scalar operands keep the shape (the fast path)
    ((), np.float64(2.0)),
])
@pytest.mark.parametrize('op', [np.multiply, np.add, np.subtract, np.true_divide, np.power,
                                operator.mul, operator.add, operator.sub, operator.truediv,
                                operator.pow])       # operators take the eager fast path
@pytest.mark.parametrize('flip', [False, True])
def test_fast_path_gradients_keep_the_parameter_shape(shape, other, op, flip):
    x0 = np.full(shape, 0.5) + np.arange(np.prod(shape, dtype=int)).reshape(shape) * 0.1

    def f(v):
        return np.sum(np.sin(op(other, v) if flip else op(v, other)))
    assert tr.gradcheck(f, x0)              # also checks the gradient's shape and dtype
    x = tr.param(x0)
    tr.back(f(x))
    assert x.grad.shape == x0.shape
    np.testing.assert_allclose(x.grad, tr.gradient(f, x0)[0], rtol=1e-14)


def test_a_private_sweep_releases_as_it_goes():
    y, back = vjp(lambda v: np.sum(np.sin(v) * 2.0), np.array([0.1, 0.2]))
    g = back(1.0, last=True)[0]
    np.testing.assert_allclose(g, 2.0 * np.cos([0.1, 0.2]))
    with pytest.raises(GraphReleasedError):
        back(1.0)
    # without last=True, back may be called again
    y, back = vjp(lambda v: np.sum(np.sin(v) * 2.0), np.array([0.1, 0.2]))
    np.testing.assert_allclose(back(1.0)[0], back(1.0)[0])


# --- what an entry saves: only what its pullbacks read (registry.Primitive.plan) ---------

def test_entries_save_only_what_their_pullbacks_read():
    x0 = np.linspace(0.1, 1.0, 1000)
    x = tr.param(x0)
    other = tr.param(x0)
    scaled = x * 3.0                    # d/dx needs 3.0 only
    assert scaled._node.args == (None, 3.0) and scaled._node.ans is None
    sine = np.sin(x)                    # needs x, not the output
    assert sine._node.args[0] is x0 and sine._node.ans is None
    expo = np.exp(x)                    # needs the output only
    assert expo._node.args == (None,) and expo._node.ans is tr.data(expo)
    diff = x - other                    # needs nothing
    assert diff._node.args == (None, None)
    total = np.sum(x)                   # needs the shape and dtype of x
    meta = total._node.args[0]
    assert type(meta) is tr.registry.Meta and (meta.shape, meta.dtype) == ((1000,), np.float64)
    assert (meta.ndim, meta.size) == (1, 1000)
    tail = x[1:]                        # needs the shape of x and the index
    assert type(tail._node.args[0]) is tr.registry.Meta and tail._node.args[1] == slice(1, None)
    power = x ** other                  # both pullbacks run: x, y and the output
    assert power._node.args[0] is x0 and power._node.ans is tr.data(power)
    squared = x ** 2                    # only the base's pullback runs: no output
    assert squared._node.ans is None
    # a shape-only read of something that is not an array keeps it as it is
    from tracked.registry import Primitive
    from tracked.dispatch import apply
    prim = Primitive(lambda a, s: a * 1.0, [lambda g, ans, a, s: g * np.ones(np.shape(s)), None])
    y = apply(prim, (x, [1.0, 2.0]), {})
    assert y._node.args == (None, [1.0, 2.0])
    # one pullback reads b's value, the other only its shape: b is kept whole
    both = Primitive(lambda a, b: a * b, [lambda g, ans, a, b: g * b,
                                          lambda g, ans, a, b: g * np.ones(np.shape(b))])
    z = apply(both, (x, other), {})
    assert z._node.args[1] is x0
    # the same operations, checked against finite differences to second order
    assert tr.gradcheck(lambda a, b: np.sum(a * 3.0 + np.sin(a) + np.exp(a) + (a - b)
                                            + a ** b + a ** 2) + np.sum(a),
                        x0[:5], x0[5:10] + 1.0, order=2)


def test_pullback_reads_come_from_bytecode():
    import functools
    from tracked.registry import KEEP, META, _uses
    assert _uses(lambda g, ans, x, y: g * y) == (False, {1: KEEP}, None)
    assert _uses(lambda g, ans, x: g * ans) == (True, {}, None)
    assert _uses(lambda g, ans, x, axis=None: np.broadcast_to(g, x.shape)) == \
        (False, {0: META}, None)
    assert _uses(lambda g, ans, x, axis: np.reshape(g, np.shape(x)) * axis) == \
        (False, {0: META, 1: KEEP}, None)
    assert _uses(lambda g, ans, x: (x.shape, g * x)) == (False, {0: KEEP}, None)
    assert _uses(lambda g, ans, *args: g * 0.0) == (False, {}, None)
    assert _uses(lambda g, ans, x, *args: g * sum(args)) == (False, {}, 1)

    def closure(g, ans, x, y):
        return (lambda: g * x)()        # read inside a nested function: kept
    assert _uses(closure) == (False, {0: KEEP}, None)
    # what is not a plain function, or reads its locals indirectly, reads everything
    assert _uses(functools.partial(lambda g, ans, x: g, 1)) == (True, None, 0)
    assert _uses(lambda g, ans, x: locals()['x'] * g)[0] is True


def test_forward_values_are_freed_as_the_code_drops_them():
    import tracemalloc
    n = 100_000
    x = tr.param(np.ones(n))
    tracemalloc.start()
    try:
        y = x
        for _ in range(20):
            y = y * 1.5 + 0.5           # nothing here is read by a pullback
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept < 3 * 8 * n             # y's value and temporaries; was 40 arrays
    tr.back(np.sum(y))
    np.testing.assert_allclose(x.grad, np.full(n, 1.5 ** 20))


# --- lazy cotangents: smaller than their entry, broadcast where needed -------------------

def test_lazy_unbroadcast_leaves_a_cotangent_that_broadcasts():
    assert np.shape(tp.unbroadcast(np.float64(2.0), (3,))) == ()
    assert np.shape(tp.unbroadcast(np.ones((1, 4)), (3, 4))) == (1, 4)
    g = tp.unbroadcast(np.ones((1, 3, 5)), (3, 3, 1))   # lazy in axis 0, summed in axis 2
    assert np.shape(g) == (1, 3, 1)
    np.testing.assert_array_equal(g, np.full((1, 3, 1), 5.0))


@pytest.mark.parametrize('f', [
    lambda x, y: np.sum(x + y),                       # a 0-d x broadcast against y
    lambda x, y: np.mean(x * 2.0 - y),
    lambda x, y: np.sum(np.reshape(y * 3.0, (3, 2)) @ np.ones(2)) * x,   # not elementwise
    lambda x, y: np.sum(np.sum(y, axis=0) * x) + np.sum(y[1:] - y[:-1]),
    lambda x, y: np.sum(np.tanh(y) - x) + np.mean(np.stack([y, y * x])),
    lambda x, y: np.sum(np.maximum(y, 0.5) * 0.5) + np.sum(np.where(y > 0.5, y, x)),
])
def test_gradients_through_lazy_cotangents(f):
    x0, y0 = np.float64(0.7), np.linspace(0.1, 1.2, 6)
    assert tr.gradcheck(f, x0, y0, order=2)
    gx, gy = tr.gradient(f, x0, y0)
    assert np.shape(gx) == () and gy.shape == (6,) and gy.flags.writeable
    x, y = tr.param(x0), tr.param(y0)
    tr.back(f(x, y))
    np.testing.assert_allclose(y.grad, gy)
    np.testing.assert_allclose(x.grad, gx)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_back_adds_slices_straight_into_the_gradient(dtype):
    x0 = np.linspace(-1.0, 1.5, 9).astype(dtype)

    def rosenbrock(x):
        return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    x = tr.param(x0)
    tr.back(rosenbrock(x))
    a, b = x0[1:] - x0[:-1] ** 2, 1 - x0[:-1]
    expected = np.zeros(9)
    expected[1:] += 200 * a
    expected[:-1] += -400 * a * x0[:-1] - 2 * b
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(tr.gradient(rosenbrock, x0)[0], x.grad, rtol=1e-6)


# --- the eager fast path for two tracked operands (a - b) ------------------------------

@pytest.mark.parametrize('xshape, yshape', [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)),
                                            ((), (3,)), ((3,), ())])
@pytest.mark.parametrize('op', [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.pow])
def test_two_tracked_operands_on_the_fast_path(xshape, yshape, op):
    rng = np.random.default_rng(1)
    x0 = rng.uniform(0.5, 1.5, xshape)
    y0 = rng.uniform(0.5, 1.5, yshape)

    def f(x, y):                        # a sum first: lazy cotangents reach the operator
        return np.sum(op(x, y) * 2.0) + np.sum(np.sin(op(y, x)))
    assert tr.gradcheck(f, x0, y0, order=2)
    x, y = tr.param(x0), tr.param(y0)
    out = op(x, y)
    # equal shapes: no unbroadcast test in back(); different ones keep it
    assert out._node.same_shape == (xshape == yshape)
    tr.back(f(x, y))
    gx, gy = tr.gradient(f, x0, y0)
    assert x.grad.shape == xshape and y.grad.shape == yshape
    np.testing.assert_allclose(x.grad, gx, rtol=1e-14)
    np.testing.assert_allclose(y.grad, gy, rtol=1e-14)


def test_two_tracked_operands_mixed_dtypes_and_one_value_twice():
    x32 = tr.param(np.array([1.0, 2.0], dtype=np.float32))
    y64 = tr.param(np.array([3.0, 4.0]))
    z = x32 * y64
    assert z.dtype == np.float64              # NumPy's promotion, as without tracking
    tr.back(np.sum(z + x32 * x32))            # x32 * x32: both parents are one entry
    assert x32.grad.dtype == np.float32
    np.testing.assert_allclose(x32.grad, [3.0 + 2.0, 4.0 + 4.0])
    np.testing.assert_allclose(y64.grad, [1.0, 2.0])


def test_chain_whose_entry_is_both_operands():
    # back() keeps a chain's cotangent out of its table; x * x must still add both halves
    def f(x):
        y = np.sin(x)
        return np.sum((y * y) * y + y)
    x0 = np.array([0.3, -1.2, 2.0])
    expected = (3 * np.sin(x0) ** 2 + 1) * np.cos(x0)
    x = tr.param(x0)
    tr.back(f(x))
    np.testing.assert_allclose(x.grad, expected, rtol=1e-14)
    np.testing.assert_allclose(tr.gradient(f, x0)[0], expected, rtol=1e-14)
    assert tr.gradcheck(f, x0, order=2)


# --- every builder of entries builds the same entry -------------------------------------

def _same_entry(fast, general):
    """``fast`` (built inline by an eager fast path) equals ``general`` (``new_node``)."""
    assert fast.prim is general.prim
    assert fast.kwargs == general.kwargs
    assert (fast.ans is None) == (general.ans is None)
    assert fast.shape == general.shape and fast.level == general.level
    assert fast.same_shape == general.same_shape
    assert [(p, n) for p, n in fast.parents] == [(p, n) for p, n in general.parents]
    assert len(fast.args) == len(general.args)
    for a, b in zip(fast.args, general.args):
        if isinstance(b, registry.Meta):     # a fast path may keep the value itself
            assert np.shape(a) == b.shape and a.dtype == b.dtype
        else:
            assert a is b or (not isinstance(a, np.ndarray) and a == b)


@pytest.mark.parametrize('build, inputs', [
    (lambda x, y, z: np.sin(x), lambda x, y, z: (tr.data(x),)),                # unary ufunc
    (lambda x, y, z: x * 2.0, lambda x, y, z: (tr.data(x), 2.0)),              # scalar operand
    (lambda x, y, z: 2.0 - x, lambda x, y, z: (2.0, tr.data(x))),
    (lambda x, y, z: x ** 2, lambda x, y, z: (tr.data(x), 2)),
    (lambda x, y, z: x - y, lambda x, y, z: (tr.data(x), tr.data(y))),         # two tracked
    (lambda x, y, z: x * z, lambda x, y, z: (tr.data(x), tr.data(z))),         # broadcasting
    (lambda x, y, z: x[1:], lambda x, y, z: (tr.data(x), slice(1, None))),     # x[a:b]
    (lambda x, y, z: np.sum(x), lambda x, y, z: (tr.data(x),)),               # one-value
    (lambda x, y, z: np.amax(x, axis=0, keepdims=True), lambda x, y, z: (tr.data(x),)),
])
def test_fast_paths_build_the_entry_new_node_builds(build, inputs):
    x, y = tr.param(np.array([0.5, 1.5, 2.5])), tr.param(np.array([1.0, 2.0, 3.0]))
    z = tr.param(np.array([4.0]))
    out = build(x, y, z)
    n = out._node
    general = tp.new_node(n.prim, inputs(x, y, z), dict(n.kwargs), tr.data(out), n.parents,
                          n.level, n.same_shape)
    _same_entry(n, general)


def test_vjp_leaves_are_the_leaves_new_node_builds():
    from tracked import box
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    fast = box.array_leaf(a, 7)._node
    general = tp.new_node(None, None, None, a, (), 7)
    for slot in tp.Node.__slots__:
        if slot not in ('seq', 'protects', '__weakref__'):
            assert getattr(fast, slot) is getattr(general, slot) or \
                getattr(fast, slot) == getattr(general, slot), slot
    assert fast.ans is a and fast.seq < general.seq


def test_an_entry_released_while_protections_are_being_counted_does_not_deadlock():
    # found by the program fuzzer: a garbage collection inside protect's critical
    # section ran a dead entry's weakref callback (_release) on the same thread, which
    # took the (then non-reentrant) lock again and hung the process
    import threading

    from tracked import tape

    class Owner:
        args = ()

    def scenario():
        owner = Owner()
        tape.protect(owner, [np.ones(3)])
        with tape._lock:
            del owner                    # its callback releases, inside the section
    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), 'releasing inside the protection section deadlocked'


def test_a_replaced_sum_buffer_is_never_written_into_again():
    # found by the program fuzzer (seed 1004192): a cotangent buffer this backward pass
    # made was replaced by a new sum, freed, and its id reused by a read-only saved
    # value, into which the pass then added ("output array is read-only"; a writable
    # one would have been changed silently)
    def f(a):
        c = np.prod(np.cos(a))

        def g(p):
            def h(q):
                return np.sqrt(1.0 + q[0] * q[0]) + 0.1 * np.sin(np.sum(q[1]))
            y, t = tr.jvp(h, ([p, c],), ([a, 0.5],))
            return np.sum(y) + np.sum(np.tanh(t)) + 0.1 * np.sin(np.sum(p))
        return np.sum(c * tr.checkpoint(g, a))
    a = np.array([-1.1, -1.18])
    np.testing.assert_allclose(tr.hessian_reverse(f, a), tr.hessian(f, a), rtol=1e-10)


# --------------------------------------------------------------------------
# Cotangent buffers the backward pass owns: computed in place, never shared
# --------------------------------------------------------------------------

def _rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


_OWNERSHIP_CASES = {
    'rosenbrock': _rosenbrock,
    'constant partials': lambda x: np.sum(np.sin(2.0 - (3.0 * -(x ** 2) - 1.0)) / 4.0),
    'identity then scale': lambda x: np.sum((np.exp(x) + 1.0) * 3.0 - x ** 2),
    'a sum that keeps g': lambda x: np.sum(np.cos(x) * 2.0 + np.cos(x) ** 2),
    'x * x': lambda x: np.sum((x * 2.0 + 1.0) * (x * 2.0 + 1.0) ** 2),
    'broadcast': lambda x: np.sum((x.reshape(4, -1) - 1.0) ** 2 * np.arange(4.0)[:, None]),
    'slices': lambda x: np.sum(x[2:-3] ** 2 * 0.5) + np.sum((1.0 - x[:-5]) ** 2)
    + np.sum(x[::3] * 2.0) + np.sum(x[:7] ** 2),
    'float_power': lambda x: np.sum(np.float_power(x - 1.0, 2) * 2.0),
    # tanh's Primitive.consume: in g, and for a - tanh(b)'s -g (negate=True)
    'tanh': lambda x: np.sum(np.tanh(x * 2.0 - 0.5) ** 2 * 3.0),
    'minus tanh': lambda x: np.sum((x * 2.0 - np.tanh(x)) ** 2),
    'tanh then matmul': lambda x: np.sum(
        np.tanh(x.reshape(-1, 4)) @ np.linspace(-1.0, 1.0, 12).reshape(4, 3)),
    # a - b's -g for b left unmade (tape._Negated): folded into x**2's pullback, made
    # for other pullbacks, for a leaf, and when b's cotangent is also summed
    'minus a square used twice': lambda x: np.sum((x * 2.0 - x ** 2) ** 2) + np.sum(
        (lambda s: (x * 3.0 - s) * 2.0 + s * 3.0)(x ** 2)),
    'minus other pullbacks': lambda x: np.sum(
        (x * 2.0 - np.cos(x)) * (x * 3.0 - -x) * (x - (1.0 - x)) * (x - np.deg2rad(x)))
    + np.sum((x * 0.5 - x ** 3) ** 2) + np.sum((x * 0.5 - np.float_power(x, 2)) ** 2),
    'minus a leaf': lambda x: np.sum((np.sin(x) - x) ** 2),
    'minus, then summed': lambda x: (lambda s: np.sum(s * 3.0) + np.sum((x * 2.0 - s) ** 2))(
        x ** 2),
}


@pytest.mark.parametrize('case', list(_OWNERSHIP_CASES))
def test_cotangents_computed_in_place_equal_new_arrays(monkeypatch, case):
    # In-place pullbacks (Primitive.consume, x * p into g, sums into a new cotangent)
    # only run on large arrays: with the threshold at 1 every small array takes them,
    # and the gradients must be bit for bit those of the allocating pullbacks.
    f = _OWNERSHIP_CASES[case]
    x0 = np.linspace(-1.3, 1.7, 40)
    monkeypatch.setattr(tp, '_IN_PLACE', 1 << 60)
    want = tr.withgradient(f, x0)
    x = tr.param(x0)
    tr.back(f(x))
    monkeypatch.setattr(tp, '_IN_PLACE', 1)
    got = tr.withgradient(f, x0)
    assert got.val == want.val
    np.testing.assert_array_equal(got.grad[0], want.grad[0])
    np.testing.assert_allclose(got.grad[0], x.grad, rtol=1e-13, atol=1e-13)
    assert tr.gradcheck(f, x0)
    np.testing.assert_array_equal(x0, np.linspace(-1.3, 1.7, 40))      # inputs untouched


@pytest.mark.parametrize('threshold', [1, None])
def test_a_gradient_returned_is_not_changed_by_a_later_backward_pass(monkeypatch, threshold):
    if threshold is not None:
        monkeypatch.setattr(tp, '_IN_PLACE', threshold)
    n = 4 * tp._IN_PLACE if threshold is None else 40     # large enough for in place
    x0 = np.linspace(-1.0, 1.0, n)
    for f in _OWNERSHIP_CASES.values():
        y, back = tr.pullback(f, x0)
        g1, = back(1.0)
        kept = g1.copy()
        g2, = back(2.0)
        np.testing.assert_array_equal(g1, kept)
        np.testing.assert_allclose(g2, 2 * kept, rtol=1e-13)
        assert not np.shares_memory(g1, g2)
        # a cotangent given by the caller is read, never written into or returned
        dy = np.ones(n)
        yv, back_v = tr.pullback(lambda x: (x - 1.0) * 3.0 + x ** 2, x0)
        gv, = back_v(dy)
        np.testing.assert_array_equal(dy, np.ones(n))
        assert gv is not dy and not np.shares_memory(gv, dy)


@pytest.mark.parametrize('threshold', [1, None])
def test_two_leaves_never_share_a_gradient_array(monkeypatch, threshold):
    # add's pullback hands one array to both operands; each argument must get its own
    if threshold is not None:
        monkeypatch.setattr(tp, '_IN_PLACE', threshold)
    n = 2 * tp._IN_PLACE if threshold is None else 10
    a0, b0, c0 = np.linspace(0.0, 1.0, n), np.linspace(1.0, 2.0, n), np.ones(n)
    for f in (lambda a, b, c: np.sum((a + b - c) ** 2),
              lambda a, b, c: np.sum((a * 2.0 - b) ** 2 + (c - b ** 2) ** 2),
              lambda a, b, c: np.sum(np.sin(a + b + c)),
              lambda a, b, c: np.sum(a + b + c)):
        grads = tr.gradient(f, a0, b0, c0)
        for i in range(3):
            for j in range(i):
                assert not np.shares_memory(grads[i], grads[j])
        kept = [g.copy() for g in grads]
        grads[0][...] = 0.0             # the caller may change one freely
        np.testing.assert_array_equal(grads[1], kept[1])
        np.testing.assert_array_equal(grads[2], kept[2])
    y, back = tr.pullback(lambda a, b: a + b, a0, b0)
    dy = np.ones(n)
    ga, gb = back(dy)
    assert not np.shares_memory(ga, gb) and ga is not dy and gb is not dy


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_slice_cotangents_made_dense_equal_zero_filled_sums(dtype):
    rng = np.random.default_rng(3)
    for shape, idxs in [((20,), [slice(None, -1), slice(None, -1), slice(1, None)]),
                        ((20,), [slice(3, 12), slice(5, 19), slice(3, 12), slice(0, 2)]),
                        ((20,), [slice(4, 9)]),
                        ((6, 3), [slice(1, 5), slice(1, 5), (slice(None), 1)]),
                        ((20,), [slice(2, 18, 2), slice(None, -1)]),
                        ((20,), [slice(5, 5), slice(1, None)])]:
        pieces = [rng.standard_normal(np.zeros(shape)[i].shape).astype(dtype) for i in idxs]
        ct = tp.SparseCotangent(pieces[0], idxs[0], shape, True)
        for g, i in zip(pieces[1:], idxs[1:]):
            ct.pieces.append((g, i, True))
        want = np.zeros(shape, dtype)
        for g, i in zip(pieces, idxs):
            want[i] += g
        for threshold in (1, 1 << 60):
            old, tp._IN_PLACE = tp._IN_PLACE, threshold
            try:
                got = ct.dense()
            finally:
                tp._IN_PLACE = old
            assert got.dtype == dtype and got.shape == shape
            np.testing.assert_array_equal(got, want)


def test_in_place_cotangents_of_zero_d_values_under_nesting(monkeypatch):
    # found by the program fuzzer with the threshold at 1 (seed 23000200: the gradient of
    # <gradient of sum(sin(-a)), u> at a scalar): -g left unmade for a 0-d cotangent
    # became a NumPy scalar when made, which an in-place pullback was given to write into
    from tests.fuzz import campaign
    monkeypatch.setattr(tp, '_IN_PLACE', 1)
    res = campaign.run([23000200, 23000665, 23000805])
    assert not res.findings('gradient of gradient'), campaign.summary(res)
    assert res.passed['gradient of gradient'] == 3
