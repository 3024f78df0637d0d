"""Bytes a training step allocates: ``tr.Duplicated`` + ``tr.AutoCompiled`` against eager.

    python benchmarks/duplicated_memory.py [--steps 100]

The model is the demo's (``python -m tracked``): a 64-32-10 relu classifier on
scikit-learn's digits, batches of 100, Adam.  Each variant runs a few warm-up steps
(recording and compiling the tape, building caches), then ``--steps`` steps under
``tracemalloc`` (which sees Python objects and NumPy's array data).  Per step:

- peak: the most memory the step held at once beyond what existed before it
  (``tracemalloc.reset_peak()`` before the step, peak minus the starting size after):
  every array a step allocates counts here, intermediates and gradients alike;
- kept: how much memory grew per step over the whole run (a leak would show here).

Variants: (a) ``tr.gradient(loss, tr.AutoCompiled(), dup, tr.Const(xb), tr.Const(yb))``
then ``tr.update(state, dup)``; (b) the eager step as ``tr.train`` takes it,
``tr.gradient(lambda m: loss(m, xb, yb), model)`` then ``tr.update(state, model, g)``;
for comparison (c) the eager tape with ``Duplicated`` and (d) ``AutoCompiled`` without
it, ``tr.gradient(loss, ad, model, xb, yb)``, which also differentiates the batch (every
plain argument of ``tr.gradient`` is) and returns new arrays.
"""
import argparse
import gc
import os
import sys
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tracked as tr  # noqa: E402
from tracked.compiled_tape.tiers import wait_all  # noqa: E402
from tracked.__main__ import batches, load_digits, loss, make_model  # noqa: E402


def measure(step, data, warmup=5, steps=100):
    """(mean peak bytes, largest peak bytes, kept bytes) per step of ``step(xb, yb)``,
    once the compiled kernels of ``step.ad`` (an AutoCompiled, if any) are in use."""
    for xb, yb in data[:warmup]:
        step(xb, yb)
    ad = getattr(step, 'ad', None)
    if ad is not None:
        # Until its kernels are compiled (in the background) a tape replays in NumPy,
        # which allocates its intermediates: measure the compiled step, not that.
        if not ad.wait(600):
            raise RuntimeError('the kernels did not compile within 600 s')
        step(*data[0])
    wait_all(600)           # a loading thread's allocations would be counted too
    run = data[warmup:warmup + steps]
    peaks = np.zeros(len(run), np.int64)      # allocated before measuring
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for i, (xb, yb) in enumerate(run):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        step(xb, yb)
        peaks[i] = tracemalloc.get_traced_memory()[1] - before
    gc.collect()
    kept = (tracemalloc.get_traced_memory()[0] - start) / len(run)
    tracemalloc.stop()
    return float(np.mean(peaks)), int(np.max(peaks)), kept


def variants(seed=0):
    """``{name: step}``: each with a fresh model and optimiser state."""
    def fresh():
        model = make_model(64, 32, 10, seed)
        return model, tr.setup(tr.Adam(0.01), model)
    out = {}

    model_a, state_a = fresh()
    dup_a = tr.Duplicated(model_a)
    ad_a = tr.AutoCompiled()

    def duplicated_compiled(xb, yb):
        tr.gradient(loss, ad_a, dup_a, tr.Const(xb), tr.Const(yb))
        tr.update(state_a, dup_a)
    duplicated_compiled.ad = ad_a
    out['(a) Duplicated + AutoCompiled'] = duplicated_compiled

    model_b, state_b = fresh()

    def eager(xb, yb):
        g = tr.gradient(lambda m: loss(m, xb, yb), model_b)[0]
        tr.update(state_b, model_b, g)
    out['(b) eager'] = eager

    model_c, state_c = fresh()
    dup_c = tr.Duplicated(model_c)

    def duplicated_eager(xb, yb):
        tr.gradient(loss, dup_c, tr.Const(xb), tr.Const(yb))
        tr.update(state_c, dup_c)
    out['(c) Duplicated, eager'] = duplicated_eager

    model_d, state_d = fresh()
    ad_d = tr.AutoCompiled()

    def compiled(xb, yb):
        g = tr.gradient(loss, ad_d, model_d, xb, yb)[0]
        tr.update(state_d, model_d, g)
    compiled.ad = ad_d
    out['(d) AutoCompiled, no Duplicated'] = compiled
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--steps', type=int, default=100)
    args = p.parse_args(argv)
    x, y, _, _ = load_digits(0)
    data = batches(x, y, 100, 1, 0)
    while len(data) < args.steps + 5:
        data = data + data
    model = make_model(64, 32, 10, 0)
    print(f'the demo\'s MLP, batch {len(data[0][0])}: {tr.nparams(model):_} parameters, '
          f'gradient {tr.destructure(model)[0].nbytes:_} bytes; '
          f'{args.steps} steps each')
    print(f'  {"step":34}{"peak bytes/step":>18}{"largest":>10}{"kept bytes/step":>18}')
    results = {}
    for name, step in variants().items():
        mean, largest, kept = measure(step, data, steps=args.steps)
        results[name] = (mean, largest, kept)
        print(f'  {name:34}{mean:>18,.0f}{largest:>10,}{kept:>18,.1f}')
    return results


if __name__ == '__main__':
    main()
