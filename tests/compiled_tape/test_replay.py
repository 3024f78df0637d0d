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
