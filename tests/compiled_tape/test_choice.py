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
    monkeypatch.setattr(choice, '_race', lambda first, second, ratio, label='':
                        (kernels, replay, kernels / replay))


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
    assert 'NumPy replay measured faster on the whole (100 µs, 1000 µs compiled' in str(chosen[0])
    W2 = W * 1.1
    val, g = ct.withgradient(W2, b, x)
    val_e, g_e = tr.withgradient(layer, W2, b, x)
    np.testing.assert_allclose(val, val_e, rtol=1e-12)
    np.testing.assert_allclose(g[0], g_e[0], rtol=1e-10, atol=1e-12)


def test_the_kernels_stay_when_the_replay_is_not_clearly_faster(measured, monkeypatch):
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {})
    _timed(monkeypatch, kernels=1e-4, replay=0.995e-4)     # within WHOLE_MARGIN
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.compiled is not None and ct.chosen_numpy == []


# -- the whole-program race, on the public calls -----------------------------------------

class Clock:
    """A stand-in for ``time`` whose ``perf_counter`` advances only by what the fake calls
    say they cost: the race's statistics, tested without a machine's noise."""

    def __init__(self):
        self.now = 0.0
        self.cpu = 0.0               # this thread's CPU seconds
        self.log = []

    def perf_counter(self):
        return self.now

    def thread_time(self):
        return self.cpu

    def sleep(self, seconds):
        self.log.append('sleep')
        self.now += seconds

    def call(self, name, costs, waiting=0.0):
        """A call named ``name`` costing ``costs[k]`` seconds its k-th time (the last
        repeated), of which ``waiting`` (a fraction) not running: the GIL held
        elsewhere; logged."""
        costs = list(costs)

        def fn():
            self.log.append(name)
            t = costs.pop(0) if len(costs) > 1 else costs[0]
            self.now += t
            self.cpu += t * (1 - (waiting() if callable(waiting) else waiting))
        return fn


def test_race_takes_medians_of_interleaved_rounds(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    # one lucky round does not make the steady 3 ms faster than a steady 2 ms (a best-of
    # said it did), nor does one slow round make 2 ms slower
    lucky = clock.call('a', [3e-3, 3e-3, 0.1e-3] + [3e-3])
    steady = clock.call('b', [2e-3, 2e-3, 2e-3, 50e-3] + [2e-3])
    a, b, r = choice._race([lucky], [steady], 1.0)
    assert (a, b, r) == (pytest.approx(3e-3), pytest.approx(2e-3), pytest.approx(1.5))
    # a warm-up call each, then rounds taking turns at going first; the two odd rounds
    # delay the sign test: round k has k - 2 of its k ratios above 1, apart by 2.2
    # deviations (k - 4 >= 2.2 sqrt(k)) from round 12
    rounds = clock.log[2:]
    assert [rounds[k:k + 2] for k in range(0, 6, 2)] == [['b', 'a'], ['a', 'b'], ['b', 'a']]
    assert len(rounds) == 2 * 12


def test_race_stops_when_clear(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    a, b, r = choice._race([clock.call('a', [1e-3])], [clock.call('b', [2e-3])], 1.0)
    assert (a, b, r) == (pytest.approx(1e-3), pytest.approx(2e-3), pytest.approx(0.5))
    assert len(clock.log) == 2 + 2 * choice.MIN_ROUNDS
    # 5% apart: as clear
    clock.log.clear()
    choice._race([clock.call('a', [2.1e-3])], [clock.call('b', [2e-3])], 1.0)
    assert len(clock.log) == 2 + 2 * choice.MIN_ROUNDS


def test_race_goes_on_while_close_until_its_budget(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    # ratios alternately above and below 1: the sign test never ends the race
    a, b, r = choice._race([clock.call('a', [1.0, 1.2] * 500)], [clock.call('b', [1.1])], 1.0)
    assert b == pytest.approx(1.1)
    assert r in (pytest.approx(1.0 / 1.1), pytest.approx(1.0), pytest.approx(1.2 / 1.1))
    rounds = (len(clock.log) - 2) // 2
    # BUDGET plus RUNS_BUDGET runs: 0.5 + 25 * 1.05 s, about 12 rounds of 2.2 s
    budget = choice.BUDGET + choice.RUNS_BUDGET * (1.0 + 1.1) / 2
    assert choice.MIN_ROUNDS < rounds < choice.MAX_ROUNDS
    assert (rounds - 1) * 2.2 <= budget + 2.3 and rounds * 2.3 >= budget - 2.3


def test_race_run_again_when_one_side_waited(monkeypatch):
    """Calls that spent their time waiting for the GIL (another thread of the process
    held it: native_ops's build made W1's compiled calls 5 ms instead of 36 µs) do not
    decide: the race is run again once they no longer wait."""
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    waits = [0.99] * (1 + choice.MIN_ROUNDS)       # the warm-up and the first attempt
    compiled = clock.call('a', [5e-3] * len(waits) + [40e-6],
                          waiting=lambda: waits.pop(0) if waits else 0.0)
    a, b, r = choice._race([compiled], [clock.call('b', [0.5e-3])], 1 / choice.WHOLE_MARGIN)
    assert clock.log.count('sleep') == 1
    assert (a, b, r) == (pytest.approx(40e-6), pytest.approx(0.5e-3), pytest.approx(0.08))


def test_race_undecided_when_always_waiting(monkeypatch):
    """A side waiting through the whole budget gives no answer (None): the kernels stay."""
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    assert choice._race([clock.call('a', [5e-3], waiting=0.99)], [clock.call('b', [0.5e-3])],
                        1.0) is None
    runs = (5e-3 + 0.5e-3) / 2
    assert clock.now <= choice.BUDGET + choice.RUNS_BUDGET * runs + 2 * choice.PAUSE
    assert clock.log.count('sleep') > 3


def test_race_alike_waiting_cancels(monkeypatch):
    """Waiting on both sides alike (BLAS threads, other processes) is no reason to run a
    race again: it cancels in the ratios."""
    clock = Clock()
    monkeypatch.setattr(choice, 'time', clock)
    a, b, r = choice._race([clock.call('a', [2e-3], waiting=0.4)],
                           [clock.call('b', [1e-3], waiting=0.3)], 1.0)
    assert r == pytest.approx(2.0) and 'sleep' not in clock.log


def _busy(seconds):
    """Work (not wait: the race discounts a side that waits) for ``seconds``."""
    import time
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _slowed(monkeypatch, cls, name, seconds):
    """``cls.name`` made ``seconds`` slower per call, working."""
    real = getattr(cls, name)

    def slow(*args, **kwargs):
        _busy(seconds)
        return real(*args, **kwargs)
    monkeypatch.setattr(cls, name, slow)


@pytest.fixture
def whole(monkeypatch):
    """The measurement on, with no unit measured faster in NumPy: the whole-program race
    alone decides."""
    monkeypatch.setenv('TRACKED_NUMPY_CHOICE', '1')
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {})


def jac_f(x):
    return np.tanh(x) * x[::-1] + np.sum(x ** 2)


@pytest.mark.parametrize('slower', ['compiled', 'replay'])
def test_the_faster_public_call_is_kept(whole, monkeypatch, slower):
    from tracked.compiled_tape.base import Tape
    from tracked.compiled_tape.compiled import CompiledProgram
    if slower == 'compiled':
        _slowed(monkeypatch, CompiledProgram, 'run', 3e-3)
    else:
        _slowed(monkeypatch, Tape, 'replay_into', 3e-3)
    x = np.linspace(-1.0, 1.0, 20)
    ct = tr.compile(tr.JacobianTape(jac_f, x), background=False)
    assert (ct.compiled is None) == (slower == 'compiled')
    if slower == 'compiled':
        assert 'NumPy replay measured faster on the whole' in str(ct.chosen_numpy[0])
    else:
        assert ct.chosen_numpy == []
    x2 = x * 0.7
    val, (J,) = ct.withjacobian(x2)
    t = np.tanh(x2)
    J_exact = np.diag((1 - t ** 2) * x2[::-1]) + np.fliplr(np.diag(t)) + 2 * x2[None, :]
    np.testing.assert_allclose(val, jac_f(x2), rtol=1e-13)
    np.testing.assert_allclose(J, J_exact, rtol=1e-12, atol=1e-14)


def test_compiled_calls_waiting_do_not_send_the_tape_to_the_replay(whole, monkeypatch):
    """Compiled calls 3 ms slower by waiting, not working (``time.sleep`` releases the
    GIL, as a call does whose kernels let another thread take it), keep the kernels:
    the race runs again until its budget, then gives no answer."""
    import time
    from tracked.compiled_tape.compiled import CompiledProgram
    real = CompiledProgram.run

    def waits(*args, **kwargs):
        time.sleep(3e-3)
        return real(*args, **kwargs)
    monkeypatch.setattr(CompiledProgram, 'run', waits)
    x = np.linspace(-1.0, 1.0, 20)
    ct = tr.compile(tr.JacobianTape(jac_f, x), background=False)
    assert ct.compiled is not None and ct.chosen_numpy == []


def test_race_ends_within_its_budget():
    """A near-tie (the same call on both sides) on the real clock: the race ends by its
    budget, ``BUDGET`` plus ``RUNS_BUDGET`` calls."""
    import time
    x = np.linspace(-1.0, 1.0, 2000)
    call = lambda: np.tanh(x) * x          # noqa: E731
    t = time.perf_counter()
    call()
    run = time.perf_counter() - t
    t = time.perf_counter()
    a, b, r = choice._race([call], [call], 1.0)
    took = time.perf_counter() - t
    assert 0.5 < r < 2.0
    assert took < choice.BUDGET + choice.RUNS_BUDGET * run + 0.5


def _elementwise_layer(W, b, x):
    return np.sum(np.tanh(x * W + b) ** 2)


def test_the_race_times_the_generated_call(whole, monkeypatch):
    """A compiled GradientTape answers through generated calls, which never go through
    ``CompiledProgram.run``: a slow ``run`` (what the race timed before) must not send
    the tape back to the replay, nor a slow general path (what only the replay takes)."""
    from tracked.compiled_tape.base import Tape
    from tracked.compiled_tape.compiled import CompiledProgram
    _slowed(monkeypatch, CompiledProgram, 'run', 3e-3)
    # elementwise: every step a kernel, with or without SciPy (without it a product runs
    # in NumPy, and a plan with NumPy steps has no generated call)
    layer = _elementwise_layer
    W, b, x = np.linspace(0.5, 1.5, 8), np.linspace(-1, 1, 8), _args(8)[2].T.copy()
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert 'withgradient' in ct.__dict__             # the generated call serves
    assert ct.compiled is not None and ct.chosen_numpy == []
    monkeypatch.undo()
    monkeypatch.setenv('TRACKED_NUMPY_CHOICE', '1')
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {})
    _slowed(monkeypatch, Tape, '_leaves', 3e-3)     # argument checks: the general path's
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)), background=False)
    assert ct.compiled is not None
    val, g = ct.withgradient(W * 1.1, b, x)
    val_e, g_e = tr.withgradient(layer, W * 1.1, b, x)
    np.testing.assert_allclose(val, val_e, rtol=1e-12)
    np.testing.assert_allclose(g[0], g_e[0], rtol=1e-10, atol=1e-12)


def test_background_switches_back_to_the_replay(whole, monkeypatch, fresh_cache):
    """In the background, the first plan serves while a second one's new kernels compile;
    if the replay then wins the race, the tape goes back to replaying."""
    from tracked.compiled_tape.base import Tape
    switched = []
    real_switch = Tape.switch_to

    def switch_to(self, tiering, prog):
        switched.append(prog)
        real_switch(self, tiering, prog)
    monkeypatch.setattr(Tape, 'switch_to', switch_to)
    monkeypatch.setattr(choice, 'choose', lambda tape, prog: {
        ins.i: 'made up' for ins in tape.program.instrs if ins.name == 'np.tanh'})
    monkeypatch.setattr(choice, 'better', lambda tape, prog, again: True)
    _timed(monkeypatch, kernels=1e-3, replay=1e-4)
    W, b, x = _args(8)
    ct = tr.compile(tr.GradientTape(layer, W, b, x, wrt=(0, 1)))
    ct.withgradient(W, b, x)
    assert ct.wait(60), ct.compile_error
    assert len(switched) == 2 and switched[0] is not None and switched[1] is None
    assert ct.compiled is None and 'withgradient' not in ct.__dict__
    g = ct.gradient(W * 0.9, b, x)
    np.testing.assert_allclose(g[0], tr.gradient(layer, W * 0.9, b, x)[0], rtol=1e-12)


def test_recorded_arguments_rebuild_every_kind_of_leaf():
    """The race calls the tape as a user does, on arguments rebuilt from the recording:
    trees, Python floats, constant ints, tied arrays."""
    from tracked.compiled_tape.firstrun import recorded_args

    def f(p, s, n, flag):
        return np.sum(p['w'] * s + p['v'] ** n) * (2.0 if flag else 1.0)
    w = np.arange(3.0)
    p = {'w': w, 'v': np.ones(3) * 0.5, 'tied': w}
    tape = tr.GradientTape(f, p, 1.5, 2, True)
    args = recorded_args(tape)
    assert tape.checker(args) is not None
    assert type(args[1]) is float and args[1] == 1.5 and args[2] == 2 and args[3] is True
    assert args[0]['w'] is args[0]['tied'] and args[0]['w'] is not w
    calls = tape.timed_calls(None)
    assert len(calls) == 1            # a Python float's gradient is no out= array
    val, g = calls[0]()
    assert val == pytest.approx(f(p, 1.5, 2, True))
    np.testing.assert_allclose(g[0]['w'], 2 * 1.5 * np.ones(3))
