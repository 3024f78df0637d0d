"""Guards: value-dependent decisions taken while recording, checked on every replay."""
import os
import sys
from types import FrameType

import numpy as np

__all__ = ['TapeGuardError', 'Guard']

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TapeGuardError(RuntimeError):
    """A replayed tape met inputs that would take another path than the recorded one.

    Raised instead of returning the result of the recorded branch.  Re-record the
    tape for these inputs, or record it with ``on_guard="retrace"``.
    """


class Guard:
    """A value-dependent decision taken while recording, checked on every replay."""

    __slots__ = ('i', 'kind', 'recorded', 'where')

    def __init__(self, i, kind, recorded, where):
        self.i = i                # the instruction whose value was concretised
        # 'bool', 'float', 'int', 'index', 'item', 'mask-count', 'value', 'int-argument'
        self.kind = kind
        self.recorded = recorded
        self.where = where        # 'file:line in function' of the user code

    def holds(self, value):
        """Whether ``value`` (the instruction's new value) takes the recorded path."""
        kind, rec = self.kind, self.recorded
        if kind == 'bool':
            return bool(value) == rec
        if kind == 'mask-count':
            return int(np.count_nonzero(value)) == rec
        if kind == 'value' or kind == 'int-argument':
            return _equal(value, rec)
        new = concrete_value(kind, value)
        return _equal(new, rec)

    def describe(self, value=None):
        """What was decided, where, and (given the new ``value``) recorded against now."""
        what = {'bool': 'truth value (bool(...), if/while on a tracked value)',
                'float': 'float(...) of a tracked value', 'int': 'int(...) of a tracked value',
                'index': 'a tracked value used as an integer index or size',
                'item': '.item()/.tolist() of a tracked value',
                'mask-count': 'number of True entries of a boolean mask used as an index',
                'value': 'result of a non-differentiable function',
                'int-argument': 'value of an integer argument (an int in every Python use)'
                }[self.kind]
        text = f'{what} at {self.where}'
        if value is not None:
            new = value
            if self.kind == 'bool':
                new = bool(value)
            elif self.kind == 'mask-count':
                new = int(np.count_nonzero(value))
            elif self.kind not in ('value', 'int-argument'):
                new = concrete_value(self.kind, value)
            text += f': recorded {self.recorded!r}, now {new!r}'
        return text


def concrete_value(kind, value):
    """``value`` as Python read it for a guard of ``kind`` ('float', 'int', 'item'...)."""
    if kind == 'float':
        return float(value)
    if kind in ('int', 'index'):
        return int(value)
    if kind == 'item':
        return np.asarray(value).tolist()
    return value


def _equal(a, b):
    """Whether a new value equals a recorded one (arrays, nested sequences, NaN == NaN)."""
    try:
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return np.shape(a) == np.shape(b) and bool(np.array_equal(a, b))
        return bool(a == b) or (a != a and b != b)     # NaN recorded, NaN again
    except Exception:
        return False


def user_frame():
    """'file:line in function' of the innermost caller outside the tracked package."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return '<unknown>'
    return f'{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}'




def guard_error(guard, value, instr_name):
    """The ``TapeGuardError`` for ``guard`` failing on ``value``."""
    return TapeGuardError(
        f'the recorded tape does not apply to these inputs: the {guard.describe(value)} '
        f'(instruction %{guard.i} {instr_name}); the replay would take another path than '
        f'the one recorded. Record a new tape for these inputs, or record with '
        f'on_guard="retrace" to re-record automatically.')
