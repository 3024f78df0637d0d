"""The error for a tracked value converted to a plain array, naming who converted it.

NumPy's protocols reach tracked only when NumPy dispatches; a NumPy or SciPy function
that converts its arguments with ``np.asarray`` first (``scipy.special.logsumexp``,
``scipy.stats.norm.logpdf``, ``np.select``'s ``default``, ``np.vectorize``) meets
``Tracked.__array__``, which refuses.  The error then names that function, found from
the Python frames of the call (the outermost NumPy or SciPy frame), and the
differentiable version ``tracked.scipy`` or ``tracked.numpy`` has of it, if any.
"""
import importlib
import sys

__all__ = ['ConversionError', 'conversion_error', 'holds_tracked', 'accepting_lists',
           'wrap_dispatched']

_GENERIC = ('a tracked value cannot be converted to a plain NumPy array silently: that would '
            'drop its gradient. Use tr.data(x) for the value; to build an array from tracked '
            'values use np.stack or np.concatenate, which tracked differentiates (or import '
            'tracked.numpy as np, whose np.array accepts lists of them). A plain array cannot '
            'hold a tracked value (a[i] = t): tracked.numpy\'s zeros_like/empty_like of a '
            'tracked array can; np.full(shape, t) is np.zeros(shape) + t.')


class ConversionError(TypeError):
    """A tracked value met ``np.asarray`` (``Tracked.__array__``).  A ``TypeError``, as
    NumPy's own refusals are; ``tracked.numpy`` catches it to retry a NumPy function
    with its lists of tracked values made arrays."""


def conversion_error(depth=1):
    """``conversion_error(depth)``: the ``ConversionError`` for a conversion requested
    ``depth`` frames above the caller, naming the NumPy or SciPy function that asked.

    >>> import tracked as tr
    >>> str(tr.conversions.conversion_error()).startswith('a tracked value cannot')
    True
    """
    caller = _library_caller(depth + 1)
    if caller is None:
        return ConversionError(_GENERIC)
    name, hint = caller
    return ConversionError(f'{name} converts its arguments with np.asarray, which cannot take '
                           f'a tracked value (NumPy does not hand it to tracked).{hint} '
                           f'Otherwise: {_GENERIC}')


def _library_caller(depth):
    """``(name, hint)`` for the outermost NumPy or SciPy frame of the chain of such frames
    that starts ``depth`` frames up, or None when that frame is someone else's."""
    frame = sys._getframe(depth + 1)
    outer = None
    while frame is not None and (frame.f_globals.get('__name__') or '').split('.')[0] in (
            'numpy', 'scipy'):
        outer = frame
        frame = frame.f_back
    if outer is None:
        return None
    module = outer.f_globals['__name__']
    qualname = getattr(outer.f_code, 'co_qualname', outer.f_code.co_name)
    if '<locals>' in qualname:          # a decorator's wrapper: the package is all we know
        return f'a {".".join(module.split(".")[:2])} function', ''
    parts = qualname.split('.')
    # a method (np.vectorize.__call__, rv_continuous.logpdf): the class names the callable
    # unless the method is a public one of its own
    func = parts[0] if len(parts) > 1 and parts[-1].startswith('_') else '.'.join(parts)
    if module.startswith('scipy'):
        package = '.'.join(module.split('.')[:2])
        return f'{package}.{func}', _scipy_hint(package, func)
    sub = next((s for s in ('linalg', 'fft', 'random') if module.startswith(f'numpy.{s}')), None)
    return (f'np.{sub}.{func}' if sub else f'np.{func}'), _numpy_hint(sub, func)


def _scipy_hint(package, func):
    sub = package.split('.')[-1]
    try:
        mod = importlib.import_module(f'tracked.scipy.{sub}')
    except ImportError:
        return ''
    names = getattr(mod, '__all__', ())
    base = func.split('.')[0]
    if base in names:
        return (f' Use tracked.scipy.{sub}.{base} instead (from tracked.scipy import {sub}): '
                f'the same function, differentiable.')
    return (f' tracked.scipy.{sub} (from tracked.scipy import {sub}) differentiates '
            f'{", ".join(names)}.')


def _numpy_hint(sub, func):
    import numpy
    mod = importlib.import_module('tracked.numpy' + (f'.{sub}' if sub else ''))
    own = vars(mod).get(func)
    numpys = getattr(getattr(numpy, sub) if sub else numpy, func, None)
    if own is not None and own is not numpys:
        return (f' tracked.numpy{"." + sub if sub else ""}.{func} (import tracked.numpy as np) '
                f'accepts tracked values there.')
    return ''


def holds_tracked(x):
    """``holds_tracked(x)``: whether ``x`` is a tracked value or a (nested) list or tuple
    holding one.

    >>> import tracked as tr
    >>> from tracked.conversions import holds_tracked
    >>> holds_tracked([1.0, (2.0, tr.param(3.0))]), holds_tracked([1.0])
    (True, False)
    """
    from .values import Tracked          # (values imports this module)
    if isinstance(x, Tracked):
        return True
    return type(x) in (list, tuple) and any(holds_tracked(v) for v in x)


def accepting_lists(fn, as_array, module):
    """``fn`` (a NumPy function) as ``tracked.numpy`` offers it: NumPy's own call, and when
    NumPy refuses a list or tuple holding tracked values (``np.sum([a, b])``: it converts
    the list, it never dispatches on it), the same call again with each such argument
    made an array by ``as_array``.  Nothing else changes: a call NumPy accepts is NumPy's.
    A tuple of integers stays as it is (a shape or axes, even holding a tracked int).

    >>> import numpy, tracked as tr, tracked.numpy as np
    >>> tr.gradient(lambda a, b: np.sum([a, a * b]), 2.0, 3.0)
    (np.float64(4.0), np.float64(2.0))
    """
    def convert(x):
        if type(x) in (list, tuple) and holds_tracked(x) and not all(
                isinstance(v, int) for v in x):
            return as_array(x)
        return x

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConversionError:
            new_args = [convert(a) for a in args]
            new_kwargs = {k: convert(v) for k, v in kwargs.items()}
            if all(a is b for a, b in zip(new_args, args)) and all(
                    new_kwargs[k] is kwargs[k] for k in kwargs):
                raise
        return fn(*new_args, **new_kwargs)
    # NumPy's signature (through __wrapped__), not its docstring: its examples are NumPy's
    # doctests, not this module's
    call.__wrapped__ = fn
    call.__name__ = call.__qualname__ = fn.__name__
    call.__module__ = module            # pickled by reference, as tracked.numpy's
    call.__doc__ = (f'``{module}.{fn.__name__}``: ``{fn.__module__}.{fn.__name__}``, also given '
                    f'lists of tracked values. NumPy\'s documentation: '
                    f'help({fn.__module__}.{fn.__name__}).')
    return call


def wrap_dispatched(namespace, numpy_module, as_array):
    """Replace, in ``namespace`` (a module's globals), every NumPy function of
    ``numpy_module`` that dispatches and that the module does not define itself by
    ``accepting_lists(fn, as_array, ...)``: ``tracked.numpy`` and its submodules."""
    for name in getattr(numpy_module, '__all__', dir(numpy_module)):
        fn = getattr(numpy_module, name, None)
        if type(fn).__name__ == '_ArrayFunctionDispatcher' and namespace.get(name) is fn:
            namespace[name] = accepting_lists(fn, as_array, namespace['__name__'])
