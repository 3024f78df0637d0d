"""Native kernels (tracked/compiled_tape/native.py): the kernels' source translated to LLVM IR
and built by llvmlite, without numba's front end.

The translation must mean what numba means by the same source: each expression below is
run as a kernel both ways on special values (signed zeros, infinities, NaN) and compared
bit for bit.  Then whole tapes: the workloads' kernels are all native, gradients agree
with the eager tape, a background compile needs no process, a failed build leaves the
NumPy replay, and what the translation does not take is compiled by numba."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape import cache, native, vm
from tracked.compiled_tape.codegen import Kernel

TIMEOUT = 300
SPECIAL = [-np.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, np.nan]
PAIRS = np.array(list(itertools.product(SPECIAL, SPECIAL))).T.copy()

FLOAT = ['x + y', 'x - y', 'x * y', 'x / y', '-x', 'np.maximum(x, y)', 'np.minimum(x, y)',
         'np.fmax(x, y)', 'np.fmin(x, y)', 'np.sign(x)', 'np.logaddexp(x, y)',
         'np.logaddexp2(x, y)', 'np.power(x, y)', 'np.arctan2(x, y)', 'np.hypot(x, y)',
         'np.copysign(x, y)', 'np.fmod(x, y)', '(x if x < y else y)', '(1.0 if x else 0.0)',
         '(1.0 if x != y else 0.0)', '(1.0 if x == y else 0.0)', '(1.0 if x <= y else 0.0)',
         '(1.0 if (x > y or x != x) else 0.0)', '(1.0 if not x else 2.0)', 'np.sqrt(x)',
         'np.exp(x)', 'np.exp2(x)', 'np.log(x)', 'np.log2(x)', 'np.log10(x)', 'np.tanh(x)',
         'np.sin(x)', 'np.cos(x)', 'np.tan(x)', 'abs(x)', 'np.abs(x)', 'np.floor(x)',
         'np.ceil(x)', 'np.trunc(x)', 'np.rint(x)', 'np.cbrt(x)', 'np.expm1(x)', 'np.log1p(x)',
         'np.sinh(x)', 'np.cosh(x)', 'np.arcsin(x)', 'np.arccos(x)', 'np.arctan(x)',
         'np.arcsinh(x)', 'np.arccosh(x)', 'np.arctanh(x)', 'np.isnan(x)', 'np.isinf(x)',
         'np.isfinite(x)', 'np.float32(x) * np.float32(y)', 'np.float32(x) + np.int64(2)',
         'x / np.int64(2)', 'np.int64(3) / np.int64(2) + x', 'np.rad2deg(x)', 'np.deg2rad(x)',
         'np.square(x)', 'math.sqrt(abs(x)) + math.pi', 'np.float64(x > y) - y']
INT = ['x + y', 'x - y', 'x * y', 'x / y', '-x', 'abs(x)', 'np.maximum(x, y)',
       'np.minimum(x, y)', 'np.sign(x)', '(x if x > y else y)', 'x & y', 'x | y', 'x ^ y',
       '(x == y) + (x < y)', 'np.sqrt(x * x)']
BOOL = ['x & y', 'x | y', 'x ^ y', 'not x', '(x and y)', '(x or y)', 'x == y', 'x != y',
        'np.maximum(x, y)', 'np.minimum(x, y)', 'bool(x + y)']


def _kernel(expr, codes):
    return Kernel(['n = T[p]', 'for i in range(n):', '    x = a0[U(i)]', '    y = a1[U(i)]',
                   f'    a2[U(i)] = {expr}'], list(codes))


def _both(monkeypatch, kernel, x, y, out_dtype):
    """The kernel's output, run natively and by numba."""
    got = []
    for flag in ('1', '0'):
        monkeypatch.setenv('TRACKED_NATIVE', flag)
        out = np.zeros(len(x), out_dtype)
        with np.errstate(all='ignore'):
            assert vm.run_kernel(kernel, [x.copy(), y.copy(), out], [len(x)]) == 1
        got.append(out)
    return got


def _native(kernel):
    name, _ = vm._source(kernel)
    return name.startswith('n_')


@pytest.mark.parametrize('expr', FLOAT)
def test_a_float_expression_means_what_numba_means(fresh_cache, monkeypatch, expr):
    kernel = _kernel(expr, 'FFF')
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    assert _native(kernel)
    mine, numbas = _both(monkeypatch, kernel, PAIRS[0], PAIRS[1], np.float64)
    # the same bits: signed zeros and NaN included
    assert np.array_equal(mine.view(np.int64), numbas.view(np.int64)) or \
        np.array_equal(mine, numbas, equal_nan=True) and np.array_equal(
            np.signbit(mine), np.signbit(numbas)), (expr, mine, numbas)


@pytest.mark.parametrize('expr', INT)
def test_an_integer_expression_means_what_numba_means(fresh_cache, monkeypatch, expr):
    kernel = _kernel(expr, 'IIF')
    values = np.array(list(itertools.product([-7, -1, 0, 1, 2, 5], repeat=2))).T.copy()
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    assert _native(kernel)
    mine, numbas = _both(monkeypatch, kernel, values[0], values[1], np.float64)
    assert np.array_equal(mine, numbas, equal_nan=True), (expr, mine, numbas)


@pytest.mark.parametrize('expr', BOOL)
def test_a_boolean_expression_means_what_numba_means(fresh_cache, monkeypatch, expr):
    kernel = _kernel(expr, 'BBB')
    values = np.array(list(itertools.product([False, True], repeat=2))).T.copy()
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    assert _native(kernel)
    mine, numbas = _both(monkeypatch, kernel, values[0], values[1], np.bool_)
    assert np.array_equal(mine, numbas), (expr, mine, numbas)


def test_float32_arrays_compute_in_float32(fresh_cache, monkeypatch):
    kernel = _kernel('np.tanh(x) * y + x / y', 'fff')
    x = np.linspace(-3, 3, 50).astype(np.float32)
    y = np.linspace(0.5, 2, 50).astype(np.float32)
    mine, numbas = _both(monkeypatch, kernel, x, y, np.float32)
    assert mine.dtype == np.float32 and np.array_equal(mine, numbas)


@pytest.mark.parametrize('source', [['n = T[p]', 'a0[U(0)] = a0[U(1)] // n'],
                                    ['a0[U(0)] = a0[U(1)] % 2.0'],
                                    ['a0[U(0)] = a0[U(1)] ** 2'],
                                    ['a0[U(0)] = np.nanmax(a0[U(1)])']])
def test_what_the_translation_does_not_take_is_numbas(fresh_cache, monkeypatch, source):
    kernel = Kernel(source, ['F'])
    with pytest.raises(native.Unsupported):
        native.translate(kernel)
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    assert not _native(kernel)                          # numba's module, the same kernel
    a = np.array([0.0, 7.0])
    assert vm.run_kernel(kernel, [a], [2]) == 1 and a[1] == 7.0


def _mlp():
    rng = np.random.default_rng(0)
    model = tr.Chain(tr.Dense(6, 8, tr.tanh, rng=rng), tr.Dense(8, 5, tr.relu, rng=rng),
                     tr.Dense(5, 3, rng=rng))
    x, y = rng.standard_normal((7, 6)), tr.nn.onehot(rng.integers(0, 3, 7), 3)
    return (lambda m, x, y: tr.nn.logitcrossentropy(m(x), y)), model, x, y


def _programs():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(12), rng.standard_normal((12, 12))

    def chain(x):
        for _ in range(20):
            x = np.sin(x) * 1.01 + 0.1
        return np.sum(x * x)

    def logistic(w, X, y):
        z = X @ w
        return np.mean(np.logaddexp(0.0, z) - y * z)

    def mixed(x, w):
        h = np.maximum(w @ x, 0.0) + np.abs(np.tanh(x)) * np.exp(-x * x)
        return np.sum(h ** 2) + np.max(h) - np.mean(np.sqrt(1.0 + x * x)) + np.sum(
            np.where(x > 0, x, 0.5 * x))

    X, y = rng.standard_normal((30, 12)), (rng.random(30) > 0.5).astype(float)
    f, model, mx, my = _mlp()
    return {'chain': (chain, (x,), (0,)), 'logistic': (logistic, (x, X, y), (0,)),
            'mixed': (mixed, (x, w), (0, 1)), 'mlp': (f, (model, mx, my), (0,)),
            'mixed32': (mixed, (x.astype(np.float32), w.astype(np.float32)), (0, 1))}


@pytest.mark.parametrize('name', list(_programs()))
def test_every_kernel_of_the_workloads_is_native_and_right(fresh_cache, monkeypatch, name):
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    f, args, wrt = _programs()[name]
    ct = tr.compile(tr.GradientTape(f, *args, wrt=wrt), background=False)
    names = [n for n, _ in ct.compiled.sources() if not n.startswith('vm_')]
    assert names and all(n.startswith('n_') for n in names), names
    scaled = [tr.fmap(lambda a: a * 0.75 if isinstance(a, np.ndarray) else a, a)
              for a in args]
    val, grads = ct.withgradient(*scaled)
    k = len(wrt)
    ev, egrads = tr.withgradient(lambda *d: f(*d, *scaled[k:]), *scaled[:k])
    tol = 1e-4 if name.endswith('32') else 1e-11
    np.testing.assert_allclose(val, ev, rtol=tol)
    for g, e in zip(tr.destructure(list(grads[:k]))[0], tr.destructure(list(egrads))[0]):
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * 1e-3)


def test_a_background_compile_of_native_kernels_starts_no_process(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    f, model, x, y = _mlp()
    ct = tr.compile(tr.GradientTape(f, model, x, y, wrt=(0,)))
    ct.withgradient(model, x, y)
    assert ct.wait(TIMEOUT), ct.compile_error
    assert ct._tiering.proc is None and ct.compiled is not None
    built = {n for n, _ in ct.compiled.sources() if n.startswith('n_')}
    assert built and built <= cache.built_here
    # the same model at another batch size: the same kernels, from the cache
    cache.built_here.clear()
    ct2 = tr.compile(tr.GradientTape(f, model, x[:3], y[:3], wrt=(0,)))
    ct2.withgradient(model, x[:3], y[:3])
    assert ct2.wait(TIMEOUT), ct2.compile_error
    assert not cache.built_here and ct2._tiering.proc is None


def test_a_failed_native_build_leaves_the_numpy_replay(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '1')

    def broken(ir):
        raise RuntimeError('LLVM is broken here')
    monkeypatch.setattr(native, 'build', broken)
    ct = tr.compile(tr.GradientTape(lambda x: np.sum(np.sin(x) * x), np.ones(3)))
    ct.gradient(np.ones(3))
    assert ct.wait(TIMEOUT) is False and 'LLVM is broken here' in str(ct.compile_error)
    np.testing.assert_allclose(ct.gradient(np.zeros(3))[0], np.zeros(3))
    with pytest.raises(RuntimeError, match='LLVM is broken here'):
        tr.compile(tr.GradientTape(lambda x: np.sum(np.sin(x) * x), np.ones(3)),
                   background=False)


def test_native_kernels_can_be_turned_off(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '0')
    ct = tr.compile(tr.GradientTape(lambda x: np.sum(np.cos(x) ** 2), np.ones(3)),
                    background=False)
    assert not any(n.startswith('n_') for n, _ in ct.compiled.sources())
    np.testing.assert_allclose(ct.gradient(np.full(3, 0.5))[0], -np.sin(1.0) * np.ones(3))


def _unaligned(n):
    a = np.frombuffer(bytearray(8 * n + 1), dtype=np.float64, offset=1, count=n)
    assert not a.flags.aligned and a.flags.writeable
    return a


class _Sub(np.ndarray):
    pass


def test_the_entry_refuses_what_numbas_refused_and_answers_as_it_did(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    f = lambda x: np.sum(np.sin(x) * x)               # noqa: E731
    ct = tr.compile(tr.GradientTape(f, np.ones(5)), background=False)
    assert ct.compiled.sources()[-1][0].startswith('n_')       # the entry is native
    entry, T = ct.compiled.vm, ct.compiled.pool[0].T
    readonly = np.ones(5)
    readonly.flags.writeable = False
    refused = [(), (T,), (T, np.ones(5)), (T, np.ones(5), np.ones(5), np.ones(5)),
               (1, np.ones(5), np.ones(5)), (T.astype(np.float64), np.ones(5), np.ones(5)),
               (T, [1.0] * 5, np.ones(5)), (T, np.ones(5, np.float32), np.ones(5)),
               (T, np.ones((5, 1)), np.ones(5)), (T, np.ones(10)[::2], np.ones(5)),
               (T, readonly, np.ones(5)), (T, np.ones(5).astype('>f8'), np.ones(5)),
               (T, _unaligned(5), np.ones(5)), (T, np.ones(5), np.ones(5, np.int64))]
    for args in refused:
        with pytest.raises(TypeError, match='compiled entry takes other arrays'):
            entry(*args)
    assert entry(T, np.ones(6), np.ones(6)) == -3                   # another shape
    x = np.ones(5)
    assert entry(T, x, x) == vm.ALIASED                              # out= overlaps x
    g = np.zeros(5)
    assert entry(T, np.full(5, 0.5).view(_Sub), g) == -1            # a subclass: taken
    np.testing.assert_allclose(g, np.sin(0.5) + 0.5 * np.cos(0.5))
    # what the entry refuses, the tape's general path takes (copies) or explains
    for x in (readonly, np.ones(10)[::2], _unaligned(5)):
        np.testing.assert_allclose(ct.gradient(x)[0], np.sin(x) + x * np.cos(x), rtol=1e-13)
    with pytest.raises(ValueError, match='dtype float32.*Record a new tape'):
        ct.gradient(np.ones(5, np.float32))


def test_threads_share_a_compiled_tape_through_the_native_entry(fresh_cache, monkeypatch):
    import threading
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    f, model, x, y = _mlp()
    ct = tr.compile(tr.GradientTape(f, model, x, y, wrt=(0,)), background=False)
    want = tr.destructure(tr.withgradient(f, model, x, y)[1][0])[0]
    bad = []

    def work():
        for _ in range(200):
            got = tr.destructure(ct.withgradient(model, x, y)[1][0])[0]
            if not np.allclose(got, want, rtol=1e-12, atol=1e-15):
                bad.append(got)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_a_variable_numba_would_widen_is_left_to_numba(fresh_cache, monkeypatch):
    # numba types `acc` float64 from its second assignment on; a translation typing it
    # by its first (int) would truncate every sum
    source = ['n = T[p]', 'acc = 0', 'for i in range(n):', '    acc += a0[U(i)]',
              'a1[U(0)] = acc']
    kernel = Kernel(source, ['F', 'F'])
    with pytest.raises(native.Unsupported, match='changes type'):
        native.translate(kernel)
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    out = np.zeros(1)
    assert vm.run_kernel(kernel, [np.array([0.25, 0.5]), out], [2]) == 1 and out[0] == 0.75


def test_a_warm_start_finds_native_code_by_name_without_translating(fresh_cache, monkeypatch):
    monkeypatch.setenv('TRACKED_NATIVE', '1')
    f, model, x, y = _mlp()
    first = tr.compile(tr.GradientTape(f, model, x, y, wrt=(0,)), background=False)
    names = [n for n, _ in first.compiled.sources()]
    # as a new process: nothing loaded, no translation remembered
    monkeypatch.setattr(cache, '_loaded', {})
    monkeypatch.setattr(vm, '_native', {})
    calls = []
    translate = native.translate
    monkeypatch.setattr(native, 'translate', lambda *a: calls.append(a) or translate(*a))
    again = tr.compile(tr.GradientTape(f, model, x, y, wrt=(0,)), background=False)
    assert [n for n, _ in again.compiled.sources()] == names and calls == []
    want = tr.destructure(first.withgradient(model, x, y)[1][0])[0]
    got = tr.destructure(again.withgradient(model, x, y)[1][0])[0]
    np.testing.assert_array_equal(got, want)
    # the names carry the translator's fingerprint: another translator, other entries
    monkeypatch.setattr(native, '_state', {'fingerprint': 'another translator'})
    monkeypatch.setattr(vm, '_native', {})
    other = tr.GradientTape(f, model, x, y, wrt=(0,)).new_compiled()
    assert not set(n for n, _ in other.sources()) & set(names)


_EXITING = r'''
import sys, time
from tracked.compiled_tape import native
ir = 'define i64 @f(i64 %x) {\n  ret i64 %x\n}\n'
native.build(ir)                    # LLVM set up, the exit hook registered
native._close()                     # what the interpreter's exit runs
t = time.perf_counter()
try:
    native.build(ir)
except RuntimeError as e:
    print('refused', 'exiting' in str(e), time.perf_counter() - t < 5)
'''


def test_no_llvm_job_starts_once_the_interpreter_exits():
    # LLVM working in a daemon thread while the interpreter finalised aborted the
    # process (an LLVM assertion or a segfault, in 4 of 11 runs of the README's quick
    # start in a fresh venv): the exit hook waits for the job in flight, then refuses
    out = subprocess.run([sys.executable, '-c', _EXITING], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['refused', 'True', 'True']


_SHORT = r'''
import sys, time
import numpy as np, tracked as tr
x = np.linspace(-1, 1, 50)
tr.gradient(lambda x: np.sum(np.tanh(x) * 2.0), x)       # starts native_ops's build
tape = tr.compile(tr.GradientTape(lambda x: np.sum(np.sin(x) ** 2), x))
tape.gradient(x)                                         # starts the tape's compile
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:                         # a busy main thread, then exit
    tr.gradient(lambda x: np.sum(x * x), x)
print('done')
'''


@pytest.mark.parametrize('seconds', ['0', '0.1', '0.3'])
def test_a_process_exiting_while_llvm_builds_exits_cleanly(seconds, tmp_path):
    env = dict(os.environ, TRACKED_CACHE_DIR=str(tmp_path))
    for _ in range(2):
        out = subprocess.run([sys.executable, '-c', _SHORT, seconds], capture_output=True,
                             text=True, timeout=120, env=env)
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        assert out.stdout.split() == ['done']
