"""Tiered execution (tracked/compiled_tape/tiers.py): a compiled tape replays in NumPy until
its kernels are compiled -- native ones in a background thread, numba's in a background
process -- then switches; failures leave the replay.

Each test compiles into its own empty cache folder, so the kernels really compile (a few
small kernels: seconds, bounded by the waits' timeouts).  The tests of the compiling
process turn native kernels off (``TRACKED_NATIVE=0``): with them every kernel here is
built without a process (test_native.py)."""
import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import base, cache, tiers

TIMEOUT = 300            # seconds: a slow, shared CI machine compiling a few kernels


def exact(x):
    # only IEEE-exact operations (no sum, no transcendental function): the same bits in
    # NumPy and in the kernels
    return x[0] * x[1] + 3.0 * x[2] * x[2] - x[3] / 4.0


def smooth(x, c):
    return np.sum(np.sin(x) * c + np.exp(-x * x)) + np.mean(x[1:] * x[:-1])


@pytest.fixture
def held_switch(monkeypatch):
    """The switch to the kernels waits until the test sets the returned event."""
    release = threading.Event()
    switch = base.Tape.switch_to

    def held(self, tiering, prog):
        release.wait(TIMEOUT)
        switch(self, tiering, prog)
    monkeypatch.setattr(base.Tape, 'switch_to', held)
    return release


def test_results_are_identical_before_and_after_the_switch(fresh_cache, held_switch):
    x = np.array([0.5, -1.5, 2.0, 3.0])
    ct = tr.compile(tr.GradientTape(exact, x))
    inputs = [np.array([1.0, 2.0, -3.0, 0.25]), np.array([-0.1, 7.0, 1e-3, 5.0])]
    before = [ct.withgradient(v) for v in inputs]
    assert ct.compiled is None                       # the NumPy replay answered
    held_switch.set()
    assert ct.wait(TIMEOUT), ct.compile_error
    assert ct.compiled is not None and ct.fallbacks == []
    after = [ct.withgradient(v) for v in inputs]
    for (v0, (g0,)), (v1, (g1,)) in zip(before, after):
        assert v0 == v1 and np.array_equal(g0, g1)   # bit for bit
    g = ct.gradient(inputs[0])
    assert ct.gradient(inputs[1], out=g) is g and np.array_equal(g[0], after[1][1][0])


def test_rounding_aside_the_switch_changes_nothing(fresh_cache, held_switch):
    x = np.linspace(-1.0, 1.0, 37)
    ct = tr.compile(tr.GradientTape(smooth, x, 1.5, wrt=(0,)))
    new = np.cos(np.arange(37.0))
    v0, (g0, _) = ct.withgradient(new, 0.5)
    with pytest.raises(ValueError, match='shape'):
        ct.gradient(np.ones(3), 0.5)                 # the same checks in both tiers
    held_switch.set()
    assert ct.wait(TIMEOUT), ct.compile_error
    v1, (g1, _) = ct.withgradient(new, 0.5)
    np.testing.assert_allclose(v1, v0, rtol=1e-13)
    np.testing.assert_allclose(g1, g0, rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match='shape'):
        ct.gradient(np.ones(3), 0.5)


def test_a_failed_compile_leaves_the_numpy_replay(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '0')
    monkeypatch.setattr(cache, 'WORKER', 'import sys; sys.exit("no compiler here")')
    ct = tr.compile(tr.GradientTape(exact, np.ones(4)))
    assert ct.wait(TIMEOUT) is False
    assert 'exited with 1' in str(ct.compile_error) and 'no compiler here' in str(ct.compile_error)
    v, (g,) = ct.withgradient(np.array([1.0, 2.0, 3.0, 4.0]))
    assert v == 1.0 * 2.0 + 27.0 - 1.0 and np.array_equal(g, [2.0, 1.0, 18.0, -0.25])


def test_a_killed_compile_leaves_the_numpy_replay(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '0')
    monkeypatch.setattr(cache, 'WORKER', 'import time; time.sleep(600)')
    ct = tr.compile(tr.GradientTape(exact, np.ones(4)))
    ct.gradient(np.ones(4))                          # the first call starts the compilation
    t = ct._tiering
    for _ in range(TIMEOUT * 10):
        if t.proc is not None or t.done.is_set():
            break
        t.done.wait(0.1)
    t.proc.kill()
    assert ct.wait(TIMEOUT) is False and 'exited with -9' in str(ct.compile_error)
    assert ct.compiled is None
    assert np.array_equal(ct.gradient(np.array([1.0, 2.0, 3.0, 4.0]))[0], [2.0, 1.0, 18.0, -0.25])


_COMPILE = r'''
import sys, warnings
import numpy as np, tracked as tr
from test_tiers import smooth
warnings.simplefilter('error')              # no CacheWarning: nothing was damaged
tape = tr.compile(tr.GradientTape(smooth, np.linspace(-1.0, 1.0, 37), 1.5, wrt=(0,)),
                  background=sys.argv[1] == 'background')
assert tape.wait(600), tape.compile_error
from tracked.compiled_tape import cache, entries
hits = [int(not (n in cache.built_here if entries.source_file(n).endswith('.ll')
                 else entries.missed(sys.modules[n])))
        for n, _ in tape.compiled.sources() if not n.startswith('vm_')]
v, (g, _) = tape.withgradient(np.cos(np.arange(37.0)), 0.5)
e, (eg, _) = tr.withgradient(smooth, np.cos(np.arange(37.0)), 0.5)
print(hits, bool(np.allclose(v, e, rtol=1e-13) and np.allclose(g, eg, rtol=1e-13)))
'''


def _python(code, *args):
    here = str(__import__('pathlib').Path(__file__).parent)
    return subprocess.Popen([sys.executable, '-c', f'import sys; sys.path.insert(0, {here!r})\n'
                             + code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize('native', ['0', '1'])
def test_two_processes_compiling_the_same_kernels_do_not_corrupt_the_cache(fresh_cache,
                                                                          monkeypatch, native):
    # one compiling in the background (a thread or a compiling process), one in the
    # foreground, started together: both publish the same entries; each keeps the one it
    # finds
    monkeypatch.setenv('TRACKED_NATIVE', native)
    procs = [_python(_COMPILE, how) for how in ('background', 'foreground')]
    for p in procs:
        out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
        assert out.split(']')[1].strip() == 'True'
    # a third process loads every kernel from the cache, checked, and compiles nothing
    out, err = _python(_COMPILE, 'foreground').communicate(timeout=TIMEOUT)
    hits, ok = out.split(']')
    assert set(json.loads(hits + ']')) == {1} and ok.strip() == 'True', err
    assert not list((fresh_cache).rglob('*.tmp'))
    assert not any((fresh_cache).glob('*/.staging/*'))


def test_one_compiling_process_at_a_time_and_shared_kernels_compile_once(fresh_cache,
                                                                          monkeypatch):
    running, most, started = [0], [0], []
    compile_all = tiers.Tiering._compile

    def counted(self, sources, cache):
        running[0] += 1
        most[0] = max(most[0], running[0])
        started.append(sources)
        try:
            compile_all(self, sources, cache)
        finally:
            running[0] -= 1
    monkeypatch.setattr(tiers.Tiering, '_compile', counted)
    # the same operations on other sizes: the same kernels, which the first process
    # compiles and the second tape then finds in the cache
    tapes = [tr.compile(tr.GradientTape(smooth, np.linspace(0.1, 1.0, n), 2.0)) for n in (5, 9)]
    assert all(ct.wait(TIMEOUT) for ct in tapes), [ct.compile_error for ct in tapes]
    assert most[0] == 1 and len(started) == 1


def test_a_module_another_thread_is_importing_is_waited_for(fresh_cache):
    # numba compiles a kernel while its module is imported: a second thread asking for
    # it then found it in sys.modules without its function ("partially initialized
    # module"), which failed background compilations when two tapes shared a kernel
    name = f'k_slow_import_{threading.get_ident()}'
    source = 'import time\ntime.sleep(0.5)\nvalue = 42\n'
    got, started = [], threading.Event()

    def first():
        started.set()
        got.append(cache.load(name, source).value)
    t = threading.Thread(target=first)
    t.start()
    started.wait()
    deadline = time.monotonic() + TIMEOUT
    while name not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.001)                        # until the first import is under way
    got.append(cache.load(name, source).value)
    t.join()
    assert got == [42, 42]
    del sys.modules[name]
