"""Custom rules in recorded and compiled tapes (tracked/custom.py, compiled_tape/record.py):
a rule whose forward cannot run on tracked values (math, SciPy, C code) is recorded as
opaque instructions that call the user's function and its pullback again on every
replay.  Every replay is checked against the eager gradient at new inputs."""
import math

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import GradientTape, JacobianTape, HessianTape

special = pytest.importorskip('scipy.special')

rng = np.random.default_rng(3)
CALLS = []                                   # (rule, whether x was tracked) per forward call


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _derf(x):
    return 2 / np.sqrt(np.pi) * np.exp(-x ** 2)


@tr.rule
def verf(x):
    """math.erf through np.vectorize: raises on tracked values."""
    CALLS.append(('verf', tr.istracked(x)))
    return np.vectorize(math.erf)(x), lambda dy: (dy * _derf(x),)


# A ufunc tracked has no rule for (scipy.special's ufuncs have rules now).
_ERF_UFUNC = np.frompyfunc(math.erf, 1, 1)


@tr.rule
def serf(x):
    """erf as a ufunc tracked has no rule for."""
    return np.asarray(_ERF_UFUNC(x), dtype=float), lambda dy: (dy * _derf(x),)


@tr.rule
def merf(x):
    """math.erf of a scalar: reads float(x), which would be a guard."""
    return math.erf(x), lambda dy: dy * _derf(x)


def loss(w, x):
    return np.sum((verf(x @ w) - 0.5) ** 2) + 0.1 * np.sum(w ** 2)


def _inputs(seed):
    r = np.random.default_rng(seed)
    return r.standard_normal(3), r.standard_normal((5, 3))


@pytest.fixture(scope='module')
def compiled_loss():
    w, x = _inputs(0)
    tape = GradientTape(loss, w, x, wrt=(0,))
    return tape, tr.compile(tape, background=False)


# --------------------------------------------------------------------------
# NumPy replay
# --------------------------------------------------------------------------

@pytest.mark.parametrize('rule', [verf, serf])
def test_replayed_gradient_follows_the_input(rule):
    f = lambda x: np.sum(rule(x) * x)        # noqa: E731
    tape = GradientTape(f, np.array([0.1, 0.5, -0.3]))
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(3)
        val, (g,) = tape.withgradient(x)
        ev, (eg,) = tr.withgradient(f, x)
        _close(val, ev)
        _close(g, eg)
        _close(g, special.erf(x) + _derf(x) * x)


def test_scalar_rule_that_reads_float_records_no_guard():
    f = lambda x: merf(x) * x                # noqa: E731
    tape = GradientTape(f, 0.3)
    assert tape.guards == []
    for x in (0.7, -1.2, 2.5):
        assert tape.gradient(x)[0] == pytest.approx(math.erf(x) + _derf(x) * x, rel=1e-12)


def test_forward_is_called_again_on_plain_values_at_every_replay():
    w, x = _inputs(1)
    CALLS.clear()
    tape = GradientTape(loss, w, x, wrt=(0,))
    assert CALLS == [('verf', True), ('verf', False)]     # the attempt, then plain
    CALLS.clear()
    for seed in (2, 3):
        w2, x2 = _inputs(seed)
        _close(tape.gradient(w2, x2)[0], tr.gradient(loss, w2, x2)[0])
    assert CALLS == [('verf', False)] * 4                  # one replay, one eager call each


def test_printout_says_which_instructions_are_opaque():
    tape = GradientTape(lambda x: np.sum(verf(x)), np.zeros(2))
    text = str(tape)
    assert 'verf[opaque](%0)' in text
    assert 'verf[opaque].pullback[0](' in text
    assert '_state' not in text and 'object at' not in text
    names = [ins.name for ins in tape.instructions]
    assert names.count('verf[opaque]') == 1 and names.count('verf[opaque].pullback[0]') == 1


def test_guards_of_a_failed_attempt_are_dropped():
    @tr.rule
    def clipped_erf(x):
        scale = 2.0 if float(np.max(x)) > 100 else 1.0      # a guard while tracked
        return np.vectorize(math.erf)(x) * scale, lambda dy: (dy * _derf(x) * scale,)
    f = lambda x: np.sum(clipped_erf(x))     # noqa: E731
    tape = GradientTape(f, np.array([0.1, 0.2]))
    assert tape.guards == []                 # the opaque replay re-runs the whole function
    x = np.array([0.4, -0.9])
    _close(tape.gradient(x)[0], _derf(x))
    _close(tape.gradient(x + 200)[0], 2 * _derf(x + 200))


def test_opaque_rule_on_data_and_parameters_with_keywords():
    @tr.rule
    def scaled_erf(x, s, scale=1.0):
        e = special.erf(x)
        return e * s * scale, lambda dy: (dy * _derf(x) * s * scale, dy * e * scale)
    f = lambda s, x: np.sum(scaled_erf(x, s, scale=2.0) ** 2)    # noqa: E731
    tape = GradientTape(f, np.ones(3), np.zeros(3), wrt=(0,))
    for seed in range(2):
        s, x = np.random.default_rng(seed).standard_normal((2, 3))
        g, gx = tape.gradient(s, x)
        assert gx is None
        _close(g, tr.gradient(f, s, x)[0])


def test_pullback_that_cannot_run_on_tracked_values_is_recorded_opaque():
    @tr.rule
    def log_scipy_pullback(x):
        return np.log(x), lambda dy: (dy * np.vectorize(math.exp)(0 * x) / x,)   # exp(0) == 1
    f = lambda x: np.sum(log_scipy_pullback(x) * x)     # noqa: E731
    tape = GradientTape(f, np.array([1.0, 2.0]))
    assert 'log_scipy_pullback[opaque].pullback[0]' in str(tape)
    x = np.array([0.5, 3.0])
    _close(tape.gradient(x)[0], np.log(x) + 1)


def test_jacobian_tape_with_an_opaque_rule():
    f = lambda x: serf(x) * x[::-1]          # noqa: E731
    tape = JacobianTape(f, np.zeros(3))
    x = rng.standard_normal(3)
    _close(tape.jacobian(x)[0], tr.jacobian(f, x)[0])


# --------------------------------------------------------------------------
# Nested recordings: through the cotangent only
# --------------------------------------------------------------------------

def penalty(w, x):
    """||d/dx sum(w * erf(x))||^2: depends on w through the opaque pullback's cotangent."""
    g = tr.gradient(lambda z: np.sum(w * serf(z)), x)[0]
    return np.sum(g ** 2)


def test_recorded_penalty_is_differentiable_in_the_cotangent():
    w, x = np.array([0.3, -1.2, 2.0]), np.array([0.1, 0.5, -0.3])
    tape = GradientTape(penalty, w, x, wrt=(0,))
    assert 'serf[opaque].pullback[0].T(' in str(tape)
    for seed in range(2):
        w2, x2 = np.random.default_rng(seed).standard_normal((2, 3))
        _close(tape.gradient(w2, x2)[0], 2 * w2 * _derf(x2) ** 2)
    ctape = tr.compile(tape, background=False)
    names = [f.instr.name for f in ctape.fallbacks]
    assert names == ['serf[opaque]', 'serf[opaque].pullback[0]', 'serf[opaque].pullback[0].T']
    assert ctape.fallbacks[0].reason == 'no kernel form for serf[opaque]'
    w2, x2 = rng.standard_normal((2, 3))
    _close(ctape.gradient(w2, x2)[0], 2 * w2 * _derf(x2) ** 2)


def test_recorded_second_derivative_in_the_input_is_exact():
    # the opaque rule's pullback is rebuilt over the recorded x (issue 28 item 2): the
    # tape records its NumPy operations and replays them at new inputs
    f = lambda x: np.sum(serf(x))  # noqa: E731
    ht = HessianTape(f, np.zeros(3))
    tape = GradientTape(penalty, np.ones(3), np.zeros(3))           # x differentiated too
    ctape = tr.compile(tape, background=False)
    for seed in range(2, 4):
        w, x = np.random.default_rng(seed).standard_normal((2, 3))
        _close(ht.hessian(x), np.diag(-2 * x * _derf(x)))
        eager = tr.gradient(penalty, w, x)
        for got in (tape.gradient(w, x), ctape.gradient(w, x)):
            _close(got[0], eager[0])
            _close(got[1], eager[1])
        h = 1e-6
        fd = [(penalty(w, x + h * e) - penalty(w, x - h * e)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(eager[1], fd, rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------
# Compiled tapes and AutoCompiled
# --------------------------------------------------------------------------

def test_compiled_opaque_rule_matches_eager_at_new_inputs(compiled_loss):
    tape, ctape = compiled_loss
    assert [f.instr.name for f in ctape.fallbacks] == ['verf[opaque]', 'verf[opaque].pullback[0]']
    assert 'opaque' in repr(ctape.fallbacks[0])
    out = None
    for seed in range(2, 5):
        w, x = _inputs(seed)
        val, (g, gx) = ctape.withgradient(w, x)
        ev, (eg, _) = tr.withgradient(loss, w, x)
        _close(val, ev)
        _close(g, eg)
        assert gx is None
        out = ctape.gradient(w, x, out=out) if out is not None else ctape.gradient(w, x)
        _close(out[0], eg)


def test_auto_compiled_opaque_rule():
    ad = tr.AutoCompiled()
    f = lambda x: np.sum(serf(x) * np.cos(x))      # noqa: E731
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal(4)
        _close(tr.gradient(f, ad, x)[0], tr.gradient(f, x)[0])
