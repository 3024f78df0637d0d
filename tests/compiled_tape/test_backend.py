"""AutoCompiled: a tape per signature, never a stale one."""
import numpy as np

import tracked as tr


def test_rebinding_a_closed_over_array_records_a_new_tape():
    ad = tr.AutoCompiled(compile=False)

    def make(d):
        return lambda w: np.sum(w * d)
    d = np.array([1.0, 2.0])
    f = make(d)
    assert np.allclose(tr.gradient(f, ad, np.ones(2))[0], [1.0, 2.0])
    # the same function object, its cell rebound to another array: not the recorded one
    f.__closure__[0].cell_contents = np.array([5.0, 7.0])
    assert np.allclose(tr.gradient(f, ad, np.ones(2))[0], [5.0, 7.0])


def test_closure_over_an_outer_tracked_value_falls_back_to_eager():
    x = np.array([0.5, -1.0])
    net = tr.Dense(2, 2, tr.tanh, rng=0)

    def outer(s, ad):
        g = tr.gradient(lambda m: np.sum(m(x * s) ** 2), *ad, net)[0]
        return np.sum(g.weight)
    eager = tr.gradient(lambda s: outer(s, ()), 1.0)[0]
    for ad in (tr.AutoCompiled(compile=False), tr.AutoCompiled()):
        got = tr.gradient(lambda s: outer(s, (ad,)), 1.0)[0]
        assert got is not None and np.isclose(got, eager)


def test_a_tape_refuses_a_closure_over_an_outer_tracked_value():
    def outer(s):
        tape = tr.GradientTape(lambda w: np.sum(w * s), np.ones(2))
        return np.sum(tape.gradient(np.ones(2))[0])
    try:
        tr.gradient(outer, 1.0)
    except TypeError as e:
        assert 'enclosing differentiation' in str(e)
    else:
        raise AssertionError('a tape froze an outer tracked value into a constant')
