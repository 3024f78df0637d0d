"""Functions whose results carry no gradient: comparisons, index-valued, shape queries."""
import numpy as np

from ..registry import nondifferentiable

nondifferentiable(
    np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
    np.shape, np.ndim, np.size,
)
