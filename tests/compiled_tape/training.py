"""The training loops of the README and docs/guide/training.md, on a small model, for
test_long_runs.py and benchmarks/training_memory.py: what memory a long run keeps.

``loop(style, steps)`` warms a loop up (the compiled styles until their kernels run),
then runs ``steps`` steps under tracemalloc and returns what is still allocated at the
end (bytes), the time taken and how many tapes the loop's backend holds.
"""
import gc
import time
import tracemalloc

import numpy as np

import tracked as tr

STYLES = ('train', 'train adtype=AutoCompiled', 'train tape=', 'gradient + update',
          'withgradient AutoCompiled', 'closure per step AutoCompiled',
          'Duplicated AutoCompiled')
BATCHES = 4
TIMEOUT = 300


def loss(m, x, y):
    return tr.mse(m(x), y)


def make(style, seed=0):
    """``(run(n), wait(), tapes())``: ``run`` takes ``n`` steps of ``style`` (a batch
    each, a new one for the closure), ``wait`` waits for its kernels, ``tapes`` counts
    the tapes its backend keeps."""
    rng = np.random.default_rng(seed)
    model = tr.Chain(tr.Dense(2, 1, tr.tanh, rng=1))
    batches = [(rng.standard_normal((8, 2)), rng.standard_normal((8, 1)))
               for _ in range(BATCHES)]
    state = tr.setup(tr.Descent(1e-3), model)
    ad = tr.AutoCompiled()
    backend = {'tapes': lambda: len(ad.tapes), 'wait': lambda: ad.wait(TIMEOUT)}
    if style.startswith('train'):
        kw = {}
        if style == 'train adtype=AutoCompiled':
            kw = {'adtype': ad}
        elif style == 'train tape=':
            ctape = kw['tape'] = tr.compile(tr.GradientTape(loss, model, *batches[0], wrt=(0,)))
            backend = {'tapes': lambda: 1, 'wait': lambda: ctape.wait(TIMEOUT)}

        def run(n):
            for _ in range(n // BATCHES):
                tr.train(loss, model, batches, state, progress=False, **kw)
    elif style == 'gradient + update':
        def run(n):
            for i in range(n):
                tr.update(state, model, tr.gradient(loss, model, *batches[i % BATCHES])[0])
    elif style == 'withgradient AutoCompiled':
        def run(n):
            for i in range(n):
                _, (g, _, _) = tr.withgradient(loss, ad, model, *batches[i % BATCHES])
                tr.update(state, model, g)
    elif style == 'closure per step AutoCompiled':
        def run(n):
            for _ in range(n):
                xb, yb = rng.standard_normal((8, 2)), rng.standard_normal((8, 1))
                _, (g,) = tr.withgradient(lambda m: loss(m, xb, yb), ad, model)
                tr.update(state, model, g)
    elif style == 'Duplicated AutoCompiled':
        dup = tr.Duplicated(model)
        state = tr.setup(tr.Descent(1e-3), dup)

        def run(n):
            for i in range(n):
                x, y = batches[i % BATCHES]
                tr.gradient(loss, ad, dup, tr.Const(x), tr.Const(y))
                tr.update(state, dup)
    else:
        raise ValueError(style)
    return run, backend['wait'], backend['tapes']


def loop(style, steps, warmup=100):
    """``(bytes still allocated, seconds, tapes kept)`` after ``steps`` steps of
    ``style``, counted from the end of a warm-up with the kernels in use."""
    run, wait, tapes = make(style)
    run(warmup)
    assert wait(), f'{style}: the kernels did not take over'
    run(warmup)
    gc.collect()
    tracemalloc.start()
    try:
        start = time.perf_counter()
        run(steps)
        seconds = time.perf_counter() - start
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return kept, seconds, tapes()
