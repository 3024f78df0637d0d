"""Known findings (issue 14) as regression tests on every path, against one oracle.

Each finding is a function and two points: the recording point ``x1`` and a new
point ``x2`` on the same recorded path (no guard decides between them).  The oracle
is central finite differences of ``f``'s values computed by plain NumPy: the value
and gradient at a point, and the Hessian (for the nested path).  Paths:

- ``eager``: ``tr.withgradient`` at x1 and x2;
- ``nested``: ``tr.hvp`` and ``tr.hessian`` per argument (the others held fixed);
- ``recorded``: ``tr.GradientTape`` recorded at x1, replayed at x1 and x2;
- ``compiled``: the same tape after ``tr.compile``;
- ``autocompiled``: ``tr.withgradient(f, tr.AutoCompiled(), ...)`` at x1, x2, x1.
"""
import numpy as np
import pytest

import tracked as tr

from tests.rules.harness import path_of, same_path

# --------------------------------------------------------------------------
# The oracle: finite differences of plain NumPy evaluation
# --------------------------------------------------------------------------


def _value(f, args):
    return float(f(*args))


def fd_gradient(f, args, eps=1e-6):
    grads = []
    for i, x in enumerate(args):
        x = np.asarray(x, dtype=np.float64)
        g = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            hi, lo = x.copy(), x.copy()
            hi[idx] += eps
            lo[idx] -= eps
            g[idx] = (_value(f, args[:i] + (hi,) + args[i + 1:])
                      - _value(f, args[:i] + (lo,) + args[i + 1:])) / (2 * eps)
        grads.append(g)
    return tuple(grads)


def fd_hessian(f, x, eps=1e-4):
    """H[i, j] over x.ravel(), from values only."""
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    H = np.zeros((n, n))

    def at(di, dj):
        y = x.copy().reshape(-1)
        y[i] += di
        y[j] += dj
        return float(f(y.reshape(x.shape)))
    for i in range(n):
        for j in range(n):
            H[i, j] = ((at(eps, eps) - at(eps, -eps) - at(-eps, eps) + at(-eps, -eps))
                       / (4 * eps ** 2))
    return H


def close(got, want, what, rtol=1e-6, atol=1e-6):
    assert got is not None, f'{what}: got None'
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f'{what}: shape {got.shape}, expected {want.shape}'
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale, err_msg=what)


def check_valgrad(val, grads, f, args, what):
    close(val, _value(f, args), f'{what}: value')
    assert len(grads) == len(args), f'{what}: {len(grads)} gradients for {len(args)} arguments'
    for i, (g, want) in enumerate(zip(grads, fd_gradient(f, args))):
        close(g, want, f'{what}: gradient of argument {i}')


# --------------------------------------------------------------------------
# The findings
# --------------------------------------------------------------------------

class Finding:
    def __init__(self, name, f, x1, x2):
        self.name, self.f = name, f
        self.x1, self.x2 = tuple(x1), tuple(x2)


W5 = np.array([0.5, -1.0, 2.0, 1.5, -0.3])
W34 = np.linspace(-1.0, 1.5, 12).reshape(3, 4)
W6 = np.array([1.0, -0.5, 2.0, 0.7, -1.3, 0.4])
MASK4 = np.array([True, False, True, True])
w0 = np.array([1.0, 2.0, 3.0])


def _spd(seed, n=3):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return (q * np.arange(1.0, n + 1)) @ q.T


SPD = _spd(2).tolist()
X5 = [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([1.1, 0.5, -0.7, -1.5, 0.2])]
X34 = ([np.arange(12.0).reshape(3, 4) * 0.3 - 1.0],
       [np.arange(12.0)[::-1].reshape(3, 4) * 0.25 - 1.2])
X3 = [np.array([0.3, -1.2, 0.8])], [np.array([1.1, 0.5, -0.7])]
W3 = np.array([1.0, 2.0, 3.0])


def squared(name, f, *points):
    """The same finding through ``(...) ** 2``: a cotangent that depends on the input
    (the linear form's constant cotangent makes the whole gradient a constant of the
    tape), and a Hessian that is not zero for the nested path."""
    return Finding(f'({name})**2', lambda *x: f(*x) ** 2, *points)


FINDINGS = [
    # silently wrong on replay: pullbacks read indices and counts with plain(...)
    Finding('sum(sort(x)*w)', lambda x: np.sum(np.sort(x) * W5), *X5),
    Finding('take(x,argmax(x))', lambda x: np.take(x, np.argmax(x)),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([1.6, 0.5, -0.7, -1.5, 0.2])]),
    Finding('sum(take(x,argsort(x))*w)', lambda x: np.sum(np.take(x, np.argsort(x)) * W5), *X5),
    Finding('sum(take_along_axis(x,argsort(x,1),1)*w)',
            lambda x: np.sum(np.take_along_axis(x, np.argsort(x, axis=1), axis=1) * W34), *X34),
    Finding('sum(repeat(x,argsort(x)+1)*w)',
            lambda x: np.sum(np.repeat(x, np.argsort(x) + 1) * W6), *X3),
    squared('sum(sort(x)*w)', lambda x: np.sum(np.sort(x) * W5), *X5),
    squared('take(x,argmax(x))', lambda x: np.take(x, np.argmax(x)),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([1.6, 0.5, -0.7, -1.5, 0.2])]),
    squared('sum(take_along_axis(x,argsort(x,1),1)*w)',
            lambda x: np.sum(np.take_along_axis(x, np.argsort(x, axis=1), axis=1) * W34), *X34),
    squared('sum(repeat(x,argsort(x)+1)*w)',
            lambda x: np.sum(np.repeat(x, np.argsort(x) + 1) * W6), *X3),
    squared('take(x,argmin(x,-1),-1)', lambda x: np.take(x, np.argmin(x, axis=-1), axis=-1),
            *X5),
    # raise in back: np.take on a 0-d array with an axis (found by test_programs.py)
    Finding('take(0-d x,0,axis=-1)', lambda x: np.take(x, 0, axis=-1) ** 2,
            [np.array(0.7)], [np.array(-0.4)]),
    # raise on a recorded tape: ~, &, | on recorded comparisons
    Finding('eigh', lambda a: np.sum(np.linalg.eigh(a)[0] ** 2 * W3)
            + np.sum(np.linalg.eigh(a)[1] ** 2 * W34[:, :3]), [_spd(0)], [_spd(1)]),
    Finding('eigvalsh', lambda a: np.sum(np.linalg.eigvalsh(a) ** 2 * W3), [_spd(0)], [_spd(1)]),
    Finding('clip(x,lo,hi) tracked bounds', lambda x, lo, hi: np.sum(np.clip(x, lo, hi) ** 2),
            [np.linspace(-2.9, 2.9, 12).reshape(4, 3), np.array([-1.1, -0.7, -1.3]),
             np.array([[0.9], [1.2], [0.6], [1.4]])],
            [np.linspace(2.8, -2.7, 12).reshape(4, 3), np.array([-0.6, -1.4, -0.9]),
             np.array([[1.3], [0.7], [1.1], [0.8]])]),
    Finding('max(x,axis=0,where=)',
            lambda x: np.sum(np.max(x, axis=0, initial=-10.0, where=MASK4) ** 2), *X34),
    Finding('where((x>0)&(x<1),x,0)', lambda x: np.sum(np.where((x > 0) & (x < 1), x, 0.0) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([1.1, 0.5, -0.7, 0.6, 0.2])]),
    Finding('where((x<0)|(x>1),x,0)', lambda x: np.sum(np.where((x < 0) | (x > 1), x, 0.0) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([1.1, 0.5, -0.7, 0.6, 0.2])]),
    # tracked booleans (recorded comparisons): ^, ~ and NumPy's logical/bitwise functions
    Finding('where((x>0)^(x<1),x,0)', lambda x: np.sum(np.where((x > 0) ^ (x < 1), x, 0.0) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([0.35, -1.1, 0.7, 1.9, -0.5])]),
    Finding('where(~(x>0),x,x/2)', lambda x: np.sum(np.where(~(x > 0), x, 0.5 * x) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([0.35, -1.1, 0.7, 1.9, -0.5])]),
    Finding('where(logical_*(...),x,0)', lambda x: np.sum(np.where(np.logical_xor(
        np.logical_and(x > -1, np.logical_not(x > 1)), np.logical_or(x > 0.5, x < -1.5)),
        x, 0.0) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([0.35, -1.1, 0.7, 1.9, -0.5])]),
    Finding('where(bitwise_*(...),x,0)', lambda x: np.sum(np.where(np.bitwise_xor(
        np.bitwise_and(x > -1, np.invert(x > 1)), np.bitwise_or(x > 0.5, x < -1.5)),
        x, 0.0) ** 2),
            [np.array([0.3, -1.2, 0.8, 2.0, -0.4])], [np.array([0.35, -1.1, 0.7, 1.9, -0.5])]),
    # raise under nesting and recording: slice cotangents added in place with out=
    Finding('sum(x[:2])+sum(x**3)', lambda x: np.sum(x[:2]) + np.sum(x ** 3),
            [np.array([0.3, -1.2, 0.8, 2.0])], [np.array([1.1, 0.5, -0.7, -1.5])]),
    # silently wrong when a closure constant is the recorded argument itself
    Finding('sum((w-w0)**2) recorded at w0', lambda w: np.sum((w - w0) ** 2), [w0], [w0 - 0.5]),
    # raise in back: a Python list operand
    Finding('sum(v*[1,2,3])', lambda v: np.sum(v * [1.0, 2.0, 3.0]), *X3),
    squared('sum(v*[1,2,3])', lambda v: np.sum(v * [1.0, 2.0, 3.0]), *X3),
    # raise in back or in a composite: list operands of NumPy functions (converted once,
    # when the entry is recorded)
    *[make(name, f, *points) for make in (Finding, squared) for name, f, points in (
        ('sum(interp(x,[0,3],[0,6]))', lambda x: np.sum(np.interp(x, [0, 3], [0, 6])),
         ([np.array([0.5, 1.0, 2.0])], [np.array([0.7, 1.4, 2.5])])),
        ("einsum('i,i',x,[1,2,3])", lambda x: np.einsum('i,i', x, [1.0, 2.0, 3.0]), X3),
        ('sum(interp([1,2],[0,1,3],x))', lambda x: np.sum(np.interp([1.0, 2.0], [0., 1., 3.], x)),
         X3),
        ('sum(solve(A.tolist(),b)**2)', lambda b: np.sum(np.linalg.solve(SPD, b) ** 2), X3))],
]
IDS = [f.name for f in FINDINGS]


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------

def _replay(tape, finding, what):
    """Replay ``tape`` at x1 and x2 against the oracle; a TapeGuardError only where a
    fresh recording takes another path."""
    f = finding.f
    for where, x in (('x1', finding.x1), ('x2', finding.x2)):
        try:
            val, grads = tape.withgradient(*x)
        except tr.TapeGuardError:
            if where == 'x1' or same_path(path_of(tr.GradientTape(f, *x)), path_of(tape)):
                raise
            continue
        check_valgrad(val, grads, f, x, f'{what} at {where}')


@pytest.mark.parametrize('finding', FINDINGS, ids=IDS)
def test_eager(finding):
    for where, x in (('x1', finding.x1), ('x2', finding.x2)):
        val, grads = tr.withgradient(finding.f, *x)
        check_valgrad(val, grads, finding.f, x, f'eager at {where}')


@pytest.mark.parametrize('finding', FINDINGS, ids=IDS)
def test_nested(finding):
    x = finding.x2
    for i in range(len(x)):
        def fi(xi, i=i):
            return finding.f(*x[:i], xi, *x[i + 1:])
        H = fd_hessian(fi, x[i])
        v = np.random.default_rng(i).standard_normal(np.shape(x[i]))
        close(tr.hvp(fi, x[i], v), (H @ v.reshape(-1)).reshape(np.shape(x[i])),
              f'hvp, argument {i}', rtol=1e-4, atol=1e-5)
        if np.ndim(x[i]) == 0:
            H = H[0, 0]                           # tr.hessian of a scalar is a scalar
        close(tr.hessian(fi, x[i]), H, f'hessian, argument {i}', rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('finding', FINDINGS, ids=IDS)
def test_recorded(finding):
    _replay(tr.GradientTape(finding.f, *finding.x1), finding, 'GradientTape')


@pytest.mark.parametrize('finding', FINDINGS, ids=IDS)
def test_compiled(finding):
    # in the foreground: a tiered compile would answer these calls in NumPy
    tape = tr.compile(tr.GradientTape(finding.f, *finding.x1), background=False)
    assert tape.compiled is not None
    _replay(tape, finding, 'compiled tape')


@pytest.mark.parametrize('finding', FINDINGS, ids=IDS)
def test_autocompiled(finding):
    ad = tr.AutoCompiled()
    for where, x in (('x1', finding.x1), ('x2', finding.x2), ('x1 again', finding.x1),
                     ('x2 again', finding.x2)):
        if where == 'x1 again':           # eager, then recorded: now the compiled kernels
            assert ad.wait()
        val, grads = tr.withgradient(finding.f, ad, *x)
        check_valgrad(val, grads, finding.f, x, f'AutoCompiled at {where}')


# --------------------------------------------------------------------------
# Tied arguments: a tape recorded on untied arrays, replayed on tied ones
# --------------------------------------------------------------------------

def _tied_problem():
    r = np.random.default_rng(3)
    W1, W2 = r.standard_normal(3), r.standard_normal(3)
    return (lambda m: np.sum(m['a'] * m['b'] ** 2)), {'a': W1, 'b': W2}, {'a': W1, 'b': W1}


def _check_tied(g, f, tied, what):
    W = tied['a']
    total = fd_gradient(lambda w: f({'a': w, 'b': w}), (W,))[0]   # the total gradient
    close(g['a'], total, f'{what}: gradient at a (tied)')
    close(g['b'], total, f'{what}: gradient at b (tied)')


def test_tied_eager():
    f, _, tied = _tied_problem()
    _check_tied(tr.gradient(f, tied)[0], f, tied, 'eager')


@pytest.mark.parametrize('compiled', [False, True], ids=['recorded', 'compiled'])
def test_tied_replay_of_an_untied_tape_is_refused_or_correct(compiled):
    f, untied, tied = _tied_problem()
    tape = tr.GradientTape(f, untied)
    if compiled:
        tape = tr.compile(tape, background=False)
    try:
        g = tape.gradient(tied)[0]
    except (tr.TapeGuardError, ValueError):
        return
    _check_tied(g, f, tied, 'tape recorded untied, replayed tied')


def test_tied_autocompiled():
    f, untied, tied = _tied_problem()
    ad = tr.AutoCompiled()
    tr.gradient(f, ad, untied)
    _check_tied(tr.gradient(f, ad, tied)[0], f, tied, 'AutoCompiled after an untied call')


def test_untied_replay_of_a_tied_tape_is_refused_or_correct():
    f, untied, tied = _tied_problem()
    tape = tr.GradientTape(f, tied)
    try:
        g = tape.gradient(untied)[0]
    except (tr.TapeGuardError, ValueError):
        return
    want = fd_gradient(lambda a, b: f({'a': a, 'b': b}), (untied['a'], untied['b']))
    close(g['a'], want[0], 'gradient at a')
    close(g['b'], want[1], 'gradient at b')
