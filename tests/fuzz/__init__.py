"""A fuzzer of programs that combine tracked's own features (issue 23, item 4).

``generate.py`` draws a program from a seed: argument trees (the same array in
several places, repeated numbers, ints, strings) and a body of blocks (NumPy
expressions, branches, loops, in-place writes, custom rules, ``ignore_derivatives``,
``checkpoint``, ``fmap``, ``destructure``, inner ``gradient``/``withgradient``/
``pullback``/``jacobian``/``hessian``/``hvp``/``jvp``/``diaghessian``, ``Duplicated``)
as data (``programs.py``), rendered as Python source.  ``oracle.py`` checks every
path (plain, reverse, forward, second order, recorded tape, ``param``/``back``,
``Duplicated``) against a reference implementation by finite differences
(``reference.py``), finite differences of the whole function, and the invariant that
a value and its derivatives do not depend on being differentiated at an outer level.
``shrink.py`` reduces a failing program; ``campaign.py`` runs many.

The CI slice is tests/test_fuzz.py; a longer campaign is
``python -m tests.fuzz --programs 5000 --seed 1``.
"""
