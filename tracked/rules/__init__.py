"""Derivative rules, one file per family.  Importing this package fills the registry.

Each rule is one entry: ``defvjp(numpy_fn, vjp_arg0, vjp_arg1, ...)`` where every
pullback has the signature ``vjp(g, ans, *args, **kwargs)`` and is written with
NumPy operations (never by reaching into ``.data``), so that it is differentiable
itself.  Broadcasting is undone centrally by the tape, not here.

SciPy (an optional extra): ``scipy_special`` registers the ``scipy.special`` ufuncs
when SciPy imports (they reach the registry unmodified); ``scipy_linalg`` and
``scipy_signal`` are imported by ``tracked.scipy.linalg``/``.signal`` only, so that
``import tracked`` does not pay for importing those SciPy modules; ``scipy_sparse`` by
``tracked.scipy.sparse``.  ``sparse_operands`` lets operators take SciPy's sparse matrices
(``A @ x``) without importing SciPy.
"""
from . import (elementwise, reductions, products, linalg, decompositions, fft, shape,  # noqa: F401
               indexing, nondiff, ufunc_methods, statistics, signal, polynomials, construction,
               unsupported, scipy_special, sparse_operands)
