"""Threads hammering shared tapes: ``python hammer.py SCENARIO``, run by test_threads.py.

A child process, so that a crash (two calls in one kernel's buffers used to corrupt
the heap) fails one test instead of killing the test run.  The threads call at once,
each with its own arguments (and its own ``out=``), and keep every distinct result;
the results are then compared with single-threaded ones.  The last line printed is
JSON: calls made, distinct results that are wrong, exceptions raised.

Why bitwise: a call computes the same operations on the same inputs in the same
process, so it gives the same bits (the frames' arenas are aligned alike, so even
vectorised sums split alike); what a race produces is garbage, not rounding.  Where
several tiers may answer (eager, the NumPy replay, the kernels: they round
differently), a result must equal one of theirs exactly.
"""
import importlib.util
import json
import sys
import threading

import numpy as np

import tracked as tr

THREADS = 6


def key(result):
    """A result (a list of arrays and numbers) as bytes."""
    return b'|'.join(np.ascontiguousarray(r).tobytes() for r in result)


def hammer(call, n_calls):
    """Threads ``k < THREADS`` each calling ``call(k, i)`` for ``i < n_calls``, all at once:
    ``{'calls', 'errors', 'seen'}`` (``seen[k]``: the distinct results of thread k)."""
    seen = {k: set() for k in range(THREADS)}
    errors = []
    start = threading.Barrier(THREADS)

    def work(k):
        start.wait()
        try:
            for i in range(n_calls):
                seen[k].add(key(call(k, i)))
        except Exception as e:        # noqa: BLE001 -- reported to the test
            errors.append(f'{type(e).__name__}: {e}')
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)        # threads switch inside calls, not only between them
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return {'calls': THREADS * n_calls, 'errors': errors, 'seen': seen}


def single(*calls, n=1):
    """``{k: {bytes}}``: the results of ``call(k, i)`` for ``i < n``, one thread at a time."""
    return {k: {key(c(k, i)) for c in calls for i in range(n)} for k in range(THREADS)}


def judged(*runs, accepted):
    """The counts of hammer ``runs`` with the distinct results not in ``accepted``."""
    return {'calls': sum(r['calls'] for r in runs),
            'errors': [e for r in runs for e in r['errors']],
            'wrong': sum(len(r['seen'][k] - accepted[k]) for r in runs for k in range(THREADS))}


def total(*counts):
    return {'calls': sum(c['calls'] for c in counts), 'wrong': sum(c['wrong'] for c in counts),
            'errors': [e for c in counts for e in c['errors']]}


# --------------------------------------------------------------------------
# Scenarios: each returns the counts of its hammer runs
# --------------------------------------------------------------------------

rng = np.random.default_rng(0)
X, Y = rng.standard_normal((16, 8)), rng.standard_normal((16, 4))
WS = [rng.standard_normal((8, 4)) for _ in range(THREADS)]
XS = [np.abs(rng.standard_normal(6)) + 0.1 for _ in range(THREADS)]


def loss(W, x, y, c):
    return np.sum((np.tanh(x @ W) * c - y) ** 2)


def branchy(x):
    # a guard (the branch), fallbacks (no kernels for sort and cumsum): the general path
    y = np.sin(x) if np.sum(x) > 0 else np.cos(x)
    return np.sum(y[1:] * y[:-1]) + np.sum(np.sort(x) * np.arange(6.0)) + \
        np.sum(np.cumsum(x) ** 2)


def gradient_tapes(ct, bt, n_calls):
    """``ct`` (of ``loss``) by default and with an ``out=`` per thread, ``bt`` (of
    ``branchy``); the threads' scalar ``c`` goes into the arena on the compiled path."""
    outs = [ct.gradient(WS[k], X, Y, 1.0 + k) for k in range(THREADS)]

    def call(k, i):
        if i % 3 == 2:
            v, (g,) = bt.withgradient(XS[k])
            return [v, g]
        v, g = ct.withgradient(WS[k], X, Y, 1.0 + k, out=outs[k] if i % 3 else None)
        return [v, g[0]]
    accepted = single(call, n=3)
    return judged(hammer(call, n_calls), accepted=accepted)


def retraced(rt, n_calls):
    """``rt`` (``on_guard='retrace'``) shared by threads whose inputs take the other branch
    half the time: re-recorded over and over, it must answer each call from one whole
    recording, as a tape recorded on that input does."""
    def x(k, i):
        return XS[k] * (1.0 if (i + k) % 2 else -1.0)

    def call(k, i):
        v, (g,) = rt.withgradient(x(k, i))
        return [v, g]

    def fresh(k, i):
        v, (g,) = tr.GradientTape(branchy, x(k, i)).withgradient(x(k, i))
        return [v, g]
    accepted = single(fresh, n=2)
    return judged(hammer(call, n_calls), accepted=accepted)


def compiled():
    ct = tr.compile(tr.GradientTape(loss, WS[0], X, Y, 1.0, wrt=(0,)), background=False)
    bt = tr.compile(tr.GradientTape(branchy, XS[0]), background=False)
    # generated calls (without SciPy numba has no BLAS: the products run in NumPy, and
    # the tape takes the general path, which is then the one hammered)
    assert 'gradient' in ct.__dict__ or importlib.util.find_spec('scipy') is None
    rt = tr.compile(tr.GradientTape(branchy, XS[0], on_guard='retrace'), background=False)
    return total(gradient_tapes(ct, bt, 1500), retraced(rt, 8))


def replay():
    return total(gradient_tapes(tr.GradientTape(loss, WS[0], X, Y, 1.0, wrt=(0,)),
                                tr.GradientTape(branchy, XS[0]), 300),
                 retraced(tr.GradientTape(branchy, XS[0], on_guard='retrace'), 100))


def jacobian_hessian():
    def f(x):
        return np.tanh(np.outer(x, x[::-1])).sum(axis=0) * x

    def h(x):
        return np.sum(np.sin(x) * x[::-1]) + np.sum(x ** 4)
    counts = []
    for compiled in (False, True):
        jt, ht = tr.JacobianTape(f, XS[0]), tr.HessianTape(h, XS[0])
        if compiled:
            jt, ht = tr.compile(jt, background=False), tr.compile(ht, background=False)
        outs = [np.zeros((6, 6)) for _ in range(THREADS)]

        def call(k, i):
            if i % 3 == 0:
                v, (J,) = jt.withjacobian(XS[k])
                return [v, J]
            if i % 3 == 1:
                return [ht.hessian(XS[k], out=outs[k]), ht.gradient(XS[k])]
            return [ht.hessian(XS[k]), ht(XS[k])]
        accepted = single(call, n=3)
        counts.append(judged(hammer(call, 600 if compiled else 150), accepted=accepted))
    return total(*counts)


def auto():
    """One AutoCompiled from its first call on, so that the threads meet the eager first
    call, the recording, the NumPy replay and the switch to the kernels; half the calls
    with a Duplicated model per thread (out= into its stored gradient)."""
    def mlp_loss(m, x, y):
        return tr.logitcrossentropy(m(x), y)
    x = rng.standard_normal((32, 4))
    y = tr.onehot(np.arange(32) % 3, 3)
    models = [tr.Chain(tr.Dense(4, 16, tr.tanh, rng=10 + k), tr.Dense(16, 3, rng=50 + k))
              for k in range(THREADS)]
    dups = [tr.Duplicated(tr.fmap(np.copy, m)) for m in models]
    ad = tr.AutoCompiled()

    def flat(g):
        return [p for layer in g.layers for p in (layer.weight, layer.bias)]

    def call(k, i):
        if i % 2:
            return flat(tr.gradient(mlp_loss, ad, dups[k], tr.Const(x), tr.Const(y))[0])
        return flat(tr.gradient(mlp_loss, ad, models[k], x, y)[0])
    cold = hammer(call, 150)
    assert ad.wait(300), [t.compile_error for _, ts in ad.tapes.values() for t in ts]
    warm = hammer(call, 300)
    tape = tr.GradientTape(mlp_loss, models[0], x, y)          # the NumPy replay's answers
    accepted = single(call, lambda k, i: flat(tr.gradient(mlp_loss, models[k], x, y)[0]),
                      lambda k, i: flat(tape.gradient(models[k], x, y)[0]), n=2)
    return judged(cold, warm, accepted=accepted)


def switch():
    """A tape compiled in the background (into an empty cache: its kernels really
    compile) switches to them while the threads call it."""
    ct = tr.compile(tr.GradientTape(loss, WS[0], X, Y, 1.0, wrt=(0,)))

    def call(k, i):
        v, g = ct.withgradient(WS[k], X, Y, 1.0 + k)
        return [v, g[0]]
    runs = [hammer(call, 50)]
    while ct.compiled is None and not runs[-1]['errors'] and ct.compile_error is None:
        runs.append(hammer(call, 50))
    before = len(runs)
    runs.append(hammer(call, 50))      # the call that set ct.compiled may have run both
    assert ct.wait(300), ct.compile_error
    numpy = tr.GradientTape(loss, WS[0], X, Y, 1.0, wrt=(0,))

    def replayed(k, i):
        v, g = numpy.withgradient(WS[k], X, Y, 1.0 + k)
        return [v, g[0]]
    counts = judged(*runs, accepted=single(call, replayed))
    counts['runs_before_switch'] = before
    return counts


def issue_example():
    """The report: 8 threads each calling ``ct.gradient(W_k, x, y)`` 3 000 times on a
    foreground-compiled tape (13 of 24 000 gradients were wrong, without an error)."""
    global THREADS
    THREADS = 8
    ws = [rng.standard_normal((8, 4)) for _ in range(THREADS)]
    ct = tr.compile(tr.GradientTape(lambda W, x, y: np.sum((np.tanh(x @ W) - y) ** 2),
                                    ws[0], X, Y, wrt=(0,)), background=False)

    def call(k, i):
        return [ct.gradient(ws[k], X, Y)[0]]
    accepted = single(call)
    return judged(hammer(call, 3000), accepted=accepted)


SCENARIOS = {'issue_example': issue_example, 'compiled': compiled, 'replay': replay,
             'jacobian_hessian': jacobian_hessian, 'auto': auto, 'switch': switch}

if __name__ == '__main__':
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
