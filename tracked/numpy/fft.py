"""``tracked.numpy.fft``: NumPy's (tracked values dispatch there)."""
from numpy.fft import *  # noqa: F401,F403
