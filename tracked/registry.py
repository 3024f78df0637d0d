"""The rule registry: one entry per primitive, looked up by the NumPy callable.

A ``Primitive`` pairs a forward function with one pullback per argument position,
written as ``vjp(g, ans, *args, **kwargs)`` with NumPy operations (so that they are
differentiable themselves: that is what makes nesting and the traced backward pass
of compiled tapes work).  ``None`` marks a position that never carries a gradient.

Registering a NumPy function means one ``defvjp`` call (or one ``defcomposite`` for
a function written with other primitives).  The tables below are all the core
consults; this module imports nothing from the rest of the package.
"""

RULES = {}        # NumPy callable (ufunc, function, or operator.*) -> Primitive | composite
NONDIFF = {}      # NumPy callable -> True: outputs are plain values, never tracked
REDUCE = {}       # ufunc -> the function that ``ufunc.reduce`` means (np.add -> np.sum)
ACCUMULATE = {}   # ufunc -> the function that ``ufunc.accumulate`` means (np.add -> np.cumsum)


def identity(g, ans, *args, **kwargs):
    """The pullback that passes the cotangent through unchanged (``add``, ``copy``, ...).

    ``backward`` recognises it and skips the call: a third of the operations in
    typical code are additions, and a Python call costs ~4% of an eager operation.
    """
    return g


class Primitive:
    """A differentiable operation: ``fn`` for the forward pass, ``vjps`` for the pullbacks.

    ``view`` marks operations whose output may share memory with their first input;
    the tape uses it to refuse in-place writes that NumPy would propagate to views.
    ``direct`` marks user rules (``@tr.rule``) whose forward must see lower-level
    tracked values itself instead of being recorded once per level.
    """

    __slots__ = ('fn', 'vjps', 'name', 'view', 'direct')

    def __init__(self, fn, vjps, name=None, view=False, direct=False):
        self.fn = fn
        self.vjps = tuple(vjps)
        self.name = name or getattr(fn, '__name__', repr(fn))
        self.view = view
        self.direct = direct   # forward handles lower-level tracked arguments itself

    def __repr__(self):
        return f'<Primitive {self.name}>'


def defvjp(fun, *vjps, fn=None, name=None, view=False):
    """Register ``fun`` as a primitive whose pullbacks are ``vjps`` (one per argument).

    ``fn`` is the forward function when it is not ``fun`` itself.
    """
    prim = Primitive(fn or fun, vjps, name=name or _name(fun), view=view)
    RULES[fun] = prim
    return prim


def defcomposite(fun, impl):
    """Register ``impl`` (written with other primitives) to run when ``fun`` meets tracked values."""
    RULES[fun] = impl
    return impl


def nondifferentiable(*funs):
    """Mark NumPy callables whose results are plain (comparisons, argmax, shapes, ...)."""
    for f in funs:
        NONDIFF[f] = True


def lookup(fun):
    return RULES.get(fun)


def _name(fun):
    mod = getattr(fun, '__module__', None) or ''
    base = getattr(fun, '__name__', repr(fun))
    for sub in ('linalg', 'fft', 'random'):
        if mod.startswith('numpy.' + sub):
            return f'np.{sub}.{base}'
    if mod == '_operator' or mod == 'operator':
        return 'operator.' + base
    return 'np.' + base
