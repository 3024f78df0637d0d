"""``tracked.numpy.linalg``: NumPy's (tracked values dispatch there), also given lists of
tracked values (see ``tracked.numpy``)."""
import numpy.linalg as _numpy_linalg
from numpy.linalg import *  # noqa: F401,F403

from . import asarray as _asarray
from ._lists import wrap_dispatched as _wrap_dispatched

_wrap_dispatched(globals(), _numpy_linalg, _asarray)
