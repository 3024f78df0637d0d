"""``tracked.numpy.fft``: NumPy's (tracked values dispatch there), also given lists of
tracked values (see ``tracked.numpy``)."""
import numpy.fft as _numpy_fft
from numpy.fft import *  # noqa: F401,F403

from . import asarray as _asarray
from ._lists import wrap_dispatched as _wrap_dispatched

_wrap_dispatched(globals(), _numpy_fft, _asarray)
