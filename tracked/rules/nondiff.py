"""Functions whose results carry no gradient: comparisons, predicates, index-valued
functions, shape and dtype queries, and arrays made only from a value's shape.

An explicit list rather than a guess: a NumPy function missing from here and from
the rules raises a ``TypeError`` naming it.  Each one reaches ``tracked`` through
``__array_ufunc__`` (the ufuncs) or ``__array_function__`` (the rest) and returns
a plain result.
"""
import numpy as np

from ..registry import nondifferentiable, defcomposite
from ..boxes import Tracked
from ..dispatch import call_nondiff

# comparison and logical ufuncs, with their compiled-tape templates
for _f, _kernel in ((np.less, '({0} < {1})'), (np.less_equal, '({0} <= {1})'),
                    (np.greater, '({0} > {1})'), (np.greater_equal, '({0} >= {1})'),
                    (np.equal, '({0} == {1})'), (np.not_equal, '({0} != {1})'),
                    (np.logical_and, '({0} and {1})'), (np.logical_or, '({0} or {1})'),
                    (np.logical_not, '(not {0})'), (np.logical_xor, '(bool({0}) != bool({1}))'),
                    (np.bitwise_and, '({0} & {1})'), (np.bitwise_or, '({0} | {1})'),
                    (np.bitwise_xor, '({0} ^ {1})')):
    nondifferentiable(_f, kernel=_kernel)

nondifferentiable(
    # bitwise ufuncs: integer results, also ~mask
    np.invert, np.left_shift, np.right_shift, np.gcd, np.lcm,
    # predicates
    np.isnan, np.isinf, np.isfinite, np.isneginf, np.isposinf, np.signbit,
    np.isclose, np.allclose, np.array_equal, np.array_equiv,
    np.isreal, np.iscomplex, np.isrealobj, np.iscomplexobj,
    np.any, np.all,
    # integer-valued: positions, counts, orderings
    np.argmax, np.argmin, np.argsort, np.argpartition, np.lexsort, np.argwhere,
    np.nonzero, np.flatnonzero, np.count_nonzero, np.searchsorted,
    # shapes and dtypes
    np.shape, np.ndim, np.size, np.result_type, np.can_cast,
    np.shares_memory, np.may_share_memory,
    # arrays made from a value's shape and dtype only (np.full_like: below)
    np.zeros_like, np.ones_like, np.empty_like,
    # more positions, counts and bins (piecewise constant in the values)
    np.nanargmax, np.nanargmin, np.digitize, np.histogram_bin_edges, np.ravel_multi_index,
    np.unravel_index, np.ix_, np.diag_indices_from, np.tril_indices_from, np.triu_indices_from,
    np.bitwise_count, np.packbits, np.unpackbits, np.spacing, np.isnat,
    # set operations: sorted distinct values and membership
    np.unique, np.unique_all, np.unique_counts, np.unique_inverse, np.unique_values,
    np.intersect1d, np.union1d, np.setdiff1d, np.setxor1d, np.isin,
    *([np.in1d] if hasattr(np, 'in1d') else []),      # removed in NumPy 2.4
    # text, dtypes, dates, contraction plans
    np.array2string, np.array_repr, np.array_str, np.common_type, np.min_scalar_type,
    np.busday_count, np.busday_offset, np.is_busday, np.datetime_as_string, np.einsum_path,
)


def _full_like(a, fill_value, dtype=None, order='K', subok=True, shape=None, **kwargs):
    """``np.full_like``: plain, unless ``fill_value`` itself is tracked."""
    if not isinstance(fill_value, Tracked):
        return call_nondiff(np.full_like, (a, fill_value, dtype, order, subok, shape), kwargs)
    out_shape = np.shape(a) if shape is None else shape
    zeros = np.zeros(out_shape, dtype=dtype or np.result_type(a))
    return zeros + fill_value      # the gradient of fill_value is the sum of the cotangent


defcomposite(np.full_like, _full_like)
