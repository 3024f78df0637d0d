"""Errors: exceptions inside recorded code or inside a pullback leave everything usable."""
import numpy as np
import pytest

import tracked as tr
from tracked import tape as tp
from tracked.api import vjp
from tracked.registry import Primitive
from tracked.dispatch import apply


class Boom(Exception):
    pass


def _raise(*args, **kwargs):
    raise Boom('pullback failed')


_boom = Primitive(lambda x: x * 1.0, (_raise,), name='boom')


def boom(x):
    """Identity on the forward pass; its pullback raises ``Boom``."""
    return apply(_boom, (x,), {})


def _check_usable(x):
    """A fresh computation on ``x`` (leaf with a buffer) still gives the right gradient."""
    before = x.grad.copy()
    tr.back(np.sum(np.sin(x) * 2.0))
    np.testing.assert_allclose(x.grad - before, 2.0 * np.cos(x.data), rtol=1e-12)
    assert tp.special_threads == 0
    assert tp.active_recorder() is None


def test_exception_mid_recording():
    x = tr.param(np.array([0.5, 1.5]))

    def loss(x, fail):
        h = np.exp(x) * 3.0
        if fail:
            raise Boom('in the middle of the forward pass')
        return np.sum(h / x)
    with pytest.raises(Boom):
        loss(x, True)
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    tr.back(loss(x, False))
    xv = x.data
    np.testing.assert_allclose(x.grad, 3 * np.exp(xv) * (xv - 1) / xv ** 2, rtol=1e-12)
    _check_usable(x)


def test_numpy_error_inside_an_operation():
    x = tr.param(np.ones(2))
    with pytest.raises(ValueError):
        x * np.ones(3)                                 # shapes do not broadcast
    with pytest.raises(ValueError):
        np.reshape(x, (3,))
    _check_usable(x)


def test_exception_mid_recording_inside_vjp():
    def f(z):
        np.sin(z) * z                   # records two operations, then fails
        raise Boom('inside vjp')
    with pytest.raises(Boom):
        vjp(f, np.array([1.0, 2.0]))
    y, back = vjp(lambda z: np.sum(np.sin(z) * z), np.array([1.0, 2.0]))
    z = np.array([1.0, 2.0])
    np.testing.assert_allclose(back(1.0)[0], np.cos(z) * z + np.sin(z), rtol=1e-12)


def test_exception_inside_nested_vjp_inside_a_loss():
    w = tr.param(np.array([1.0, 2.0]))

    def loss(fail):
        def inner(x):
            if fail:
                raise Boom('inner')
            return np.sum(np.tanh(w * x))
        gx = vjp(inner, np.array([0.5, -0.5]))[1](1.0)[0]
        return np.sum(gx * gx)
    with pytest.raises(Boom):
        loss(True)
    tr.back(loss(False))
    x = np.array([0.5, -0.5])
    wv = w.data
    t = np.tanh(wv * x)
    expected = 2 * wv * (1 - t ** 2) ** 2 - 4 * wv ** 2 * (1 - t ** 2) ** 2 * t * x
    np.testing.assert_allclose(w.grad, expected, rtol=1e-12)


def test_exception_inside_a_pullback():
    x = tr.param(np.array([1.0, 2.0]))
    y = np.sum(boom(x) * 2.0 + np.sin(x))
    with pytest.raises(Boom, match='pullback failed'):
        tr.back(y)
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])   # nothing half-accumulated
    _check_usable(x)
    # and graphs recorded before the failure, sharing its leaves, still work
    x2 = tr.param(np.array([1.0, 2.0]))
    other = np.sum(x2 * 3.0)
    failing = np.sum(boom(x2 * 5.0))
    with pytest.raises(Boom):
        failing.back()
    other.back()
    np.testing.assert_array_equal(x2.grad, [3.0, 3.0])


def test_exception_inside_a_pullback_keeps_the_shared_part_of_the_graph():
    x = tr.param(np.array([1.0, 2.0]))
    h = np.exp(x) * 2.0                                  # shared by both losses
    bad = np.sum(boom(h) * 3.0)
    good = np.sum(h * h)
    with pytest.raises(Boom):
        tr.back(bad)
    tr.back(good)                                        # h's entries were not released
    np.testing.assert_allclose(x.grad, 2 * (2 * np.exp(x.data)) ** 2, rtol=1e-12)


def test_exception_inside_a_pullback_releases_nothing():
    # entries recorded after the failing one are visited first by back(); a failed
    # back() must not release them, or another loss using them would break
    x = tr.param(np.array([1.0, 2.0]))
    a = boom(x)
    c = np.exp(x) * 2.0
    bad = np.sum(a + c)
    good = np.sum(c * c)
    with pytest.raises(Boom):
        tr.back(bad)
    with pytest.raises(Boom):                            # the failure repeats, not a
        tr.back(bad)                                     # GraphReleasedError
    tr.back(good)
    np.testing.assert_allclose(x.grad, 8 * np.exp(2 * x.data), rtol=1e-12)


def test_exception_inside_a_pullback_under_vjp():
    def f(z):
        return np.sum(boom(z) * z)
    y, back = vjp(f, np.array([1.0, 2.0]))
    with pytest.raises(Boom):
        back(1.0)
    y, back = vjp(lambda z: np.sum(z * z), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(back(1.0)[0], [2.0, 4.0])


def test_exception_inside_a_pullback_under_nesting():
    # the inner backward pass fails while being recorded on the outer tape
    def df(x):
        return vjp(lambda z: np.sum(boom(np.sin(z))), x)[1](1.0)[0]
    with pytest.raises(Boom):
        vjp(df, np.array([0.1, 0.2]))
    y, back = vjp(lambda x: vjp(lambda z: np.sum(np.sin(z)), x)[1](1.0)[0], np.array([0.1, 0.2]))
    np.testing.assert_allclose(back(np.ones(2))[0], -np.sin([0.1, 0.2]), rtol=1e-12)


def test_complex_result_of_a_real_input_gives_a_real_gradient():
    to_complex = Primitive(lambda x: x * 1j, (lambda g, ans, x: g * -1j,), name='to_complex')
    x = tr.param(np.array([1.0, 2.0]))
    z = apply(to_complex, (x,), {})
    tr.back(np.sum(np.imag(z) * np.array([3.0, 4.0])))
    assert x.grad.dtype == np.float64          # the real part of the complex cotangent
    np.testing.assert_allclose(x.grad, [3.0, 4.0])


def test_tracked_keyword_argument_is_refused():
    scale = Primitive(lambda x, k=1.0: x * k, (lambda g, ans, x, k=1.0: g * k,), name='scale')
    x = tr.param(np.ones(2))
    with pytest.raises(TypeError, match='scale.*positional'):
        apply(scale, (x,), {'k': tr.param(2.0)})
    _check_usable(x)


def test_errors_leave_other_threads_state_alone():
    # a pause that raises restores the pause switch; recording resumes afterwards
    x = tr.param(np.array([1.0, 2.0]))
    with pytest.raises(Boom):
        with tp.pause_recording():
            _ = x * 2.0
            raise Boom('paused')
    assert tr.istracked(x * 2.0)
    _check_usable(x)


def test_a_conversion_inside_numpy_or_scipy_names_the_function_and_the_way_out():
    x = np.array([1.0, 2.0])
    with pytest.raises(TypeError, match=r'^np\.vectorize converts .*tracked\.numpy\.vectorize'):
        tr.gradient(lambda v: np.sum(np.vectorize(lambda u: 2 * u)(v)), x)
    with pytest.raises(TypeError, match=r'^np\.select converts'):
        tr.gradient(lambda d: np.sum(np.select([x > 1], [x], default=d)), 0.5)
    with pytest.raises(TypeError, match='^a tracked value cannot be converted'):
        tr.gradient(np.asarray, x)          # the user's own conversion: no library to name
    sp = pytest.importorskip('scipy.special')
    with pytest.raises(TypeError, match=r'^scipy\.special\.logsumexp converts .*'
                                        r'tracked\.scipy\.special\.logsumexp instead'):
        tr.gradient(sp.logsumexp, x)
    import scipy.stats as st
    with pytest.raises(TypeError, match=r'^scipy\.stats\.norm\.logpdf converts .*'
                                        r'Use tracked\.scipy\.stats\.norm\.logpdf instead'):
        tr.gradient(lambda v: np.sum(st.norm.logpdf(v)), x)
