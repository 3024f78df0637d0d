"""The NumPy replay (program.py) drops large temporaries after their last reader and
writes a ufunc's result into a dying ufunc temporary: never into a value that is viewed,
read later, an output or an input."""
import numpy as np

import tracked as tr
from tracked.compiled_tape import program


def f(x):
    a = np.sin(x) * 2.0              # a ufunc temporary ...
    v = a[::2]                       # ... viewed: never overwritten
    b = np.exp(a) + 1.0              # a's last ufunc reader
    return np.sum(b * b) + np.sum(v) + np.sum(x * 3.0)


def test_replay_reuses_only_dying_unviewed_temporaries(monkeypatch):
    monkeypatch.setattr(program, 'FREE_BYTES', 0)     # every value counts as large
    x = np.linspace(-1, 1, 50)
    tape = tr.GradientTape(f, x)
    x2 = x * 0.7
    keep = x2.copy()
    val, (g,) = tape.withgradient(x2)
    val_e, (g_e,) = tr.withgradient(f, x2)
    np.testing.assert_allclose(val, val_e, rtol=1e-13)
    np.testing.assert_allclose(g, g_e, rtol=1e-13)
    np.testing.assert_array_equal(x2, keep)           # the input untouched
    _, body, _ = tape.program._compile_steps()
    assert any(s[8] for s in body)                    # something was dropped
    assert any(s[4] is not tape.program.instrs[s[0]].fn for s in body)    # and reused
    # twice in a row: nothing of the first call leaks into the second
    np.testing.assert_allclose(tape.withgradient(x2).grad[0], g_e, rtol=1e-13)


def _stencil(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _shared(x):
    s = x[1:] * 2.0                   # x[1:]'s adjoint and ...
    t = np.sin(x) * 3.0               # ... a sum whose operand is read twice
    return np.sum(s * s) + np.sum(t * t) + np.sum(t[::3])


def _gathered(x):
    i = np.array([0, 2, 2, 5])        # an integer index: repeated positions
    return np.sum(x[i] ** 2) + np.sum(x[1:] * x[:-1])


def test_replay_adds_a_slices_adjoint_in_place_only_where_nothing_else_reads():
    # W3's three slice adjoints are summed into one array (two scatters fused); the
    # gradients equal eager evaluation's, and a program where an operand is read again,
    # or the index repeats positions, keeps its scatters
    x = np.linspace(-1.5, 1.5, 40)
    fused = {}
    for f in (_stencil, _shared, _gathered):
        tape = tr.GradientTape(f, x)
        fused[f.__name__] = len(tape.program.fused)
        for point in (x, x * 0.6 - 0.1):
            val, (g,) = tape.withgradient(point)
            val_e, (g_e,) = tr.withgradient(f, point)
            np.testing.assert_allclose(val, val_e, rtol=1e-13)
            np.testing.assert_allclose(g, g_e, rtol=1e-12, atol=1e-14)
    assert fused['_stencil'] == 2
    assert fused['_gathered'] <= 1        # x[i]'s scatter (repeats) is never fused



# -- the default call's outputs: the replay's own arrays, never shared ------------------

def _mlp(W1, b1, W2, b2, x, y):
    h = np.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    return np.sum((z - y) ** 2) / len(x)


def _mlp_args(rng):
    return (rng.standard_normal((6, 5)), rng.standard_normal(5), rng.standard_normal((5, 3)),
            rng.standard_normal(3), rng.standard_normal((4, 6)), rng.standard_normal((4, 3)))


def test_the_default_call_hands_out_arrays_of_their_own():
    rng = np.random.default_rng(3)
    args = _mlp_args(rng)
    tape = tr.GradientTape(_mlp, *args, wrt=(0, 1, 2, 3))
    first = tape.gradient(*args)[:4]             # (None for x and y)
    expected = tr.gradient(lambda *p: _mlp(*p, *args[4:]), *args[:4])
    for g, e in zip(first, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    # none shares memory with an argument or another gradient ...
    for i, g in enumerate(first):
        assert g.flags.writeable and g.flags.c_contiguous
        assert not any(np.shares_memory(g, a) for a in args)
        assert not any(np.shares_memory(g, h) for h in first[i + 1:])
    # ... and writing into one changes no later call
    for g in first:
        g[...] = 1e9
    again = tape.gradient(*args)[:4]
    for g, e in zip(again, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    # with out= the arrays given are filled
    out = (*(np.empty_like(g) for g in again), None, None)
    assert tape.gradient(*args, out=out) is out
    for g, e in zip(out, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_an_argument_a_constant_or_a_shared_value_is_copied_out():
    rng = np.random.default_rng(4)
    args = _mlp_args(rng)
    tape = tr.GradientTape(_mlp, *args, wrt=(0, 1, 2, 3))
    run = tape.program.run
    constant, shared = np.ones((6, 5)), np.full((6, 5), 2.0)
    handed, _ = tape._handed()
    k_w1 = 0                                  # W1's gradient, placed whole
    assert k_w1 in handed

    for kind in ('argument', 'constant', 'shared'):
        def fake(leaves, kind=kind):
            vals = run(leaves)
            oi = handed[k_w1]
            if kind == 'argument':
                vals[oi] = leaves[0]
            elif kind == 'constant':
                vals[oi] = constant
                tape.__dict__['_handed_for'] = (tape.program, (handed, frozenset({id(constant)})))
            else:                           # one array, also another output's value
                vals[oi] = shared
                vals.append(shared)
            return vals
        tape.program.run = fake
        try:
            g = tape.gradient(*args)[0]
        finally:
            del tape.program.run
            tape.__dict__.pop('_handed_for', None)
        source = {'argument': args[0], 'constant': constant, 'shared': shared}[kind]
        np.testing.assert_array_equal(g, source)
        assert not np.shares_memory(g, source)
