"""Derivative rules, one file per family.  ``install()`` (called by the package's
``__init__``) registers them: each family module registers its rules when imported.

Each NumPy callable has one entry in ``registry.RULES``: a primitive made by
``defpartials`` (an elementwise function's partial derivatives) or ``defvjp`` (one
pullback ``vjp(g, ans, *args, **kwargs)`` per argument, ``multi=True`` for several
outputs), or a composite (``defcomposite``) written with other primitives, among them
internal ones a module builds with ``Primitive(...)`` and calls with ``apply`` (svd,
clip, indexing).  Pullbacks are written with NumPy operations (never by reaching into
``.data``), so that they are differentiable themselves.  Broadcasting is undone
centrally by the tape, not here.  ``docs/dev/rules.md`` is the guide.

SciPy (an optional extra): ``scipy_special`` registers the ``scipy.special`` ufuncs
when SciPy imports (they reach the registry unmodified); ``scipy_linalg`` and
``scipy_signal`` are imported by ``tracked.scipy.linalg``/``.signal`` only, so that
``import tracked`` does not pay for importing those SciPy modules; ``scipy_sparse`` by
``tracked.scipy.sparse``.  ``sparse_operands`` lets operators take SciPy's sparse matrices
(``A @ x``) without importing SciPy.
"""
import importlib

__all__ = ['FAMILIES', 'install']

FAMILIES = ('elementwise', 'reductions', 'products', 'linalg', 'decompositions', 'fft', 'shape',
            'indexing', 'nondiff', 'ufunc_methods', 'statistics', 'signal', 'polynomials',
            'construction', 'unsupported', 'scipy_special', 'sparse_operands')


def install() -> None:
    """Register the rules of every family in ``FAMILIES`` (once: a module registers when
    it is first imported).

    >>> import numpy as np, tracked
    >>> from tracked import registry, rules
    >>> rules.install(); np.sin in registry.RULES
    True
    """
    for family in FAMILIES:
        importlib.import_module(f'{__name__}.{family}')
