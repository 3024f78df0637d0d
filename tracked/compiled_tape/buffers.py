"""Where every value of a compiled tape lives: arenas, inputs, outputs, constants, views.

Each instruction's value gets a ``Storage``: an array *slot* (in the tuple of
arrays of its dtype that the generated code receives: slot 0 is that dtype's arena,
allocated once per compiled tape; then the caller's input arrays; then the gradient
output arrays) with an element offset, a shape and element strides.  Views
(reshape, transpose, basic slicing, broadcast_to, ...) get no memory of their own:
their storage is computed once, at compile time, by running the instruction on a
*probe* array whose entries are their own storage positions, and checking that the
result is affine in its indices.
"""
import numpy as np

__all__ = ['Storage', 'KERNEL_DTYPES', 'probe_view', 'c_strides']

KERNEL_DTYPES = {np.dtype(np.float64): 'F', np.dtype(np.int64): 'I', np.dtype(np.bool_): 'B'}


def c_strides(shape):
    out = []
    s = 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


class Storage:
    """A strided region of one array slot (``kind``: 'mem' an array slot, 'const' a scalar)."""

    __slots__ = ('kind', 'dtype', 'slot', 'off', 'shape', 'strides', 'cidx', 'value')

    def __init__(self, kind, dtype, slot=0, off=0, shape=(), strides=None, cidx=None, value=None):
        self.kind = kind
        self.dtype = np.dtype(dtype)
        self.slot = slot
        self.off = off
        self.shape = tuple(shape)
        self.strides = tuple(strides) if strides is not None else c_strides(shape)
        self.cidx = cidx          # const: index into the float constant table (None: literal)
        self.value = value        # const: the scalar

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def contiguous(self):
        """Whether the region is C-contiguous (size-1 axes may have any stride)."""
        return all(st == cs for st, cs, n in zip(self.strides, c_strides(self.shape), self.shape)
                   if n != 1)

    def broadcast_scalar(self):
        return self.kind == 'const' or all(st == 0 for st, n in zip(self.strides, self.shape)
                                           if n != 1)

    def strides_for(self, shape):
        """Element strides when read broadcast to ``shape`` (numpy rules)."""
        extra = len(shape) - len(self.shape)
        out = [0] * extra
        for st, n in zip(self.strides, self.shape):
            out.append(0 if n == 1 else st)
        return tuple(out)

    def span(self):
        """(lowest, highest) element index touched."""
        lo = hi = self.off
        for st, n in zip(self.strides, self.shape):
            if n == 0:
                return self.off, self.off - 1
            if st > 0:
                hi += st * (n - 1)
            else:
                lo += st * (n - 1)
        return lo, hi

    def view(self, off, shape, strides):
        return Storage(self.kind, self.dtype, self.slot, off, shape, strides, self.cidx, self.value)

    def __repr__(self):
        if self.kind == 'const':
            return f'const({self.value!r})'
        return f'{self.kind}[{self.slot}]+{self.off} {self.shape} {self.strides}'


def probe_view(fn, args, kwargs, parent, out_shape):
    """The storage of ``fn(parent, *args[1:])`` if it only rearranges ``parent``'s
    elements affinely (a view, or a copy that a view could replace); else None."""
    if parent.kind == 'const':
        return parent.view(0, out_shape, (0,) * len(out_shape))
    lo, hi = parent.span()
    if lo < 0:
        return None
    base = np.arange(hi + 1, dtype=np.int64)
    probe = np.lib.stride_tricks.as_strided(
        base[parent.off:], parent.shape, tuple(s * 8 for s in parent.strides))
    try:
        res = fn(probe, *args[1:], **kwargs)
    except Exception:
        return None
    res = np.asarray(res)
    if res.shape != tuple(out_shape) or res.dtype != np.int64:
        return None
    if res.size == 0:
        return parent.view(parent.off, out_shape, c_strides(out_shape))
    first = res.reshape(-1)[0]
    strides = []
    for ax, n in enumerate(res.shape):
        if n == 1:
            strides.append(0)
            continue
        idx = [0] * res.ndim
        idx[ax] = 1
        strides.append(int(res[tuple(idx)] - first))
    grid = first + sum(np.arange(n).reshape((-1,) + (1,) * (res.ndim - ax - 1)) * s
                       for ax, (n, s) in enumerate(zip(res.shape, strides))) if res.ndim else first
    if not np.array_equal(res, np.broadcast_to(grid, res.shape)):
        return None
    return parent.view(int(first), out_shape, strides)
