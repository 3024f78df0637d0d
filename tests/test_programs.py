"""Random programs (hypothesis): every path of tracked against one oracle.

A program is a few lines of NumPy over a few inputs of small shapes, built from the
registry's rules: elementwise ufuncs on domain-safe forms, reductions with axes,
reshapes, transposes, slices, constant and computed indices (argsort, argmax),
sort, take, take_along_axis, repeat, where with comparisons and ``&``/``|``,
concatenate/stack, matmul, cumsum, clip, maximum, and value-dependent Python
(``if np.sum(x) > 0:``, ``int(...)``).  It is generated as source text and run by
``exec``, so a failing example prints the program exactly as it ran.

Each program is recorded at one point ``x1`` and checked at another ``x2`` (drawn
anew, or near ``x1``), on one path per test:

- ``eager``: ``tr.withgradient`` against central finite differences of the values
  along a random direction (skipped where one-sided differences disagree: a kink);
- ``nested``: ``tr.hvp`` per input against finite differences of the eager gradient;
- ``recorded``: ``tr.GradientTape`` recorded at x1, replayed at x1 and x2, against
  eager; at x2 a ``TapeGuardError`` is accepted only if a fresh recording at x2
  takes another path (other instructions or guard values);
- ``compiled``: the same tape after ``tr.compile`` (fewer examples and no
  shrinking: every new program compiles new numba code, ~1 s cold).

The operations are grouped (``GROUPS``) so that a bug in one family does not hide
the others: hypothesis reports one minimal failing program per test.
Derandomized: CI sees the same programs on every run.  For a long search, set
``TRACKED_PROGRAMS_EXAMPLES=N`` (examples per test on every path) and
``TRACKED_PROGRAMS_SEED=S`` (other programs than CI's), e.g.
``TRACKED_PROGRAMS_EXAMPLES=3000 TRACKED_PROGRAMS_SEED=7 python -m pytest tests/test_programs.py``.
"""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings, strategies as st
from hypothesis import seed as fixed_seed

import tracked as tr

from tests.rules.harness import assert_close, path_of, same_path

SHAPES = [(), (3,), (4,), (2, 3), (3, 3), (3, 4)]
MAX_SIZE = 64

# --------------------------------------------------------------------------
# Operations: expression templates over operands {a}, {b}, {c}
# --------------------------------------------------------------------------

UNARY = ['np.sin({a})', 'np.cos({a})', 'np.tanh({a})', 'np.arctan({a})', 'np.exp(np.tanh({a}))',
         'np.log(1.0 + {a} * {a})', 'np.sqrt(1.0 + {a} ** 2)', '{a} * {a}', '-{a}',
         'np.abs({a})', 'np.square({a})', '{a} ** 3', 'np.cbrt(1.5 + np.sin({a}))',
         'np.reciprocal(2.0 + np.cos({a}))', 'np.expm1(np.sin({a}))', 'np.floor({a}) + {a}',
         'np.log1p(np.exp(-np.abs({a})))', 'np.sinh(np.tanh({a}))']
BINARY = ['{a} + {b}', '{a} - {b}', '{a} * {b}', '{a} / (1.0 + {b} * {b})',
          'np.maximum({a}, {b})', 'np.minimum({a}, {b})', 'np.arctan2({a}, 2.0 + np.cos({b}))',
          'np.logaddexp({a}, {b})', 'np.power(1.5 + np.sin({a}), {b})',
          'np.hypot({a}, 1.0 + {b} * {b})', 'np.where({a} > {b}, {a}, 0.5 * {b})',
          'np.fmax({a}, {b})', 'np.clip({a}, -0.5, 0.5) * {b}']
REDUCE = ['np.sum({a}{axis})', 'np.mean({a}{axis})', 'np.max({a}{axis})', 'np.min({a}{axis})',
          'np.prod({a}{axis})', 'np.var({a}{axis})', 'np.sum({a}{axis}, keepdims=True)',
          'np.cumsum({a}{axis1})', 'np.cumprod(np.tanh({a}){axis1})', 'np.linalg.norm({a})',
          'np.amax({a}{axis}, keepdims=True)', 'np.std({a}{axis})']
LINALG = ['{a} @ {b}', '{a} @ {a}.T', 'np.dot({a}, {b})', 'np.outer({a}, {b})',
          'np.trace({a})', 'np.einsum("ij,j->i", {a}, {b})', 'np.matmul({a}.T, {a})',
          'np.linalg.inv(3.0 * np.eye({a}.shape[0]) + {a} @ {a}.T)',
          'np.linalg.det(2.0 * np.eye({a}.shape[0]) + {a} @ {a}.T)',
          'np.tensordot({a}, {b}, axes=1)',
          'np.linalg.solve(3.0 * np.eye({a}.shape[0]) + {a} @ {a}.T, {b})',
          'np.linalg.slogdet(2.0 * np.eye({a}.shape[0]) + {a} @ {a}.T)[1]',
          'np.linalg.cholesky(2.0 * np.eye({a}.shape[0]) + {a} @ {a}.T)',
          'np.einsum("ij,ij->i", {a}, {b})', 'np.kron({a}, {b})']
SHAPE = ['{a}.reshape(-1)', '{a}.T', 'np.transpose({a})', '{a}[1:]', '{a}[::-1]', '{a}[..., 0]',
         '{a}[0]', '{a}[[0, 0, 1]]', '{a}[:2] + {a}[-2:]',
         'np.concatenate([{a}.ravel(), {b}.ravel()])',
         'np.stack([{a}, {b}])', 'np.flip({a})', 'np.roll({a}, 1)', 'np.expand_dims({a}, 0)',
         'np.tile({a}, 2)', 'np.repeat({a}, 2)', 'np.broadcast_to({a}, (2,) + np.shape({a}))',
         'np.triu({a})', 'np.diagonal({a})', 'np.pad({a}, 1)', '{a}.ravel()[{b}.size - 1]',
         'np.hstack([{a}, {b}])', 'np.swapaxes({a}, 0, -1)', 'np.squeeze({a}[None])',
         'SET', 'IADD', '{a}[::2, 1:]', 'np.split({a}, 2)[0]',
         'np.atleast_2d({a}) @ np.atleast_2d({b}).T']
INDEX = ['np.sort({a}, axis=-1)', 'np.sort({a}, axis=None)',
         '{a}.ravel()[np.argsort({a}, axis=None)]',
         'np.take({a}, np.argmax({a}))', 'np.take({a}, np.argsort({b}, axis=None))',
         '{a}.ravel()[np.argmax({b})]',
         'np.take_along_axis({a}, np.argsort({b}, axis=-1), axis=-1)',
         'np.repeat({a}.ravel(), np.argsort({a}, axis=None) + 1)', 'np.sum({a}[{a} > 0.0])',
         'np.take({a}, np.argmin({b}, axis=-1), axis=-1)', '{a}[np.argmax({a})]',
         'np.take({a}.ravel(), [2, 0, 1])']
CONTROL = ['IF', 'np.where(({a} > 0.0) & ({a} < 1.0), {a}, 0.0)',
           'np.where(({a} < -0.5) | ({b} > 0.5), {a}, {b})',
           'np.clip({a}, -1.0 - {b} * {b}, 1.0 + np.abs({c}))', '{a} * int(np.sum({b} > 0.0))',
           'np.where(~({a} > {b}), {a}, {b})', 'np.maximum({a}, np.mean({b}))',
           '{a} * (1.0 if np.sum({b}) > 0 else -1.0)']

GROUPS = {
    'elementwise': UNARY + BINARY,
    'reductions': REDUCE + LINALG + UNARY[:6],
    'shapes': SHAPE + UNARY[:6] + BINARY[:4],
    'indices': INDEX + UNARY[:6] + BINARY[:4],
    'control': CONTROL + UNARY[:6] + BINARY[:4],
    'mixed': UNARY + BINARY + REDUCE + LINALG + SHAPE + INDEX + CONTROL,
}


class Program:
    """A generated function: its source (printed on failure) and the callable."""

    def __init__(self, shapes, body, result):
        self.shapes = shapes
        args = ', '.join(f'x{i}' for i in range(len(shapes)))
        lines = [f'def f({args}):'] + ['    ' + line for line in body] + [f'    return {result}']
        self.source = '\n'.join(lines)
        ns = {'np': np}
        exec(self.source, ns)
        self.f = ns['f']
        self.f.__name__ = 'program'

    def __repr__(self):
        shapes = ', '.join(f'x{i}: {s}' for i, s in enumerate(self.shapes))
        return f'Program(  # {shapes}\n{self.source}\n)'


def _evaluate(expr_lines, env):
    """Run ``expr_lines`` (assigning the last name) in a copy of ``env``; None if it
    fails, is not a finite float array, or is too large."""
    ns = dict(env, np=np)
    try:
        with warnings.catch_warnings(), np.errstate(all='ignore'):
            warnings.simplefilter('ignore')
            exec('\n'.join(expr_lines), ns)
    except Exception:
        return None
    return ns


def _ok(v):
    v = np.asarray(v)
    return (v.dtype.kind == 'f' and v.size <= MAX_SIZE and v.size > 0
            and bool(np.all(np.isfinite(v))) and float(np.max(np.abs(v))) < 1e3)


@st.composite
def programs(draw, group):
    """(program, x1, x2): a random program of ``group``'s operations and two points."""
    ops = GROUPS[group]
    n_in = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_in)]
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    x1 = [rng.uniform(-2.0, 2.0, s) for s in shapes]
    if draw(st.booleans()):
        x2 = [x + rng.uniform(-0.05, 0.05, np.shape(x)) for x in x1]  # near: likely the same path
    else:
        x2 = [rng.uniform(-2.0, 2.0, s) for s in shapes]
    names = [f'x{i}' for i in range(n_in)]
    env = dict(zip(names, x1))
    body = []
    for k in range(draw(st.integers(1, 6))):
        target = f'v{k}'
        lines = None
        for _ in range(3):
            lines = _statement(draw, draw(st.sampled_from(ops)), names, target, env)
            if lines is not None:
                break
        if lines is None:                              # fallback: always valid
            lines = [f'{target} = np.sin({names[-1]})']
        ns = _evaluate(lines, env)
        if ns is None or not _ok(ns[target]):
            continue
        env[target] = ns[target]
        body += lines
        names.append(target)
    # the result: a sum over the last value, linear or not, plus maybe another term
    last = names[-1]
    result = draw(st.sampled_from([
        'np.sum({a})', 'np.sum({a} * {a})', 'np.sum(np.sin({a}))',
        'np.sum({a} * np.cos(np.arange(np.size({a}))).reshape(np.shape({a})))']))
    result = result.format(a=last)
    if len(names) > 1 and draw(st.booleans()):
        other = names[draw(st.integers(0, len(names) - 2))]
        result += f' + 0.5 * np.sum(np.tanh({other}))'
    return Program(shapes, body, result), x1, x2


def _statement(draw, template, names, target, env):
    """Source lines assigning ``target`` from ``template`` on drawn operands; None when
    the operands do not fit (NumPy raises, or a non-finite or non-float result)."""
    pick = lambda: names[len(names) - 1 - draw(st.integers(0, len(names) - 1))]   # recent first
    a, b, c = pick(), pick(), pick()
    if template == 'IF':
        u1, u2 = draw(st.sampled_from(UNARY)), draw(st.sampled_from(UNARY))
        lines = [f'if np.sum({c}) > 0:', f'    {target} = {u1.format(a=a)}', 'else:',
                 f'    {target} = {u2.format(a=a)}']
    elif template in ('SET', 'IADD'):
        # In place, into a copy that is tracked whenever a or b is (NumPy cannot store a
        # tracked value into a plain array), and never 0-d (a NumPy scalar rebinds).
        if np.ndim(env[a]) == 0:
            return None
        lines = [f'{target} = {a} * 1.0 + 0.0 * np.sum({b})',
                 f'{target}[..., 0] = np.tanh(np.sum({b}))' if template == 'SET'
                 else f'{target} += np.sin({b})']
    else:
        nd = np.ndim(env[a])
        axis = axis1 = ''
        if nd:
            ax = draw(st.integers(-nd, nd))
            axis = '' if ax == nd else f', axis={ax}'
            axis1 = f', axis={ax % nd}' if ax != nd else ''
        lines = [f'{target} = ' + template.format(a=a, b=b, c=c, axis=axis, axis1=axis1)]
    ns = _evaluate(lines, env)
    if ns is None or target not in ns or not _ok(ns[target]):
        return None
    if template in ('SET', 'IADD') and np.shape(ns[target]) != np.shape(env[a]):
        return None
    return lines


# --------------------------------------------------------------------------
# Checks, one path each
# --------------------------------------------------------------------------

def _value(f, xs):
    with np.errstate(all='ignore'):
        return float(f(*xs))


def _grads(grads, xs):
    return [np.zeros(np.shape(x)) if g is None else np.asarray(g, dtype=np.float64)
            for g, x in zip(grads, xs)]


def _usable(prog, xs):
    """The program runs at ``xs`` with a finite value (else the example is rejected)."""
    try:
        return np.isfinite(_value(prog.f, xs))
    except Exception:
        return False


def _directional(f, xs, us, h):
    """(central, forward, backward) differences of f at xs along us."""
    at = lambda t: _value(f, [x + t * u for x, u in zip(xs, us)])
    f0, fp, fm = at(0.0), at(h), at(-h)
    return (fp - fm) / (2 * h), (fp - f0) / h, (f0 - fm) / h


def _smooth(central, fwd, bwd):
    return abs(fwd - bwd) <= 1e-3 * (1.0 + abs(central))


def check_eager(prog, x1, x2):
    f = prog.f
    for x in (x1, x2):
        val, grads = tr.withgradient(f, *x)
        assert_close(val, _value(f, x), 'eager value', rtol=1e-12)
        grads = _grads(grads, x)
        for seed in range(2):
            r = np.random.default_rng(seed)
            us = [r.standard_normal(np.shape(xi)) for xi in x]
            central, fwd, bwd = _directional(f, x, us, 1e-6)
            if not _smooth(central, fwd, bwd):
                note('eager: not differentiable along the direction here (a kink); skipped')
                continue
            reverse = sum(float(np.sum(g * u)) for g, u in zip(grads, us))
            assert np.isclose(reverse, central, rtol=1e-5, atol=1e-5 * (1 + abs(central))), \
                (f'eager gradient along a random direction: {reverse!r}, '
                 f'finite differences {central!r}')


def check_nested(prog, x1, x2):
    x = x2
    for i in range(len(x)):
        def fi(xi, i=i):
            return prog.f(*x[:i], xi, *x[i + 1:])

        def gi(xi):
            return _grads(tr.gradient(fi, xi), [xi])[0]
        v = np.random.default_rng(i).standard_normal(np.shape(x[i]))
        hv = tr.hvp(fi, x[i], v)
        eps = 2e-6
        gp, gm, g0 = gi(x[i] + eps * v), gi(x[i] - eps * v), gi(x[i])
        central = (gp - gm) / (2 * eps)
        kink = np.max(np.abs((gp - g0) - (g0 - gm)) / eps, initial=0.0)
        if kink > 1e-2 * (1.0 + np.max(np.abs(central), initial=0.0)):
            note(f'nested: the gradient is not differentiable along v at input {i}; skipped')
            continue
        hv = np.zeros(np.shape(x[i])) if hv is None else np.asarray(hv)
        scale = max(1.0, float(np.max(np.abs(central), initial=0.0)))
        np.testing.assert_allclose(hv, central, rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=f'hvp at input {i} vs finite differences of the '
                                           'gradient')


def _replay(tape, prog, x1, x2, what):
    for where, x in (('x1 (the recording point)', x1), ('x2', x2)):
        try:
            val, grads = tape.withgradient(*x)
        except tr.TapeGuardError:
            if x is x1 or same_path(path_of(tr.GradientTape(prog.f, *x)), path_of(tape)):
                raise AssertionError(f'{what}: TapeGuardError at {where}, where a fresh recording '
                                     f'takes the recorded path')
            note(f'{what}: TapeGuardError at {where} (another path: accepted)')
            continue
        ev, eg = tr.withgradient(prog.f, *x)
        assert_close(val, ev, f'{what} at {where}: value')
        for i, (g, e) in enumerate(zip(_grads(grads, x), _grads(eg, x))):
            assert_close(g, e, f'{what} at {where}: gradient of x{i}')


def check_recorded(prog, x1, x2):
    _replay(tr.GradientTape(prog.f, *x1), prog, x1, x2, 'GradientTape')


def check_compiled(prog, x1, x2):
    # in the foreground: a tiered compile would answer these calls in NumPy; and the
    # kernels, not the NumPy replay that choice.py keeps when it times faster (as it
    # does for programs of many fallbacks)
    before = os.environ.get('TRACKED_NUMPY_CHOICE')
    os.environ['TRACKED_NUMPY_CHOICE'] = '0'
    try:
        tape = tr.compile(tr.GradientTape(prog.f, *x1), background=False)
    finally:
        if before is None:
            del os.environ['TRACKED_NUMPY_CHOICE']
        else:
            os.environ['TRACKED_NUMPY_CHOICE'] = before
    assert tape.compiled is not None
    _replay(tape, prog, x1, x2, 'compiled tape')


CHECKS = {'eager': check_eager, 'nested': check_nested, 'recorded': check_recorded,
          'compiled': check_compiled}

EXAMPLES = int(os.environ.get('TRACKED_PROGRAMS_EXAMPLES', '0'))
SEED = os.environ.get('TRACKED_PROGRAMS_SEED')
BASE = dict(deadline=None, derandomize=SEED is None, database=None, print_blob=SEED is not None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck))
NUMPY_PATHS = settings(max_examples=EXAMPLES or 150, **BASE)
COMPILED_PATH = settings(max_examples=EXAMPLES or 8, phases=[Phase.explicit, Phase.generate],
                         **BASE)


def _run(path, example):
    prog, x1, x2 = example
    assume(_usable(prog, x1) and _usable(prog, x2))
    note(repr(prog))
    note(f'x1 = {[x.tolist() for x in x1]}')
    note(f'x2 = {[x.tolist() for x in x2]}')
    with warnings.catch_warnings(), np.errstate(all='ignore'):
        warnings.simplefilter('ignore')
        CHECKS[path](prog, x1, x2)


def _seeded(test):
    return test if SEED is None else fixed_seed(int(SEED))(test)


def _numpy_test(path, group):
    @_seeded
    @NUMPY_PATHS
    @given(example=programs(group))
    def test(example):
        _run(path, example)
    return test


@pytest.mark.parametrize('group', list(GROUPS))
@pytest.mark.parametrize('path', ['eager', 'nested', 'recorded'])
def test_random_programs(path, group):
    _numpy_test(path, group)()


@pytest.mark.parametrize('group', list(GROUPS))
def test_random_programs_compiled(group):
    @_seeded
    @COMPILED_PATH
    @given(example=programs(group))
    def test(example):
        _run('compiled', example)
    test()
