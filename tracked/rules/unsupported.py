"""NumPy functions without a rule on purpose, and those NumPy never hands a tracked value.

``UNSUPPORTED``: called on tracked values they raise the no-rule ``TypeError``; the
reason says what to do instead.  ``UNDISPATCHED``: NumPy does not dispatch them on
their arguments (constructors from shapes, readers, configuration), so a tracked
value reaches tracked only through the NumPy functions they call, if any.  With the
rules and ``NONDIFF`` these account for NumPy's whole public namespace (the coverage
page, ``python -m tracked.coverage``, and its test).
"""
import numpy as np

from ..registry import UNDISPATCHED, UNSUPPORTED


def _mark(table, reason, *funs):
    for f in funs:
        table[f] = reason


_mark(UNSUPPORTED, 'writes a file: save tr.data(x)',
      np.save, np.savetxt, np.savez, np.savez_compressed)

_mark(UNDISPATCHED, 'builds an array from sizes (a tracked integer is read as its value)',
      np.arange, np.empty, np.eye, np.identity, np.ones, np.zeros, np.tri, np.indices,
      np.diag_indices, np.tril_indices, np.triu_indices, np.mask_indices,
      np.bartlett, np.blackman, np.hamming, np.hanning)
_mark(UNDISPATCHED, 'not dispatched, yet differentiable in d: NumPy computes k / (n * d) with '
      'arithmetic on d, which is recorded as such (n is a size)', np.fft.fftfreq,
      np.fft.rfftfreq)
_mark(UNDISPATCHED, 'converts with np.asarray, which refuses a tracked value: use np.stack '
      '(or tracked.numpy)', np.array, np.asarray, np.asanyarray, np.ascontiguousarray,
      np.asfortranarray, np.asarray_chkfinite, np.asmatrix, np.bmat, np.require)
_mark(UNDISPATCHED, 'fills with np.copyto: use np.zeros(shape) + value or np.full_like', np.full)
_mark(UNDISPATCHED, 'computes with np.i0, which has a rule (a tracked beta differentiates)',
      np.kaiser)
_mark(UNDISPATCHED, 'calls the function on index arrays: differentiable where it is',
      np.fromfunction)
# (removed in NumPy 2.5: ``import tracked`` must not depend on it)
if hasattr(np, 'row_stack'):
    _mark(UNDISPATCHED, 'deprecated alias of np.vstack, which has a rule', np.row_stack)
_mark(UNDISPATCHED, 'makes an object-dtype ufunc of a Python function (no rule)', np.frompyfunc)
_mark(UNDISPATCHED, 'reads files or buffers', np.frombuffer, np.fromfile, np.fromiter,
      np.fromregex, np.fromstring, np.genfromtxt, np.load, np.loadtxt, np.from_dlpack)
_mark(UNDISPATCHED, 'configuration, printing and dtype utilities',
      np.base_repr, np.binary_repr, np.broadcast_shapes, np.datetime_data,
      np.format_float_positional, np.format_float_scientific, np.get_include,
      np.get_printoptions, np.getbufsize, np.geterr, np.geterrcall, np.info, np.isdtype,
      np.isfortran, np.isscalar, np.issubdtype, np.iterable, np.mintypecode, np.nested_iters,
      np.printoptions, np.promote_types, np.set_printoptions, np.setbufsize, np.seterr,
      np.seterrcall, np.show_config, np.show_runtime, np.typename)
