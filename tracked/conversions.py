"""The error for a tracked value converted to a plain array, naming who converted it.

NumPy's protocols reach tracked only when NumPy dispatches; a NumPy or SciPy function
that converts its arguments with ``np.asarray`` first (``scipy.special.logsumexp``,
``scipy.stats.norm.logpdf``, ``np.select``'s ``default``, ``np.vectorize``) meets
``Tracked.__array__``, which refuses.  The error then names that function, found from
the Python frames of the call (the outermost NumPy or SciPy frame), and the
differentiable version ``tracked.scipy`` or ``tracked.numpy`` has of it, if any.
"""
from __future__ import annotations

import importlib
import sys
from types import FrameType

__all__ = ['ConversionError', 'conversion_error']

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


def conversion_error(depth: int = 1) -> ConversionError:
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


def _library_caller(depth: int) -> tuple[str, str] | None:
    """``(name, hint)`` for the outermost NumPy or SciPy frame of the chain of such frames
    that starts ``depth`` frames up, or None when that frame is someone else's."""
    frame: FrameType | None = sys._getframe(depth + 1)
    outer = None
    while frame is not None and (frame.f_globals.get('__name__') or '').split('.')[0] in (
            'numpy', 'scipy'):
        outer = frame
        frame = frame.f_back
    if outer is None:
        return None
    module = outer.f_globals['__name__']
    qualname = getattr(outer.f_code, 'co_qualname', None)
    if qualname is None:                # Python 3.10: a method's class from its self
        self = outer.f_locals.get('self')
        qualname = outer.f_code.co_name if self is None else \
            f'{type(self).__qualname__}.{outer.f_code.co_name}'
    if '<locals>' in qualname:          # a decorator's wrapper: the package is all we know
        return f'a {".".join(module.split(".")[:2])} function', ''
    parts = qualname.split('.')
    self = outer.f_locals.get('self')
    if len(parts) > 1 and parts[0].startswith('_') and self is not None:
        parts[0] = type(self).__name__      # a private base's method: the user's class
    # a method (np.vectorize.__call__, rv_continuous.logpdf): the class names the callable
    # unless the method is a public one of its own
    func = parts[0] if len(parts) > 1 and parts[-1].startswith('_') else '.'.join(parts)
    if module.startswith('scipy'):
        # the public package: scipy.sparse.linalg for scipy.sparse.linalg._dsolve.linsolve
        names = module.split('.')
        package = '.'.join(names[:next((k for k, n in enumerate(names) if n.startswith('_')),
                                       len(names))])
        return f'{package}.{func}', _scipy_hint(package, func)
    sub = next((s for s in ('linalg', 'fft', 'random') if module.startswith(f'numpy.{s}')), None)
    return (f'np.{sub}.{func}' if sub else f'np.{func}'), _numpy_hint(sub, func)


def _scipy_hint(package: str, func: str) -> str:
    sub = package.partition('.')[2]                  # 'sparse.linalg'
    try:
        mod = importlib.import_module(f'tracked.scipy.{sub}')
    except ImportError:
        return ''
    own = getattr(mod, 'conversion_hint', None)      # a module's word on its own cases
    hint = own(func) if own is not None else None
    if hint is not None:
        return hint
    names = getattr(mod, '__all__', ())
    base = func.split('.')[0]
    parent, _, last = f'tracked.scipy.{sub}'.rpartition('.')
    if base in names:
        return (f' Use tracked.scipy.{sub}.{base} instead (from {parent} import {last}): '
                f'the same function, differentiable.')
    return (f' tracked.scipy.{sub} (from {parent} import {last}) differentiates '
            f'{", ".join(names)}.')


def _numpy_hint(sub: str | None, func: str) -> str:
    import numpy
    mod = importlib.import_module('tracked.numpy' + (f'.{sub}' if sub else ''))
    own = vars(mod).get(func)
    numpys = getattr(getattr(numpy, sub) if sub else numpy, func, None)
    if own is not None and own is not numpys:
        return (f' tracked.numpy{"." + sub if sub else ""}.{func} (import tracked.numpy as np) '
                f'accepts tracked values there.')
    return ''
