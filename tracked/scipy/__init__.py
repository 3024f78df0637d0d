"""``tracked.scipy``: SciPy for tracked values, in SciPy's layout (as ``autograd.scipy``
and ``jax.scipy``).

``scipy.special``'s ufuncs need nothing from here: they reach tracked's registry
through NumPy's ufunc protocol, so ``scipy.special.gammaln(x)`` is differentiated
unmodified.  The SciPy functions that convert their arguments with ``np.asarray``
first cannot be intercepted; this package provides them, written with NumPy
operations on tracked values or as derivative rules of their own, under the same
names, so that changing one import line is all a program needs::

    from scipy import special, stats           # before
    from tracked.scipy import special, stats   # after

Submodules: ``special`` (logsumexp, softmax, log_softmax, polygamma, multigammaln),
``stats`` (distributions' densities and distribution functions), ``linalg`` (expm,
sqrtm, logm, solve_triangular, cho_factor/cho_solve, lu_factor/lu_solve,
solve_sylvester, solve_banded),
``signal`` (convolve, correlate), ``integrate`` (odeint, solve_ivp by the adjoint
method), ``sparse`` (sparse matrices with tracked values; ``sparse.linalg``: spsolve,
splu, cg, gmres, minres).  Every name a submodule does not define is SciPy's own object
(it works on plain values); any other SciPy subpackage is SciPy's
(``tracked.scipy.optimize``).
"""
from __future__ import annotations

import importlib
from typing import Any

try:
    import scipy  # noqa: F401
except ImportError as e:        # an optional dependency: say which extra installs it
    raise ImportError("tracked.scipy needs SciPy, an optional dependency: "
                      "pip install 'tracked[scipy]'") from e

_OWN = ('special', 'stats', 'linalg', 'signal', 'integrate', 'sparse')


def __getattr__(name: str) -> Any:
    """The submodules above, imported on first use (``scipy.signal`` alone takes most
    of a second to import); SciPy's other subpackages as they are
    (``tracked.scipy.optimize`` is ``scipy.optimize``)."""
    if name.startswith('_'):
        raise AttributeError(name)
    try:
        return importlib.import_module(f'{__name__}.{name}' if name in _OWN else f'scipy.{name}')
    except ImportError as e:
        if name in _OWN:
            raise
        raise AttributeError(f"module 'tracked.scipy' has no attribute {name!r}") from e


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_OWN))
