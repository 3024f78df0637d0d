"""``tracked.numpy.linalg``: NumPy's (tracked values dispatch there)."""
from numpy.linalg import *  # noqa: F401,F403
