"""In-place mutation of tracked arrays: correct gradients, or a clear error.

``y[idx] = v`` and ``y += v`` on a non-leaf tracked array are recorded functionally
(``operator.setitem`` returns a new array, the box is pointed at it).  Refused: writes
into leaves, writes into views, and writes into memory that a live view shares.
"""
import numpy as np
import pytest

import tracked as tr
from tracked.box import plain


def fresh(x, *others):
    """A writable copy of ``x``: tracked (non-leaf) when any argument is tracked."""
    y = x * 1.0
    for o in others:
        y = y + 0.0 * np.sum(o)
    return y if tr.istracked(y) else np.array(y)


RNG = np.random.default_rng(1)
X = RNG.standard_normal((3, 4))
V4 = RNG.standard_normal(4)
MASK = X > 0.2


def set_row(x, v):
    y = fresh(x, v)
    y[1] = np.sin(v)
    return y * x


def set_elem(x, v):
    y = fresh(x, v)
    y[2, -1] = v[0] * v[1]
    return y


def set_mask(x, v):
    y = fresh(x, v)
    y[MASK] = v[0]
    return y * y


def set_mask_values(x, v):
    y = fresh(x, v)
    y[MASK] = np.tile(v, 3)[:int(MASK.sum())]
    return y


def set_slice(x, v):
    y = fresh(x, v)
    y[1:3] = v * x[0]                    # (4,) broadcast over the (2, 4) slice
    return y


def set_slice_2d(x, v):
    y = fresh(x, v)
    y[:, 1:3] = np.reshape(v[:2], (1, 2))
    return np.sum(y ** 2, axis=0)


def set_fancy(x, v):
    y = fresh(x, v)
    y[[0, 2], [3, 1]] = v[1:3] ** 2
    return y


def set_ellipsis_none(x, v):
    y = fresh(x, v)
    y[..., None, 0] = v[:3, None]
    return y


def iadd(x, v):
    y = fresh(x, v)
    y += v
    return y


def isub(x, v):
    y = fresh(x, v)
    y -= v * x
    return y


def imul(x, v):
    y = fresh(x, v)
    y *= v
    return y


def idiv(x, v):
    y = fresh(x, v)
    y /= (v * v + 1.0)
    return y


def several(x, v):
    y = fresh(x, v)
    y[0] = v
    y *= x
    y[MASK] = 0.5
    y[:, 0] += v[1]                      # a column view: rewritten below as a copy
    return y


def several_ok(x, v):
    y = fresh(x, v)
    y[0] = v
    y *= x
    y[MASK] = 0.5
    y[:, 0] = y[:, 0] + v[1]             # the view is a temporary: allowed
    y[2, 3] += v[2]                      # a scalar read is a copy: allowed
    return y


def recurrence_rows(x, v):
    y = fresh(x, v)
    for i in range(1, 3):
        y[i] = np.tanh(y[i - 1] * v + x[i])
    return y


MUTATORS = [set_row, set_elem, set_slice, set_mask, set_mask_values, set_slice_2d, set_fancy,
            set_ellipsis_none, iadd, isub, imul, idiv, several_ok, recurrence_rows]


@pytest.mark.parametrize('f', MUTATORS, ids=[f.__name__ for f in MUTATORS])
def test_mutation_gradients_match_finite_differences(f):
    assert tr.gradcheck(f, X, V4, order=2)


def test_mutation_forward_matches_numpy():
    for f in MUTATORS:
        want = f(X, V4)
        got = f(tr.param(X), tr.param(V4))
        np.testing.assert_allclose(plain(got), want, err_msg=f.__name__)


def test_slice_augmented_assignment_matches_numpy():
    # y[:, 0] += v makes a view, changes it in place, and writes it back (views.py)
    want = several(X, V4)
    got = several(tr.param(X), tr.param(V4))
    np.testing.assert_allclose(plain(got), want)


def test_recurrence_1d_gradient():
    x = tr.param(np.array([1.0, 0.5, -0.5, 2.0]))
    y = x * 1.0
    for i in range(1, 4):
        y[i] = y[i - 1] * y[i]
    tr.back(y[3])
    a = plain(x)
    np.testing.assert_allclose(x.grad, [a[1] * a[2] * a[3], a[0] * a[2] * a[3],
                                        a[0] * a[1] * a[3], a[0] * a[1] * a[2]])


def test_inplace_through_gradient_api():
    def f(x):
        y = x * 2.0
        y[0] = x[1] ** 2
        y += x
        return np.sum(y * y)
    x = np.array([1.0, 2.0, 3.0])
    g = tr.gradient(f, x)[0]
    y = np.array([4.0, 4.0, 6.0]) + x
    want = np.array([2 * y[0], 2 * y[1] * 3 + 2 * y[0] * 4, 2 * y[2] * 3])
    np.testing.assert_allclose(g, want)


# --------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------

@pytest.mark.parametrize('write', [
    lambda x: x.__setitem__(0, 1.0),
    lambda x: x.__setitem__(slice(None), 1.0),
    lambda x: x.__iadd__(1.0),
    lambda x: x.__imul__(x),
    lambda x: x.__isub__(2.0),
    lambda x: x.__itruediv__(2.0),
])
def test_write_into_leaf_raises(write):
    x = tr.param(np.arange(3.0))
    with pytest.raises(ValueError, match='leaf'):
        write(x)
    np.testing.assert_array_equal(plain(x), [0.0, 1.0, 2.0])   # untouched


def test_write_into_leaf_inside_gradient_raises():
    def f(x):
        x[0] = 0.0
        return np.sum(x)
    with pytest.raises(ValueError, match='leaf'):
        tr.gradient(f, np.ones(3))


VIEWS = [lambda y: y[1:], lambda y: y[None], lambda y: y[...], lambda y: np.reshape(y, (2, 3)),
         lambda y: np.reshape(y, (2, 3)).T, lambda y: np.flip(y), lambda y: np.split(y, 2)[1]]


def _both(program):
    """``program(y)`` on a NumPy array and on a tracked one: the arrays it returns."""
    want = program(np.arange(6.0))
    got = program(tr.param(np.arange(6.0)) * 1.0)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(plain(g), w)


@pytest.mark.parametrize('make_view', VIEWS)
@pytest.mark.parametrize('how', ['setitem', 'iadd'])
def test_write_into_view_changes_the_base_as_numpy(make_view, how):
    def program(y):
        z = make_view(y)
        if how == 'setitem':
            z[0] = 10.0
        else:
            z += 1.0
        return y, z
    _both(program)


@pytest.mark.parametrize('write', [
    lambda y: y.__setitem__(1, 5.0),
    lambda y: y.__setitem__((slice(None), 2), 5.0),
    lambda y: y.__setitem__([0], 5.0),
    lambda y: y.__iadd__(1.0),
])
def test_write_into_base_changes_its_live_views_as_numpy(write):
    def program(y):
        y = np.reshape(y, (2, 3)) * 1.0
        z = y[:, 1:]
        write(y)
        return y, z
    _both(program)


def test_write_into_base_beside_live_view_is_allowed_like_numpy():
    a = np.arange(6.0).reshape(2, 3)
    za = a[:, 0]
    a[:, 1] = 7.0
    y = tr.param(np.arange(6.0).reshape(2, 3)) * 1.0
    z = y[:, 0]
    y[:, 1] = 7.0
    np.testing.assert_array_equal(plain(y), a)
    np.testing.assert_array_equal(plain(z), za)


def test_row_swap_through_views_gives_numpys_surprise():
    # In NumPy y[0], y[1] = y[1], y[0] on a 2-d array copies row 1 into both rows
    def program(y):
        y = np.reshape(y[:4], (2, 2)) * 1.0
        y[0], y[1] = y[1], y[0]
        return (y,)
    _both(program)
    y = tr.param(np.arange(4.0).reshape(2, 2)) * 1.0
    y[[0, 1]] = y[[1, 0]]          # the fancy-index swap is a copy: a real swap
    np.testing.assert_array_equal(plain(y), [[2.0, 3.0], [0.0, 1.0]])


def test_view_of_view_sees_writes_into_the_base():
    def program(y):
        w = y[1:][::2]
        y[3] = 0.0
        w *= 2.0
        return y, w
    _both(program)


def test_write_through_a_view_of_a_leaf_is_refused():
    x = tr.param(np.arange(6.0))
    for view in (x[1:], x.T, np.reshape(x, (2, 3))[0]):
        with pytest.raises(ValueError, match='view of a leaf'):
            view[0] = 1.0
    np.testing.assert_array_equal(plain(x), np.arange(6.0))


# --------------------------------------------------------------------------
# Aliasing works like NumPy
# --------------------------------------------------------------------------

def test_alias_sees_inplace_changes():
    a = np.arange(3.0)
    b = a
    a += 1.0
    y = tr.param(np.arange(3.0)) * 1.0
    z = y
    y += 1.0
    assert z is y
    np.testing.assert_array_equal(plain(z), b)
    held = [y]
    y[0] = 10.0
    assert plain(held[0])[0] == 10.0


def test_values_computed_before_a_write_keep_their_value():
    y = tr.param(np.arange(3.0)) * 1.0
    before = y * 2.0
    s = y[0]               # 1-d scalar read: a copy, as in NumPy
    y[0] = 100.0
    np.testing.assert_array_equal(plain(before), [0.0, 2.0, 4.0])
    assert plain(s) == 0.0


def test_mutation_keeps_dtype_and_shape():
    y = tr.param(np.zeros(3, dtype=np.float32)) * 1.0
    y += tr.param(np.ones(3))           # float64 operand, float32 array: stays float32
    assert y.dtype == np.float32
    with pytest.raises(ValueError):
        y += np.ones((2, 3))             # would change the shape


# --------------------------------------------------------------------------
# Plain arrays receiving tracked values
# --------------------------------------------------------------------------

@pytest.mark.parametrize('op', ['__iadd__', '__isub__', '__imul__', '__itruediv__'])
def test_plain_inplace_with_tracked_raises(op):
    a = np.ones(3)
    with pytest.raises(TypeError, match='out='):
        getattr(a, op)(tr.param(np.ones(3)))
    np.testing.assert_array_equal(a, np.ones(3))


def test_plain_setitem_with_tracked_array_raises():
    a = np.zeros(3)
    with pytest.raises(TypeError, match=r'tr\.data'):
        a[:2] = tr.param(np.ones(2))
