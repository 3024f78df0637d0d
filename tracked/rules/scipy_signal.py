"""SciPy's convolutions: a rule keyed on ``scipy.signal.convolve``.

Reached through ``tracked.scipy.signal`` (which imports this module: importing
``scipy.signal`` costs most of a second, so ``import tracked`` does not).
Convolution is bilinear, so its tangent is the sum over arguments (``linear='each'``)
and each pullback is a 'valid' correlation of the cotangent, zero-padded to the
'full' output, with the other argument: ``convolve(g_full, flip(conj(other)),
'valid')``, the primitive itself, so derivatives nest.  'same' and 'valid' outputs
are slices of the 'full' one (measured against SciPy for every mode and for either
argument the larger).  ``correlate`` is ``convolve`` with the second argument
reversed and conjugated, as in SciPy.
"""
import numpy as np
import scipy.signal as ssig

from ..registry import defcomposite, defvjp
from ..dispatch import call
from .elementwise import is_complex


def _shape(x):
    # not np.shape in the pullbacks themselves: that would make the tape keep only the
    # shape (registry.Meta), and an argument may be a list
    return np.shape(x)


def _window(mode, s1, s2):
    """Per axis, ``(start, length)`` of the ``mode`` output within the 'full' one."""
    if mode == 'full':
        return [(0, n1 + n2 - 1) for n1, n2 in zip(s1, s2)]
    if mode == 'same':
        return [((n2 - 1) // 2, n1) for n1, n2 in zip(s1, s2)]
    if mode == 'valid':
        return [(min(n1, n2) - 1, abs(n1 - n2) + 1) for n1, n2 in zip(s1, s2)]
    raise ValueError(f"mode={mode!r}: expected 'full', 'valid' or 'same'")


def _reverse_conj(x):
    """``x`` reversed along every axis and conjugated (SciPy's ``_reverse_and_conj``)."""
    x = np.flip(x)
    return np.conj(x) if is_complex(x) else x


def _full_cotangent(g, mode, s1, s2):
    """The cotangent of the 'full' output: ``g`` in its window, zeros around it."""
    if mode == 'full':
        return g
    return np.pad(g, [(start, n1 + n2 - 1 - start - length)
                      for (start, length), n1, n2 in zip(_window(mode, s1, s2), s1, s2)])


def convolve(in1, in2, mode='full', method='auto'):
    return call(ssig.convolve, in1, in2, mode=mode, method=method)


def _vjp_in1(g, ans, in1, in2, mode='full', method='auto'):
    full = _full_cotangent(g, mode, _shape(in1), _shape(in2))
    return convolve(full, _reverse_conj(in2), 'valid', method)


def _vjp_in2(g, ans, in1, in2, mode='full', method='auto'):
    full = _full_cotangent(g, mode, _shape(in1), _shape(in2))
    return convolve(full, _reverse_conj(in1), 'valid', method)


defvjp(ssig.convolve, _vjp_in1, _vjp_in2, name='scipy.signal.convolve', linear='each')


def correlate(in1, in2, mode='full', method='auto'):
    return convolve(in1, _reverse_conj(in2), mode, method)


defcomposite(ssig.correlate, correlate)
