"""The error for a tracked value converted to a plain array, naming who converted it;
and the one for a tracked value passed to a numba-compiled function.

NumPy's protocols reach tracked only when NumPy dispatches; a NumPy or SciPy function
that converts its arguments with ``np.asarray`` first (``scipy.special.logsumexp``,
``scipy.stats.norm.logpdf``, ``np.select``'s ``default``, ``np.vectorize``) meets
``Tracked.__array__``, which refuses.  The error then names that function, found from
the Python frames of the call (the outermost NumPy or SciPy frame), and the
differentiable version ``tracked.scipy`` or ``tracked.numpy`` has of it, if any.
"""
from __future__ import annotations

import dis
import importlib
import sys
from types import FrameType, FunctionType
from typing import Any

import numpy as np

__all__ = ['ConversionError', 'conversion_error', 'library_caller', 'numba_type',
           'conversion_message', 'running', 'PERCENT', 'STORE', 'plain_result',
           'object_array_error', 'refuse_subclass']

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
    caller = library_caller(depth + 1)
    if caller is None:
        return ConversionError(_GENERIC)
    name, hint = caller
    return ConversionError(f'{name} converts its arguments with np.asarray, which cannot take '
                           f'a tracked value (NumPy does not hand it to tracked).{hint} '
                           f'Otherwise: {_GENERIC}')


def library_caller(depth: int = 1) -> tuple[str, str] | None:
    """``library_caller(depth) -> (name, hint)`` for the public NumPy or SciPy function
    the user called, found in the chain of their frames that starts ``depth`` frames
    above the caller (None when that frame is someone else's): the outermost one with
    a public name, so a SciPy function that calls others is named, and a decorator's
    wrapper (``scipy._lib``'s batching) names the function it wraps.  ``hint`` points
    to tracked's differentiable version, if any.

    >>> import numpy as np
    >>> np.apply_along_axis(lambda v: library_caller()[0], 0, np.zeros(1))
    array('np.apply_along_axis', dtype='<U19')
    """
    frame: FrameType | None = sys._getframe(depth + 1)
    chain = []
    while frame is not None and _package(frame.f_globals.get('__name__')) in ('numpy', 'scipy'):
        chain.append(frame)
        frame = frame.f_back
    for outer in reversed(chain):
        found = _public_name(outer)
        if found is not None:
            return found
    if not chain:
        return None
    module = chain[-1].f_globals['__name__']
    return f'a {".".join(module.split(".")[:2])} function', ''


def _package(module: str | None) -> str:
    return (module or '').split('.')[0]


def _public_name(frame: FrameType) -> tuple[str, str] | None:
    """``(name, hint)`` of the function running in ``frame``, None for a wrapper or a
    private helper whose public caller should be named instead."""
    module = frame.f_globals['__name__']
    qualname = getattr(frame.f_code, 'co_qualname', None)
    if qualname is None:                # Python 3.10: a method's class from its self
        self = frame.f_locals.get('self')
        qualname = frame.f_code.co_name if self is None else \
            f'{type(self).__qualname__}.{frame.f_code.co_name}'
    if '<locals>' in qualname:          # a decorator's wrapper: the function it wraps
        wrapped = _wrapped(frame)
        if wrapped is None:
            return None
        module, qualname = wrapped.__module__, wrapped.__qualname__
    elif module.startswith('scipy._lib'):
        return None
    parts = qualname.split('.')
    if module.startswith('scipy'):
        # the public package: scipy.sparse.linalg for scipy.sparse.linalg._dsolve.linsolve
        names = module.split('.')
        package = '.'.join(names[:next((k for k, n in enumerate(names) if n.startswith('_')),
                                       len(names))])
        func = _scipy_object(frame, package, parts) if len(parts) > 1 else qualname
        return f'{package}.{func}', _scipy_hint(package, func)
    # a method (np.vectorize.__call__): the class names the callable unless the method is
    # a public one of its own
    func = parts[0] if len(parts) > 1 and parts[-1].startswith('_') else '.'.join(parts)
    sub = next((s for s in ('linalg', 'fft', 'random') if module.startswith(f'numpy.{s}')), None)
    return (f'np.{sub}.{func}' if sub else f'np.{func}'), _numpy_hint(sub, func)


def _wrapped(frame: FrameType) -> FunctionType | None:
    """The NumPy or SciPy function a wrapper's closure holds (``functools.wraps``' target)."""
    for name in frame.f_code.co_freevars:
        f = frame.f_locals.get(name)
        if isinstance(f, FunctionType) and _package(f.__module__) in ('numpy', 'scipy') \
                and '<locals>' not in f.__qualname__:
            return f
    return None


def _scipy_object(frame: FrameType, package: str, parts: list[str]) -> str:
    """A SciPy method's callable as the user spelled it: the instance's public name
    (``multivariate_normal.entropy``, ``norm.logpdf``, ``norm(...).logpdf`` for a frozen
    distribution), else its class (``CubicSpline`` for ``CubicSpline.__init__``)."""
    method = '' if parts[-1].startswith('_') else f'.{parts[-1]}'
    if frame.f_code.co_argcount and frame.f_code.co_varnames[0] == 'self':
        self = frame.f_locals.get('self')
        public = [(k, v) for k, v in
                  vars(sys.modules.get(package) or importlib.import_module(package)).items()
                  if not k.startswith('_')]
        name = next((k for k, v in public if v is self), None)
        if name is not None:
            return name + method
        # a frozen distribution holds a copy of the instance it froze (``dist``; ``_dist``
        # for the multivariate ones)
        dist = type(getattr(self, 'dist', getattr(self, '_dist', None)))
        name = next((k for k, v in public if type(v) is dist and not isinstance(v, type)), None)
        if name is not None and dist.__module__.startswith('scipy'):
            return f'{name}(...){method}'
    owner = parts[0]
    self = frame.f_locals.get('self')
    if owner.startswith('_') and self is not None:
        owner = type(self).__name__          # a private base's method: the user's class
    return owner + method


def _scipy_hint(package: str, func: str) -> str:
    sub = package.partition('.')[2]                  # 'linalg', 'sparse.linalg'
    try:
        mod = importlib.import_module(f'tracked.scipy.{sub}')
    except ImportError:
        return ''
    own = getattr(mod, 'conversion_hint', None)      # a module's word on its own cases
    hint = own(func) if own is not None else None
    if hint is not None:
        return hint
    names = getattr(mod, '__all__', ())
    base, _, method = func.replace('(...)', '').partition('.')
    parent, _, last = f'tracked.scipy.{sub}'.rpartition('.')
    # a method counts only where tracked defines it (its other methods are SciPy's)
    if base in names and (not method or hasattr(type(getattr(mod, base)), method)):
        return (f' Use tracked.scipy.{sub}.{func} instead (from {parent} import {last}): '
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


def numba_type(value: Any) -> Any:
    """What numba's ``typeof`` reads from a tracked value (``Tracked._numba_type_``): a
    ``TypeError`` naming the compiled function and the two ways out, instead of
    numba's ``TypingError`` about an unknown type deep in its pipeline.  A function
    numba compiles in object mode (``forceobj=True``) runs Python code, which takes
    tracked values: there the value is a Python object.  numba is imported by then.

    >>> import numpy as np, tracked as tr
    >>> try:
    ...     numba_type(tr.param(np.ones(2)))
    ... except TypeError as e:
    ...     print(str(e)[:54])
    a numba-compiled function cannot take a tracked value
    """
    dispatcher = _numba_dispatcher()
    options = getattr(dispatcher, 'targetoptions', {})
    if options.get('forceobj') or options.get('nopython') is False:
        from numba.core import types
        return types.pyobject
    py_func = getattr(dispatcher, 'py_func', None)
    name = 'a numba-compiled function' if py_func is None else \
        f'{py_func.__module__}.{py_func.__qualname__} (compiled by numba)'
    raise TypeError(f'{name} cannot take a tracked value ({type(value).__name__}): numba '
                    f'types its arguments itself, so NumPy never hands the call to tracked, '
                    f'and the gradient would be lost. Wrap the call in @tr.rule -- a forward '
                    f'that calls it on plain arrays and returns (value, pullback), with the '
                    f'pullback written in NumPy: derivatives of every order then -- or call '
                    f'it on tr.data(x) if you do not need its gradient.')


def _numba_dispatcher() -> Any:
    """The numba dispatcher typing its arguments in a frame above (None if there is none)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == 'typeof_pyval' and \
                _package(frame.f_globals.get('__name__')) == 'numba':
            return frame.f_locals.get('self')
        frame = frame.f_back
    return None


def conversion_message(what: str) -> str:
    """The refusal of a conversion of a tracked number to a Python one (``what``)."""
    return (f'{what} would drop its gradient (so would math.*, '
            f'np.float64(...), storing it into a plain array with a[i] = t or a.fill(t), '
            f'and np.array([...]) of tracked values). Read the value on purpose with '
            f'tr.data(t) (a recorded tape follows it), branch with a comparison '
            f'(if t > 0: ...), and build arrays from tracked values with np.stack([...]) '
            f'(or import tracked.numpy as np, whose np.array accepts them, and whose '
            f'zeros_like/empty_like(x) of a tracked x give an array that out[i] = t can '
            f'write into).')


# ``'%.3f' % loss`` (and logging's ``'loss %f', loss``) reach __float__ from C exactly as
# float(loss) and math.exp(loss) do; the caller's current instruction tells them apart:
# only %-formatting runs the ``%`` operator there (a number's ``%`` with a tracked
# operand is tracked's __rmod__).  Text keeps no gradient to lose, so it is allowed,
# as f'{loss:.3f}' (__format__) is; on an unknown bytecode the conversion refuses.
PERCENT: tuple[tuple[int, tuple[int, ...] | None], ...]    # (opcode, its args or None)
if 'BINARY_OP' in dis.opmap:            # Python >= 3.11: NB_REMAINDER, NB_INPLACE_REMAINDER
    PERCENT = ((dis.opmap['BINARY_OP'], (6, 19)),)
else:
    PERCENT = ((dis.opmap['BINARY_MODULO'], None), (dis.opmap['INPLACE_MODULO'], None))


# ``a[i] = t`` into a plain array reaches __float__ from NumPy's C setter: the same
# refusal, worded for the statement the user wrote.
STORE = ((dis.opmap['STORE_SUBSCR'], None),)


def running(frame: Any, ops: tuple[tuple[int, tuple[int, ...] | None], ...]) -> bool:
    """Whether ``frame``'s current instruction is one of ``ops`` (``PERCENT``, ``STORE``)."""
    try:
        code, i = frame.f_code.co_code, frame.f_lasti
        return any(code[i] == op and (args is None or code[i + 1] in args)
                   for op, args in ops)
    except (AttributeError, IndexError, KeyError):
        return False


def plain_result(name: str, ans: Any) -> np.ndarray | np.generic:
    """The result of ``name`` as a NumPy value, or a ``TypeError`` when it is not one
    that tracked can differentiate (an operand was a masked array, a matrix, or held
    Python objects)."""
    if type(ans) in (float, int, bool, complex):
        return np.asarray(ans)[()]
    if isinstance(ans, np.ndarray) and type(ans) is not np.ndarray:
        refuse_subclass(ans, name)
    if getattr(ans, 'dtype', None) is None or ans.dtype.kind == 'O':
        raise TypeError(f'{name} gave {_describe_value(ans)}: an operand holds Python '
                        f'objects (an array of dtype object?). {_OBJECTS_FIX}')
    return ans


_OBJECTS_FIX = ('tracked differentiates arrays of numbers: convert it with x.astype(float) '
                'first')


def object_array_error(x: Any) -> TypeError:
    """The error for an array of dtype object given where tracked takes numbers."""
    return TypeError(f'got an array of dtype object (shape {x.shape}): its numbers are '
                     f'Python objects, which tracked cannot differentiate (their gradient '
                     f'would be None). {_OBJECTS_FIX}')


def _describe_value(v: Any) -> str:
    dtype = getattr(v, 'dtype', None)
    return f'an array of dtype {dtype}' if dtype is not None else f'a {type(v).__name__}'


def refuse_subclass(x: Any, operation: str | None = None) -> None:
    """Refuse the ndarray subclasses whose arithmetic is not NumPy's (a masked array's
    mask, np.matrix's ``*``): tracked differentiates plain arrays, and would drop the
    mask or change the product without a word.  Other subclasses (np.memmap, ...) are
    taken as plain arrays."""
    if isinstance(x, np.ma.MaskedArray):
        fix = ('compute with plain arrays: x.filled(0.0) or np.where(mask, 0.0, x), '
               'and a weight array for masked reductions')
    elif isinstance(x, np.matrix):
        fix = 'convert it with np.asarray(m) (and write matrix products with @)'
    elif operation is None:
        return
    else:
        fix = 'convert it with np.asarray(...) first'
    where = f' from {operation}' if operation else ''
    raise TypeError(f'tracked differentiates plain NumPy arrays, got a '
                    f'{type(x).__module__}.{type(x).__name__}{where}; {fix}')

