"""SciPy's sparse matrices as operands of tracked values' operators: ``A @ x``,
``x @ A``, ``A.dot(x)``, ``A.T @ x``, ``A * x``, ``A + x`` with a constant
``scipy.sparse`` matrix or array ``A``, in unmodified code.

How ``A @ x`` reaches tracked: Python asks ``A.__matmul__(x)`` first.  SciPy's
``_matmul_dispatch`` (behind ``@``, ``.dot`` and ``spmatrix``'s ``*``) converts ``x``
with ``np.asanyarray`` and, on a 0-d object array, returns ``NotImplemented`` "so that
other's ``__rmatmul__`` can kick in" (its source says so).  ``Tracked.__array__`` gives
that array to this caller alone (``_dispatch``); to anyone else it raises the
``ConversionError``.  Python then calls ``x.__rmatmul__(A)``, which meets ``A`` here
(``_accepts``): it becomes ``tracked.scipy.sparse``'s matrix with ``A``'s values as
constants, whose operators take tracked values.  ``x @ A`` reaches ``x.__matmul__``
first, the same way.  ``sparray``'s ``*`` (elementwise) asks from another function,
answered only under the operator: ``A.multiply(x)``, a method, would hand the
``NotImplemented`` to its caller, so it raises the ``ConversionError`` naming the fix.
COO's own ``dot`` asks only to refuse a 0-d object array, then reads ``x.shape`` and
computes ``A @ x`` with ``x`` itself: it gets an object array of ``x``'s shape holding
None (were SciPy to compute with it, it would fail, never return a wrong value).
``A + x`` needs nothing: SciPy returns ``NotImplemented`` for an operand that is not
an ndarray.

Rejected: ``__array_priority__`` (SciPy's operators do not read it); replacing SciPy's
operators (a change to a library every other caller shares); a subclass of SciPy's
classes (Python tries a right operand's reflected method first only when it subclasses
the left one's type).

Nothing here imports SciPy: ``sys.modules`` says whether ``scipy.sparse`` is loaded
(no sparse matrix exists before it is), and ``tracked.scipy.sparse`` is imported when
the first one is met.
"""
import sys

import numpy as np

from ..boxes import register_foreign_operand

__all__: list[str] = []


def _sparse_classes():
    sparse = sys.modules.get('scipy.sparse')
    return None if sparse is None else (sparse.sparray, sparse.spmatrix)


def _accepts(t):
    classes = _sparse_classes()
    return classes is not None and issubclass(t, classes)


def _convert(a):
    from ..scipy.sparse.matrix import SparseMatrix     # (imports SciPy: see above)
    return SparseMatrix.from_scipy(a)


def _dispatch(frame, x):
    """What ``Tracked.__array__`` gives SciPy's sparse code that asks for ``x``'s array
    only to dispatch (above); None for any other caller."""
    if not (frame.f_globals.get('__name__') or '').startswith('scipy.sparse'):
        return None
    name = frame.f_code.co_name
    if name == '_matmul_dispatch':
        return _holding(x, ())
    if name == '_multiply_2d_with_broadcasting':       # under multiply, under __mul__
        outer = frame.f_back.f_back if frame.f_back is not None else None
        return _holding(x, ()) if outer is not None and outer.f_code.co_name == '__mul__' \
            else None
    if name == 'dot' and frame.f_globals['__name__'].endswith('_coo'):
        return _holding(None, x.shape)
    return None


def _holding(v, shape):
    """An object array of ``shape`` holding None, or 0-d holding ``v``."""
    out = np.empty(shape, dtype=object)
    if v is not None:
        out[()] = v
    return out


register_foreign_operand(_accepts, _convert, _dispatch)
