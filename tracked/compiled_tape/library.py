"""Kernels compiled ahead of use: ``python -m tracked.compiled_tape.library``.

Native kernels and entries (native.py, pyentry.py) build in ~20 ms each, so a cold
``tr.compile`` of the demo's MLP reaches compiled speed in well under a second and
this library is rarely worth its build.  It still serves where numba compiles: with
``TRACKED_NATIVE=0``, on a CPython whose object layout the native entry does not
read, or for kernels the translation does not take.  There a compiled tape reaches
numba speed only after a process has started numba (~0.7 s) and compiled each of its
kernels (0.15-0.3 s of CPU each: numba's typing and lowering, not LLVM; the demo's
MLP has 22).  But kernels are generic in shape and shared by every tape with the
same fused operations (vm.py), so the kernels of a few small reference models --
MLPs of one to three layers with relu, tanh or sigmoid, logit cross-entropy, softmax
cross-entropy or squared loss, in float64 and float32 -- are most of the kernels of
any model of that kind.  Measured (numba's kernels): with them in the cache the
demo's MLP compiles no kernel, a three-layer MLP mixing tanh and relu one, W4a one.

``prebuild()`` compiles what the cache lacks of those kernels (native ones in this
process, numba's in a new one), once per machine and numba version.

    python -m tracked.compiled_tape.library
"""
import time

import numpy as np

__all__ = ['reference_tapes', 'missing', 'prebuild']

ACTIVATIONS = ('relu', 'tanh', 'sigmoid')
LOSSES = (('logitcrossentropy', 3), ('mse', 1), ('mse', 3), ('softmax crossentropy', 3))
DTYPES = (np.float64, np.float32)
# 1: a linear model; 3 layers have products the second layer alone has not, and the
# entry, compiled per number of arrays, differs with the depth (4 layers: one more entry)
DEPTHS = (1, 2, 3)


def _loss(name):
    """``loss(model, x, y)`` of the loss named ``name``."""
    from .. import nn
    if name == 'logitcrossentropy':
        return lambda m, x, y: nn.logitcrossentropy(m(x), y)
    if name == 'mse':
        return lambda m, x, y: nn.mse(m(x), y)
    return lambda m, x, y: nn.crossentropy(nn.softmax(m(x)), y)


def reference_tapes(activations=ACTIVATIONS, losses=LOSSES, dtypes=DTYPES, depths=DEPTHS):
    """``[(label, GradientTape)]``: an MLP per depth, hidden activation, loss (with its
    number of outputs) and dtype, recorded on tiny arrays (sizes do not enter a
    kernel)."""
    from .. import nn
    from .tapes import GradientTape
    out = []
    for dtype in dtypes:
        for depth in depths:
            for act in activations if depth > 1 else activations[:1]:
                for loss, n_out in losses:
                    rng = np.random.default_rng(0)
                    sizes = [5] + [4] * (depth - 1) + [n_out]
                    model = nn.Chain(*[nn.Dense(sizes[i], sizes[i + 1],
                                                getattr(nn, act) if i < depth - 1 else None,
                                                rng=rng, dtype=dtype) for i in range(depth)])
                    x = rng.standard_normal((6, 5)).astype(dtype)
                    y = (nn.onehot(rng.integers(0, n_out, 6), n_out) if n_out > 1
                         else rng.standard_normal((6, 1))).astype(dtype)
                    label = (f'{depth}-layer {act + " " if depth > 1 else ""}MLP, {loss} '
                             f'({n_out} out), {np.dtype(dtype).name}')
                    out.append((label, GradientTape(_loss(loss), model, x, y, wrt=(0,))))
    return out


def missing(tapes):
    """``[(module name, source)]`` of the kernels and entries of ``tapes`` (GradientTapes)
    that the disk cache lacks, each once."""
    from . import cache
    found: dict[str, str] = {}
    for tape in tapes:
        for name, source in tape.new_compiled().sources():
            found.setdefault(name, source)
    return cache.missing(list(found.items()))


def prebuild(tapes=None, out=None):
    """``prebuild(tapes=None)``: compile into the disk cache the kernels and entries of
    ``tapes`` (default: ``reference_tapes()``) that it lacks, in a new process; returns
    their module names.  ``out`` (a callable, e.g. ``print``) receives a line per module
    compiled."""
    from . import cache
    if tapes is None:
        tapes = [t for _, t in reference_tapes()]
    todo = missing(tapes)
    if todo:
        try:
            cache.compile_elsewhere(todo, out=out)
        except cache.CacheError as e:
            raise RuntimeError(f'compiling the kernel library failed: {e}') from e
    return [name for name, _ in todo]


if __name__ == '__main__':
    from . import cache
    start = time.perf_counter()
    done = prebuild(out=print)
    print(f'{len(done)} modules compiled into {cache.cache_dir()} in '
          f'{time.perf_counter() - start:.1f} s')
