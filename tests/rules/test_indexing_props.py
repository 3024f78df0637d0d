"""Property tests: for random arrays and index expressions, the gradient of
``sum(w * x[idx])`` is the scatter ``np.add.at(zeros, idx, w)`` computed in plain NumPy,
and ``y[idx] = v`` sends ``w`` outside ``idx`` to ``x`` and ``w[idx]`` (summed over
broadcasting) to ``v``."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tracked as tr
from tracked.box import plain

EXAMPLES = int(os.environ.get('TRACKED_HYPOTHESIS_EXAMPLES', 60))   # raise it for a deep run
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def axis_index(draw, n, allow_arrays):
    """One entry of an index tuple for an axis of length ``n``."""
    kinds = ['int', 'slice', 'full'] + (['ints', 'mask'] if allow_arrays else [])
    kind = draw(st.sampled_from(kinds))
    if kind == 'int':
        return draw(st.integers(-n, n - 1))
    if kind == 'slice':
        start = draw(st.none() | st.integers(-n - 1, n + 1))
        stop = draw(st.none() | st.integers(-n - 1, n + 1))
        step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
        return slice(start, stop, step)
    if kind == 'full':
        return slice(None)
    if kind == 'ints':     # repeats allowed
        return np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=5)))
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))


@st.composite
def indexed(draw, allow_arrays=True):
    """An array shape and an index expression for it."""
    shape = draw(shapes)
    if allow_arrays and shape and draw(st.integers(0, 5)) == 0:     # a whole-array mask
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
        return shape, rng.random(shape) < 0.5
    nd = len(shape)
    front = draw(st.integers(0, nd))                         # entries for the first axes
    ellipsis = front < nd and draw(st.booleans())
    back = draw(st.integers(0, nd - front)) if ellipsis else 0   # ... and for the last ones
    axes = list(range(front)) + list(range(nd - back, nd))
    parts = [draw(axis_index(shape[d], allow_arrays)) for d in axes]
    # one array entry at most keeps advanced indices broadcastable (mixed ones: test_indexing)
    seen = False
    for k, p in enumerate(parts):
        if isinstance(p, np.ndarray):
            if seen:
                parts[k] = slice(None)
            seen = True
    if ellipsis:
        parts.insert(front, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        parts.insert(draw(st.integers(0, len(parts))), None)
    idx = tuple(parts) if draw(st.booleans()) or len(parts) != 1 else parts[0]
    return shape, idx


@SETTINGS
@given(indexed(), st.integers(0, 2 ** 16))
def test_getitem_gradient_is_numpy_scatter(case, seed):
    shape, idx = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(np.shape(x[idx]))
    want = np.zeros(shape)
    np.add.at(want, idx, w)

    t = tr.param(x)
    y = t[idx]
    np.testing.assert_array_equal(plain(y), x[idx])
    tr.back(np.sum(w * y))
    assert t.grad.shape == shape
    np.testing.assert_allclose(t.grad, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(indexed(), st.integers(0, 2 ** 16))
def test_getitem_second_order(case, seed):
    shape, idx = case
    x = np.random.default_rng(seed).uniform(-1, 1, shape)
    assert tr.gradcheck(lambda t: np.sin(t[idx]) * t[idx], x, order=2)


def _positions_unique(shape, idx):
    pos = np.arange(int(np.prod(shape))).reshape(shape)[idx]
    return np.unique(pos).size == pos.size


@SETTINGS
@given(indexed(), st.integers(0, 2 ** 16), st.booleans())
def test_setitem_gradients(case, seed, scalar_value):
    shape, idx = case
    if not _positions_unique(shape, idx):
        y = tr.param(np.zeros(shape)) * 1.0
        with pytest.raises(ValueError, match='repeats a position'):
            y[idx] = 1.0
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    region = np.shape(x[idx])
    vshape = () if scalar_value else region
    v = rng.standard_normal(vshape)
    w = rng.standard_normal(shape)

    want = x.copy()
    want[idx] = v
    want_gx = w.copy()
    want_gx[idx] = 0.0
    want_gv = np.sum(w[idx]) if scalar_value else w[idx]

    tx, tv = tr.param(x), tr.param(v)
    y = tx * 1.0
    y[idx] = tv
    np.testing.assert_array_equal(plain(y), want)
    tr.back(np.sum(w * y))
    assert tx.grad.shape == shape and np.shape(tv.grad) == vshape
    np.testing.assert_allclose(tx.grad, want_gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tv.grad, want_gv, rtol=1e-12, atol=1e-12)
