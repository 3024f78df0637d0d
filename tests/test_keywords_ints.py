"""Tracked values passed by keyword, and differentiated integers that behave as ints."""
import numpy as np
import pytest

import tracked as tr

x0 = np.array([-1.0, 0.5, 2.0])


def test_tracked_keywords_differentiate_like_positional_ones():
    by_position = tr.gradient(lambda x, lo, hi: np.sum(np.clip(x, lo, hi) ** 2), x0, 0.0, 1.0)
    by_keyword = tr.gradient(lambda x, lo, hi: np.sum(np.clip(x, a_min=lo, a_max=hi) ** 2),
                             x0, 0.0, 1.0)
    by_new_names = by_keyword if np.lib.NumpyVersion(np.__version__) < '2.1.0' else (  # min=/max=
        tr.gradient(lambda x, lo, hi: np.sum(np.clip(x, min=lo, max=hi) ** 2), x0, 0.0, 1.0))
    for a, b, c in zip(by_position, by_keyword, by_new_names):
        np.testing.assert_allclose(a, b)
        np.testing.assert_allclose(a, c)
    np.testing.assert_allclose(by_keyword[0], [0.0, 1.0, 0.0])
    assert by_keyword[1:] == (2 * 0.0, 2 * 1.0)      # lo taken at -1.0, hi at 2.0
    g = tr.gradient(lambda x, hi: np.sum(np.clip(x, None, a_max=hi)), x0, 1.0)
    np.testing.assert_allclose(g[0], [1.0, 1.0, 0.0])
    assert g[1] == 1.0
    w = np.array([1.0, 2.0, 3.0])
    gx, gw = tr.gradient(lambda x, w: np.average(x, weights=w), x0, w)
    np.testing.assert_allclose(gx, w / w.sum())
    np.testing.assert_allclose(gw, (x0 - np.average(x0, weights=w)) / w.sum())
    assert tr.gradcheck(lambda x, w: np.average(x, weights=w), x0, w)


def test_integer_arguments_used_as_axis_by_keyword():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    # Zygote's jacobian((a, d) -> prod(a, dims=d), A, 2), 0-based and row-major
    J, Jd = tr.jacobian(lambda a, d: np.prod(a, axis=d, keepdims=True), A, 1)
    np.testing.assert_allclose(J, [[2.0, 1.0, 0.0, 0.0], [0.0, 0.0, 4.0, 3.0]])
    g, gd = tr.gradient(lambda a, d: np.sum(np.sum(a, axis=d) ** 2), A, 0)
    np.testing.assert_allclose(g, [[8.0, 12.0], [8.0, 12.0]])
    assert gd is None


def test_a_tracked_keyword_only_float_is_refused_by_name():
    from tracked.dispatch import bind_keywords
    def f(x, *, scale=1.0):
        return x * scale
    with pytest.raises(TypeError, match='scale= cannot be passed by position'):
        bind_keywords(f, (np.ones(2),), {'scale': tr.param(2.0)})


def test_differentiated_integers_are_the_ints_they_hold():
    seen = {}

    def f(x, n):
        seen['int'] = isinstance(n, int)
        seen['set'] = n in {3}
        seen['dict'] = {3: 2.0}.get(n, 7.0)
        seen['format'] = (f'{n}', f'{n:03d}', str(n), repr(n))
        seen['bits'] = (n & 1, n | 4, n ^ 1, n << 2, n >> 1, ~n)
        seen['repeat'] = len([0] * n) + len(n * (1, 2))
        seen['order'] = (n < 4, n >= 3, max(n, 2), sorted([5, n, 1]))
        seen['seed'] = np.random.default_rng(n).integers(10)
        seen['range'] = list(range(n))
        return x * n ** 2
    g = tr.gradient(f, 2.0, 3)
    assert g == (9.0, 12.0)                   # d/dn x n^2 = 2 x n
    assert seen['int'] and seen['set'] and seen['dict'] == 2.0
    assert seen['format'] == ('3', '003', '3', '3')
    assert seen['bits'] == (1, 7, 2, 12, 1, -4)
    assert seen['repeat'] == 3 + 6
    assert seen['order'] == (True, True, 3, [1, 3, 5])
    assert seen['seed'] == np.random.default_rng(3).integers(10)
    assert seen['range'] == [0, 1, 2]
    # a long integer formats as itself: 300 has three digits, not a tracked repr
    assert tr.gradient(lambda x, n: x * len(f'{n}'), 2.0, 300) == (3.0, None)


def test_zygote_integers_in_a_tuple():
    # gradient((a, t) -> sum(a .* t[1]) + t[2], [1,2,3], (4,5)) == ([4,4,4], (6, 1))
    ga, gt = tr.gradient(lambda a, t: np.sum(a * t[0]) + t[1], np.array([1.0, 2.0, 3.0]), (4, 5))
    np.testing.assert_allclose(ga, [4.0, 4.0, 4.0])
    assert gt == (6.0, 1.0)


def test_integer_arithmetic_on_a_differentiated_int_is_an_int_again():
    import json
    import math
    seen = {}

    def f(x, n):
        m = n + 1
        seen['types'] = (isinstance(m, int), isinstance(2 * n, int), isinstance(n // 2, int),
                         isinstance(n % 2, int), isinstance(-n, int), isinstance(n ** 2, int))
        seen['uses'] = ([0] * m, {4: 'four'}.get(m), hash(m) == hash(4), list(range(n - 1)),
                        'ab' * (n - 1), m in {4}, np.zeros((m, 2)).shape)
        seen['reads'] = (float(n), f'{n:.2f}', f'{m:03d}', math.sqrt(n), int(n / 2),
                         float(n / 2), json.dumps({'n': n, 'm': m}))
        seen['arange'] = (np.arange(n).tolist(), np.arange(1, m).tolist(),
                          np.arange(0, m, 2).tolist())
        seen['python'] = (n ** -1, divmod(m, 3), n.bit_length())
        with pytest.raises(ZeroDivisionError):
            n % 0
        with pytest.raises(ZeroDivisionError):
            m // (n - 3)
        # derivatives: n % 2.5 moves with n, n // 2 does not; the repetition count is an int
        return x * m * (n % 2.5) + np.sum(np.stack([x] * m)) + x * (n // 2)
    g = tr.gradient(f, 2.0, 3)
    assert seen['types'] == (True,) * 6
    assert seen['uses'] == ([0, 0, 0, 0], 'four', True, [0, 1], 'abab', True, (4, 2))
    assert seen['reads'] == (3.0, '3.00', '004', math.sqrt(3), 1, 1.5, '{"n": 3, "m": 4}')
    assert seen['arange'] == ([0, 1, 2], [1, 2, 3], [0, 2])
    assert float(seen['python'][0]) == pytest.approx(1 / 3) and seen['python'][1:] == ((1, 1), 2)
    # f = x (n + 1)(n % 2.5) + (n + 1) x + x (n // 2): d/dx = 4 * 0.5 + 4 + 1, d/dn = x (0.5 + 4)
    assert g == (pytest.approx(7.0), pytest.approx(2.0 * 4.5))
    # a recorded tape guards the int argument: another n is refused, the same one replays
    tape = tr.GradientTape(f, 2.0, 3)
    assert tape.gradient(1.5, 3) == (pytest.approx(7.0), pytest.approx(1.5 * 4.5))
    with pytest.raises(tr.TapeGuardError):
        tape.gradient(1.5, 4)


def test_integers_in_forward_mode_are_ints_too():
    # jvp and forward-mode Jacobians carry an int argument as an int with a tangent
    y, t = tr.jvp(lambda x, n: x * (n in {3}) * [1.0, 2.0, 4.0, 8.0][n] * n, (2.0, 3), (1.0, 1.0))
    assert (y, t) == (48.0, 8.0 * 3 + 2.0 * 8.0)
    def f(x, n):
        return np.sin(x) * np.arange(n) * n + np.sum(np.stack([x] * (n + 1)))
    for a, b in zip(tr.jacobian(f, 1.0, 5, mode='forward'), tr.jacobian(f, 1.0, 5, mode='reverse')):
        np.testing.assert_allclose(a, b, rtol=1e-14)
