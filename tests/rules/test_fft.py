"""np.fft: every transform with n/s, axis/axes and the three norm modes, real and complex
inputs, padding and cropping; shifts; frequencies are not differentiated."""
import numpy as np
import pytest

import tracked as tr

from .harness import arg, case, grad, parametrize

C = np.complex128
F = np.fft
NORMS = ('backward', 'ortho', 'forward')


def z(*shape):
    return arg(shape, dtype=C)


CASES = [
    # ---- fft / ifft: lengths even and odd, n padding and cropping, axes, norms
    case(F.fft, (8,)),
    case(F.fft, z(5)),
    case(F.fft, z(2, 3, 4)),
    case(F.fft, z(3, 4), kwargs={'axis': 0}),
    case(F.fft, z(5), kwargs={'n': 8}),
    case(F.fft, (2, 6), kwargs={'n': 4}),
    *[case(F.fft, z(4, 3), kwargs={'norm': m, 'axis': -2}) for m in NORMS],
    case(F.ifft, z(6)),
    case(F.ifft, (7,)),
    case(F.ifft, z(3, 5), kwargs={'n': 3, 'axis': 1}),
    case(F.ifft, z(4, 2), kwargs={'n': 6, 'axis': 0}),
    *[case(F.ifft, z(2, 5), kwargs={'norm': m}) for m in NORMS],

    # ---- rfft / irfft: the half spectrum, even and odd n
    case(F.rfft, (8,)),
    case(F.rfft, (7,)),
    case(F.rfft, (2, 3, 6)),
    case(F.rfft, (5, 3), kwargs={'axis': 0}),
    case(F.rfft, (6,), kwargs={'n': 9}),
    case(F.rfft, (2, 9), kwargs={'n': 4}),
    *[case(F.rfft, (3, 5), kwargs={'norm': m}) for m in NORMS],
    case(F.irfft, z(5)),
    case(F.irfft, z(5), kwargs={'n': 9}),
    case(F.irfft, z(2, 6), kwargs={'n': 4}),
    case(F.irfft, z(4), kwargs={'n': 12}),
    case(F.irfft, z(4, 3), kwargs={'axis': 0}),
    case(F.irfft, (5,)),
    *[case(F.irfft, z(2, 4), kwargs={'norm': m, 'n': 7}) for m in NORMS],

    # ---- hfft / ihfft (Hermitian input / output)
    case(F.hfft, z(5)),
    case(F.hfft, z(2, 4), kwargs={'n': 7, 'norm': 'ortho'}),
    case(F.hfft, z(3, 4), kwargs={'axis': 0, 'norm': 'forward'}),
    case(F.ihfft, (8,)),
    case(F.ihfft, (2, 7), kwargs={'n': 5, 'norm': 'ortho'}),
    case(F.ihfft, (6, 2), kwargs={'axis': 0, 'norm': 'forward'}),

    # ---- 2-d and n-d forms
    case(F.fft2, z(3, 4)),
    case(F.fft2, (2, 3, 4), kwargs={'s': (4, 3), 'norm': 'ortho'}),
    case(F.ifft2, z(3, 4), kwargs={'axes': (0, 1), 'norm': 'forward'}),
    case(F.fftn, z(2, 3, 4)),
    case(F.fftn, z(2, 3, 4), kwargs={'axes': (0, 2), 's': (3, 2)}),
    case(F.ifftn, z(3, 4), kwargs={'s': (2, 5), 'axes': (0, 1)}),
    case(F.ifftn, z(2, 2, 3), kwargs={'norm': 'ortho'}),
    case(F.rfft2, (4, 6)),
    case(F.rfft2, (2, 4, 5), kwargs={'norm': 'forward'}),
    case(F.irfft2, z(4, 3)),
    case(F.irfft2, z(2, 3, 4), kwargs={'s': (3, 5)}),
    case(F.rfftn, (2, 3, 4)),
    case(F.rfftn, (3, 4, 5), kwargs={'axes': (2, 0), 's': (4, 6), 'norm': 'ortho'}),
    case(F.irfftn, z(2, 3, 3)),
    case(F.irfftn, z(3, 4), kwargs={'axes': (1, 0), 's': (5, 4), 'norm': 'forward'}),

    # ---- shifts
    case(F.fftshift, (5,)),
    case(F.fftshift, z(3, 4)),
    case(F.fftshift, (3, 4), kwargs={'axes': 1}),
    case(F.fftshift, (2, 3, 5), kwargs={'axes': (0, 2)}),
    case(F.ifftshift, (5,)),
    case(F.ifftshift, z(3, 4)),
    case(F.ifftshift, (3, 4, 2), kwargs={'axes': (-2,)}),
]


@parametrize(CASES)
def test_case(c):
    c.check()


@pytest.mark.parametrize('call', [
    lambda x: F.fft(x, 6, norm='ortho'), lambda x: F.ifft(x, axis=0),
    lambda x: F.rfft(x, 7), lambda x: F.irfft(x), lambda x: F.hfft(x, 5),
    lambda x: F.ihfft(x), lambda x: F.fft2(x, s=(2, 3)), lambda x: F.rfftn(x, norm='forward'),
    lambda x: F.irfftn(x, s=(4, 4), axes=(0, 1)), lambda x: F.fftshift(x),
    lambda x: F.ifftshift(x, axes=0),
])
def test_values_like_numpy(call):
    x = np.random.default_rng(0).standard_normal((4, 3))
    got = call(tr.param(x))
    assert tr.istracked(got)
    np.testing.assert_allclose(tr.data(got), call(x), rtol=1e-12, atol=1e-12)


def test_parseval():
    # |fft(x, norm='ortho')|^2 sums to |x|^2: the gradient of the spectrum energy is 2x
    x = (np.random.default_rng(1).standard_normal(9)
         + 1j * np.random.default_rng(2).standard_normal(9))
    energy = lambda v: np.sum(np.abs(np.fft.fft(v, norm='ortho')) ** 2)
    np.testing.assert_allclose(grad(energy, x), 2 * x, rtol=1e-12)
    r = x.real
    np.testing.assert_allclose(grad(lambda v: np.sum(np.abs(np.fft.rfft(v)) ** 2), r[:8]),
                               grad(lambda v: np.sum(np.abs(np.fft.fft(v)) ** 2) / 2
                                    + np.abs(np.fft.fft(v)[0]) ** 2 / 2
                                    + np.abs(np.fft.fft(v)[4]) ** 2 / 2, r[:8]), rtol=1e-12)


def test_real_input_gets_a_real_gradient():
    x = np.arange(6.0)
    g = grad(lambda v: np.real(np.sum(np.fft.fft(v) * np.arange(6))), x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, np.real(np.fft.fft(np.arange(6.0))).conj(), atol=1e-12)


def test_float32_stays_float32():
    x = np.ones(8, np.float32)
    for f in (np.fft.rfft, np.fft.fft, lambda v: np.fft.irfft(np.fft.rfft(v))):
        p = tr.param(x)
        tr.back(np.sum(np.abs(f(p)) ** 2))
        assert p.grad.dtype == np.float32


def test_frequencies_are_arithmetic_on_the_spacing():
    # fftfreq(n, d) = k / (n d): NumPy's own arithmetic, differentiated in d
    np.testing.assert_allclose(grad(lambda d: np.sum(np.fft.fftfreq(8, d) ** 2), 0.5),
                               -2 * np.sum(np.fft.fftfreq(8, 0.5) ** 2) / 0.5)
    np.testing.assert_allclose(tr.data(np.fft.rfftfreq(8, tr.param(0.5))), np.fft.rfftfreq(8, 0.5))


def test_out_is_refused():
    with pytest.raises(TypeError, match='out='):
        np.fft.fft(tr.param(np.ones(4)), out=np.zeros(4, complex))


def test_forward_mode_is_the_transform():
    x, t = np.arange(5.0), np.ones(5)
    y, dy = tr.jvp(np.fft.rfft, (x,), (t,))
    np.testing.assert_allclose(dy, np.fft.rfft(t))
