"""``python -m tracked.coverage``: the coverage page, one table per NumPy module, made
from the registry: each public function of ``np``, ``np.linalg`` and ``np.fft`` (the
random module excluded) with its status and the version that gave it.

Statuses: **rule** (differentiated), **non-differentiable** (plain results),
**unsupported** (raises the no-rule error on purpose; the reason says what to do),
**not dispatched** (NumPy never hands it a tracked value), and **no rule yet**.
``python -m tracked.coverage --write`` rewrites ``docs/coverage.md``; a test keeps the
committed page equal to what the registry says.
"""
import pathlib
import sys
import types

import numpy as np

from . import registry

__all__ = ['MODULES', 'public_functions', 'status', 'rows', 'counts', 'render']

MODULES = (('np', np), ('np.linalg', np.linalg), ('np.fft', np.fft))
NEXT = '0.2.0'        # the version the changes since 0.1.0 shipped in
# What had a status in 0.1.0 (everything else arrived in NEXT).
SINCE_0_1 = frozenset("""
    abs absolute acos acosh add all allclose amax amin angle any append arccos arccosh arcsin
    arcsinh arctan arctan2 arctanh argmax argmin argpartition argsort argwhere around
    array_equal array_equiv array_split asin asinh astype atan atan2 atanh atleast_1d atleast_2d
    atleast_3d average bitwise_and bitwise_invert bitwise_left_shift bitwise_not bitwise_or
    bitwise_right_shift bitwise_xor broadcast_arrays broadcast_to can_cast cbrt ceil clip
    column_stack concat concatenate conj conjugate copy cos cosh count_nonzero cross cumprod
    cumsum deg2rad degrees diag diagonal divide dot dstack einsum empty_like equal exp exp2
    expand_dims expm1 fabs flatnonzero flip fliplr flipud float_power floor floor_divide fmax
    fmin fmod full_like gcd greater greater_equal hsplit hstack hypot imag inner invert isclose
    iscomplex iscomplexobj isfinite isinf isnan isneginf isposinf isreal isrealobj kron lcm
    left_shift less less_equal lexsort log log10 log1p log2 logaddexp logaddexp2 logical_and
    logical_not logical_or logical_xor matmul matrix_transpose matvec max maximum
    may_share_memory mean min minimum mod moveaxis multiply nanmax nanmean nanmin nansum ndim
    negative nonzero not_equal ones_like outer pad permute_dims positive pow power prod rad2deg
    radians ravel real real_if_close reciprocal remainder repeat reshape result_type right_shift
    rint roll rot90 round searchsorted shape shares_memory sign signbit sin sinc sinh size sort
    split sqrt square squeeze stack std subtract sum swapaxes take take_along_axis tan tanh
    tensordot tile trace transpose tril triu true_divide trunc unstack var vdot vecdot vecmat
    vsplit vstack where zeros_like np.linalg.cholesky np.linalg.cross np.linalg.det
    np.linalg.eigh np.linalg.eigvalsh np.linalg.inv np.linalg.matmul np.linalg.matrix_power
    np.linalg.multi_dot np.linalg.norm np.linalg.outer np.linalg.pinv np.linalg.slogdet
    np.linalg.solve np.linalg.tensordot np.linalg.vecdot
""".split())
PAGE = pathlib.Path(__file__).resolve().parent.parent / 'docs' / 'coverage.md'

# Classes and methods beyond the functions (written by hand: they are not walked).
OTHERS = (
    ('ufunc.reduce / accumulate / outer / at / reduceat', 'rule',
     'every ufunc with a rule (np.logaddexp.reduce, np.maximum.accumulate, '
     'np.multiply.outer, np.add.at); plain for comparisons'),
    ('np.poly1d(c)(x)', 'rule', 'through np.polyval, in c and x'),
    ('np.lib.stride_tricks.sliding_window_view', 'rule', 'a gather of windows'),
    ('np.vectorize', 'not dispatched', 'it converts its arguments with np.asarray first; '
     'tracked.numpy.vectorize (import tracked.numpy as np) runs the function on tracked '
     'scalars'),
    ('ndarray.flat', 'rule', 'reads, iteration and writes (x.flat[i] = v) of tracked arrays'),
)


def public_functions(mod):
    """``{name: callable}`` of the public functions and ufuncs of NumPy module ``mod``."""
    out = {}
    for name in dir(mod):
        if name.startswith('_'):
            continue
        f = getattr(mod, name)
        if isinstance(f, (np.ufunc, types.FunctionType, types.BuiltinFunctionType)) or \
                type(f).__name__ == '_ArrayFunctionDispatcher':
            out[name] = f
    return out


def status(f):
    """(status, note) of NumPy callable ``f``."""
    if f in registry.RULES:
        return 'rule', ''
    if f in registry.NONDIFF:
        return 'non-differentiable', ''
    if f in registry.UNSUPPORTED:
        return 'unsupported', registry.UNSUPPORTED[f]
    if f in registry.UNDISPATCHED:
        return 'not dispatched', registry.UNDISPATCHED[f]
    return 'no rule yet', ''


def rows(prefix, mod):
    """``(qualified name, status, note, since)`` for every public function of ``mod``."""
    out = []
    for name, f in sorted(public_functions(mod).items()):
        qual = name if prefix == 'np' else f'{prefix}.{name}'
        st, note = status(f)
        since = '' if st == 'no rule yet' else '0.1.0' if qual in SINCE_0_1 else NEXT
        out.append((qual, st, note, since))
    return out


def counts():
    """``{module: {status: count}}``."""
    out: dict[str, dict[str, int]] = {}
    for prefix, mod in MODULES:
        c = out[prefix] = {}
        for _, st, _, _ in rows(prefix, mod):
            c[st] = c.get(st, 0) + 1
    return out


_ORDER = ('rule', 'non-differentiable', 'unsupported', 'not dispatched', 'no rule yet')


def numpy_version():
    """NumPy's ``major.minor``: what the namespace, and so the page, depends on."""
    return '.'.join(np.__version__.split('.')[:2])


def render():
    """The coverage page as Markdown."""
    lines = ['# NumPy coverage', '',
             f'Generated by `python -m tracked.coverage --write` from the rule registry '
             f'(NumPy {numpy_version()}). **rule**: differentiated (eager, nested, forward '
             f'mode, recorded and compiled tapes); **non-differentiable**: plain results; '
             f'**unsupported**: raises the no-rule error, the note says what to do; **not '
             f'dispatched**: NumPy never hands it a tracked value; **no rule yet**: raises '
             f'the no-rule error.', '', '| module | ' + ' | '.join(_ORDER) + ' |',
             '|---' * (len(_ORDER) + 1) + '|']
    for prefix, c in counts().items():
        lines.append(f'| {prefix} | ' + ' | '.join(str(c.get(s, 0)) for s in _ORDER) + ' |')
    for prefix, mod in MODULES:
        lines += ['', f'## {prefix}', '', '| function | status | since | note |',
                  '|---|---|---|---|']
        lines += [f'| `{q}` | {st} | {since} | {note} |'
                  for q, st, note, since in rows(prefix, mod)]
    lines += ['', '## Methods and classes', '', '| what | status | note |', '|---|---|---|']
    lines += [f'| `{w}` | {st} | {note} |' for w, st, note in OTHERS]
    return '\n'.join(lines) + '\n'


def main(argv):
    text = render()
    if '--write' in argv:
        PAGE.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == '__main__':
    main(sys.argv[1:])
