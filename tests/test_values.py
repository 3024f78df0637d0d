"""Tracked values (values.py, boxes.py, dispatch.py): param, the tracked types, NumPy dispatch."""
import io
import operator

import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp
from tracked.boxes import TrackedArray, TrackedReal


# --------------------------------------------------------------------------
# param
# --------------------------------------------------------------------------

@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_param_keeps_float_dtype(dtype):
    x = np.arange(6, dtype=dtype).reshape(2, 3)
    W = tr.param(x)
    assert isinstance(W, TrackedArray)
    assert W.dtype == dtype
    assert W.grad.dtype == dtype
    assert W.grad.shape == (2, 3)
    assert not W.grad.any()


@pytest.mark.parametrize('x', [np.array([1, 2, 3]), np.array([1, 2, 3], dtype=np.int32),
                               np.array([1, 2, 3], dtype=np.uint8), np.array([True, False])])
def test_param_int_and_bool_become_float64(x):
    W = tr.param(x)
    assert W.dtype == np.float64
    assert W.grad.dtype == np.float64
    np.testing.assert_array_equal(W.data, np.asarray(x, dtype=np.float64))


@pytest.mark.parametrize('x, dtype', [(2.5, np.float64), (np.float64(2.5), np.float64),
                                      (np.float32(2.5), np.float32), (3, np.float64),
                                      (np.array(2.5), np.float64)])
def test_param_of_a_scalar_is_a_tracked_real(x, dtype):
    r = tr.param(x)
    assert isinstance(r, TrackedReal)
    assert r.shape == () and r.ndim == 0 and r.size == 1
    assert r.dtype == dtype
    assert r.grad == 0 and np.asarray(r.grad).dtype == dtype
    assert tr.data(r) == float(x)


@pytest.mark.parametrize('x', [1 + 2j, np.array([1.0 + 0j, 2.0]), np.complex64(1)])
def test_param_keeps_complex(x):
    p = tr.param(x)
    assert p.dtype == np.asarray(x).dtype and p.grad.dtype == p.dtype
    tr.back(np.sum(np.abs(p) ** 2))            # d|z|^2/dx + i d|z|^2/dy = 2z
    np.testing.assert_allclose(p.grad, 2 * np.asarray(x), rtol=1e-6)


def test_param_rejects_non_numeric():
    with pytest.raises(TypeError, match='number'):
        tr.param(np.array(['a', 'b']))


def test_param_rejects_an_already_tracked_value():
    with pytest.raises(TypeError, match='already tracked'):
        tr.param(tr.param(1.0))


def test_data_is_the_ndarray_and_grad_its_zeros():
    x = np.random.default_rng(0).standard_normal((3, 4))
    W = tr.param(x)
    assert type(W.data) is np.ndarray
    assert W.data is x                      # param wraps the array, it does not copy it
    assert type(W.grad) is np.ndarray
    np.testing.assert_array_equal(W.grad, np.zeros((3, 4)))


def test_grad_of_a_non_leaf_is_none_and_cannot_be_set():
    x = tr.param(np.ones(3))
    y = x * 2.0
    assert y.grad is None
    with pytest.raises(AttributeError, match='param'):
        y.grad = np.ones(3)


def test_grad_setter_writes_into_the_buffer():
    x = tr.param(np.ones(3))
    buf = x.grad
    x.grad = np.array([1.0, 2.0, 3.0])
    assert x.grad is buf
    np.testing.assert_array_equal(buf, [1.0, 2.0, 3.0])


def test_istracked():
    assert tr.istracked(tr.param(1.0))
    assert tr.istracked(tr.param(np.ones(2)) * 2.0)
    assert not tr.istracked(1.0)
    assert not tr.istracked(np.ones(2))


# --------------------------------------------------------------------------
# Array attributes and protocols
# --------------------------------------------------------------------------

def test_repr_says_tracked():
    assert '(tracked)' in repr(tr.param(np.ones(2)))
    assert '(tracked)' in repr(tr.param(1.5))
    assert '(tracked)' in repr(tr.param(np.ones(2)) * 2.0)
    assert '1.5' in repr(tr.param(1.5))


def test_shape_dtype_ndim_size_len():
    W = tr.param(np.zeros((2, 3, 4), dtype=np.float32))
    assert W.shape == (2, 3, 4)
    assert W.dtype == np.float32
    assert W.ndim == 3
    assert W.size == 24
    assert len(W) == 2
    with pytest.raises(TypeError):
        len(tr.param(1.0))


def test_transpose_property_and_its_gradient():
    x = np.arange(6.0).reshape(2, 3)
    W = tr.param(x)
    T = W.T
    assert isinstance(T, TrackedArray)
    np.testing.assert_array_equal(T.data, x.T)
    w = np.arange(6.0).reshape(3, 2)
    tr.back(np.sum(T * w))
    np.testing.assert_array_equal(W.grad, w.T)


def test_iteration_yields_tracked_rows_with_gradient():
    x = np.arange(6.0).reshape(3, 2)
    W = tr.param(x)
    rows = list(W)
    assert len(rows) == 3
    assert all(isinstance(r, TrackedArray) and r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(rows[1].data, x[1])
    total = rows[0] * 1.0 + rows[1] * 2.0 + rows[2] * 3.0
    tr.back(np.sum(total))
    np.testing.assert_array_equal(W.grad, [[1, 1], [2, 2], [3, 3]])


def test_iterating_a_vector_yields_tracked_reals():
    v = tr.param(np.array([1.0, 2.0, 3.0]))
    items = list(v)
    assert all(isinstance(r, TrackedReal) for r in items)
    s = items[0] * items[1] + items[2]
    assert tr.data(s) == 5.0
    tr.back(s)
    np.testing.assert_array_equal(v.grad, [2.0, 1.0, 1.0])


@pytest.mark.parametrize('idx', [1, -1, (0, 2), (slice(None), 1), slice(1, None),
                                 (Ellipsis, 0), ([0, 0, 1], [1, 1, 2]),
                                 (np.array([True, False]),), (None, 0)])
def test_indexing_value_and_gradient(idx):
    x = np.arange(6.0).reshape(2, 3)
    W = tr.param(x)
    y = W[idx]
    np.testing.assert_array_equal(y.data, x[idx])
    w = np.arange(1.0, 1.0 + np.size(x[idx])).reshape(np.shape(x[idx]))
    tr.back(np.sum(y * w))
    expected = np.zeros_like(x)
    np.add.at(expected, idx, w)             # repeated indices accumulate
    np.testing.assert_array_equal(W.grad, expected)


def test_tracked_index_must_be_integer():
    with pytest.raises(TypeError, match='integer'):
        operator.index(tr.param(2.0))
    with pytest.raises(TypeError, match='integer'):
        [1, 2, 3][tr.param(1.0)]
    # an integer argument of vjp stays an integer and works as an index and a size
    y, back = vjp(lambda n, z: z * [1.0, 2.0, 3.0][n] + float(len(range(n))), 2, 1.5)
    assert y == 6.5
    assert back(1.0) == (None, 3.0)


# --------------------------------------------------------------------------
# TrackedReal conversions
# --------------------------------------------------------------------------

def test_tracked_real_conversions():
    r = tr.param(2.0)
    loss = r * r + 0.25                      # 4.25
    assert isinstance(loss, TrackedReal)
    for read in (float, lambda t: t.item(), lambda t: t.tolist()):
        with pytest.raises(TypeError, match=r'drop its gradient.*tr\.data\(t\)'):
            read(loss)                        # a Python number keeps no gradient
    assert tr.data(loss) == 4.25
    with pytest.raises(TypeError, match='drop its gradient'):
        int(r * 1.5)                          # int() of a float value would drop it too
    assert int(tr.data(loss)) == 4
    assert bool(loss) is True
    assert bool(r - 2.0) is False
    assert f'{loss:.3f}' == '4.250'
    assert f'{loss:8.2e}' == '4.25e+00'
    assert format(loss, 'g') == '4.25'
    assert '(tracked)' in f'{loss}'
    # conversions do not disturb the tape
    tr.back(loss)
    assert r.grad == 4.0


def test_index_only_for_integer_tracked_scalars():
    with pytest.raises(TypeError, match='integer'):
        operator.index(tr.param(3.0))

    def f(n, z):
        assert tr.istracked(n) and n.dtype.kind == 'i'
        assert operator.index(n) == 3
        return z * np.ones(5)[:n].sum()      # n as a slice bound
    y, back = vjp(f, 3, 2.0)
    assert y == 6.0
    assert back(1.0) == (None, 3.0)


# --------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------

def test_float32_stays_float32_through_python_floats():
    x = tr.param(np.array([0.5, 1.0, 2.0], dtype=np.float32))
    steps = [x * 2.0, 2.0 * x, x + 1.5, 1.5 - x, x / 4.0, 3.0 / x, -x, np.sin(x),
             np.exp(x * 0.5), np.log(x + 1.0), np.tanh(x)]
    for y in steps:
        assert y.dtype == np.float32, y
    loss = np.sum(x * 2.0 + np.sin(x) / 4.0 - 3.0 / x)
    assert isinstance(loss, TrackedReal) and loss.dtype == np.float32
    tr.back(loss)
    assert x.grad.dtype == np.float32
    xv = x.data.astype(np.float64)
    np.testing.assert_allclose(x.grad, 2.0 + np.cos(xv) / 4.0 + 3.0 / xv ** 2, rtol=1e-6)


def test_float32_scalar_param():
    r = tr.param(np.float32(1.5))
    y = r * 2.0 + np.sin(r)
    assert y.dtype == np.float32
    tr.back(y)
    assert np.asarray(r.grad).dtype == np.float32
    assert np.isclose(r.grad, 2.0 + np.cos(1.5), rtol=1e-6)


def test_float32_gradient_is_cast_when_the_tape_promotes():
    x = tr.param(np.ones(3, dtype=np.float32))
    loss = np.sum(x * np.array([1.0, 2.0, 3.0]))     # float64 operand promotes
    assert loss.dtype == np.float64
    tr.back(loss)
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------
# Mixed arguments and broadcasting
# --------------------------------------------------------------------------

def test_mixed_tracked_untracked_and_python_numbers():
    a = tr.param(np.array([1.0, 2.0]))
    b = tr.param(np.array([3.0, 5.0]))
    c = np.array([10.0, 20.0])
    y = np.sum(a * b + c * a - 2.0 * b / a + 1.0 + np.float64(2.0) * c)
    av, bv = a.data, b.data
    assert np.isclose(tr.data(y), np.sum(av * bv + c * av - 2 * bv / av + 1 + 2 * c))
    tr.back(y)
    np.testing.assert_allclose(a.grad, bv + c + 2 * bv / av ** 2)
    np.testing.assert_allclose(b.grad, av - 2 / av)


def test_untracked_ndarray_on_the_left_dispatches_to_tracked():
    a = tr.param(np.array([1.0, 2.0]))
    c = np.array([3.0, 4.0])
    for y in (c * a, c + a, c - a, c / a, np.multiply(c, a)):
        assert isinstance(y, TrackedArray)
    tr.back(np.sum(c * a - c / a))
    np.testing.assert_allclose(a.grad, c + c / a.data ** 2)


def test_broadcasting_is_undone():
    a = tr.param(np.array([[1.0], [2.0], [3.0]]))          # (3, 1)
    b = tr.param(np.array([1.0, 10.0, 100.0, 1000.0]))      # (4,)
    y = a * b
    assert y.shape == (3, 4)
    tr.back(np.sum(y))
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_array_equal(a.grad, np.full((3, 1), 1111.0))
    np.testing.assert_array_equal(b.grad, np.full(4, 6.0))


def test_scalar_times_array_broadcasts():
    s = tr.param(2.0)
    v = tr.param(np.array([1.0, 2.0, 3.0]))
    w = np.array([1.0, -1.0, 2.0])
    tr.back(np.sum(s * v * w))
    assert s.grad == pytest.approx(np.sum(v.data * w))
    np.testing.assert_array_equal(v.grad, 2.0 * w)


def test_broadcasting_with_size_one_leading_axes():
    a = tr.param(np.ones((1, 3)))
    b = tr.param(np.ones((2, 1, 1)))
    y = a + b                                               # (2, 1, 3)
    tr.back(y, np.arange(6.0).reshape(2, 1, 3))
    np.testing.assert_array_equal(a.grad, [[3.0, 5.0, 7.0]])
    np.testing.assert_array_equal(b.grad, [[[3.0]], [[12.0]]])


def test_same_value_used_twice_accumulates():
    x = tr.param(np.array([1.0, 2.0]))
    tr.back(np.sum(x * x + x))
    np.testing.assert_array_equal(x.grad, 2 * x.data + 1)


# --------------------------------------------------------------------------
# NumPy protocols: conversion, missing rules, out=, comparisons
# --------------------------------------------------------------------------

def test_asarray_raises_pointing_to_data():
    W = tr.param(np.ones(3))
    for convert in (np.asarray, np.array, lambda t: np.array([t, t])):
        with pytest.raises(TypeError, match=r'tr\.data'):
            convert(W)
    with pytest.raises(TypeError, match=r'tr\.data'):
        np.asarray(tr.param(1.0))
    assert type(tr.data(W)) is np.ndarray       # the suggested fix works


@pytest.mark.parametrize('fn, name', [(lambda x: np.savetxt(io.StringIO(), x), 'np.savetxt'),
                                      (np.frompyfunc(abs, 1, 1), 'abs (vectorized)')])
def test_function_without_rule_raises_naming_it(fn, name):
    W = tr.param(np.linspace(0.0, 1.0, 8))
    with pytest.raises(TypeError) as err:
        fn(W)
    msg = str(err.value)
    assert name in msg
    assert 'tr.rule' in msg


def test_ufunc_method_without_rule_raises():
    W = tr.param(np.ones(3))
    with pytest.raises(TypeError, match=r'np\.logical_and\.at.*tr\.rule'):
        np.logical_and.at(W, [0], 1.0)


def test_ufunc_out_raises():
    W = tr.param(np.ones(3))
    with pytest.raises(TypeError, match='out='):
        np.sin(W, out=np.zeros(3))
    with pytest.raises(TypeError, match='out='):
        np.add(W, 1.0, out=np.zeros(3))
    with pytest.raises(TypeError, match='out='):
        np.add(np.ones(3), W, np.zeros(3))
    with pytest.raises(TypeError, match='out='):
        np.sum(W, out=np.zeros(()))


def test_ufunc_where_raises():
    W = tr.param(np.ones(3))
    with pytest.raises(TypeError, match=r'where=.*np\.where'):
        np.sin(W, where=np.array([True, False, True]))


@pytest.mark.parametrize('op', [operator.lt, operator.le, operator.gt, operator.ge,
                                operator.eq, operator.ne])
def test_comparisons_return_plain_bool_arrays(op):
    x = np.array([1.0, 2.0, 3.0])
    W = tr.param(x)
    for got, want in ((op(W, 2.0), op(x, 2.0)), (op(2.0, W), op(2.0, x)),
                      (op(W, W * 1.0), op(x, x)), (op(np.full(3, 2.0), W), op(np.full(3, 2.0), x))):
        assert type(got) is np.ndarray and got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)
    r = op(tr.param(1.0), 2.0)
    assert not tr.istracked(r) and r == op(1.0, 2.0)


def test_ufunc_reduce_matches_numpy_axis_default():
    x = np.arange(6.0).reshape(2, 3)
    W = tr.param(x)
    y = np.add.reduce(W)                       # axis=0, like NumPy (np.sum's default is None)
    np.testing.assert_array_equal(y.data, np.add.reduce(x))
    np.testing.assert_array_equal(np.add.reduce(W, 1).data, np.add.reduce(x, 1))
    assert tr.data(np.add.reduce(W, axis=None)) == 15.0
    tr.back(y, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(W.grad, [[1, 2, 3], [1, 2, 3]])
    for uf in (np.multiply, np.maximum, np.minimum):
        np.testing.assert_array_equal(uf.reduce(W).data, uf.reduce(x))
        np.testing.assert_array_equal(uf.reduce(W, axis=1, keepdims=True).data,
                                      uf.reduce(x, axis=1, keepdims=True))


def test_ufunc_accumulate_matches_numpy_axis_default():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    for uf in (np.add, np.multiply):
        W = tr.param(x.copy())
        y = uf.accumulate(W)                   # axis=0 (np.cumsum's default flattens)
        np.testing.assert_array_equal(y.data, uf.accumulate(x))
        np.testing.assert_array_equal(uf.accumulate(W, 1).data, uf.accumulate(x, 1))
    W = tr.param(x.copy())
    tr.back(np.add.accumulate(W), np.ones((2, 3)))
    np.testing.assert_array_equal(W.grad, [[2, 2, 2], [1, 1, 1]])


# --------------------------------------------------------------------------
# In-place syntax
# --------------------------------------------------------------------------

def test_inplace_on_a_leaf_is_refused():
    W = tr.param(np.ones(3))
    with pytest.raises(ValueError, match='leaf'):
        W += 1.0


def test_inplace_on_an_intermediate_is_recorded():
    x = tr.param(np.array([1.0, 2.0]))
    y = x * 3.0
    y += x                                     # 4 x
    y *= x                                     # 4 x^2
    tr.back(np.sum(y))
    np.testing.assert_array_equal(x.grad, 8 * x.data)


def test_inplace_on_a_view_changes_its_base_as_numpy():
    x = tr.param(np.arange(4.0))
    y = x * 1.0
    v = y[1:]
    y += 1.0
    v += 1.0
    np.testing.assert_array_equal(tr.data(y), [1.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(tr.data(v), [3.0, 4.0, 5.0])
    tr.back(np.sum(y * v[0]))
    np.testing.assert_array_equal(x.grad, [3.0, 16.0, 3.0, 3.0])


# --------------------------------------------------------------------------
# The usual methods dispatch to the NumPy function of the same name
# --------------------------------------------------------------------------

_X = np.array([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7]])

METHODS = [
    ('sum', lambda a: a.sum()), ('sum axis', lambda a: a.sum(axis=1)),
    ('sum keepdims', lambda a: a.sum(0, keepdims=True)), ('mean', lambda a: a.mean()),
    ('mean axis', lambda a: a.mean(axis=0)), ('prod', lambda a: a.prod(axis=1)),
    ('max', lambda a: a.max()), ('min axis', lambda a: a.min(axis=0)),
    ('var', lambda a: a.var()), ('std axis', lambda a: a.std(axis=1)),
    ('cumsum', lambda a: a.cumsum(axis=1)), ('cumprod', lambda a: a.cumprod(axis=0)),
    ('dot', lambda a: a.dot(np.array([1.0, 2.0, 3.0]))),
    ('clip', lambda a: a.clip(-1.0, 1.0)), ('ravel', lambda a: a.ravel()),
    ('flatten', lambda a: a.flatten()), ('squeeze', lambda a: a[None].squeeze(axis=0)),
    ('swapaxes', lambda a: a.swapaxes(0, 1)), ('trace', lambda a: a.trace()),
    ('diagonal', lambda a: a.diagonal()), ('copy', lambda a: a.copy()),
    ('take', lambda a: a.take([0, 2], axis=1)),
    ('reshape args', lambda a: a.reshape(3, 2)), ('reshape tuple', lambda a: a.reshape((3, 2))),
    ('reshape -1', lambda a: a.reshape(-1)), ('transpose', lambda a: a.transpose()),
    ('transpose args', lambda a: a.transpose(1, 0)),
    ('transpose tuple', lambda a: a.transpose((1, 0))),
    ('T', lambda a: a.T), ('mT', lambda a: a.mT), ('matmul', lambda a: a @ _X.T),
    ('rmatmul', lambda a: _X.T @ a), ('pow', lambda a: a ** 2), ('rpow', lambda a: 2.0 ** a),
    ('abs', lambda a: abs(a)), ('pos', lambda a: +a), ('neg', lambda a: -a),
    ('getitem', lambda a: a[1, ::-1]), ('round', lambda a: a.round(1)),
]


@pytest.mark.parametrize('name, f', METHODS, ids=[m[0] for m in METHODS])
def test_methods_match_numpy(name, f):
    y = f(tr.param(_X.copy()))
    assert tr.istracked(y)
    want = f(_X.copy())
    assert y.dtype == want.dtype
    np.testing.assert_allclose(y.data, want, rtol=1e-12)
    assert tr.gradcheck(f, _X.copy(), order=1)


def test_astype_method_and_its_gradient():
    x = tr.param(_X.copy())
    y = x.astype(np.float32)
    assert y.dtype == np.float32 and tr.istracked(y)
    np.testing.assert_array_equal(y.data, _X.astype(np.float32))
    w = np.arange(6.0).reshape(2, 3)
    tr.back(np.sum(y * w.astype(np.float32)))
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad, w)


@pytest.mark.parametrize('name, f', [
    ('argmax', lambda a: a.argmax()), ('argmin', lambda a: a.argmin(axis=1)),
    ('argsort', lambda a: a.argsort(axis=0)), ('any', lambda a: (a > 1.0).any()),
    ('all', lambda a: a.all()), ('nonzero', lambda a: a.nonzero()[1]),
])
def test_value_methods_return_plain_results(name, f):
    got = f(tr.param(_X.copy()))
    assert not tr.istracked(got)
    np.testing.assert_array_equal(got, f(_X.copy()))


def test_setitem_on_an_intermediate_gives_correct_gradients():
    x = tr.param(np.array([1.0, 2.0, 3.0]))
    y = x * 2.0
    y[0] = x[1] * x[2]                          # y = (x1 x2, 2 x1, 2 x2)
    y[2] = 7.0
    np.testing.assert_array_equal(y.data, [6.0, 4.0, 7.0])
    tr.back(np.sum(y * np.array([1.0, 10.0, 100.0])))
    np.testing.assert_array_equal(x.grad, [0.0, 3.0 + 20.0, 2.0])


def test_setitem_on_a_leaf_is_refused():
    x = tr.param(np.ones(3))
    with pytest.raises(ValueError, match='leaf'):
        x[0] = 2.0
    np.testing.assert_array_equal(x.data, [1.0, 1.0, 1.0])


def test_inplace_keeps_the_dtype():
    x = tr.param(np.ones(3, dtype=np.float32))
    y = x * 2.0
    y += np.array([1.0, 2.0, 3.0])              # float64 operand, float32 array
    assert y.dtype == np.float32
    r = tr.param(2.0) * 1.0
    r *= 3.0
    assert isinstance(r, TrackedReal) and tr.data(r) == 6.0
    tr.back(np.sum(y * y))
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 4.0 * np.array([3.0, 4.0, 5.0]))


def test_flat_reads_iterates_and_writes_like_ndarray_flat():
    X = np.arange(12.0).reshape(3, 4) / 7
    v = np.array([0.5, -1.5])

    def f(a, v, flat_of):
        b = a * 1.0 + 0 * v[0]
        flat_of(b)[[1, 3]] = v
        flat_of(b)[5] = v[0] * 2
        flat_of(b)[7:10] = v                  # repeated to fill the slice, as NumPy does
        return (np.sum(b ** 2) + np.sum(flat_of(a)[[0, 5, 7]] ** 2) + flat_of(a)[3] * 2
                + sum(t * t for t in flat_of(a[:2, :2])))
    with_flat = lambda a, v: f(a, v, lambda z: z.flat)
    assert np.isclose(tr.data(with_flat(tr.param(X), v)), f(X, v, lambda z: z.flat))
    assert tr.gradcheck(with_flat, X, v)
    tape = tr.GradientTape(with_flat, X, v)
    expected = tr.gradient(with_flat, 2 * X, v)
    for got in (tape.gradient(2 * X, v), tr.compile(tape, background=False).gradient(2 * X, v)):
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
    p = tr.param(X)
    assert len(p.flat) == 12 and p.flat.copy().shape == (12,) and p.flat.base is p
