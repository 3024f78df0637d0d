"""tracked: reverse-mode automatic differentiation of NumPy code by operator overloading."""
from .values import TrackedArray, TrackedReal, param, back, istracked
from . import rules  # noqa: F401  (fills the registry)
from . import api  # noqa: F401
from .testing import gradcheck
