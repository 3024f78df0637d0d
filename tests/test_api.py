"""The convenience API (section 2 of API.md): operators, argument handling, return
conventions, errors and backends."""
import dataclasses
from collections import namedtuple

import numpy as np
import pytest

import tracked as tr
from tracked import reverse

rng = np.random.default_rng(0)


# --------------------------------------------------------------------------
# gradient and withgradient: arguments and return conventions
# --------------------------------------------------------------------------

def test_gradient_shapes_and_dtypes():
    x32 = np.array([1.0, 2.0], dtype=np.float32)
    xi = np.array([1, 2])
    x0 = np.array(3.0)
    g32, gi, g0, gs, gn = tr.gradient(
        lambda a, b, c, d, e: np.sum(a * b) * c * d * e, x32, xi, x0, 2.0, np.float32(1.0))
    assert g32.dtype == np.float32 and g32.shape == (2,)
    assert gi.dtype == np.float64 and gi.shape == (2,)
    assert isinstance(g0, np.ndarray) and g0.shape == () and g0.dtype == np.float64
    assert np.ndim(gs) == 0 and not isinstance(gs, np.ndarray) and gs.dtype == np.float64
    assert isinstance(gn, np.float32)
    np.testing.assert_allclose(g32, [1 * 6.0, 2 * 6.0])
    np.testing.assert_allclose(gi, [6.0, 12.0])
    assert g0 == 10.0 and gs == 15.0 and gn == 30.0


def test_gradients_are_writable_arrays():
    g, = tr.gradient(lambda x: np.sum(x), np.zeros((2, 3)))
    g += 1                         # not a read-only broadcast view
    np.testing.assert_array_equal(g, np.full((2, 3), 2.0))


def test_non_numeric_arguments_give_none():
    def f(x, name, nothing, fn, flag, mask):
        assert name == 'w' and nothing is None and flag is True
        return np.sum(fn(x) * mask)
    grads = tr.gradient(f, np.array([0.0, 1.0]), 'w', None, np.cos, True,
                        np.array([True, False]))
    np.testing.assert_allclose(grads[0], [-np.sin(0.0), 0.0])
    assert grads[1:] == (None, None, None, None, None)


def test_integer_scalar_is_usable_as_size_and_index():
    def f(x, n, i):
        total = 0.0
        for k in range(n):
            total = total + x[k] * k
        return total + x[i] + np.sum(np.zeros(x.shape[0]))
    gx, gn, gi = tr.gradient(f, np.array([1.0, 2.0, 3.0]), 3, 0)
    np.testing.assert_array_equal(gx, [1.0, 1.0, 2.0])
    assert gn is None and gi is None


def test_integer_scalar_used_arithmetically_gets_float_gradient():
    g = tr.gradient(lambda n, x: n * n * x, 3, 2.0)
    assert g == (12.0, 9.0)
    assert type(g[0]) is np.float64


def test_output_independent_of_argument_gives_none():
    gx, gy = tr.gradient(lambda x, y: np.sum(x ** 2), np.ones(2), np.ones(3))
    np.testing.assert_array_equal(gx, [2.0, 2.0])
    assert gy is None
    assert tr.gradient(lambda x: 3.0, 1.0) == (None,)


def test_non_scalar_output_raises_naming_jacobian_and_pullback():
    with pytest.raises(ValueError, match=r'(?s)shape \(3,\).*jacobian.*pullback'):
        tr.gradient(lambda x: x * 2, np.ones(3))
    with pytest.raises(ValueError, match='jacobian'):
        tr.withgradient(lambda x: [np.sum(x)], np.ones(3))
    with pytest.raises(ValueError, match='jacobian'):
        tr.gradient(lambda x: (x, 1.0), np.ones(3))      # first element is not a scalar


def test_complex_arguments_follow_chainrules_convention():
    z = np.array([1 + 2j, 3 - 1j])
    # a real loss of z = x + iy: the gradient is dL/dx + i dL/dy (here 2z)
    g, = tr.gradient(lambda z: np.sum(np.real(z * np.conj(z))), z)
    np.testing.assert_allclose(g, 2 * z)
    # gradient descent z -= lr * g then lowers the loss, as for reals
    assert np.sum(np.abs(z - 0.1 * g) ** 2) < np.sum(np.abs(z) ** 2)
    with pytest.raises(ValueError, match='real scalar'):
        tr.gradient(lambda z: np.sum(z), z)       # a complex output: not a real loss


@pytest.mark.parametrize('who', [tr.jacobian, tr.hessian, tr.diaghessian])
def test_complex_arguments_to_jacobians_name_a_call_that_works(who):
    z = np.array([1 + 2j, 3 - 1j])
    f = lambda z: np.sum(np.abs(z) ** 4)                        # noqa: E731
    with pytest.raises(ValueError, match='real and imaginary parts') as e:
        who(f, z)
    suggested = str(e.value).split('e.g. ')[1]                  # the call the message shows
    got = eval(suggested, {'np': np, 'f': f, 'z': z, who.__name__: who})
    x, y = z.real, z.imag                                       # d2/dx2 (x^2+y^2)^2 etc.
    r2 = x ** 2 + y ** 2
    if who is tr.jacobian:
        np.testing.assert_allclose(got[0], [4 * r2 * x], rtol=1e-12)
        np.testing.assert_allclose(got[1], [4 * r2 * y], rtol=1e-12)
    else:
        diag = np.stack([4 * r2 + 8 * x ** 2, 4 * r2 + 8 * y ** 2])
        H = got[0] if who is tr.diaghessian else np.diag(got).reshape(2, 2)
        np.testing.assert_allclose(H, diag, rtol=1e-12)


def test_a_shaped_output_without_a_dtype_is_refused_by_name():
    class Shaped:                   # has a shape, no dtype (found by mypy: a TypeError)
        shape = ()
    with pytest.raises(ValueError, match='real scalar; f returned a value of dtype None'):
        tr.gradient(lambda x: Shaped(), 1.0)


def test_withgradient_aux_named_tuple_and_dict():
    Out = namedtuple('Out', 'loss pred')
    x = np.array([1.0, 2.0])
    val, (g,) = tr.withgradient(lambda x: Out(np.sum(x ** 2), x * 3), x)
    assert isinstance(val, Out) and val.loss == 5.0
    np.testing.assert_array_equal(val.pred, [3.0, 6.0])
    assert not tr.istracked(val.pred)
    np.testing.assert_array_equal(g, [2.0, 4.0])

    val, (g,) = tr.withgradient(lambda x: {'loss': np.sum(x ** 3), 'n': 2, 'y': x}, x)
    assert val['loss'] == 9.0 and val['n'] == 2 and not tr.istracked(val['y'])
    np.testing.assert_array_equal(g, [3.0, 12.0])


def test_tree_arguments_mirror_structure():
    @dataclasses.dataclass
    class Layer:
        w: np.ndarray
        name: str

    P = namedtuple('P', 'a b')
    args = ({'k': np.array([1.0, 2.0]), 's': 'x'}, [Layer(np.array([3.0]), 'l')],
            P(2.0, (4.0, 5)))

    def f(d, layers, p):
        return np.sum(d['k'] ** 2) + np.sum(layers[0].w) * p.a + p.b[0] * p.b[1]
    gd, gl, gp = tr.gradient(f, *args)
    assert set(gd) == {'k', 's'} and gd['s'] is None
    np.testing.assert_array_equal(gd['k'], [2.0, 4.0])
    assert isinstance(gl, list) and isinstance(gl[0], Layer) and gl[0].name is None
    np.testing.assert_array_equal(gl[0].w, [2.0])
    assert isinstance(gp, P) and gp.a == 3.0 and gp.b == (5.0, 4.0)


def test_tape_usable_after_exception_in_f():
    def bad(x):
        np.sin(x)
        raise RuntimeError('boom')
    with pytest.raises(RuntimeError):
        tr.gradient(bad, 1.0)
    assert tr.gradient(lambda x: x * x, 3.0) == (6.0,)


# --------------------------------------------------------------------------
# pullback
# --------------------------------------------------------------------------

def test_pullback_tuple_output_with_none_seeds():
    x = np.array([1.0, 2.0])
    (a, b), back = tr.pullback(lambda x: (x ** 2, np.sum(x)), x)
    np.testing.assert_array_equal(a, [1.0, 4.0])
    assert b == 3.0
    g1, = back((np.ones(2), None))
    g2, = back((None, 1.0))
    g3, = back((np.ones(2), 2.0))
    np.testing.assert_array_equal(g1, [2.0, 4.0])
    np.testing.assert_array_equal(g2, [1.0, 1.0])
    np.testing.assert_array_equal(g3, [4.0, 6.0])
    assert back((None, None)) == (None,)


def test_pullback_same_output_twice_accumulates():
    _, back = tr.pullback(lambda x: (x * 2, x * 2), 1.0)
    y, back2 = tr.pullback(lambda x: (lambda t: (t, t))(x * 2), 1.0)
    assert back((1.0, 1.0)) == (4.0,)
    assert back2((1.0, 1.0)) == (4.0,)


def test_pullback_dict_output():
    _, back = tr.pullback(lambda x: {'a': x * 2, 'b': x * 3}, 1.0)
    assert back({'a': 1.0, 'b': None}) == (2.0,)
    assert back({'a': 1.0, 'b': 1.0}) == (5.0,)


def test_pullback_default_seed_and_errors():
    _, back = tr.pullback(lambda x: np.sum(x ** 2), np.array([1.0, 3.0]))
    np.testing.assert_array_equal(back()[0], [2.0, 6.0])
    _, back = tr.pullback(lambda x: x ** 2, np.array([1.0, 3.0]))
    with pytest.raises(ValueError, match='needs dy'):
        back()
    with pytest.raises(ValueError, match=r'shape \(3,\).*shape \(2,\)'):
        back(np.ones(3))
    _, back = tr.pullback(lambda x: (x, x), 1.0)
    with pytest.raises(ValueError, match='mirror'):
        back((1.0,))


# --------------------------------------------------------------------------
# jacobian
# --------------------------------------------------------------------------

def test_jacobian_conventions():
    x = np.array([1.0, 2.0, 3.0])
    Jx, Js, Jn, Jz = tr.jacobian(lambda x, s, name, z: x * s, x, 2.0, 'n', np.ones(2))
    np.testing.assert_array_equal(Jx, 2.0 * np.eye(3))
    assert Js.shape == (3,)                       # a scalar argument gives a vector
    np.testing.assert_array_equal(Js, x)
    assert Jn is None
    np.testing.assert_array_equal(Jz, np.zeros((3, 2)))   # numeric but independent
    J, = tr.jacobian(lambda x: np.sum(x ** 2), x)
    assert J.shape == (1, 3)                      # a scalar output gives one row
    np.testing.assert_array_equal(J, [[2.0, 4.0, 6.0]])
    J, = tr.jacobian(lambda s: s ** 3, 2.0)
    assert J.shape == (1,) and J[0] == 12.0


def test_jacobian_of_matrix_function_ravels():
    A = rng.standard_normal((2, 3))
    X = rng.standard_normal((3, 2))
    J, = tr.jacobian(lambda X: A @ X, X)
    expected = np.zeros((4, 6))
    for k in range(4):
        for i in range(6):
            E = np.zeros(6)
            E[i] = 1
            expected[k, i] = (A @ E.reshape(3, 2)).ravel()[k]
    np.testing.assert_allclose(J, expected)


def test_jacobian_runs_f_once_in_the_mode_it_is_given():
    # mode='auto' records f for reverse mode to learn the output's size; when forward
    # mode turns out cheaper (no more inputs than outputs: this square Jacobian) f runs
    # a second time, carrying the tangents
    calls = []

    def f(x):
        calls.append(1)
        return np.sin(x) * np.sum(x)
    x = rng.standard_normal(6)
    expected = np.diag(np.cos(x)) * np.sum(x) + np.sin(x)[:, None]
    for mode, runs in (('forward', 1), ('reverse', 1), ('auto', 2)):
        calls.clear()
        J, = tr.jacobian(f, x, mode=mode)
        assert len(calls) == runs, mode
        np.testing.assert_allclose(J, expected)
    calls.clear()
    J, = tr.jacobian(lambda x: f(x)[:2], x)            # wide: auto keeps its recording
    assert len(calls) == 1
    np.testing.assert_allclose(J, expected[:2])


def test_jacobian_float32_and_tree_argument():
    x = np.array([1.0, 2.0], dtype=np.float32)
    J, = tr.jacobian(lambda x: x * x, x)
    assert J.dtype == np.float32
    Jd, = tr.jacobian(lambda d: d['a'] * d['b'], {'a': np.array([1.0, 2.0]), 'b': 3.0})
    np.testing.assert_array_equal(Jd['a'], 3.0 * np.eye(2))
    np.testing.assert_array_equal(Jd['b'], [1.0, 2.0])


def test_jacobian_rejects_tuple_output():
    with pytest.raises(ValueError, match='pullback'):
        tr.jacobian(lambda x: (x, x), np.ones(2))


# --------------------------------------------------------------------------
# Hessians
# --------------------------------------------------------------------------

def _mlp_like(W):
    return lambda x: np.sum(np.tanh(W @ x)) + 0.5 * np.sum(x ** 2)


def _hand_hessian(W, x):
    t = np.tanh(W @ x)
    return (W.T * (-2 * t * (1 - t * t))) @ W + np.eye(len(x))


def test_hessian_against_hand_written():
    W = rng.standard_normal((6, 6))
    x = rng.standard_normal(6)
    H = tr.hessian(_mlp_like(W), x)
    np.testing.assert_allclose(H, _hand_hessian(W, x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tr.hessian_reverse(_mlp_like(W), x), H, rtol=1e-12, atol=1e-12)


def test_hessian_runs_f_once():
    calls = []

    def f(x):
        calls.append(1)
        return np.sum(np.sin(x) * x[::-1])
    x = rng.standard_normal(5)
    H = tr.hessian(f, x)
    assert len(calls) == 1       # f and its backward pass recorded once, one sweep per row
    np.testing.assert_allclose(H, tr.hessian_reverse(f, x), atol=1e-12)


def test_hessian_matrix_argument_and_symmetry():
    X = rng.standard_normal((2, 3))
    f = lambda X: np.sum(np.exp(X) * X[::-1])   # noqa: E731
    H = tr.hessian(f, X)
    assert H.shape == (6, 6)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    np.testing.assert_allclose(tr.hessian_reverse(f, X), H, atol=1e-12)
    fd = tr.jacobian(lambda X: tr.gradient(f, X)[0], X)[0]
    np.testing.assert_allclose(H, fd)


def test_hessian_scalar_and_linear():
    assert tr.hessian(lambda x: x ** 3, 2.0) == 12.0
    assert tr.hessian_reverse(lambda x: x ** 3, 2.0) == 12.0
    np.testing.assert_array_equal(tr.hessian(lambda x: np.sum(3 * x), np.ones(3)), np.zeros((3, 3)))
    np.testing.assert_array_equal(tr.hessian(lambda x: 1.0, np.ones(2)), np.zeros((2, 2)))


def test_diaghessian_matches_hessian_diagonal():
    W = rng.standard_normal((4, 4))
    x = rng.standard_normal(4)
    y = rng.standard_normal((2, 2))
    f = lambda x, y, name: _mlp_like(W)(x) * np.sum(y ** 3)   # noqa: E731
    dx, dy, dn = tr.diaghessian(f, x, y, 'n')
    assert dx.shape == (4,) and dy.shape == (2, 2) and dn is None
    np.testing.assert_allclose(dx, np.diag(tr.hessian(lambda x: f(x, y, 'n'), x)))
    np.testing.assert_allclose(dy.ravel(), np.diag(tr.hessian(lambda y: f(x, y, 'n'), y)))


# --------------------------------------------------------------------------
# jvp and hvp: no matrices
# --------------------------------------------------------------------------

class _SweepCounter:
    def __init__(self, monkeypatch):
        self.n = 0
        orig = reverse.backward

        def counting(*a, **k):
            self.n += 1
            return orig(*a, **k)
        monkeypatch.setattr(reverse, "backward", counting)


def test_jvp_matches_jacobian_and_needs_no_matrix(monkeypatch):
    A = rng.standard_normal((7, 5))
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    s, w = 1.5, 0.3
    f = lambda x, s: np.tanh(A @ x) * s   # noqa: E731
    Jx, Js = tr.jacobian(f, x, s)
    counter = _SweepCounter(monkeypatch)
    y, Jv = tr.jvp(f, (x, s), (v, w))
    assert counter.n == 0        # forward mode: one pass, no reverse sweep, no tape
    np.testing.assert_allclose(y, f(x, s))
    np.testing.assert_allclose(Jv, Jx @ v + Js * w, rtol=1e-12)
    assert Jv.shape == (7,)


def test_jvp_single_argument_and_none_tangent():
    y, Jv = tr.jvp(np.sin, np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    np.testing.assert_allclose(Jv, np.cos([0.0, 1.0]) * [1.0, 2.0])
    y, Jv = tr.jvp(lambda x, y: x * y, (2.0, 3.0), (1.0, None))
    assert Jv == 3.0
    y, Jv = tr.jvp(lambda x: np.ones(2), (np.ones(3),), (np.ones(3),))
    np.testing.assert_array_equal(Jv, [0.0, 0.0])


def test_hvp_matches_hessian(monkeypatch):
    W = rng.standard_normal((5, 5))
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    H = _hand_hessian(W, x)
    counter = _SweepCounter(monkeypatch)
    Hv = tr.hvp(_mlp_like(W), x, v)
    assert counter.n == 1        # one reverse sweep, carrying the tangent v (forward mode)
    np.testing.assert_allclose(Hv, H @ v, rtol=1e-12)
    np.testing.assert_array_equal(tr.hvp(lambda x: np.sum(x), x, v), np.zeros(5))


# --------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------

def test_backends_agree():
    W = rng.standard_normal((3, 3))
    model = {'W': W, 'b': np.zeros(3), 'act': 'tanh'}
    x = rng.standard_normal(3)

    def loss(m, x):
        return np.sum(np.tanh(m['W'] @ x + m['b']) ** 2)
    ref_val, (ref_m, ref_x) = tr.withgradient(loss, model, x)
    for backend in (tr.AutoTracked(), tr.AutoFiniteDifferences()):
        val, (gm, gx) = tr.withgradient(loss, backend, model, x)
        assert val == pytest.approx(ref_val)
        assert gm['act'] is None
        np.testing.assert_allclose(gm['W'], ref_m['W'], rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gm['b'], ref_m['b'], rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gx, ref_x, rtol=1e-6, atol=1e-8)
        g = tr.gradient(loss, backend, model, x)
        np.testing.assert_allclose(g[1], ref_x, rtol=1e-6, atol=1e-8)


def test_finite_differences_conventions():
    fd = tr.AutoFiniteDifferences()
    gx, gy, gd = tr.gradient(lambda x, y, d: np.sum(x ** x.shape[d] + y), fd,
                             np.array([7, 11]), 0, 0)
    np.testing.assert_allclose(gx, [14.0, 22.0], rtol=1e-7)
    assert gy == pytest.approx(2.0) and gd is None
    g32, = tr.gradient(lambda x: np.sum(x * x), fd, np.ones(2, dtype=np.float32))
    assert g32.dtype == np.float32
    with pytest.raises(ValueError, match='jacobian'):
        tr.gradient(lambda x: x, fd, np.ones(2))
    assert 'AutoFiniteDifferences' in repr(fd)


def test_custom_backend_object_is_detected():
    class AutoConstant(tr.backends.ADType):
        def withgradient(self, f, *args):
            return 'v', tuple('g' for _ in args)
    assert tr.withgradient(lambda x: x, AutoConstant(), 1.0) == ('v', ('g',))
    assert tr.gradient(lambda x: x, AutoConstant(), 1.0) == ('g',)
