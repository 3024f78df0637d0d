"""Numba or NumPy, measured (compiled_tape/choice.py): a unit NumPy runs faster moves
to NumPy, the gradient stays right, and the choice travels with a pickled tape."""
import pickle

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import choice


def layer(W, b, x):
    return np.sum(np.tanh(x @ W + b) ** 2)


REPLAY_FASTER = choice.replay_faster


@pytest.fixture
def measured(monkeypatch):
    """The measurement on, the whole-program comparison with the replay off (where a
    machine runs the replay faster, as one without SciPy's BLAS for numba does, it would
    decide instead of the units' choice under test)."""
    monkeypatch.setenv('TRACKED_NUMPY_CHOICE', '1')
    monkeypatch.setattr(choice, 'replay_faster', lambda tape, prog: None)


def _args(n=256):
    r = np.random.default_rng(0)
    return r.standard_normal((64, n)) / 8, r.standard_normal(n), r.standard_normal((n, 64))


def test_unit_measured_faster_runs_in_numpy(measured, monkeypatch):
    monkeypatch.setattr(choice, 'numpy_seconds', lambda instrs, env: 0.0)   # NumPy made free
    monkeypatch.setattr(choice, 'better', lambda tape, prog, again: True)
    W, b, x = _args()
    tape = tr.GradientTape(layer, W, b, x, wrt=(0, 1))
    ct = tr.compile(tape, background=False)
    chosen = ct.chosen_numpy
    # (without SciPy a large product has no kernel: the floors' run)
    assert chosen and [f for f in ct.fallbacks if 'without SciPy' not in str(f)] == []
    assert 'np.tanh' in [c.instr.name for c in chosen]
    assert 'NumPy measured faster' in str(chosen[0])
    W2 = W * 1.1
    val, g = ct.withgradient(W2, b, x)
    val_e, g_e = tr.withgradient(layer, W2, b, x)
    np.testing.assert_allclose(val, val_e, rtol=1e-12)
    for a, e in zip(g[:2], g_e[:2]):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-12)
    # the choice is pickled with the tape: a worker plans the same program
    back = pickle.loads(pickle.dumps(ct))
    assert [c.instr.i for c in back.chosen_numpy] == [c.instr.i for c in chosen]
    np.testing.assert_allclose(back.gradient(W2, b, x)[0], g[0], rtol=1e-12)


def test_kernels_kept_when_numpy_is_slower(measured, monkeypatch):
    monkeypatch.setattr(choice, 'numpy_seconds', lambda instrs, env: 1.0)   # made to cost 1 s
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.chosen_numpy == []


def test_off_by_environment():
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.chosen_numpy == []


def test_background_compile_switches_to_the_chosen_plan(measured, monkeypatch):
    monkeypatch.setattr(choice, 'numpy_seconds', lambda instrs, env: 0.0)
    monkeypatch.setattr(choice, 'better', lambda tape, prog, again: True)
    W, b, x = _args()
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)))
    ct.withgradient(W, b, x)
    assert ct.wait(60), ct.compile_error
    assert ct.chosen_numpy and ct.compiled.numpy
    g = ct.gradient(W * 0.9, b, x)
    g_e = tr.gradient(layer, W * 0.9, b, x)
    np.testing.assert_allclose(g[0], g_e[0], rtol=1e-10, atol=1e-12)


def test_new_plan_dropped_when_slower_on_the_whole(measured, monkeypatch):
    monkeypatch.setattr(choice, 'numpy_seconds', lambda instrs, env: 0.0)
    monkeypatch.setattr(choice, 'better', lambda tape, prog, again: False)
    W, b, x = _args()
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.chosen_numpy == [] and not ct.compiled.numpy


def _timed(monkeypatch, kernels, replay):
    """The race of the compiled program against the NumPy replay answering ``kernels``
    and ``replay`` seconds; the comparison on."""
    monkeypatch.setattr(choice, 'replay_faster', REPLAY_FASTER)
    monkeypatch.setattr(choice, '_race', lambda tape, first, second: (kernels, replay))


@pytest.mark.parametrize('background', [False, True], ids=['foreground', 'background'])
def test_the_replay_stays_when_measured_faster_on_the_whole(measured, monkeypatch, background):
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {})
    _timed(monkeypatch, kernels=1e-3, replay=1e-4)
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=background)
    assert ct.wait(30)
    assert ct.compiled is None                     # the NumPy replay answers
    chosen = ct.chosen_numpy
    assert len(chosen) == len(ct.program.instrs)
    assert 'NumPy replay measured faster on the whole (100 µs, 1000 µs compiled)' in str(chosen[0])
    W2 = W * 1.1
    val, g = ct.withgradient(W2, b, x)
    val_e, g_e = tr.withgradient(layer, W2, b, x)
    np.testing.assert_allclose(val, val_e, rtol=1e-12)
    np.testing.assert_allclose(g[0], g_e[0], rtol=1e-10, atol=1e-12)


def test_the_kernels_stay_when_the_replay_is_not_clearly_faster(measured, monkeypatch):
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {})
    _timed(monkeypatch, kernels=1e-4, replay=0.97e-4)      # within MARGIN
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.compiled is not None and ct.chosen_numpy == []
