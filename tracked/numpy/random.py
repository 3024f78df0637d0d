"""``tracked.numpy.random``: NumPy's (random numbers are constants of a computation)."""
from numpy.random import *  # noqa: F401,F403
