"""Shape rules: finite-difference cases for every rule, plus views, dtypes, ties, errors."""
import numpy as np
import pytest

import tracked as tr
from tracked.api import vjp
from tracked.box import plain as data

from .harness import arg, case, const

S0, S1, S2, S3 = (), (5,), (3, 4), (2, 3, 4)


def via(covers, caller, *specs, name, **kw):
    """A case for rule ``covers`` exercised through ``caller`` (lists, methods, tuples out)."""
    return case(caller, *specs, covers=covers, name=name, **kw)


def joined(outs):
    """One array from several outputs, each weighted differently (checks every output)."""
    return np.concatenate([np.ravel(o) * (k + 1.0) for k, o in enumerate(outs)])


CASES = [
    # -- reshape / ravel ---------------------------------------------------------
    case(np.reshape, S2, const((2, 6))),
    *([case(np.reshape, S2, kwargs=dict(shape=(-1,)))]                # shape=: NumPy 2.1
      if np.lib.NumpyVersion(np.__version__) >= '2.1.0' else []),
    case(np.reshape, S2, const(12)),
    case(np.reshape, S0, const((1, 1))),
    case(np.reshape, S3, const((4, -1)), kwargs=dict(order='F')),
    case(np.reshape, (1,), const(())),
    case(np.ravel, S2),
    case(np.ravel, S0),
    case(np.ravel, S3, kwargs=dict(order='F')),
    # -- transposes ------------------------------------------------------------------
    case(np.transpose, S2),
    case(np.transpose, S1),
    case(np.transpose, S0),
    case(np.transpose, S3, const((2, 0, 1))),
    case(np.transpose, S3, kwargs=dict(axes=(-1, 0, 1))),
    via(np.transpose, lambda x: x.T, S3, name='.T(2,3,4)'),
    via(np.transpose, lambda x: x.transpose(1, 0, 2), S3, name='.transpose(1,0,2)'),
    case(np.swapaxes, S3, const(0), const(2)),
    case(np.swapaxes, S3, const(-1), const(0)),
    case(np.swapaxes, S2, kwargs=dict(axis1=1, axis2=1)),
    case(np.moveaxis, S3, const(0), const(-1)),
    case(np.moveaxis, S3, const((0, 1)), const((2, 0))),
    case(np.matrix_transpose, S2),
    case(np.matrix_transpose, S3),
    case(np.expand_dims, S1, const(0)),
    case(np.expand_dims, S2, kwargs=dict(axis=-1)),
    case(np.expand_dims, S0, const(0)),
    case(np.expand_dims, S2, const((0, 3))),
    case(np.squeeze, (1, 3, 1)),
    case(np.squeeze, (1, 3, 1), const(0)),
    case(np.squeeze, (1, 3, 1), kwargs=dict(axis=-1)),
    case(np.squeeze, (1,)),
    case(np.squeeze, (2, 1, 3, 1), kwargs=dict(axis=(1, 3))),
    case(np.broadcast_to, S1, const((2, 5))),
    case(np.broadcast_to, (1, 4), const((2, 3, 4))),
    case(np.broadcast_to, S0, kwargs=dict(shape=(2, 2))),
    via(np.broadcast_arrays, lambda a, b: joined(np.broadcast_arrays(a, b)), (3, 1), (4,),
        name='broadcast_arrays((3,1),(4,))'),
    via(np.broadcast_arrays, lambda a, b: joined(np.broadcast_arrays(a, b)), S0, S2,
        name='broadcast_arrays((),(3,4))'),
    # -- flips, rolls, rotations, triangles -------------------------------------------------
    case(np.flip, S2),
    case(np.flip, S2, const(0)),
    case(np.flip, S2, kwargs=dict(axis=-1)),
    case(np.flip, S3, kwargs=dict(axis=(0, 2))),
    case(np.flip, S0),
    case(np.fliplr, S2),
    case(np.flipud, S1),
    case(np.roll, S1, const(2)),
    case(np.roll, S2, const(-1), kwargs=dict(axis=1)),
    case(np.roll, S2, const((1, 2)), const((0, -1))),
    case(np.roll, S2, kwargs=dict(shift=5)),
    case(np.roll, S0, const(1)),
    case(np.rot90, S2),
    case(np.rot90, S2, const(2)),
    case(np.rot90, S2, const(-1), const((1, 0))),
    case(np.rot90, S3, kwargs=dict(k=3, axes=(1, 2))),
    case(np.triu, (4, 4)),
    case(np.triu, (3, 5), const(1)),
    case(np.triu, S3, kwargs=dict(k=-1)),
    case(np.triu, (4,)),
    case(np.tril, (4, 4)),
    case(np.tril, (3, 5), kwargs=dict(k=-1)),
    case(np.tril, S3, const(2)),
    case(np.tril, (3,)),
    case(np.copy, S2),
    case(np.copy, S0),
    via(np.copy, lambda x: x.copy() * x, S1, name='.copy()'),
    via(np.copy, lambda x: x.flatten(), S2, name='.flatten()'),
    # -- atleast_nd --------------------------------------------------------------------------
    case(np.atleast_1d, S0),
    case(np.atleast_1d, S1),
    case(np.atleast_1d, S2),
    via(np.atleast_1d, lambda a, b: joined(np.atleast_1d(a, b)), S0, S2,
        name='atleast_1d((),(3,4))'),
    case(np.atleast_2d, S0),
    case(np.atleast_2d, S1),
    case(np.atleast_2d, S3),
    via(np.atleast_2d, lambda a, b, c: joined(np.atleast_2d(a, b, c)), S0, S1, S2,
        name='atleast_2d((),(5,),(3,4))'),
    case(np.atleast_3d, S0),
    case(np.atleast_3d, S1),
    case(np.atleast_3d, S2),
    case(np.atleast_3d, S3),
    via(np.atleast_3d, lambda a, b: joined(np.atleast_3d(a, b)), S1, S3,
        name='atleast_3d((5,),(2,3,4))'),
    # -- astype (float to float) -------------------------------------------------------------
    via(np.ndarray.astype, lambda x: x.astype(np.float64), S1, name='astype(float64)(5,)'),
    via(np.ndarray.astype, lambda x: x.astype('f8') * x, S0, name='astype(f8)()'),
    case(np.astype, S2, const(np.float64)),
    case(np.astype, S2, const(np.complex128), name='astype(real->complex)'),
    case(np.astype, arg((2, 3), dtype=np.complex128), const(np.complex128),
         name='astype(complex->complex)'),
    *([via(np.astype, lambda x: np.astype(x, 'f8', copy=False) * x, S0, name='np.astype(f8)()')]
      if np.lib.NumpyVersion(np.__version__) >= '2.1.0' else []),    # of a NumPy scalar: 2.1
    # -- joining --------------------------------------------------------------------------------
    via(np.concatenate, lambda a, b: np.concatenate([a, b]), S1, (3,), name='concatenate(5,3)'),
    via(np.concatenate, lambda a, b, c: np.concatenate((a, b, c), axis=-1), S2, (3, 1), (3, 2),
        name='concatenate(axis=-1,3 arrays)'),
    via(np.concatenate, lambda a, b: np.concatenate([a, b], axis=None), S0, S2,
        name='concatenate(axis=None,0-d)'),
    via(np.concatenate, lambda a: np.concatenate([a, np.ones((1, 4)), a], 0), S2,
        name='concatenate(one array twice, a constant)'),
    via(np.concatenate, lambda a: np.concatenate(a, axis=0), S3, name='concatenate(tracked 3-d)'),
    via(np.concatenate, lambda a: np.concat([a, a * 2], axis=1), S2, name='concat alias'),
    via(np.stack, lambda a, b: np.stack([a, b]), S2, S2, name='stack(axis=0)'),
    via(np.stack, lambda a, b: np.stack((a, b), axis=-1), S2, S2, name='stack(axis=-1)'),
    via(np.stack, lambda a, b, c: np.stack([a, b, c]), S0, S0, S0, name='stack(0-d)'),
    via(np.stack, lambda a: np.stack([a, np.zeros(5), a], axis=1), S1, name='stack(const)'),
    via(np.hstack, lambda a, b: np.hstack([a, b]), S1, S0, name='hstack(1-d,0-d)'),
    via(np.hstack, lambda a, b: np.hstack((a, b)), S2, (3, 2), name='hstack(2-d)'),
    via(np.vstack, lambda a, b: np.vstack([a, b]), S1, S1, name='vstack(1-d)'),
    via(np.vstack, lambda a, b: np.vstack([a, b]), S2, (1, 4), name='vstack(2-d)'),
    via(np.dstack, lambda a, b: np.dstack([a, b]), S2, S2, name='dstack'),
    via(np.column_stack, lambda a, b: np.column_stack([a, b]), (3,), S2, name='column_stack'),
    via(np.append, lambda a, b: np.append(a, b), S2, S1, name='append'),
    via(np.append, lambda a, b: np.append(a, b, axis=0), S2, (1, 4), name='append(axis=0)'),
    # -- splitting (several outputs) ---------------------------------------------------
    via(np.split, lambda a: joined(np.split(a, 2, axis=1)), S2, name='split(2, axis=1)'),
    via(np.split, lambda a: joined(np.split(a, [1, 3])), S1, name='split([1,3])'),
    via(np.split, lambda a: joined(np.split(a, [2, 1], axis=-1)), S3, name='split([2,1],-1)'),
    via(np.array_split, lambda a: joined(np.array_split(a, 3)), (7,), name='array_split(7,3)'),
    via(np.array_split, lambda a: joined(np.array_split(a, 3, axis=-1)), S2,
        name='array_split(3,axis=-1)'),
    via(np.array_split, lambda a: joined(np.array_split(a, [1, 10], axis=0)), S2,
        name='array_split([1,10])'),
    via(np.hsplit, lambda a: joined(np.hsplit(a, 2)), S2, name='hsplit'),
    via(np.vsplit, lambda a: joined(np.vsplit(a, [1])), S2, name='vsplit'),
    *([via(np.unstack, lambda a: joined(np.unstack(a, axis=-1)), S2, name='unstack')]
      if hasattr(np, 'unstack') else []),
    # -- tile, repeat, pad --------------------------------------------------------------------
    case(np.tile, (3,), const(2)),
    case(np.tile, S2, const((2, 1, 2))),
    case(np.tile, S0, const(3)),
    case(np.tile, S3, kwargs=dict(reps=(2, 1))),
    case(np.repeat, (3,), const(2)),
    case(np.repeat, S2, const([1, 0, 2, 1]), kwargs=dict(axis=1)),
    case(np.repeat, S2, const(2), const(-2)),
    case(np.repeat, S0, const(3)),
    case(np.repeat, S2, kwargs=dict(repeats=[2])),
    case(np.repeat, S2, const(np.arange(12) % 3)),
    case(np.pad, S1, const(1)),
    case(np.pad, S2, const(((1, 0), (2, 1))), kwargs=dict(constant_values=2.0)),
    case(np.pad, S3, const((1, 2)), const('constant')),
    *([case(np.pad, S2, const({1: (0, 2)}))]                          # a dict: NumPy 2.3
      if np.lib.NumpyVersion(np.__version__) >= '2.3.0' else []),
    case(np.pad, S2, const(2), const('reflect')),
    case(np.pad, S2, const(((1, 2), (3, 0))), kwargs=dict(mode='edge')),
    case(np.pad, S1, const(7), kwargs=dict(mode='symmetric')),
    case(np.pad, S2, const(1), kwargs=dict(mode='wrap')),
    # -- gathers ----------------------------------------------------------------------------
    case(np.take, S1, const([0, 0, 4])),
    case(np.take, S2, const([[0, 1], [1, 1]]), kwargs=dict(axis=1)),
    case(np.take, S2, const(2), const(-1)),
    case(np.take, S2, const([5, -1, 13]), kwargs=dict(mode='wrap')),
    case(np.take, S2, const([5, -1, 13]), kwargs=dict(mode='clip', axis=0)),
    case(np.take, S2, const(np.array([[3, 3], [11, 0]]))),
    via(np.take, lambda x: x.take([1, 1], axis=0), S2, name='.take'),
    case(np.take_along_axis, S2, const(np.array([[0, 0], [3, 1], [2, 2]])), const(1)),
    case(np.take_along_axis, S2, const(np.array([[2, 0, 1, 2]])), kwargs=dict(axis=0)),
    case(np.take_along_axis, S2, const(np.array([11, 0, 0])), kwargs=dict(axis=None)),
    case(np.take_along_axis, S3, const(np.array([[[3], [0], [3]]])), kwargs=dict(axis=-1)),
    case(np.diagonal, S2),
    case(np.diagonal, S2, const(1)),
    case(np.diagonal, S2, kwargs=dict(offset=-2)),
    case(np.diagonal, S3, kwargs=dict(axis1=1, axis2=2)),
    case(np.diagonal, S3, const(1), const(-1), const(0)),
    case(np.diagonal, S2, const(7)),
    via(np.diagonal, lambda x: x.diagonal(), (3, 3), name='.diagonal()'),
    case(np.diag, (4,)),
    case(np.diag, (3,), const(1)),
    case(np.diag, (3,), kwargs=dict(k=-2)),
    case(np.diag, S2, kwargs=dict(k=-1)),
    case(np.diag, (4, 4)),
    case(np.sort, S1),
    case(np.sort, S2, const(0)),
    case(np.sort, S2, kwargs=dict(axis=None)),
    case(np.sort, S3, kwargs=dict(axis=-1, kind='stable')),
    case(np.sort, S3, kwargs=dict(axis=1)),
]


# --------------------------------------------------------------------------
# Values and forward results match NumPy
# --------------------------------------------------------------------------

def _fwd_matches(f, *xs):
    want = f(*xs)
    got = f(*[tr.param(x) for x in xs])
    got = [data(g) for g in got] if isinstance(got, (list, tuple)) else [data(got)]
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize('f', [
    lambda x: np.split(x, 3, axis=-1),
    lambda x: np.array_split(x, 5),
    lambda x: np.atleast_2d(x, x[0], x[0, 0]),
    lambda x: np.pad(x, ((1, 2), (0, 3)), mode='reflect'),
    lambda x: np.pad(x, 1, mode='symmetric'),
    *([lambda x: np.pad(x, {0: 2}, mode='wrap')]                       # a dict: NumPy 2.3
      if np.lib.NumpyVersion(np.__version__) >= '2.3.0' else []),
    lambda x: np.tile(x, (2, 1, 1)),
    lambda x: np.repeat(x, [0, 1, 2, 3, 4, 5], axis=1),
    lambda x: np.diag(x[1], -1),
    lambda x: np.sort(x, axis=None),
    lambda x: np.hstack([x[0], x[1, 0]]),
    lambda x: np.column_stack([x[:, 0], x]),
    lambda x: np.broadcast_arrays(x[:, :1], x[0]),
    lambda x: np.rot90(x, 3),
])
def test_forward_matches_numpy(f):
    _fwd_matches(f, np.random.default_rng(0).standard_normal((4, 6)))


def test_sort_ties_send_gradient_to_one_element_each():
    x = tr.param(np.array([2.0, 1.0, 2.0, 0.0]))
    y = np.sort(x)
    np.testing.assert_array_equal(data(y), [0.0, 1.0, 2.0, 2.0])
    tr.back(np.sum(y * np.array([1.0, 10.0, 100.0, 1000.0])))
    # each output position sends its weight to exactly one input; the tied 2.0s share 100+1000
    assert sorted(x.grad.tolist()) == [1.0, 10.0, 100.0, 1000.0]
    assert x.grad[1] == 10.0 and x.grad[3] == 1.0


@pytest.mark.parametrize('f', [
    lambda x: np.pad(x, 1),
    lambda x: np.tile(x, 2),
    lambda x: np.repeat(x, [1, 2, 0], axis=0),
    lambda x: np.concatenate([x, x]),
    lambda x: np.stack([x, x]),
    lambda x: np.take(x, [0, 0]),
    lambda x: np.sort(x),
    lambda x: np.diag(x),
    lambda x: np.flip(np.roll(x, 1)),
    lambda x: np.reshape(x, (3, 1)).T,
])
def test_float32_stays_float32(f):
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    y, back = vjp(f, x)
    assert y.dtype == np.float32
    g = back(np.ones(y.shape, dtype=np.float32))[0]
    assert g.dtype == np.float32 and g.shape == x.shape


def test_astype_float32_roundtrip_gradient_and_dtype():
    x = tr.param(np.array([1.0, 2.0]))
    y = x.astype(np.float32)
    assert y.dtype == np.float32 and tr.istracked(y)
    tr.back(np.sum(y * y))
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    assert x.grad.dtype == np.float64


@pytest.mark.parametrize('dtype', [int, np.int32, 'int64', bool, np.uint8])
def test_astype_to_integer_or_bool_is_plain(dtype):
    x = tr.param(np.array([1.7, -2.2, 0.0]))
    y = x.astype(dtype)
    assert not tr.istracked(y) and isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, np.array([1.7, -2.2, 0.0]).astype(dtype))
    s = tr.param(2.9).astype(int)
    assert not tr.istracked(s) and s == 2
    z = np.astype(x, dtype)
    assert not tr.istracked(z)
    np.testing.assert_array_equal(z, np.array([1.7, -2.2, 0.0]).astype(dtype))


def test_astype_to_complex_differentiates_and_back_to_real_refuses():
    z = tr.param(np.ones(2)).astype(complex) * (1 + 2j)
    assert z.dtype == np.complex128
    g, = tr.gradient(lambda x: np.sum(np.abs(x.astype(complex) * (3 + 4j))), np.ones(2))
    np.testing.assert_allclose(g, [5.0, 5.0])
    with pytest.raises(TypeError, match='imaginary part'):
        z.astype(float)


def test_view_results_write_their_base_copies_only_themselves():
    for make in (lambda y: np.reshape(y, (2, 3)), lambda y: y[1:], np.flip, np.ravel,
                 lambda y: np.expand_dims(y, 0)):
        a = np.arange(6.0)
        make(a)[0] = 10.0
        y = tr.param(np.arange(6.0)) * 1.0
        make(y)[0] = 10.0
        np.testing.assert_array_equal(data(y), a)
    y = tr.param(np.arange(6.0)) * 1.0
    for copy in (np.tile(y, 2), np.repeat(y, 2), np.concatenate([y, y]), np.pad(y, 1),
                 np.copy(y), np.sort(y), np.take(y, [0, 1]), np.roll(y, 1)):
        copy[0] = 5.0
        assert data(copy)[0] == 5.0


@pytest.mark.parametrize('call, match', [
    (lambda x: np.pad(x, 1, mode='mean'), "mode='mean'"),
    (lambda x: np.pad(x, 1, mode='linear_ramp'), 'linear_ramp'),
    (lambda x: np.pad(x, 1, mode='reflect', reflect_type='odd'), 'odd'),
    (lambda x: np.pad(x, 1, constant_values=tr.param(1.0)), 'constant_values'),
    (lambda x: np.reshape(x, (3, 2), order='A'), "order='A'"),
    (lambda x: np.take(x, [0], out=np.zeros(1)), 'out='),
    (lambda x: np.concatenate([x, x], out=np.zeros(12)), 'out='),
    (lambda x: np.sort(x, order='a'), 'structured'),
])
def test_unsupported_arguments_raise_type_error(call, match):
    with pytest.raises(TypeError, match=match):
        call(tr.param(np.ones((2, 3))))


def test_split_errors_like_numpy():
    x = tr.param(np.ones(5))
    with pytest.raises(ValueError, match='equal division'):
        np.split(x, 2)
    with pytest.raises(ValueError):
        np.diag(tr.param(np.ones((2, 2, 2))))


def test_concatenate_of_zero_d_arrays_raises_numpy_error():
    with pytest.raises(ValueError, match='zero-dimensional'):
        np.concatenate([tr.param(1.0), tr.param(2.0)])


def test_concatenate_many_pieces_gradient():
    xs = [tr.param(np.full(2, float(i))) for i in range(200)]
    y = np.concatenate(xs)
    tr.back(np.sum(y * np.arange(400.0)))
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(x.grad, [2 * i, 2 * i + 1])


def test_split_pieces_are_views_of_the_input():
    y = tr.param(np.arange(6.0)) * 1.0
    a, b = np.split(y, 2)
    a[0] = 10.0
    b += 1.0
    np.testing.assert_array_equal(data(y), [10.0, 1.0, 2.0, 4.0, 5.0, 6.0])
