"""``tracked.autograd.scipy.signal.convolve``: autograd's n-dimensional convolution.

``convolve(A, B, axes=None, dot_axes=[(), ()], mode='full')`` convolves ``A`` and ``B``
along the paired axes ``axes = [A_axes, B_axes]`` (default: all axes, paired in
order), sums over the paired ``dot_axes``, and keeps every other axis as an outer
product; the result's axes are ``A``'s other axes, then ``B``'s, then the convolved
ones.  ``mode`` is ``'full'`` (size ``a + b - 1``) or ``'valid'`` (``|a - b| + 1``; one
array must be at least as large as the other along every convolved axis).  This is
autograd's own function (its ``convnet`` example), not ``scipy.signal.convolve``, which
``tracked.scipy.signal`` mirrors.  It is one primitive whose pullback is again a
convolution, so it nests to any order.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..extend import defvjp, primitive

__all__ = ['convolve']

_MODES = ('full', 'valid')


def _parse(ndim_a: int, ndim_b: int, axes: Any, dot_axes: Any) -> tuple[Any, ...]:
    if axes is None:
        if ndim_a != ndim_b:
            raise ValueError(f'convolve: A has {ndim_a} axes and B {ndim_b}; give axes=[A_axes, '
                             f'B_axes] to say which are convolved')
        axes = (tuple(range(ndim_a)), tuple(range(ndim_a)))
    conv_a, conv_b = (tuple(int(i) for i in a) for a in axes)
    dot_a, dot_b = (tuple(int(i) for i in a) for a in dot_axes)
    if len(conv_a) != len(conv_b) or len(dot_a) != len(dot_b):
        raise ValueError('convolve: axes and dot_axes pair axes of A with axes of B: give '
                         'lists of the same length')
    keep_a = tuple(i for i in range(ndim_a) if i not in conv_a and i not in dot_a)
    keep_b = tuple(i for i in range(ndim_b) if i not in conv_b and i not in dot_b)
    return conv_a, conv_b, dot_a, dot_b, keep_a, keep_b


def _convolve(A: Any, B: Any, axes: Any = None, dot_axes: Sequence[Any] = ((), ()),
              mode: str = 'full') -> Any:
    if mode not in _MODES:
        raise ValueError(f"convolve: mode={mode!r}; expected 'full' or 'valid'")
    A, B = np.asarray(A), np.asarray(B)
    conv_a, conv_b, dot_a, dot_b, keep_a, keep_b = _parse(A.ndim, B.ndim, axes, dot_axes)
    na = [A.shape[i] for i in conv_a]
    nb = [B.shape[j] for j in conv_b]
    if mode == 'valid' and not (all(a >= b for a, b in zip(na, nb)) or
                                all(a <= b for a, b in zip(na, nb))):
        raise ValueError('convolve: in valid mode one array must be at least as large as '
                         'the other along every convolved axis')
    # correlation of the larger (zero-padded in full mode) with the flipped smaller one
    a_big = all(a >= b for a, b in zip(na, nb))
    big, small, cb, cs = (A, B, conv_a, conv_b) if a_big else (B, A, conv_b, conv_a)
    dots_big, dots_small = (dot_a, dot_b) if a_big else (dot_b, dot_a)
    keep_big, keep_small = (keep_a, keep_b) if a_big else (keep_b, keep_a)
    if mode == 'full':
        pad = [(0, 0)] * big.ndim
        for i, j in zip(cb, cs):
            pad[i] = (small.shape[j] - 1,) * 2
        big = np.pad(big, pad)
    flip = [slice(None)] * small.ndim
    for j in cs:
        flip[j] = slice(None, None, -1)
    small = small[tuple(flip)]
    windows = sliding_window_view(big, [small.shape[j] for j in cs], axis=tuple(cb))
    # einsum labels: each axis of A and B its own, shared labels for pairs
    nb_, ns = big.ndim, small.ndim
    big_idx = list(range(nb_)) + [nb_ + ns + k for k in range(len(cb))]
    small_idx = list(range(nb_, nb_ + ns))
    for k, j in enumerate(cs):
        small_idx[j] = nb_ + ns + k                    # window offset: summed
    for i, j in zip(dots_big, dots_small):
        small_idx[j] = big_idx[i]                      # dot axes: summed
    out_idx = [big_idx[i] for i in keep_big] + [small_idx[j] for j in keep_small] + \
        [big_idx[i] for i in cb]
    out = np.einsum(windows, big_idx, small, small_idx, out_idx)
    if a_big:
        return out
    # B was the larger: put A's kept axes first, as the result's order requires
    nka, nkb = len(keep_a), len(keep_b)
    order = list(range(nkb, nkb + nka)) + list(range(nkb)) + \
        list(range(nka + nkb, out.ndim))
    return np.transpose(out, order)


convolve = primitive(_convolve)
convolve.__doc__ = """``convolve(A, B, axes=None, dot_axes=[(), ()], mode='full')``: autograd's
convolution (module docstring).

>>> import numpy as np, tracked as tr
>>> from tracked.autograd.scipy.signal import convolve
>>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
array([0. , 1. , 2.5, 4. , 1.5])
>>> tr.gradient(lambda a: np.sum(convolve(a, np.array([1.0, -1.0]), mode='valid') ** 2),
...             np.array([1.0, 3.0, 2.0]))[0]
array([-4.,  6., -2.])
"""


def _vjp(argnum: int) -> Any:
    def maker(ans: Any, A: Any, B: Any, axes: Any = None, dot_axes: Sequence[Any] = ((), ()),
              mode: str = 'full') -> Any:
        conv_a, conv_b, dot_a, dot_b, keep_a, keep_b = _parse(np.ndim(A), np.ndim(B), axes,
                                                              dot_axes)
        X, Y = (A, B) if argnum == 0 else (B, A)
        conv_x, conv_y, dot_x, dot_y, keep_x, keep_y = (
            (conv_a, conv_b, dot_a, dot_b, keep_a, keep_b) if argnum == 0 else
            (conv_b, conv_a, dot_b, dot_a, keep_b, keep_a))
        nx = [np.shape(X)[i] for i in conv_x]
        ny = [np.shape(Y)[j] for j in conv_y]
        new_mode = 'valid' if mode == 'full' or all(a <= b for a, b in zip(nx, ny)) else 'full'
        nka, nkb = len(keep_a), len(keep_b)
        out_keep_y = tuple(range(nka, nka + nkb)) if argnum == 0 else tuple(range(nka))
        out_conv = tuple(range(nka + nkb, nka + nkb + len(conv_a)))
        flip = [slice(None)] * np.ndim(Y)
        for j in conv_y:
            flip[j] = slice(None, None, -1)

        def vjp(g: Any) -> Any:
            r = convolve(g, Y[tuple(flip)], axes=[out_conv, conv_y],
                         dot_axes=[out_keep_y, keep_y], mode=new_mode)
            # r's axes: X's kept axes, X's dot axes (paired with Y's), X's convolved axes
            return np.transpose(r, np.argsort(keep_x + dot_x + conv_x))
        return vjp
    return maker


defvjp(convolve, _vjp(0), _vjp(1))
