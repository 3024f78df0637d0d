"""AutoCompiled: a tape per signature, never a stale one."""
import gc
import weakref

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


# -- signatures by code and captures (captures.py) ----------------------------------

def _mse(m, x, y):
    return np.mean((m(x) - y) ** 2)


def _eager(f, *args):
    v, g = tr.withgradient(f, *args)
    return v, g


def test_a_closure_made_per_step_replays_one_tape_on_each_new_batch():
    rng = np.random.default_rng(0)
    model = tr.Dense(3, 2, rng=0)
    ad = tr.AutoCompiled(compile=False)
    for _ in range(5):
        xb, yb = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
        v, (g,) = tr.withgradient(lambda m: _mse(m, xb, yb), ad, model)
        ev, (eg,) = _eager(lambda m: _mse(m, xb, yb), model)
        assert np.isclose(v, ev) and np.allclose(g.weight, eg.weight)   # this batch's
    (entry,) = ad.tapes.values()
    assert len(entry[1]) == 1
    # another batch size is another signature
    xb, yb = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    for _ in range(2):
        g = tr.gradient(lambda m: _mse(m, xb, yb), ad, model)[0]
    assert np.allclose(g.bias, _eager(lambda m: _mse(m, xb, yb), model)[1][0].bias)
    assert len(ad.tapes) == 2


def _steps(ad, model, refs):
    for step in range(6):
        xb = np.full((4, 3), float(step))
        refs.append(weakref.ref(xb))
        tr.gradient(lambda m: np.sum(m(xb)), ad, model)


def test_no_tape_keeps_the_batches_of_the_closures_alive():
    ad = tr.AutoCompiled(compile=False)
    refs = []
    _steps(ad, tr.Dense(3, 1, rng=0), refs)
    gc.collect()
    # before, every closure and its batch stayed in ad.tapes
    assert [r() for r in refs] == [None] * 6


def test_globals_the_code_reads_are_read_at_every_call():
    ns = {'np': np}
    exec('def loss(w):\n    return np.sum(w * data) + scale * np.sum(w)\n', ns)
    ad = tr.AutoCompiled(compile=False)
    for k in range(4):
        ns['data'], ns['scale'] = np.full(2, float(k)), 0.5 * k     # a module-level loop
        assert np.array_equal(tr.gradient(ns['loss'], ad, np.ones(2))[0], [1.5 * k] * 2)
    ns['data'] = np.ones(3)                                         # another shape: a tape
    assert np.array_equal(tr.gradient(ns['loss'], ad, np.ones(3))[0], [2.5] * 3)
    assert len(ad.tapes) == 2


def test_captured_numbers_floats_as_inputs_ints_by_value():
    ad = tr.AutoCompiled(compile=False)
    for c in (0.5, 1.5, 2.5, 3.5):
        f = lambda w: np.sum(w) * c
        assert tr.gradient(f, ad, np.ones(2))[0].tolist() == [c, c]
    assert len(ad.tapes) == 1                 # a float is an input of the one tape
    for n in (2, 3, 2, 3):
        f = lambda w: np.sum(w ** n)
        assert tr.gradient(f, ad, np.full(2, 2.0))[0].tolist() == [n * 2.0 ** (n - 1)] * 2
    assert len(ad.tapes) == 3                 # an int (a size, a power) is a constant
    # a float that changes the branch taken: a guard, then the other path
    for c in (1.0, -1.0, 1.0):
        f = lambda w: np.sum(w) if c > 0 else -2.0 * np.sum(w)
        assert tr.gradient(f, ad, np.ones(2))[0].tolist() == ([1.0] * 2 if c > 0 else [-2.0] * 2)


def test_an_int_outside_wrt_that_changes_records_another_tape():
    ad = tr.AutoCompiled(compile=False)
    f = lambda x, n: np.sum(x ** n)
    for n in (2, 3, 2):
        (g, none) = ad.withgradient(f, np.array([1.0, 2.0]), n, wrt=(0,))[1]
        assert none is None and g.tolist() == [n * 1.0, n * 2.0 ** (n - 1)]


def test_a_captured_model_changed_in_place_is_read_afresh():
    model = tr.Dense(2, 1, rng=0)
    ad = tr.AutoCompiled(compile=False)
    f = lambda x: np.sum(model(x))
    for k in range(3):
        model.weight[...] = k
        assert tr.gradient(f, ad, np.ones((1, 2)))[0].tolist() == [[k, k]]


def test_a_bound_method_reads_its_instance():
    class Fit:
        def __init__(self, data):
            self.data = data

        def loss(self, w):
            return np.sum((w - self.data) ** 2)
    ad = tr.AutoCompiled(compile=False)
    for k in range(3):
        fit = Fit(np.full(2, float(k)))
        assert tr.gradient(fit.loss, ad, np.zeros(2))[0].tolist() == [-2.0 * k] * 2
    assert len(ad.tapes) == 1


def test_a_duplicated_model_with_a_closure_per_step():
    rng = np.random.default_rng(1)
    model = tr.Dense(3, 1, rng=0)
    dup = tr.Duplicated(model)
    ad = tr.AutoCompiled(compile=False)
    for _ in range(3):
        xb = rng.standard_normal((5, 3))
        tr.gradient(lambda m: np.sum(m(xb) ** 2), ad, dup)
        eg = tr.gradient(lambda m: np.sum(m(xb) ** 2), model)[0]
        assert np.allclose(dup.dval.weight, eg.weight)
    assert len(ad.tapes) == 1


def test_the_signatures_kept_are_bounded():
    ad = tr.AutoCompiled(compile=False, maxsize=3)
    f = lambda x: np.sum(x ** 2)
    for n in range(1, 7):
        for _ in range(2):
            assert tr.gradient(f, ad, np.ones(n))[0].tolist() == [2.0] * n
    assert len(ad.tapes) == 3
    assert [k[2][0][0] for k in ad.tapes] == [(4,), (5,), (6,)]    # the last three shapes


def test_captured_lists_numbers_are_constants_and_arrays_numpy_converts_stay_eager():
    A = [[2.0, 1.0], [1.0, 3.0]]                 # a list of floats: NumPy's constant
    W = [np.ones(2), np.full(2, 2.0)]            # a list of arrays np.array converts
    ad = tr.AutoCompiled(compile=False)
    for _ in range(3):
        g = tr.gradient(lambda b: np.sum(np.linalg.solve(A, b)), ad, np.ones(2))[0]
        assert np.allclose(g, np.linalg.solve(np.array(A).T, np.ones(2)))
        assert tr.gradient(lambda x: np.sum(np.array(W) @ x), ad, np.ones(2))[0].tolist() == \
            [3.0, 3.0]
    assert [len(tapes) for _, tapes in ad.tapes.values()] == [1, 0]   # the second: eager
