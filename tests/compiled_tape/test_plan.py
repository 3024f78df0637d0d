"""The compiler's planning (plan.py, fusion.py, patterns.py, chains.py): what fuses is
keyed on ``Primitive.kernel``, every fallback says why, and each pattern's edge cases
compile to the eager tape's values."""
import numpy as np
import pytest

import tracked as tr
from tracked.compiled_tape.patterns import have_blas
from tracked import registry
from tracked.compiled_tape import fusion
from tracked.rules.indexing import scatter_add


def _compiled(f, *args, wrt=None):
    tape = tr.GradientTape(f, *args, wrt=wrt)
    return tape, tr.compile(tape, background=False)


def _same(tape, ctape, *args):
    """The compiled replay gives the NumPy replay's value and gradients."""
    val, grads = ctape.withgradient(*args)
    ev, egrads = tape.withgradient(*args)
    np.testing.assert_allclose(val, ev, rtol=1e-12)
    for g, e in zip(grads, egrads):
        if e is not None:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-15)


def test_the_compilers_templates_are_the_registrys():
    assert fusion.ADD == registry.RULES[np.add].kernel
    assert fusion.SELECT == registry.RULES[np.where].kernel
    assert fusion.COPY == registry.RULES[np.positive].kernel


def test_renaming_a_rule_changes_nothing_that_fuses(monkeypatch):
    def f(x):
        return np.sum(np.sin(x) * 1.5 + np.sin(x[::-1]))
    x = np.linspace(0.1, 1.0, 5)
    before = [k.name for k in tr.compile(tr.GradientTape(f, x), background=False).compiled.kernels]
    monkeypatch.setattr(registry.RULES[np.sin], 'name', 'renamed_sine')
    tape = tr.GradientTape(f, x)
    assert 'renamed_sine' in str(tape)
    ctape = tr.compile(tape, background=False)
    assert [k.name for k in ctape.compiled.kernels] == before
    assert ctape.fallbacks == []


@pytest.mark.parametrize('f, x, reason', [
    (lambda x: np.sum(np.cumsum(x) * x), np.ones(3), 'no kernel form for np.cumsum'),
    (lambda x: np.sum(np.sin(x)), np.ones(3, np.float16), 'float16: no kernel dtype'),
    (lambda x: np.sum(np.sin(x)), np.ones((1, 2, 1, 2, 1)),
     '5-d: kernels take at most 4 dimensions'),
    (lambda x: np.sum(x[np.nonzero(x > 0.6)] ** 2), np.linspace(0, 1, 5), 'tuple-valued result'),
    (lambda x: np.sum(np.sum(x, axis=0, dtype=np.float64) ** 2), np.ones((2, 3)),
     'options other than axis and keepdims'),
    (lambda x: np.sum(x[[0, 2, 2]] ** 2), np.ones(3), 'an index with arrays: a gather, not a view'),
])
def test_every_fallback_says_why(f, x, reason):
    tape, ctape = _compiled(f, x)
    assert reason in [fb.reason for fb in ctape.fallbacks]
    fb = next(fb for fb in ctape.fallbacks if fb.reason == reason)
    assert fb.instr in tape.instructions                        # the instruction itself
    assert str(fb).endswith('   # ' + reason) and str(fb).startswith(f'%{fb.instr.i} = ')
    _same(tape, ctape, x * 1.01)


def test_clip_with_one_bound_and_casts_fuse():
    # both compiled with a TypeError before the kernel field (None and a dtype as constants)
    def f(x):
        return np.sum(np.clip(x, None, 0.5) * np.clip(x, -0.2, None)
                      + (x > 0).astype(np.float64) * x)
    x = np.array([-1.0, 0.1, 0.7, 2.0])
    tape, ctape = _compiled(f, x)
    assert ctape.fallbacks == []
    _same(tape, ctape, x[::-1] * 0.9)


def test_a_guard_on_a_cast_to_its_own_dtype_is_checked():
    # the cast is a view of the sum (no step); its guard used to be dropped with it
    # (.item() of a differentiated value refuses; of an input outside wrt it is guarded)
    tape, ctape = _compiled(lambda x, s: np.sum(x * np.sum(s).astype(np.float64).item()),
                            np.ones(3), np.ones(3), wrt=(0,))
    np.testing.assert_array_equal(ctape.gradient(np.ones(3), np.ones(3))[0], [3.0, 3.0, 3.0])
    with pytest.raises(tr.TapeGuardError, match='item'):
        ctape.gradient(np.ones(3), np.array([1.0, 2.0, 3.0]))


def test_scatter_add_with_unique_false_is_a_chain():
    def f(x):
        return np.sum(scatter_add(x * x, slice(1, 4), (5,), unique=False) * np.arange(5.0))
    x = np.array([1.0, 2.0, 3.0])
    tape, ctape = _compiled(f, x)
    assert ctape.fallbacks == []
    _same(tape, ctape, x + 0.5)
    val, (g,) = ctape.withgradient(x)
    assert val == 1.0 * 1 + 2 * 4 + 3 * 9
    np.testing.assert_array_equal(g, [2.0, 8.0, 18.0])


def test_an_affine_gather_is_a_view():
    tape, ctape = _compiled(lambda x: np.sum(x[[1, 2, 3]] * x[:3]), np.arange(5.0))
    assert 'operator.getitem' not in [fb.instr.name for fb in ctape.fallbacks]
    _same(tape, ctape, np.arange(5.0) ** 2)


def test_complex_values_run_in_numpy():
    def f(x):
        return np.sum(np.abs(np.exp(1j * x)) * x)
    try:
        tape = tr.GradientTape(f, np.ones(3))
    except TypeError:
        pytest.skip('complex values are not supported by this version of the core')
    ctape = tr.compile(tape, background=False)
    assert 'complex128: no kernel dtype' in [fb.reason for fb in ctape.fallbacks]
    _same(tape, ctape, np.array([0.3, 0.5, 0.9]))


def test_logical_functions_give_bools_inside_loops():
    # Python's ``and`` gives an operand: x * (x > 0 and x) was x * x in the loop
    def f(x):
        return np.sum(x * np.logical_and(x > 0, x) + np.logical_or(x - 2.0, x < -5) * 3.0)
    x = np.array([0.5, -1.0, 2.0])
    tape, ctape = _compiled(f, x)
    assert ctape.fallbacks == []
    val, (g,) = ctape.withgradient(x)
    assert val == 0.5 + 2.0 + 3.0 * 2
    np.testing.assert_array_equal(g, [1.0, 0.0, 1.0])
    _same(tape, ctape, x * 1.5)


# --------------------------------------------------------------------------
# Kernels are generic in shape: a new width or batch size compiles nothing new
# --------------------------------------------------------------------------

def _kernels_of(f, *args, wrt=None):
    """What compiling would load: the kernels' names (hashes of their sources) and the
    entry's (planning only: nothing is compiled here)."""
    prog = tr.GradientTape(f, *args, wrt=wrt).new_compiled()
    assert prog.fallbacks == []
    return sorted(k.name for k in prog.kernels), prog.entry_name


def _mlp(hidden, batch):
    from tracked.__main__ import loss, make_model
    rng = np.random.default_rng(hidden + batch)
    x = rng.standard_normal((batch, 64))
    y = tr.nn.onehot(rng.integers(0, 10, batch), 10)
    return loss, make_model(64, hidden, 10, 0), x, y


# without SciPy (numba's BLAS helpers need it), whether a product gets a kernel depends
# on its size: large ones are left to NumPy
@pytest.mark.skipif(not have_blas(), reason="numba's BLAS helpers need SciPy")
def test_a_new_width_or_batch_size_compiles_nothing_new():
    seen = _kernels_of(*_mlp(32, 100), wrt=(0,))            # the demo's MLP
    assert len(seen[0]) > 5
    for hidden, batch in ((48, 100), (32, 37), (7, 3), (300, 256)):
        assert _kernels_of(*_mlp(hidden, batch), wrt=(0,)) == seen, (hidden, batch)


def test_a_new_length_of_a_stencil_compiles_nothing_new():
    def rosenbrock(x):
        return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    seen = _kernels_of(rosenbrock, np.linspace(-1.0, 1.0, 100))
    for n in (3, 37, 1000):
        assert _kernels_of(rosenbrock, np.linspace(-1.0, 1.0, n)) == seen, n
