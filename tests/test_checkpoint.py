"""tr.checkpoint (section 4 of API.md): every derivative -- reverse, forward, nested,
replayed -- equals that of f(*args) without checkpoint and central finite differences,
also for what f closes over; f's intermediates are not kept, but recomputed."""
import gc
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import tracked as tr
from tracked.tape import GraphReleasedError, reachable


def direct(f, *args):
    """What checkpoint(f, *args) must be indistinguishable from."""
    return f(*args)


def _fd_gradient(f, x, eps=1e-6):
    """Central differences of scalar ``f`` at float64 vector ``x``."""
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def _fd_jacobian(g, x, eps=1e-6):
    """Central differences of vector ``g`` at ``x``: J[k, i] = d g_k / d x_i."""
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        cols.append((g(x + e) - g(x - e)) / (2 * eps))
    return np.stack(cols, axis=-1)


def _plain(*values):
    for v in tr.tree_util.leaves(values):
        assert not tr.istracked(v), f'a tracked value leaked out: {v!r}'


def _close(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def check(make, x, v=None, fd=True):
    """Every derivative of ``make(tr.checkpoint)`` at vector ``x`` equals that of
    ``make(direct)`` (to rounding) and central finite differences (float64)."""
    f, ref = make(tr.checkpoint), make(direct)
    v = np.linspace(-1.0, 1.0, x.size) + 0.3 if v is None else v
    ref_grad = lambda z: tr.gradient(ref, z)[0]                   # noqa: E731
    calls, runs = [], []

    def counting(g, *args):
        calls.append(g)
        return tr.checkpoint(lambda *a: runs.append(g) or g(*a), *args)
    val, (g,) = tr.withgradient(make(counting), x)
    assert len(runs) > len(calls)                # not trivially equal: f ran again
    _plain(val, g)
    _close(val, ref(x))
    _close(g, ref_grad(x))
    y, t = tr.jvp(f, (x,), (v,))
    _plain(y, t)
    _close(t, tr.jvp(ref, (x,), (v,))[1])
    hv = tr.hvp(f, x, v)
    _plain(hv)
    _close(hv, tr.hvp(ref, x, v))
    H = tr.hessian(f, x)
    _plain(H)
    _close(H, tr.hessian(ref, x))
    _close(tr.hessian_reverse(f, x), H, rtol=1e-10, atol=1e-10)
    _close(tr.jacobian(f, x, mode='forward')[0][0], g)
    tape = tr.GradientTape(f, x)                          # replayed at another point
    _close(tape.gradient(x * 0.9)[0], ref_grad(x * 0.9))
    if fd:
        _close(g, _fd_gradient(ref, x), rtol=1e-6, atol=1e-7)
        _close(t, (ref(x + 1e-6 * v) - ref(x - 1e-6 * v)) / 2e-6, rtol=1e-6, atol=1e-7)
        _close(hv, (ref_grad(x + 1e-6 * v) - ref_grad(x - 1e-6 * v)) / 2e-6,
               rtol=1e-6, atol=1e-6)
        _close(H, _fd_jacobian(ref_grad, x), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------
# What f closes over (issue 23)
# --------------------------------------------------------------------------

def test_closed_over_number_gets_its_gradient_and_nothing_leaks():
    val, grad = tr.withgradient(lambda x, y: tr.checkpoint(lambda a: a * y, x), 0.7, 1.3)
    _plain(val, grad)
    assert val == pytest.approx(0.91, rel=1e-15)
    assert grad == pytest.approx((1.3, 0.7), rel=1e-15)
    check(lambda c: lambda v: c(lambda a: a * v[1], v[0]), np.array([0.7, 1.3]))


def test_layer_closing_over_its_weight():
    W = np.array([[1.0, -0.5, 0.2], [0.3, 0.2, -0.7]])
    h = np.array([0.4, -1.2, 0.5])

    def make(c):
        def loss(W, h):
            return np.sum(c(lambda z: np.tanh(W @ z), h) ** 2)
        return loss
    gW, gh = tr.gradient(make(tr.checkpoint), W, h)
    rW, rh = tr.gradient(make(direct), W, h)
    assert gW is not None
    _close(gW, rW)
    _close(gh, rh)
    check(lambda c: lambda v: make(c)(v[:6].reshape(2, 3), v[6:]), np.r_[W.ravel(), h])


def test_jvp_through_a_closure():
    y, t = tr.jvp(lambda x, y: tr.checkpoint(lambda a: a * y, x), (0.7, 1.3), (1.0, 1.0))
    _plain(y, t)
    # d/ds (0.7 + s)(1.3 + s) = 1.3 + 0.7
    assert (y, t) == (pytest.approx(0.91, rel=1e-15), pytest.approx(2.0, rel=1e-15))
    assert (y, t) == tr.jvp(lambda x, y: x * y, (0.7, 1.3), (1.0, 1.0))
    assert t == pytest.approx((0.7000001 * 1.3000001 - 0.6999999 * 1.2999999) / 2e-7)


def test_hvp_through_a_closure_over_the_argument_itself():
    hv = tr.hvp(lambda x: tr.checkpoint(lambda a: np.sum(a * x * x), x),
                np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    _plain(hv)
    np.testing.assert_allclose(hv, [6.0, 6.0], rtol=1e-15)
    check(lambda c: lambda x: c(lambda a: np.sum(a * x * x), x), np.array([1.0, -0.5]))


@pytest.mark.parametrize('write', ['set', 'add', 'slice', 'value as argument'])
def test_closed_over_value_written_into_an_array(write):
    def make(c):
        def f(v):
            x, y = v[:3], v[3]

            def g(a, *b):
                z = a * 1.0
                if write == 'set':
                    z[0] = y
                elif write == 'add':
                    z[0] += y
                elif write == 'slice':
                    z[1:] = z[1:] * y
                else:
                    z[2] = b[0] * y
                return np.sum(z ** 3) * y
            return c(g, x, *([v[4]] if write == 'value as argument' else []))
        return f
    check(make, np.array([0.5, -1.0, 2.0, 1.3, 0.6]))


def test_the_same_value_passed_twice():
    g = lambda a, b: a * b * b + np.sin(a)           # noqa: E731
    check(lambda c: lambda v: c(g, v[0], v[0]), np.array([0.7]))        # a number
    check(lambda c: lambda v: np.sum(c(g, v, v)), np.array([0.7, -0.2]))   # an array
    val, (gx,) = tr.withgradient(lambda x: tr.checkpoint(g, x, x), 0.7)
    assert (val, gx) == (pytest.approx(g(0.7, 0.7)), pytest.approx(3 * 0.49 + np.cos(0.7)))


def test_f_writes_into_its_own_argument():
    def make(c):
        def f(v):
            h = v[:3] * 1.0

            def g(a):
                a[0] = a[1] * v[3]                   # changes the caller's h, as f(h) does
                return np.sum(np.sin(a) * a)
            return c(g, h) + np.sum(h * h)
        return f
    check(make, np.array([0.5, -1.0, 2.0, 1.3]))


# --------------------------------------------------------------------------
# Nesting, forward mode, trees, outputs
# --------------------------------------------------------------------------

def test_inside_an_inner_gradient_closing_over_the_outer_variable():
    # checkpoint inside an inner gradient, closing over the outer variable W
    def make(c):
        def outer(v):
            W = v[:4].reshape(2, 2)
            g, = tr.gradient(lambda h: np.sum(c(lambda z: np.tanh(W @ z), h) ** 2), v[4:])
            return np.sum(g ** 2) + np.sum(W * W)
        return outer
    check(make, np.array([1.0, -0.5, 0.3, 0.2, 0.3, -0.2]))


def test_inner_differentiation_inside_the_checkpoint():
    def make(c):
        def f(v):
            x, y = v[:2], v[2]
            inner = lambda a: np.sum(                                # noqa: E731
                tr.gradient(lambda b: np.sum(np.sin(b * a) * y), x)[0] ** 2)
            return c(inner, x)
        return f
    check(make, np.array([0.4, -0.8, 1.1]))


def test_inside_forward_mode_inside_reverse_mode():
    def make(c):
        def f(v):
            x, y = v[:3], v[3]
            _, t = tr.jvp(lambda a: np.sum(c(lambda b: np.sin(b * y) * b, a)), (x,),
                          (np.array([1.0, 0.5, -0.3]),))
            jf, = tr.jacobian(lambda a: c(lambda b: np.cos(b * y), a), x, mode='forward')
            return t * y + np.sum(jf ** 2)
        return f
    check(make, np.array([0.5, -1.0, 2.0, 1.3]))


def test_checkpoints_inside_checkpoints():
    def make(c):
        def f(v):
            x, y = v[:3], v[3]

            def g(a):
                b = c(lambda u: np.sin(u * y), a * 2)
                return np.sum(b * a * y)
            return c(g, x) + c(lambda: np.sum(x) * y)
        return f
    check(make, np.array([0.5, -1.0, 2.0, 1.3]))


def test_rules_and_multi_output_primitives_inside():
    @tr.rule
    def softplus(z):
        return np.logaddexp(0.0, z), lambda dy: (dy / (1 + np.exp(-z)),)
    A = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 3.0]])

    def make(c):
        def f(v):
            x, y = v[:3], v[3]
            e = c(lambda a: np.linalg.eigh(A * y + np.diag(a))[0], x)
            return np.sum(c(lambda a: softplus(a * y) ** 2, x)) + np.sum(e ** 3)
        return f
    check(make, np.array([0.5, -1.0, 2.0, 1.3]))


def test_tree_arguments_and_tuple_output():
    W = np.array([[0.5, -1.0], [2.0, 0.1]])

    def make(c):
        def f(v):
            m = {'W': v[:4].reshape(2, 2), 'b': v[4:6], 'act': np.tanh}
            x = v[6:]

            def layer(m, xs):
                y = m['act'](m['W'] @ xs[0] + m['b']) * xs[1]
                return y, np.sum(y * x)                              # closes over x too
            y, s = c(layer, m, (x, 2.0))
            return np.sum(y ** 2) * s
        return f
    check(make, np.r_[W.ravel(), [0.1, 0.2], [0.3, 0.7]])

    def loss(m, x):
        return np.sum(tr.checkpoint(lambda m, x: m['act'](m['W'] @ x), m, x) ** 2)
    model = {'W': W, 'act': np.tanh}
    g, gx = tr.gradient(loss, model, np.array([0.3, 0.7]))
    ref, rx = tr.gradient(lambda m, x: np.sum(m['act'](m['W'] @ x) ** 2), model,
                          np.array([0.3, 0.7]))
    _close(g['W'], ref['W'])
    _close(gx, rx)
    assert g['act'] is None
    assert tr.checkpoint(lambda m, x: m['act'](m['W'] @ x), model, np.ones(2)).shape == (2,)


def test_random_programs_with_closures_over_random_subsets():
    """Seeded programs of checkpointed steps, each taking a random subset of the
    variables as (possibly tree) arguments and closing over the rest."""
    names = ['x', 'a', 'b', 'h']
    steps_of = [
        lambda c, e: np.sin(e['x'] * e['a']) + e['h'] * e['b'],
        lambda c, e: np.tanh(e['h']) * e['x'] + e['a'] * e['b'],
        lambda c, e: e['h'] * e['h'] * e['a'] - np.exp(e['x'] * 0.3) * e['b'],
        lambda c, e: _written(e),
        lambda c, e: c(lambda u: np.cos(u * e['a']), e['h']) * e['x'] + e['b'],
    ]
    for seed in range(12):
        rng = np.random.default_rng(seed)
        program = []
        for _ in range(rng.integers(1, 4)):
            passed = list(rng.permutation(names)[:rng.integers(0, 5)])
            program.append((rng.integers(len(steps_of)), passed, rng.random() < 0.3))

        def make(c, program=program):
            def f(v):
                env = {'x': v[:3], 'a': v[3], 'b': v[4]}
                env['h'] = env['x'] * 1.0
                for k, passed, as_tree in program:
                    def step(*given, k=k, passed=passed, as_tree=as_tree, env=dict(env)):
                        e = dict(env)                          # closed over: the rest
                        e.update(given[0] if as_tree else zip(passed, given))
                        return steps_of[k](c, e)
                    given = [env[n] for n in passed]
                    env['h'] = c(step, {n: env[n] for n in passed}) if as_tree else \
                        c(step, *given)
                return np.sum(env['h'] ** 2) * env['a']
            return f
        check(make, rng.uniform(-1.0, 1.0, 5), fd=seed < 3)


def _written(e):
    z = e['h'] * 1.0
    z[0] = e['a'] * e['b']
    z[1:] = z[1:] + e['x'][1:] * e['a']
    return z * e['x']


# --------------------------------------------------------------------------
# Memory and recomputation
# --------------------------------------------------------------------------

def test_f_runs_again_once_per_backward_pass():
    calls = []

    def block(x, W):
        calls.append(1)
        return np.tanh(W @ np.sin(x))
    W = np.array([[1.0, -0.5], [0.3, 0.2]])
    x = np.array([0.4, -1.2])
    got = tr.gradient(lambda x, W: np.sum(tr.checkpoint(block, x, W) ** 2), x, W)
    assert len(calls) == 2                       # forward once, recomputed in backward
    ref = tr.gradient(lambda x, W: np.sum(block(x, W) ** 2), x, W)
    for a, b in zip(got, ref):
        _close(a, b)
    calls.clear()
    y, back = tr.pullback(lambda x: tr.checkpoint(block, x, W), x)
    back(np.ones(2))
    back(np.ones(2))
    assert len(calls) == 3


def test_keeps_no_intermediates():
    kept = []

    def block(x):
        h = np.exp(x)                            # an intermediate we watch: its value
        kept.append(weakref.ref(tr.data(h)))
        return np.sum(np.sin(h) * 2)
    x = tr.param(np.array([0.1, 0.2, 0.3]))
    y = tr.checkpoint(block, x)
    gc.collect()
    assert kept[0]() is None                     # the forward's intermediate is gone
    entries = [n for n in reachable(y._node) if n.prim is not None]
    assert entries and all(n.args is None and n.ans is None for n in entries)
    y_plain = block(x)
    assert kept[1]() is not None                 # without checkpoint the tape keeps it
    assert len(reachable(y_plain._node)) > 3
    tr.back(y)
    np.testing.assert_allclose(x.grad, 2 * np.cos(np.exp(x.data)) * np.exp(x.data))


def test_a_deep_network_closing_over_its_weights_holds_a_fraction_of_the_memory():
    n, depth = 20_000, 6
    rng = np.random.default_rng(0)
    W0 = rng.standard_normal(n)

    def held(c):
        W = tr.param(W0.copy())
        gc.collect()
        tracemalloc.start()
        try:
            h = tr.param(np.ones(n))
            for _ in range(depth):
                h = c(lambda a: np.tanh(np.sin(np.exp(a * 0.1) * W) ** 2), h)
            loss = np.sum(h)
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        tr.back(loss)
        return kept, W.grad
    kept, g = held(tr.checkpoint)
    kept_plain, ref = held(direct)
    _close(g, ref)
    # each layer keeps its input (and the last its output) instead of ~5 arrays
    assert kept < (depth + 2) * n * 8 * 1.2
    assert kept < 0.4 * kept_plain


def test_f_that_computes_something_else_again_raises():
    rng = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match='computed something else'):
        tr.gradient(lambda x: tr.checkpoint(lambda a: np.sum(a * rng.random(3)), x),
                    np.ones(3))
    dropout = tr.trainmode(tr.Dropout(0.5, rng=0))   # its output is freed before back
    with pytest.raises(RuntimeError, match='computed something else'):
        tr.gradient(lambda x: np.sum(tr.checkpoint(lambda a: dropout(a) * 2, x)), np.ones(50))
    c = np.array([1.0, 2.0, 3.0])
    x = tr.param(np.ones(3))
    loss = np.sum(tr.checkpoint(lambda a: np.sin(a + c), x))
    c[:] = 0.0                                   # (np.add saves neither operand)
    with pytest.raises(RuntimeError, match='computed something else'):
        tr.back(loss)
    with np.errstate(all='ignore'):               # non-finite outputs are no reason
        f = lambda c: lambda x: np.sum(np.nan_to_num(c(lambda a: a / 0.0 * 0 + a, x)))  # noqa: E731
        np.testing.assert_array_equal(tr.gradient(f(tr.checkpoint), np.ones(2)),
                                      tr.gradient(f(direct), np.ones(2)))


def test_leaves_read_inside_stay_read_only_until_back():
    W = tr.param(np.ones(3))
    x = tr.param(np.array([0.1, 0.2, 0.3]))
    y = tr.checkpoint(lambda a: np.sum(np.sin(a * W)), x)
    for leaf in (W, x):
        with pytest.raises(ValueError, match='read-only'):
            tr.data(leaf)[0] = 3.0
    tr.back(y)
    tr.data(W)[0] = 3.0                          # released with the graph
    with pytest.raises(GraphReleasedError):
        tr.back(y)


def test_retained_graph_and_threads():
    x = tr.param(np.array([0.1, 0.2, 0.3]))
    y = tr.checkpoint(lambda a: np.sum(np.sin(a) ** 2), x)
    tr.back(y, retain_graph=True)
    tr.back(y)
    _close(x.grad, 2 * np.sin(2 * x.data))
    v, back = tr.pullback(lambda x, y: tr.checkpoint(lambda a: np.sin(a * y) * a, x),
                          np.array([0.5, -1.0]), 1.3)
    expected = back(np.ones(2))
    got = [None] * 6

    def work(i):
        got[i] = back(np.ones(2))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        _close(g[0], expected[0])
        _close(g[1], expected[1])
