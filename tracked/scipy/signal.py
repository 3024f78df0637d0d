"""``tracked.scipy.signal``: ``scipy.signal``'s convolutions for tracked values.

``convolve`` and ``correlate`` (every ``mode`` and ``method``), ``fftconvolve``, and
``convolve2d``/``correlate2d`` with zero fill, differentiable in both inputs to any
order (the rule is in ``tracked/rules/scipy_signal.py``).  Every other name is
``scipy.signal``'s own (plain values).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.signal as _ssig

from ..rules import scipy_signal as _rules

__all__ = ['convolve', 'correlate', 'fftconvolve', 'convolve2d', 'correlate2d']


def __getattr__(name: str) -> Any:
    """Every other name is ``scipy.signal``'s (plain values)."""
    return getattr(_ssig, name)


def convolve(in1: Any, in2: Any, mode: str = 'full', method: str = 'auto') -> Any:
    """``convolve(in1, in2, mode='full', method='auto')``: the N-d convolution, as SciPy's.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.signal import convolve
    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])
    >>> tr.gradient(lambda k: np.sum(convolve(np.ones(4), k, 'valid')), np.ones(2))
    (array([3., 3.]),)
    """
    return _rules.convolve(in1, in2, mode, method)


def correlate(in1: Any, in2: Any, mode: str = 'full', method: str = 'auto') -> Any:
    """``correlate(in1, in2, mode='full', method='auto')``: the N-d cross-correlation, as SciPy's.

    >>> import numpy as np
    >>> from tracked.scipy.signal import correlate
    >>> correlate(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0]), 'valid')
    array([3., 5.])
    """
    return _rules.correlate(in1, in2, mode, method)


def fftconvolve(in1: Any, in2: Any, mode: str = 'full', axes: Any = None) -> Any:
    """``fftconvolve(in1, in2, mode='full')``: ``convolve`` by FFT (``axes=None`` only)."""
    if axes is not None:
        raise NotImplementedError('tracked.scipy.signal.fftconvolve: axes= is not '
                                  'supported; convolve over all axes')
    return _rules.convolve(in1, in2, mode, 'fft')


def _check_2d(name: Any, in1: Any, in2: Any, boundary: Any, fillvalue: Any) -> Any:
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f'{name} inputs must both be 2-D arrays')
    if boundary != 'fill' or fillvalue != 0:
        raise NotImplementedError(f"tracked.scipy.signal.{name}: only boundary='fill' "
                                  f"with fillvalue=0 is supported")


def convolve2d(in1: Any, in2: Any, mode: str = 'full', boundary: str = 'fill',
               fillvalue: int = 0) -> Any:
    """``convolve2d(in1, in2, mode='full')``: ``convolve`` of two 2-D arrays (zero fill)."""
    _check_2d('convolve2d', in1, in2, boundary, fillvalue)
    return _rules.convolve(in1, in2, mode, 'direct')


def correlate2d(in1: Any, in2: Any, mode: str = 'full', boundary: str = 'fill',
                fillvalue: int = 0) -> Any:
    """``correlate2d(in1, in2, mode='full')``: ``correlate`` of two 2-D arrays (zero fill)."""
    _check_2d('correlate2d', in1, in2, boundary, fillvalue)
    if mode == 'same':
        # correlate2d centres its 'same' window at n2 // 2 of the 'full' output, correlate
        # at (n2 - 1) // 2 (they differ for even n2; measured): a zero before in2 along
        # its even axes makes the two agree
        in2 = np.pad(in2, [(1 - n % 2, 0) for n in np.shape(in2)])
    out = _rules.correlate(in1, in2, mode, 'direct')
    if mode == 'valid' and not all(n1 >= n2 for n1, n2 in zip(np.shape(in1), np.shape(in2))):
        # SciPy swaps the inputs then, and its correlate2d (not correlate) returns the
        # conjugate of the correlation; matched here
        out = np.conj(out) if np.iscomplexobj(out) else out
    return out
