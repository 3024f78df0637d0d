"""In-place writes through views (tracked/views.py, issue 28 item 1): NumPy's values in
every alias and the right derivatives on every path.

Each program below writes through a view in one of the forms users write (stencils,
time steps, PyTorch's in-place-on-view cases); each is checked against NumPy for its
value and against central finite differences for its gradient (reverse), tangent
(forward), Hessian (forward over reverse and reverse over reverse) and forward-mode
Jacobian, and replayed on a recorded tape at a new input; a few are compiled.  Writes
into views NumPy makes read-only raise NumPy's error; views of leaves stay refused.
"""
import numpy as np
import pytest

import tracked as tr


def slice_iadd(x):
    y = x * 1.0
    y[1:] += y[:-1]                       # the issue's first example
    return np.sum(y ** 2)


def reshape_iadd(x):
    y = x * 1.0
    v = y.reshape(2, 3)
    v[0] += v[1]                          # the issue's second example
    return np.sum(y ** 2)


def slice_setitem(x):
    y = x * 1.0
    v = y[2:]
    v[0] = 7.0 * x[0]
    return np.sum(y * y)


def strided_setitem(x):
    y = x * 2.0
    y[::2][1] = x[1]
    return np.sum(y ** 2)


def view_of_view(x):
    y = x * 1.0
    v = y[1:][::2]
    v *= 3.0
    return np.sum(y ** 3)


def ravel_write(x):
    y = np.outer(x[:2], x[:3])
    r = y.ravel()
    r[4] = x[5]
    return np.sum(y ** 2)


def transpose_write(x):
    y = np.reshape(x * 1.0, (2, 3))
    y.T[0] -= x[:2]
    return np.sum(y ** 2)


def swapaxes_write(x):
    y = np.reshape(x * 1.0, (2, 3))
    s = np.swapaxes(y, 0, 1)
    s[1, 1] = x[0] ** 2
    return np.sum(y ** 2)


def expand_dims_write(x):
    y = x * 1.0
    e = np.expand_dims(y, 0)
    e[0, 3] = 1.0
    return np.sum(y ** 2)


def ufunc_at_write(x):
    y = x * 1.0
    v = y[1:4]
    np.add.at(v, [0, 0, 2], x[:3])
    return np.sum(y ** 2)


def real_write(x):
    y = (x * 1.0).astype(complex)
    y.real[0] = 5.0
    return np.sum(np.abs(y) ** 2)


def imag_write(x):
    y = (x * 1.0).astype(complex)
    im = y.imag
    im += x
    return np.sum(np.abs(y) ** 2)


def base_write_live_view(x):
    y = x * 1.0
    v = y[1:]
    y[1] = 9.0                            # NumPy changes v[0] too
    return np.sum(v ** 2)


def base_iadd_live_view(x):
    y = np.reshape(x * 1.0, (2, 3))
    t = y.T
    y += 1.0
    return np.sum(t * x[:2])


def loop_stencil(x):                      # fluidsim's pattern: fields updated through views
    u = x * 1.0
    for _ in range(3):
        inner = u[1:-1]
        inner += 0.1 * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    return np.sum(u ** 2)


WRITES = [slice_iadd, reshape_iadd, slice_setitem, strided_setitem, view_of_view,
          ravel_write, transpose_write, swapaxes_write, expand_dims_write, ufunc_at_write,
          real_write, imag_write, base_write_live_view, base_iadd_live_view, loop_stencil]


def diagonal_write(x):
    y = np.outer(x[:3], x[:3])
    d = np.diagonal(y)
    d[0] = 1.0
    return np.sum(y)


def broadcast_to_write(x):
    b = np.broadcast_to(x * 1.0, (2, 6))
    b[0, 0] = 1.0
    return np.sum(b)


READ_ONLY = [diagonal_write, broadcast_to_write]

X = np.arange(1.0, 7.0)
T = np.linspace(0.5, 1.0, 6)


def central_gradient(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])


# Writes that NumPy confines to one array: unchanged by view tracking.
def temporary_view(x):
    y = x * 1.0
    y[1] = y[0] * 2.0                     # y[0] is gone before the write
    y[2:4] = np.sin(y[:2])
    return np.sum(y ** 2)


def base_write_beside_view(x):
    y = x * 1.0
    v = y[3:]
    y[:3] = x[:3] ** 2                    # does not touch v's memory
    return np.sum(y) + np.sum(v ** 2)


def write_to_copy_of_view(x):
    y = x * 1.0
    c = y.reshape(2, 3).copy()
    c[0] += c[1]
    return np.sum(c ** 2) + np.sum(y)


def reshape_copy_is_not_a_view(x):
    y = np.reshape(x * 1.0, (2, 3)).T     # strided: reshape copies
    r = y.reshape(6)
    r[0] = 100.0                          # y unchanged, as in NumPy
    return np.sum(y ** 2) + np.sum(r)


ALLOWED = [temporary_view, base_write_beside_view, write_to_copy_of_view,
           reshape_copy_is_not_a_view]


@pytest.mark.parametrize('f', WRITES + ALLOWED, ids=lambda f: f.__name__)
def test_view_writes_match_numpy_and_finite_differences_on_every_path(f):
    fd = central_gradient(f, X)
    val, (g,) = tr.withgradient(f, X)
    assert val == pytest.approx(f(X.copy()), rel=1e-12)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    y, t = tr.jvp(f, (X,), (T,))
    assert y == pytest.approx(val, rel=1e-12) and t == pytest.approx(fd @ T, rel=1e-6)
    np.testing.assert_allclose(tr.jacobian(f, X, mode='forward')[0][0], g, rtol=1e-12)
    H_fd = central_gradient(lambda x: tr.gradient(f, x)[0], X)
    H = tr.hessian(f, X)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tr.hessian_reverse(f, X), H, rtol=1e-10, atol=1e-10)
    tape = tr.GradientTape(f, X)
    np.testing.assert_allclose(tape.gradient(X * 1.1)[0], tr.gradient(f, X * 1.1)[0],
                               rtol=1e-12)


@pytest.mark.parametrize('f', [reshape_iadd, view_of_view, base_iadd_live_view, loop_stencil],
                         ids=lambda f: f.__name__)
def test_view_writes_compiled(f):
    ctape = tr.compile(tr.GradientTape(f, X), background=False)
    for x in (X * 0.9, X[::-1].copy()):
        np.testing.assert_allclose(ctape.gradient(x)[0], tr.gradient(f, x)[0], rtol=1e-12)


@pytest.mark.parametrize('path', ['jvp', 'gradient', 'hessian'])
@pytest.mark.parametrize('f', READ_ONLY, ids=lambda f: f.__name__)
def test_write_into_read_only_view_raises_numpys_error(f, path):
    with pytest.raises(ValueError, match='read-only') as numpy_err:
        f(X.copy())
    run = {'jvp': lambda: tr.jvp(f, (X,), (T,)), 'gradient': lambda: tr.gradient(f, X),
           'hessian': lambda: tr.hessian(f, X)}[path]
    with pytest.raises(ValueError) as err:
        run()
    assert str(err.value) == str(numpy_err.value)


def test_issue_examples():
    def g(x):
        y = x * 1.0
        y[1:] += y[:-1]
        return np.sum(y ** 2)
    x = np.arange(3.0)
    np.testing.assert_allclose(tr.gradient(g, x)[0], central_gradient(g, x), rtol=1e-6)

    def h(x):
        y = x * 1.0
        v = y.reshape(2, 3)
        v[0] += v[1]
        return np.sum(y ** 2)
    assert h(np.arange(1., 7.)) == 232.0
    assert tr.jvp(h, (np.arange(1., 7.),), (np.ones(6),)) == (232.0, 114.0)


def test_stale_view_read_after_a_write_to_its_base():
    def f(x):
        y = x * 1.0
        v = y[2:]
        w = y.reshape(2, 3)
        y *= 2.0                         # v and w see it, as in NumPy
        w[1, 0] = x[0]                   # and y and v see this
        return np.sum(v ** 2) + np.sum(w[0])
    np.testing.assert_allclose(tr.gradient(f, X)[0], central_gradient(f, X), rtol=1e-6)
    assert tr.withgradient(f, X).val == pytest.approx(f(X.copy()))


def test_overlapping_views_written_in_turn():
    def f(x):
        y = x * 1.0
        a, b = y[:4], y[2:]
        a += b[:4] * 0.5                 # overlap: y[2:4] is in both
        b *= 2.0
        return np.sum(y * x) + np.sum(a)
    np.testing.assert_allclose(tr.gradient(f, X)[0], central_gradient(f, X), rtol=1e-6)
    assert tr.jvp(f, (X,), (T,))[0] == pytest.approx(f(X.copy()))


def test_write_into_a_view_of_a_parameter_stays_refused():
    with pytest.raises(ValueError, match='view of a leaf'):
        tr.gradient(lambda x: (x[1:].__iadd__(1.0), np.sum(x))[1], X)
    x = tr.param(X.copy())
    for view in (x[1:][::2], np.reshape(x, (2, 3))[0], x.T[1:]):   # views of views too
        with pytest.raises(ValueError, match='view of a leaf'):
            view[0] = 5.0
    np.testing.assert_array_equal(tr.data(x), X)


def test_forward_mode_views_of_an_input_write_functionally():
    # a jvp input is a value of its own (JAX's semantics): writes through its views
    # change what the function sees, never the caller's array
    x = X.copy()

    def f(x):
        v = x[1:]
        v *= 2.0
        return np.sum(x ** 2)
    assert tr.jvp(f, (x,), (T,))[0] == pytest.approx(f(X.copy()))
    np.testing.assert_array_equal(x, X)
