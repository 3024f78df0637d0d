"""Forward mode and in-place writes through views: refused, never silently wrong.

A dual's primal and tangent are replaced on an in-place write, never written through,
so a write that NumPy would let reach another array (through a view, or into a base
whose live view overlaps the part written) cannot be right.  Forward mode refuses it
with reverse mode's errors, and a write into a view NumPy made read-only with NumPy's.
Each program below writes through a view in one of the forms users write; each runs
under ``tr.jvp``, ``tr.jacobian(mode='forward')`` and ``tr.hessian`` (forward over
reverse), and each allowed neighbour still gives NumPy's value and the right tangent.
"""
import numpy as np
import pytest

import tracked as tr
from tracked.values import LIVE_VIEW_WRITE, VIEW_WRITE


def slice_iadd(x):
    y = x * 1.0
    y[1:] += y[:-1]                       # the first example
    return np.sum(y ** 2)


def reshape_iadd(x):
    y = x * 1.0
    v = y.reshape(2, 3)
    v[0] += v[1]                          # the second example
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


def forward_paths(f):
    return {'jvp': lambda: tr.jvp(f, (X,), (T,)),
            'jacobian': lambda: tr.jacobian(f, X, mode='forward'),
            'hessian': lambda: tr.hessian(f, X)}


@pytest.mark.parametrize('path', ['jvp', 'jacobian', 'hessian'])
@pytest.mark.parametrize('f', WRITES, ids=lambda f: f.__name__)
def test_forward_mode_refuses_writes_through_views(f, path):
    f(X.copy())                           # NumPy runs it: a valid program
    with pytest.raises(ValueError) as err:
        forward_paths(f)[path]()
    assert str(err.value) in (VIEW_WRITE, LIVE_VIEW_WRITE)


@pytest.mark.parametrize('path', ['jvp', 'jacobian', 'hessian'])
@pytest.mark.parametrize('f', READ_ONLY, ids=lambda f: f.__name__)
def test_forward_mode_write_into_read_only_view_raises_numpys_error(f, path):
    with pytest.raises(ValueError, match='read-only') as numpy_err:
        f(X.copy())
    with pytest.raises(ValueError) as err:
        forward_paths(f)[path]()
    if path != 'hessian':                 # (reverse mode, inside, refuses it as a view)
        assert str(err.value) == str(numpy_err.value)


@pytest.mark.parametrize('f', WRITES, ids=lambda f: f.__name__)
def test_reverse_mode_refuses_the_same_writes(f):
    with pytest.raises(ValueError) as err:
        tr.gradient(f, X)
    assert str(err.value) in (VIEW_WRITE, LIVE_VIEW_WRITE)


# Writes that NumPy confines to one array: forward mode still runs them.
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
    c[0] = c[0] + c[1]
    return np.sum(c ** 2) + np.sum(y)


def dropped_view_then_write(x):
    y = x * 1.0
    s = np.sum(y[1:] ** 2)                # the view dies with the expression
    y += 1.0
    return s + np.sum(y ** 3)


ALLOWED = [temporary_view, base_write_beside_view, write_to_copy_of_view,
           dropped_view_then_write]


def central(f, x, t, h=1e-6):
    return (f(x + h * t) - f(x - h * t)) / (2 * h)


@pytest.mark.parametrize('f', ALLOWED, ids=lambda f: f.__name__)
def test_forward_mode_allowed_writes_match_numpy_and_finite_differences(f):
    value, tangent = tr.jvp(f, (X,), (T,))
    np.testing.assert_allclose(value, f(X.copy()), rtol=1e-12)
    np.testing.assert_allclose(tangent, central(f, X, T), rtol=1e-6)
    J = tr.jacobian(f, X, mode='forward')[0]
    np.testing.assert_allclose(J @ T, central(f, X, T), rtol=1e-6)
    H = tr.hessian(f, X)
    g = lambda x: tr.gradient(f, x)[0]  # noqa: E731
    np.testing.assert_allclose(H @ T, central(g, X, T), rtol=1e-5, atol=1e-8)


def test_view_write_is_refused_under_reverse_over_forward():
    def inner_tangent(x):
        return tr.jvp(reshape_iadd, (x,), (T,))[1]
    with pytest.raises(ValueError, match='it is a view'):
        tr.gradient(inner_tangent, X)


def test_view_write_is_refused_under_forward_over_forward():
    def inner_tangent(x):
        return tr.jvp(slice_iadd, (x,), (T,))[1]
    with pytest.raises(ValueError, match='it is a view'):
        tr.jvp(inner_tangent, (X,), (T,))
