"""The kernel library (tracked/compiled_tape/library.py): the kernels of small reference
models, compiled ahead of use, serve other models of the same kind whatever their sizes
and depth, so that their compiled tapes start without compiling anything."""
import numpy as np

import tracked as tr
from tracked.compiled_tape import library

TIMEOUT = 300


def _user_model():
    """A model the library was not built from: other sizes and batch."""
    rng = np.random.default_rng(5)
    model = tr.Chain(tr.Dense(7, 11, tr.relu, rng=rng), tr.Dense(11, 9, tr.relu, rng=rng),
                     tr.Dense(9, 1, rng=rng))
    x, y = rng.standard_normal((13, 7)), rng.standard_normal((13, 1))
    return (lambda m, x, y: tr.nn.mse(m(x), y)), model, x, y


def test_the_reference_tapes_cover_activations_losses_and_dtypes():
    tapes = library.reference_tapes()
    per_depth = [len(library.ACTIVATIONS) if d > 1 else 1 for d in library.DEPTHS]
    assert len(tapes) == sum(per_depth) * len(library.LOSSES) * len(library.DTYPES)
    assert any('float32' in label for label, _ in tapes)


def test_a_prebuilt_library_serves_other_sizes_and_depths(fresh_cache):
    f, model, x, y = _user_model()
    tape = tr.GradientTape(f, model, x, y, wrt=(0,))
    assert library.missing([tape]) != []                   # an empty cache lacks them
    refs = [t for _, t in library.reference_tapes(activations=('relu',),
                                                  losses=(('mse', 1),), dtypes=(np.float64,),
                                                  depths=(3,))]
    built = library.prebuild(refs)
    assert built and library.prebuild(refs) == []          # once
    assert library.missing([tape]) == []
    ctape = tr.compile(tape)
    val, (g, _, _) = ctape.withgradient(model, x, y)
    assert ctape.wait(TIMEOUT), ctape.compile_error
    assert ctape._tiering.proc is None                     # no process compiled anything
    val2, (g2, _, _) = ctape.withgradient(model, x, y)
    ev, (eg, _, _) = tr.withgradient(f, model, x, y)
    np.testing.assert_allclose([val, val2], [ev, ev], rtol=1e-12)
    for got in (g, g2):
        for a, b in zip(tr.destructure(got)[0], tr.destructure(eg)[0]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)
