"""np.fft: the 1-d transforms fft, ifft, rfft and irfft are primitives, linear (the
tangent is the transform of the tangent); every other transform is a composite
written the way NumPy writes it (``fftn`` loops over axes, ``hfft`` is ``irfft`` of
the conjugate, ...), so its derivative falls out.  fftshift/ifftshift are rolls.
fftfreq/rfftfreq need no rule: NumPy computes them with arithmetic on ``d``
(``k / (n * d)``), which is differentiated as such.

A transform first crops or zero-pads its input to ``n`` along ``axis``, then applies
a DFT scaled by ``norm``.  The adjoint of the scaled DFT is the opposite transform
with the opposite scaling (``norm='backward'`` <-> ``'forward'``, ``'ortho'`` is its
own), and the adjoint of cropping is padding: so each pullback is one transform and
one crop/pad.  rfft's output holds each frequency but 0 (and n/2) for two, so its
pullback halves those bins and lets irfft mirror them; irfft's pullback doubles them.
"""
import operator

import numpy as np

from ..registry import defcomposite, defvjp
from .matrices import arr, conj, dtype_of, is_complex, real_dtype, reject_out, shape_of

_SWAP = {None: 'forward', 'backward': 'forward', 'ortho': 'ortho', 'forward': 'backward'}


def _swap(norm):
    """The scaling of the adjoint transform."""
    try:
        return _SWAP[norm]
    except (KeyError, TypeError):
        raise ValueError(f'Invalid norm value {norm!r}; should be "backward", "ortho" or '
                         f'"forward".') from None


def _fit_axis(x, axis, length):
    """``x`` cropped or zero-padded to ``length`` along ``axis`` (the adjoint of the
    other direction)."""
    s = shape_of(x)
    ax = axis % len(s)
    have = s[ax]
    if have == length:
        return x
    if have > length:
        return x[(slice(None),) * ax + (slice(0, length),)]
    pad = np.zeros(s[:ax] + (length - have,) + s[ax + 1:], dtype=dtype_of(x))
    return np.concatenate([x, pad], axis=ax)


def _bin_weights(g, n, axis, middle):
    """Per frequency bin of a length-``n`` real transform along ``axis``: 1 for bin 0
    (and bin n/2 for even n), ``middle`` for the others, shaped to broadcast."""
    nb = n // 2 + 1
    w = np.full(nb, middle, dtype=real_dtype(g))
    w[0] = 1
    if n % 2 == 0:
        w[-1] = 1
    ax = axis % len(shape_of(g))
    return np.reshape(w, (nb,) + (1,) * (len(shape_of(g)) - ax - 1))


def _length(x, n, axis, default):
    return default(shape_of(x)[axis]) if n is None else operator.index(n)


def _forward(fun, name):
    def fn(a, n=None, axis=-1, norm=None, out=None):
        reject_out(name, out)
        return fun(a, n, axis, norm)
    fn.__name__ = fun.__name__
    return fn


def _fft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    return _fit_axis(np.fft.ifft(g, None, axis, _swap(norm)), axis, shape_of(a)[axis])


def _ifft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    return _fit_axis(np.fft.fft(g, None, axis, _swap(norm)), axis, shape_of(a)[axis])


def _rfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    m = _length(a, n, axis, lambda k: k)
    gx = np.fft.irfft(g * _bin_weights(g, m, axis, 0.5), m, axis, _swap(norm))
    return _fit_axis(gx, axis, shape_of(a)[axis])


def _irfft_vjp(g, ans, a, n=None, axis=-1, norm=None, out=None):
    m = _length(a, n, axis, lambda k: 2 * (k - 1))
    gx = np.fft.rfft(g, m, axis, _swap(norm)) * _bin_weights(g, m, axis, 2.0)
    if not is_complex(a):         # a real input (its imaginary part is zero) gets a real gradient
        gx = np.real(gx)
    return _fit_axis(gx, axis, shape_of(a)[axis])


def _batched(fun):
    """The transform of tangents stacked along a leading axis: ``axis`` counted from
    the end."""
    def batched(ts, ans, a, n=None, axis=-1, norm=None, out=None):
        return fun(ts[0], n, axis - len(shape_of(a)) if axis >= 0 else axis, norm)
    return batched


for _fun, _vjp in ((np.fft.fft, _fft_vjp), (np.fft.ifft, _ifft_vjp), (np.fft.rfft, _rfft_vjp),
                   (np.fft.irfft, _irfft_vjp)):
    defvjp(_fun, _vjp, fn=_forward(_fun, 'np.fft.' + _fun.__name__), linear='joint',
           batched=_batched(_fun))


# --------------------------------------------------------------------------
# Composites, as NumPy writes them
# --------------------------------------------------------------------------

def _hfft(a, n=None, axis=-1, norm=None, out=None):
    reject_out('np.fft.hfft', out)
    n = _length(a, n, axis, lambda k: 2 * (k - 1))
    return np.fft.irfft(conj(arr(a)), n, axis, _swap(norm))


def _ihfft(a, n=None, axis=-1, norm=None, out=None):
    reject_out('np.fft.ihfft', out)
    return np.conj(np.fft.rfft(a, n, axis, _swap(norm)))


def _cook_nd_args(a, s=None, axes=None, invreal=False):
    """NumPy's sizes and axes of an n-d transform (``s[i] == -1``: the whole axis)."""
    shape = shape_of(a)
    if s is None:
        s = [shape[ax] for ax in axes] if axes is not None else list(shape)
        if invreal:
            s[-1] = (shape[axes[-1] if axes is not None else -1] - 1) * 2
    s = list(s)
    if axes is None:
        axes = list(range(-len(s), 0))
    axes = list(axes)
    if len(s) != len(axes):
        raise ValueError('Shape and axes have different lengths.')
    return [shape[ax] if k == -1 or k is None else k for k, ax in zip(s, axes)], axes


def _nd(function):
    """fftn/ifftn (and their 2-d forms): ``function`` along each axis, last first."""
    def transform(a, s=None, axes=None, norm=None, out=None):
        reject_out('np.fft', out)
        s, axes = _cook_nd_args(a, s, axes)
        for k in reversed(range(len(axes))):
            a = function(a, s[k], axes[k], norm)
        return a
    return transform


def _rfftn(a, s=None, axes=None, norm=None, out=None):
    reject_out('np.fft.rfftn', out)
    s, axes = _cook_nd_args(a, s, axes)
    a = np.fft.rfft(a, s[-1], axes[-1], norm)
    for k in reversed(range(len(axes) - 1)):
        a = np.fft.fft(a, s[k], axes[k], norm)
    return a


def _irfftn(a, s=None, axes=None, norm=None, out=None):
    reject_out('np.fft.irfftn', out)
    s, axes = _cook_nd_args(a, s, axes, invreal=True)
    for k in range(len(axes) - 1):
        a = np.fft.ifft(a, s[k], axes[k], norm)
    return np.fft.irfft(a, s[-1], axes[-1], norm)


def _two_d(fun):
    def transform(a, s=None, axes=(-2, -1), norm=None, out=None):
        return fun(a, s, axes, norm, out)
    return transform


def _shift(sign):
    def shift(x, axes=None):
        s = shape_of(x)
        if axes is None:
            axes = tuple(range(len(s)))
        by = ([sign * (s[ax] // 2) for ax in axes] if isinstance(axes, (tuple, list))
              else sign * (s[axes] // 2))
        return np.roll(x, by, axes)
    return shift


_fftn, _ifftn = _nd(np.fft.fft), _nd(np.fft.ifft)
defcomposite(np.fft.hfft, _hfft)
defcomposite(np.fft.ihfft, _ihfft)
defcomposite(np.fft.fftn, _fftn)
defcomposite(np.fft.ifftn, _ifftn)
defcomposite(np.fft.fft2, _two_d(_fftn))
defcomposite(np.fft.ifft2, _two_d(_ifftn))
defcomposite(np.fft.rfftn, _rfftn)
defcomposite(np.fft.irfftn, _irfftn)
defcomposite(np.fft.rfft2, _two_d(_rfftn))
defcomposite(np.fft.irfft2, _two_d(_irfftn))
defcomposite(np.fft.fftshift, _shift(1))
defcomposite(np.fft.ifftshift, _shift(-1))
