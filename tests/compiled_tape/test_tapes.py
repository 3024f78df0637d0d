"""Recorded tapes replayed in NumPy (tracked/compiled_tape/tapes.py), against eager gradients."""
import dataclasses

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import GradientTape, JacobianTape, HessianTape

rng = np.random.default_rng(0)


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def loss_mlp(model, x, y):
    h = np.tanh(x @ model['W1'].T + model['b1'])
    out = h @ model['W2'].T + model['b2']
    return np.mean((out - y) ** 2)


def make_mlp(seed):
    r = np.random.default_rng(seed)
    return {'W1': r.standard_normal((8, 3)), 'b1': r.standard_normal(8),
            'W2': r.standard_normal((1, 8)), 'b2': r.standard_normal(1)}


def test_replay_matches_eager_on_new_inputs():
    f = lambda x, y: np.sum(np.sin(x) * y + x * x)
    tape = GradientTape(f, rng.standard_normal(4), rng.standard_normal(4))
    for seed in range(3):
        r = np.random.default_rng(seed + 10)
        x, y = r.standard_normal(4), r.standard_normal(4)
        val, grads = tape.withgradient(x, y)
        ev, eg = tr.api.withgradient(f, x, y)
        _close(val, ev)
        _close(grads[0], eg[0])
        _close(grads[1], eg[1])
        _close(tape(x, y), ev)


def test_model_tree_with_data_arguments_outside_wrt():
    model = make_mlp(0)
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))
    tape = GradientTape(loss_mlp, model, x, y, wrt=(0,))
    model2 = make_mlp(1)
    x2, y2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))
    val, (g, gx, gy) = tape.withgradient(model2, x2, y2)
    ev, (eg, _, _) = tr.api.withgradient(loss_mlp, model2, x2, y2)
    assert gx is None and gy is None
    assert set(g) == set(model)
    _close(val, ev)
    for k in model:
        _close(g[k], eg[k])


def test_out_writes_into_the_callers_arrays():
    model = make_mlp(0)
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))
    tape = GradientTape(loss_mlp, model, x, y, wrt=(0,))
    g = tape.gradient(model, x, y)
    model2 = make_mlp(2)
    res = tape.gradient(model2, x, y, out=g)
    assert res is g
    eg = tr.api.gradient(loss_mlp, model2, x, y)[0]
    for k in model:
        _close(g[0][k], eg[k])


def test_dataclass_and_tied_arrays():
    @dataclasses.dataclass
    class Lin:
        w: np.ndarray
        scale: float
        name: str

    w = rng.standard_normal(3)
    m = Lin(w, 2.0, 'lin')
    f = lambda m, x: np.sum(m[0].w * m[0].scale * m[1] * x)
    tape = GradientTape(f, (m, w), w)          # w twice in argument 0: one leaf there
    w2, x2 = rng.standard_normal(3), rng.standard_normal(3)
    m2 = (Lin(w2, 3.0, 'lin'), w2)
    g = tape.gradient(m2, x2)
    assert isinstance(g[0][0], Lin) and g[0][0].name is None
    _close(g[0][0].w, 2 * 3.0 * w2 * x2)               # total gradient of the tied array
    assert g[0][1] is g[0][0].w
    _close(g[0][0].scale, np.sum(w2 * w2 * x2))
    eg = tr.gradient(f, m2, x2)
    _close(g[0][0].w, eg[0][0].w)
    _close(g[1], eg[1])
    with pytest.raises(ValueError, match=r'structure.*array \(tied\)'):
        tape.gradient((Lin(w2, 3.0, 'lin'), w2.copy()), x2)   # not tied any more


def test_same_array_in_two_arguments_is_two_leaves_as_in_gradient():
    f = lambda a, b: np.sum(a * b * b)
    x = rng.standard_normal(3)
    tape = GradientTape(f, x, x)
    for a, b in [(x, x), (x, x.copy()), (x, 2 * x)]:
        g = tape.gradient(a, b)
        eg = tr.gradient(f, a, b)
        _close(g[0], eg[0])
        _close(g[1], eg[1])


def test_float32_gradients_keep_their_dtype():
    x = rng.standard_normal(3).astype(np.float32)
    tape = GradientTape(lambda x: np.sum(x * 2.0), x)
    g = tape.gradient(x)[0]
    assert g.dtype == np.float32
    _close(g, np.full(3, 2.0))


def test_scalar_arguments_and_tuple_outputs():
    f = lambda a, b: (a * b, a + b)
    tape = GradientTape(f, 2.0, 3.0)
    val, g = tape.withgradient(5.0, 7.0)
    assert val == (35.0, 12.0)
    assert g == (7.0, 5.0)


def test_shape_dtype_and_structure_errors_name_expected_and_given():
    tape = GradientTape(lambda x: np.sum(x * x), np.ones(5))
    with pytest.raises(ValueError, match=r'shape \(3,\).*recorded for shape \(5,\)'):
        tape.gradient(np.ones(3))                      # ReverseDiff replays this silently
    with pytest.raises(ValueError, match='float32.*float64'):
        tape.gradient(np.ones(5, dtype=np.float32))
    with pytest.raises(ValueError, match='structure'):
        tape.gradient([np.ones(5)])
    with pytest.raises(ValueError, match='1 arguments, got 2'):
        tape.gradient(np.ones(5), np.ones(5))
    tape2 = GradientTape(lambda d: np.sum(d['a']), {'a': np.ones(2)})
    with pytest.raises(ValueError,
                       match=r"expected \(\{'a': array\},\), given \(\{'b': array\},\)"):
        tape2.gradient({'b': np.ones(2)})


def test_non_scalar_output_needs_jacobian_tape():
    with pytest.raises(ValueError, match='JacobianTape'):
        GradientTape(lambda x: x * 2, np.ones(3))


def test_print_lists_instructions_with_shapes_and_dtypes():
    tape = GradientTape(lambda x: np.sum(np.sin(x)), np.ones(3))
    text = str(tape)
    assert 'np.sin(%0)' in text and 'np.cos(%0)' in text
    assert '(3,) float64' in text and '() float64' in text


def test_f_is_not_rerun_on_replay():
    calls = []

    def f(x):
        calls.append(1)
        return np.sum(x ** 3)
    tape = GradientTape(f, np.ones(2))
    tape.gradient(np.array([1.0, 2.0]))
    tape(np.array([1.0, 2.0]))
    assert len(calls) == 1


def test_where_mask_and_indices_are_recomputed_on_replay():
    f = lambda x: np.sum(np.where(x > 0, x, 0.1 * x) ** 2) + x[np.argmax(x)]
    tape = GradientTape(f, np.array([1.0, -2.0, 0.5]))
    x2 = np.array([-1.0, 2.0, 3.0])
    _close(tape.gradient(x2)[0], tr.api.gradient(f, x2)[0])


def test_custom_rule_is_rerun_on_every_replay():
    seen = []

    @tr.rule
    def cube(x):
        seen.append(1)
        return x ** 3, lambda dy: (dy * 3 * x ** 2,)
    tape = GradientTape(lambda x: np.sum(cube(x)), np.array([1.0, 2.0]))
    g1 = tape.gradient(np.array([1.0, 2.0]))[0]
    g2 = tape.gradient(np.array([3.0, -1.0]))[0]
    _close(g1, [3.0, 12.0])
    _close(g2, [27.0, 3.0])                            # not the pullback captured at recording


def test_custom_rule_on_data_only_is_recomputed():
    @tr.rule
    def double(x):
        return 2 * x, lambda dy: (2 * dy,)
    f = lambda w, x: np.sum(w * double(x))
    tape = GradientTape(f, np.ones(2), np.ones(2), wrt=(0,))
    _close(tape.gradient(np.ones(2), np.array([3.0, 4.0]))[0], [6.0, 8.0])


def test_jacobian_tape():
    f = lambda x, y: np.sin(x) * y
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    tape = JacobianTape(f, x, y)
    x2, y2 = rng.standard_normal(3), rng.standard_normal(3)
    val, (jx, jy) = tape.withjacobian(x2, y2)
    _close(val, f(x2, y2))
    _close(jx, np.diag(np.cos(x2) * y2))
    _close(jy, np.diag(np.sin(x2)))
    ex = tr.jacobian(f, x2, y2)
    _close(jx, ex[0])


def test_hessian_tape():
    W = rng.standard_normal((4, 4))
    f = lambda x: np.sum(np.tanh(W @ x)) + 0.5 * np.sum(x ** 2)
    tape = HessianTape(f, rng.standard_normal(4))
    x2 = rng.standard_normal(4)
    _close(tape.hessian(x2), tr.hessian(f, x2))
    _close(tape.gradient(x2), tr.api.gradient(f, x2)[0])
    _close(tape(x2), f(x2))


# --- identity and aliasing of arguments are part of what a tape is recorded for --------

def test_a_closure_constant_that_is_the_recorded_input_stays_a_constant():
    w0 = np.array([1.0, 2.0, 3.0])
    f = lambda w: np.sum((w - w0) ** 2)           # noqa: E731
    for replay in (tr.GradientTape(f, w0), tr.compile(tr.GradientTape(f, w0), background=False)):
        _close(replay.gradient(w0 - 0.5)[0], [-1.0, -1.0, -1.0])
    ad = tr.AutoCompiled(compile=False)
    _close(tr.gradient(f, ad, w0)[0], [0.0, 0.0, 0.0])
    _close(tr.gradient(f, ad, w0 - 0.5)[0], [-1.0, -1.0, -1.0])
    # while the input's own value (tr.data of it) follows the input on replay
    h = lambda w: np.sum(w * tr.data(w))          # noqa: E731
    _close(tr.GradientTape(h, w0).gradient(2 * w0)[0], 2 * w0)


def test_arrays_tied_on_replay_but_not_when_recorded_are_another_structure():
    W1, W2 = np.ones(2), 2 * np.ones(2)
    g = lambda m: np.sum(m['a'] * 3 + m['b'] ** 2)       # noqa: E731
    tape = tr.GradientTape(g, {'a': W1, 'b': W2})
    with pytest.raises(ValueError, match='tied'):
        tape.gradient({'a': W1, 'b': W1})
    g2 = lambda m: np.sum(m['a'] ** 2 + m['b'] ** 3)     # noqa: E731
    ctape = tr.compile(tr.GradientTape(g2, {'a': W1, 'b': W2}), background=False)
    assert 'gradient' in ctape.__dict__                 # the generated calls check it too
    with pytest.raises(ValueError, match='tied'):
        ctape.gradient({'a': W1, 'b': W1})
    ad = tr.AutoCompiled(compile=False)                 # records a tape for the tied case
    tied = tr.gradient(g, ad, {'a': W1, 'b': W1})[0]
    _close(tied['a'], [5.0, 5.0])                       # the total, in both places
    _close(tied['b'], [5.0, 5.0])


def test_an_integer_argument_is_guarded_on_replay():
    tape = tr.GradientTape(lambda x, n: x ** n, 2.0, 3)
    assert tape.gradient(2.0, 3) == (12.0, pytest.approx(8 * np.log(2.0)))
    with pytest.raises(tr.TapeGuardError, match='integer argument'):
        tape.gradient(2.0, 4)


def test_jacobian_tape_of_a_complex_output_is_complex():
    # J[k] = d Re(y_k) + i d Im(y_k), as tr.jacobian gives (the tape dropped Im)
    f = lambda t: np.exp(1j * t[0] * np.arange(3.0)) * t[0] + t[1] ** 2     # noqa: E731
    x = np.array([0.5, 0.2])
    tape = tr.JacobianTape(f, x)
    for t in (tape, tr.compile(tape, background=False)):
        J = t.jacobian(1.4 * x)[0]
        assert J.dtype == np.complex128
        np.testing.assert_allclose(J, tr.jacobian(f, 1.4 * x)[0], rtol=1e-12)


@pytest.mark.parametrize('Tape', [tr.JacobianTape, tr.HessianTape])
def test_jacobian_and_hessian_tapes_refuse_complex_arguments(Tape):
    with pytest.raises(ValueError, match='real and imaginary parts'):
        Tape(lambda z: np.sum(np.abs(z) ** 2), np.array([1 + 1j, 2.0]))
