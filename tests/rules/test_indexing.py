"""Indexing rules (x[idx], x[idx] = v), the non-differentiable list, and dispatch errors."""
import io
import operator

import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp
from tracked.box import plain as data

from .harness import case, const

S0, S1, S2, S3 = (), (5,), (3, 4), (2, 3, 4)
MASK = np.array([[True, False, True, False],
                 [False, False, False, False],
                 [True, True, False, True]])


def get(shape, idx, name):
    return case(operator.getitem, shape, const(idx), name=f'getitem{shape}[{name}]')


def assigned(x, idx, v):
    # A non-leaf copy (leaves refuse in-place writes), tracked whenever x or v is.
    y = x * 1.0 + 0.0 * np.sum(v)
    if not tr.istracked(y):
        y = np.array(y)      # finite differences run on plain values
    y[idx] = v
    return y


def put(shape, idx, vshape, name, **kw):
    return case(lambda x, v: assigned(x, idx, v), shape, vshape, covers=operator.setitem,
                name=f'setitem{shape}[{name}]={vshape}', **kw)


CASES = [
    # -- basic indexing --------------------------------------------------------------
    get(S1, 2, '2'),
    get(S1, -1, '-1'),
    get(S1, slice(1, None), '1:'),
    get(S1, slice(None, None, -2), '::-2'),
    get(S2, (1, 2), '1,2'),
    get(S2, 1, '1'),
    get(S2, (slice(None), -1), ':,-1'),
    get(S2, (slice(2, 0, -1), slice(None, None, 3)), '2:0:-1,::3'),
    get(S2, None, 'None'),
    get(S2, (Ellipsis, None, 1), '...,None,1'),
    get(S3, (Ellipsis, 0), '...,0'),
    get(S3, (0, Ellipsis, slice(1, 3)), '0,...,1:3'),
    get(S3, (), '()'),
    get(S0, (), '0-d ()'),
    get(S0, None, '0-d None'),
    get(S0, Ellipsis, '0-d ...'),
    get(S1, slice(3, 1), 'empty'),
    # -- advanced indexing -------------------------------------------------------------
    get(S1, [0, 0, 3, 0], 'repeats'),
    get(S1, np.array([[4, 4], [-1, 0]]), '2-d int array'),
    get(S2, ([0, 2, 2], [1, 1, 3]), 'pairs'),
    get(S2, (slice(None), [3, 3, 0]), ':,[3,3,0]'),
    get(S3, (0, slice(None), [1, 1]), 'mixed int/slice/array'),
    get(S3, ([1, 0], slice(None), [0, 0]), 'separated arrays'),
    get(S2, MASK, 'mask'),
    get(S2, np.array([True, False, True]), 'row mask'),
    get(S2, (slice(None), np.array([False, True, True, False])), ':,col mask'),
    get(S2, (np.array([True, False, True]), [1, 1]), 'mask and ints'),
    get(S3, (Ellipsis, [2, 0], None), '...,ints,None'),
    get(S0, np.array(True), '0-d True'),
    get(S1, np.array(3), '0-d int array'),
    # -- assignment --------------------------------------------------------------------------
    put(S1, 2, S0, '2'),
    put(S1, slice(1, 3), (2,), '1:3'),
    put(S1, slice(1, 3), S0, '1:3 scalar'),
    put(S2, 1, (4,), '1'),
    put(S2, 1, (1, 4), '1 extra leading 1'),
    put(S2, (slice(None), 0), (3,), ':,0'),
    put(S2, (slice(None), slice(1, 3)), (3, 1), ':,1:3 broadcast'),
    put(S2, MASK, S0, 'mask scalar'),
    put(S2, MASK, (5,), 'mask values'),
    put(S2, ([0, 2], [3, 1]), (2,), 'int pairs'),
    put(S2, [2, 0], (4,), 'int rows'),
    put(S3, (Ellipsis, 1), (3,), '...,1'),
    put(S0, (), S0, '0-d'),
    put(S2, (), S2, 'all'),
    # -- np.full_like with a tracked fill value (otherwise non-differentiable) --------------
    case(lambda a, s: np.full_like(a + 0.0 * s, s) * a, S2, S0, covers=np.full_like,
         name='full_like(tracked fill)'),
]


# --------------------------------------------------------------------------
# getitem: views and copies, scatter with repeats, dtypes
# --------------------------------------------------------------------------

def test_repeated_indices_accumulate():
    x = tr.param(np.arange(4.0))
    tr.back(np.sum(x[[1, 1, 1, 3]] * np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_array_equal(x.grad, [0.0, 6.0, 0.0, 4.0])


def test_basic_index_gradient_places_cotangent():
    x = tr.param(np.zeros((3, 4)))
    tr.back(np.sum(x[1:, ::2] * np.array([[1.0, 2.0], [3.0, 4.0]])))
    np.testing.assert_array_equal(x.grad, [[0, 0, 0, 0], [1, 0, 2, 0], [3, 0, 4, 0]])


@pytest.mark.parametrize('idx', [(1,), (1, 2), 1, slice(1, 3), (Ellipsis, 0), None, (),
                                 [0, 1], np.array([True, False, True]), (0, [1, 2])])
def test_view_flag_matches_numpy(idx):
    x = np.arange(12.0).reshape(3, 4)
    y = tr.param(x) * 1.0
    z = y[idx]
    numpy_view = np.shares_memory(x[idx], x)
    if numpy_view:              # a view: the write reaches y, as in NumPy (views.py)
        z[...] = 0.0
        w = x.copy()
        w[idx] = 0.0
        np.testing.assert_array_equal(data(y), w)
    elif np.ndim(x[idx]) > 0:
        z[...] = 0.0          # a copy: writing into it is fine
        assert np.all(data(z) == 0.0)


def test_scalar_reads_leave_base_writable():
    # y[i - 1] on a 1-d array is a scalar copy, so the recurrence is allowed
    x = tr.param(np.array([1.0, 0.0, 0.0, 0.0]))
    y = x * 1.0
    for i in range(1, 4):
        y[i] = y[i - 1] * 2.0 + x[i]
    np.testing.assert_array_equal(data(y), [1.0, 2.0, 4.0, 8.0])
    tr.back(y[3])
    np.testing.assert_array_equal(x.grad, [8.0, 4.0, 2.0, 1.0])


def test_getitem_float32_cotangent():
    x = np.arange(5, dtype=np.float32)
    for idx in ([0, 0, 1], slice(1, 3), x > 2, 2):
        y, back = vjp(lambda t: t[idx], x)
        g = back(np.ones(np.shape(y), dtype=np.float32))[0]
        assert g.dtype == np.float32 and g.shape == (5,)


def test_tracked_integer_index():
    x = np.arange(5.0)
    g = tr.api.vjp(lambda t, i: t[i] * 3.0, x, 2)[1](1.0)
    np.testing.assert_array_equal(g[0], [0, 0, 3, 0, 0])


def test_index_out_of_bounds_is_numpy_error():
    with pytest.raises(IndexError):
        tr.param(np.ones(3))[5]


# --------------------------------------------------------------------------
# setitem
# --------------------------------------------------------------------------

def test_setitem_repeated_integer_index_raises():
    y = tr.param(np.zeros(4)) * 1.0
    with pytest.raises(ValueError, match='repeats a position'):
        y[[1, 1]] = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match='repeats a position'):
        y[[1, -3]] = 5.0
    z = tr.param(np.zeros((2, 2))) * 1.0
    with pytest.raises(ValueError, match='repeats a position'):
        z[[0, 0], [1, 1]] = 1.0
    z[[0, 0], [0, 1]] = 1.0     # distinct positions are fine
    np.testing.assert_array_equal(data(z), [[1, 1], [0, 0]])


def test_setitem_list_of_tracked_values_raises():
    a, b = tr.param(1.0), tr.param(2.0)
    y = tr.param(np.zeros(3)) * 1.0
    with pytest.raises(TypeError, match='np.stack'):
        y[:2] = [a, b]


def test_setitem_gradients_both_sides():
    x = tr.param(np.arange(1.0, 5.0))
    v = tr.param(np.array([10.0, 20.0]))
    y = x * 2.0
    y[1:3] = v * v
    np.testing.assert_array_equal(data(y), [2.0, 100.0, 400.0, 8.0])
    tr.back(np.sum(y * np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, 0.0, 8.0])
    np.testing.assert_array_equal(v.grad, [40.0, 120.0])


def test_setitem_keeps_dtype():
    y = tr.param(np.zeros(3, dtype=np.float32)) * 1.0
    y[0] = tr.param(np.float64(2.5))
    assert y.dtype == np.float32


# --------------------------------------------------------------------------
# Non-differentiable functions return plain results
# --------------------------------------------------------------------------

X = np.array([[1.5, -2.0, np.nan], [0.0, 3.0, 1.5]])
Y = np.array([[1.0, -2.0, 0.5], [0.0, 4.0, 1.5]])
V = np.array([-1.0, 0.0, 2.5, 3.0])

NONDIFF_CALLS = {
    'less': lambda x, y: np.less(x, y), 'greater': lambda x, y: np.greater(x, y),
    'equal': lambda x, y: np.equal(x, y), 'not_equal': lambda x, y: np.not_equal(x, y),
    'less_equal': lambda x, y: np.less_equal(x, y),
    'greater_equal': lambda x, y: np.greater_equal(x, y),
    'operator <': lambda x, y: x < y, 'operator >=': lambda x, y: x >= y,
    'operator ==': lambda x, y: x == y, 'operator !=': lambda x, y: x != y,
    'logical_and': lambda x, y: np.logical_and(x, y),
    'logical_or': lambda x, y: np.logical_or(x, y),
    'logical_xor': lambda x, y: np.logical_xor(x, y),
    'logical_not': lambda x, y: np.logical_not(x),
    'argmax': lambda x, y: np.argmax(y), 'argmax axis': lambda x, y: np.argmax(y, axis=1),
    'argmin': lambda x, y: np.argmin(y, 0), 'argsort': lambda x, y: np.argsort(y, axis=-1),
    'argpartition': lambda x, y: np.argpartition(y, 1, axis=1),
    'lexsort': lambda x, y: np.lexsort(y),
    '.argmax': lambda x, y: y.argmax(), '.argsort': lambda x, y: y.argsort(),
    'argwhere': lambda x, y: np.argwhere(y), 'nonzero': lambda x, y: np.nonzero(y),
    '.nonzero': lambda x, y: y.nonzero(), 'flatnonzero': lambda x, y: np.flatnonzero(y),
    'isnan': lambda x, y: np.isnan(x), 'isinf': lambda x, y: np.isinf(x),
    'isfinite': lambda x, y: np.isfinite(x), 'isneginf': lambda x, y: np.isneginf(x),
    'isposinf': lambda x, y: np.isposinf(x),
    'isclose': lambda x, y: np.isclose(x, y), 'allclose': lambda x, y: np.allclose(y, y),
    'array_equal': lambda x, y: np.array_equal(x, y, equal_nan=True),
    'array_equiv': lambda x, y: np.array_equiv(y, y[0]),
    'isreal': lambda x, y: np.isreal(y), 'iscomplex': lambda x, y: np.iscomplex(y),
    'isrealobj': lambda x, y: np.isrealobj(y), 'iscomplexobj': lambda x, y: np.iscomplexobj(y),
    'shape': lambda x, y: np.shape(x), 'ndim': lambda x, y: np.ndim(x),
    'size': lambda x, y: np.size(x), 'size axis': lambda x, y: np.size(x, 1),
    'signbit': lambda x, y: np.signbit(y), 'count_nonzero': lambda x, y: np.count_nonzero(y),
    'count_nonzero axis': lambda x, y: np.count_nonzero(y, axis=0),
    'searchsorted': lambda x, y: np.searchsorted(V, y),
    'searchsorted (sorted tracked)': lambda x, y: np.searchsorted(y[0], V),
    'zeros_like': lambda x, y: np.zeros_like(y), 'ones_like': lambda x, y: np.ones_like(y),
    'empty_like': lambda x, y: np.empty_like(y).shape,
    'full_like': lambda x, y: np.full_like(y, 7.0),
    'any': lambda x, y: np.any(y), 'all': lambda x, y: np.all(y, axis=1),
    '.any': lambda x, y: y.any(), '.all': lambda x, y: y.all(),
    'result_type': lambda x, y: np.result_type(y, np.float32),
    'can_cast': lambda x, y: np.can_cast(y, np.float32),
    'shares_memory': lambda x, y: np.shares_memory(y, V),
    'may_share_memory': lambda x, y: np.may_share_memory(y, V),
}


def _assert_plain_equal(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_plain_equal(g, w)
        return
    assert not tr.istracked(got), f'{got!r} is tracked'
    assert type(got) is type(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('name', list(NONDIFF_CALLS))
def test_nondifferentiable_function_returns_plain(name):
    f = NONDIFF_CALLS[name]
    want = f(X, Y)
    _assert_plain_equal(f(tr.param(X), tr.param(Y)), want)
    _assert_plain_equal(f(X, tr.param(Y)), want)       # one tracked argument is enough


def test_nondifferentiable_under_nesting_returns_plain():
    def f(x):
        assert not tr.istracked(np.argmax(x)) and not tr.istracked(x > 0)
        return np.sum(x[x > 0] ** 2)
    g = vjp(lambda x: vjp(f, x)[1](1.0)[0], np.array([1.0, -1.0, 2.0]))[1](np.ones(3))[0]
    np.testing.assert_array_equal(g, [2.0, 0.0, 2.0])


def test_full_like_with_tracked_fill_value_is_differentiable():
    s = tr.param(3.0)
    y = np.full_like(tr.param(np.zeros((2, 2))), s)
    assert tr.istracked(y)
    np.testing.assert_array_equal(data(y), np.full((2, 2), 3.0))
    tr.back(np.sum(y))
    assert float(s.grad) == 4.0


# --------------------------------------------------------------------------
# Dispatch errors
# --------------------------------------------------------------------------

@pytest.mark.parametrize('call, name', [
    (lambda x: np.save(io.BytesIO(), x), 'np.save'),
    (lambda x: np.logical_and.at(x, [0], 1.0), 'np.logical_and.at'),
])
def test_function_without_rule_raises_type_error_naming_it(call, name):
    with pytest.raises(TypeError) as err:
        call(tr.param(np.array([1.0, 2.0, 3.0])))
    assert name in str(err.value) and 'tr.rule' in str(err.value)


@pytest.mark.parametrize('convert', [np.asarray, np.array, lambda t: np.ascontiguousarray(t),
                                     lambda t: np.zeros(3) + np.asarray(t)])
def test_silent_conversion_to_ndarray_raises(convert):
    with pytest.raises(TypeError, match=r'tr\.data'):
        convert(tr.param(np.ones(3)))
