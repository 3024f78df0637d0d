"""``scipy.signal`` convolutions (``tracked.scipy.signal``): finite-difference cases in
every mode, for either input the larger, n-d and complex; values against SciPy.
Skipped when SciPy is not installed."""
import numpy as np
import pytest

ssig = pytest.importorskip('scipy.signal')

import tracked as tr                                    # noqa: E402
from tracked.scipy import signal as tsig                # noqa: E402

from .harness import arg, case, const, parametrize     # noqa: E402

MODES = ('full', 'same', 'valid')
SHAPES = [((6,), (3,)), ((3,), (5,)), ((4,), (4,)), ((4, 5), (2, 3)), ((2, 3), (3, 4))]


def conv(fn, covers, mode, s1, s2, **kw):
    return case(lambda a, b: fn(a, b, mode, **kw), s1, s2, covers=covers,
                name=f'{fn.__name__}({_spec(s1)},{_spec(s2)},{mode},{kw or ""})')


def _spec(s):
    return str(s) if isinstance(s, tuple) else f'c{s.shape}'


def carg(shape):
    return arg(shape, dtype=np.complex128)


CASES = [
    *[conv(f, cov, m, s1, s2) for f, cov in ((tsig.convolve, ssig.convolve),
                                             (tsig.correlate, ssig.correlate))
      for m in MODES for s1, s2 in SHAPES],
    conv(tsig.convolve, ssig.convolve, 'same', (8,), (3,), method='fft'),
    conv(tsig.correlate, ssig.correlate, 'valid', (4, 5), (2, 2), method='direct'),
    *[conv(f, cov, m, carg((5,)), carg((3,))) for f, cov in ((tsig.convolve, ssig.convolve),
                                                           (tsig.correlate, ssig.correlate))
      for m in MODES],
    conv(tsig.correlate, ssig.correlate, 'full', (4, 3), carg((2, 2))),
    case(lambda a: tsig.convolve(a, np.array([0.25, 0.5, 0.25]), 'same'), (7,),
         covers=ssig.convolve, name='convolve((7,),constant kernel,same)'),
    case(tsig.convolve, const(np.arange(5.0)), (2,), covers=ssig.convolve,
         name='convolve(constant signal,(2,))'),
]


@parametrize(CASES)
def test_case(c):
    c.check()


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('fn, s1, s2', [
    (fn, s1, s2) for fn in ('convolve', 'correlate', 'convolve2d', 'correlate2d', 'fftconvolve')
    for s1, s2 in SHAPES + [((2, 6), (2, 2))]
    if not fn.endswith('2d') or len(s1) == 2])          # the 2-d functions take 2-d arrays
def test_values_match_scipy(fn, mode, s1, s2):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(s1) + 1j * rng.standard_normal(s1)
    b = rng.standard_normal(s2) + 1j * rng.standard_normal(s2)
    np.testing.assert_allclose(getattr(tsig, fn)(tr.param(a), b, mode).data,
                               getattr(ssig, fn)(a, b, mode), rtol=1e-10, atol=1e-12)


def test_correlate2d_same_with_even_kernel_is_differentiated():
    a = np.random.default_rng(1).standard_normal((4, 5))
    assert tr.gradcheck(lambda a, b: tsig.correlate2d(a, b, 'same'), a, np.ones((2, 2)))


def test_convolution_layer_on_recorded_and_compiled_tapes():
    x1, x2 = np.random.default_rng(2).standard_normal((2, 8))

    def loss(k, x):
        return np.sum(np.tanh(tsig.correlate(x, k, 'valid')) ** 2)
    k = np.array([0.2, -0.5, 0.3])
    tape = tr.GradientTape(loss, k, x1, wrt=(0,))
    ctape = tr.compile(tape, background=False)
    for x in (x1, x2):
        val, (g, _) = tr.withgradient(loss, k, x)
        np.testing.assert_allclose(tape.withgradient(k, x)[1][0], g, rtol=1e-10)
        np.testing.assert_allclose(ctape.withgradient(k, x)[1][0], g, rtol=1e-10)
