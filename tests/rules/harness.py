"""One way to state a rule test: ``case(np.fn, spec, spec, ..., kwargs=...)``.

Each ``spec`` is a shape tuple (a random float64 argument that is differentiated),
``arg(shape, low=, high=)`` for a restricted domain, or ``const(value)`` for an
argument that is passed as is and not differentiated.  ``check`` runs
``tr.gradcheck`` (central finite differences, float64) to ``order`` (default 2:
the pullback itself is differentiated on an outer tape).  A case whose ``fun`` wraps
the NumPy call (``lambda a: np.linalg.cholesky(a @ a.T + 3 * np.eye(3))``) names the
rule it tests with ``covers=np.linalg.cholesky`` for the systematic coverage check.

The same case also checks the recorded paths against the eager tape (ReverseDiff's
"every path against one oracle"): ``check_replay`` records a ``GradientTape`` of a
scalar loss built from the case at one sample and replays it (in NumPy, or compiled
with numba) at another; ``check_autocompiled`` goes through ``tr.AutoCompiled``;
``check_hessian_tape`` replays a ``HessianTape``.  The oracle is the eager
``tr.withgradient`` / ``tr.hessian`` at the second sample, which ``check`` itself
validates against finite differences.  ``check_lists`` calls the case again with
its constant arrays, and the differentiated arguments it holds fixed, as Python
lists, against the same call with arrays.
"""
import numpy as np
import pytest

import tracked as tr

# A replay runs the recorded forward and backward operations on new inputs: it must
# agree with eager evaluation up to rounding (the compiled tape sums in another order).
REPLAY_RTOL = 1e-10


class arg:
    def __init__(self, shape, low=-2.0, high=2.0, dtype=np.float64, values=None):
        self.shape, self.low, self.high, self.dtype, self.values = shape, low, high, dtype, values

    def make(self, rng):
        if self.values is not None:
            return np.array(self.values, dtype=self.dtype)
        x = rng.uniform(self.low, self.high, self.shape)
        if np.dtype(self.dtype).kind == 'c':
            x = x + 1j * rng.uniform(self.low, self.high, self.shape)
        return x.astype(self.dtype)


class const:
    def __init__(self, value):
        self.value = value


class Case:
    def __init__(self, fun, *specs, kwargs=None, order=2, name=None, rtol=1e-5, atol=1e-6,
                 covers=None):
        self.fun, self.kwargs, self.order = fun, kwargs or {}, order
        self.covers = fun if covers is None else covers   # the rule this case tests
        self.specs = [arg(s) if isinstance(s, tuple) else s for s in specs]
        self.rtol, self.atol = rtol, atol
        fname = getattr(self.covers, '__name__', repr(self.covers))
        shapes = ','.join(repr(s.value) if isinstance(s, const) else str(s.shape if s.values is None
                                                                         else np.shape(s.values))
                          for s in self.specs)
        self.id = name or f'{fname}({shapes}{"," + repr(self.kwargs) if self.kwargs else ""})'

    @property
    def diff(self):
        """Positions of the differentiated arguments."""
        return [i for i, s in enumerate(self.specs) if not isinstance(s, const)]

    def sample(self, k=0):
        """All arguments at sample ``k``.  Sample 0 is the one ``check`` uses.  A later
        sample draws each ranged argument anew in its domain, and scales arguments
        given by ``values`` by factors in [0.95, 1.05] (zeros, NaNs and signs stay,
        matrices stay well conditioned): the same case at another point."""
        rng = np.random.default_rng(k)
        out = []
        for s in self.specs:
            if isinstance(s, const):
                out.append(s.value)
                continue
            v = s.make(rng)
            if s.values is not None and k:
                v = (v * (1 + 0.05 * rng.uniform(-1.0, 1.0, v.shape))).astype(v.dtype)
            out.append(v)
        return out

    def check(self, seed=0):
        rng = np.random.default_rng(seed)
        values = [s.value if isinstance(s, const) else s.make(rng) for s in self.specs]
        diff = self.diff

        def f(*xs):
            full = list(values)
            for i, x in zip(diff, xs):
                full[i] = x
            return self.fun(*full, **self.kwargs)
        assert tr.gradcheck(f, *[values[i] for i in diff], order=self.order,
                             rtol=self.rtol, atol=self.atol)
        assert tr.jvpcheck(f, *[values[i] for i in diff], rtol=self.rtol, atol=self.atol)

    # -- the recorded paths -------------------------------------------------------
    def loss(self, kind='linear', wrt=None, given=None):
        """``loss(*xs)``: a real scalar of the differentiated arguments ``xs`` (constants
        as given), with ``y = fun(...)`` and ``w``, ``u`` fixed random arrays shaped like
        ``y`` (every output element is checked).  ``wrt`` (default: every differentiated
        position) are the positions of ``xs``; ``given`` maps other positions to what is
        passed there instead of sample 0 (``list_variants``).  Kinds:

        - ``'linear'``: ``sum(w * y)``.  The cotangent reaching ``fun`` is a constant,
          so the backward pass of a linear rule is a constant of the tape except
          where it reads recorded indices or counts (sort, take, repeat);
        - ``'quadratic'``: ``sum(w * y + u * y * y / 2)``: the cotangent ``w + u * y``
          depends on the input, so every pullback runs on the tape, and the Hessian
          is not zero for linear rules.
        """
        base = self.sample(0)
        diff = self.diff if wrt is None else wrt
        out = _joined(self.fun(*base, **self.kwargs))
        rng = np.random.default_rng(12345)
        w = rng.standard_normal(np.shape(out))
        u = rng.standard_normal(np.shape(out))
        part = (lambda v: v)
        if np.iscomplexobj(out):      # a real loss of complex outputs: both parts weighted
            w = w + 1j * rng.standard_normal(np.shape(out))
            u = u + 1j * rng.standard_normal(np.shape(out))
            part = np.real

        def y_of(xs):
            full = list(base)
            for i, x in (given or {}).items():
                full[i] = x
            for i, x in zip(diff, xs):
                full[i] = x
            return _joined(self.fun(*full, **self.kwargs))
        if kind == 'linear':
            def loss(*xs):
                return part(np.sum(y_of(xs) * w))
        elif kind == 'quadratic':
            def loss(*xs):
                y = y_of(xs)
                return part(np.sum(w * y + u * y * y / 2))
        else:
            raise ValueError(kind)
        loss.__name__ = loss.__qualname__ = f'{kind} loss of {self.id}' + (
            f' with {sorted(given)} given' if given else '')
        return loss

    def points(self, k, wrt=None):
        """The differentiated arguments (those at ``wrt`` if given) at sample ``k``."""
        values = self.sample(k)
        return [values[i] for i in (self.diff if wrt is None else wrt)]

    # -- Python lists in place of arrays ---------------------------------------------
    def list_variants(self):
        """``(label, given, wrt)``: the ways this case is also called with Python lists
        (``.tolist()``; a 0-d array as a Python number) where it takes arrays:

        - every constant array (label ``'constants as lists'``), all differentiated
          arguments differentiated;
        - with several differentiated arguments, for each ``k``: argument ``k``
          differentiated alone, the others held at sample 0 and passed as lists.
        """
        base = self.sample(0)
        diff = self.diff
        out = []
        consts = {i: _as_list(v) for i, v in enumerate(base)
                  if i not in diff and isinstance(v, (np.ndarray, np.generic))}
        if consts:
            out.append(('constants as lists', consts, diff))
        if len(diff) > 1:
            for k in diff:
                held = {i: _as_list(base[i]) for i in diff if i != k}
                out.append((f'argument {k} differentiated, the others as lists', held, [k]))
        return out

    def check_lists(self, paths=('eager', 'nested', 'recorded'), kind='quadratic'):
        """Each ``list_variants`` against the same call with arrays (the eager tape, which
        ``check`` validates): value and gradient (``'eager'``), the Hessian per real
        differentiated argument (``'nested'``, forward over reverse), a ``GradientTape``
        recorded with the lists and replayed at sample 0 and another sample
        (``'recorded'``, and ``'compiled'`` after ``tr.compile``).  Where plain NumPy
        refuses the lists (``np.take_along_axis`` takes no list of indices; ``y[1] =
        [[...]]`` where ``y[1] = np.array([[...]])`` works), tracked raises too or
        gives the arrays' result."""
        for label, given, wrt in self.list_variants():
            lists, arrays = self.loss(kind, wrt, given), self.loss(kind, wrt)
            x1 = self.points(0, wrt)
            if not _numpy_accepts(self, given):
                try:
                    got = tr.withgradient(lists, *x1)
                except Exception:
                    continue
                compare_replay(lambda *x: got, arrays, x1, f'{label} (NumPy refuses them)')
                continue
            for path in paths:
                what = f'{label}, {path}'
                if path == 'eager':
                    compare_replay(lambda *x: tr.withgradient(lists, *x), arrays, x1, what)
                elif path == 'nested':
                    for k, x in enumerate(x1):
                        if np.iscomplexobj(x):
                            continue            # no Hessian w.r.t. a complex argument
                        def fk(f, xk, k=k):
                            return f(*x1[:k], xk, *x1[k + 1:])
                        assert_close(tr.hessian(lambda xk: fk(lists, xk), x),
                                     tr.hessian(lambda xk: fk(arrays, xk), x),
                                     f'{what}: Hessian of argument {wrt[k]}')
                elif path in ('recorded', 'compiled'):
                    tape = tr.GradientTape(lists, *x1)
                    if path == 'compiled':
                        tape = tr.compile(tape, background=False)   # numba, not the NumPy tier
                    compare_replay(lambda *x: tape.withgradient(*x), arrays, x1,
                                   f'{what} at the recording point')
                    x2, same = second_point(lambda *x: tr.GradientTape(lists, *x), tape,
                                            lambda k: self.points(k, wrt))
                    try:
                        got = tape.withgradient(*x2)
                    except tr.TapeGuardError:
                        if same:
                            raise
                        continue
                    compare_replay(lambda *x: got, arrays, x2, f'{what} at a new point')
                else:
                    raise ValueError(path)

    def check_replay(self, compiled=False, kind='linear'):
        """Record ``GradientTape(loss)`` at sample 0, replay it (compiled with numba if
        asked) at sample 0 and at another sample, and compare value and gradient with
        eager ``tr.withgradient``.  ``tr.TapeGuardError`` is accepted only where eager
        evaluation takes another path than the recorded one."""
        loss = self.loss(kind)
        x1 = self.points(0)
        tape = tr.GradientTape(loss, *x1)
        path = 'compiled tape' if compiled else 'tape'
        if compiled:
            # in the foreground: with the default (tiered) compile, these calls would
            # replay in NumPy, which test_rule_replayed_on_a_tape already checks
            tape = tr.compile(tape, background=False)
            assert tape.compiled is not None
        compare_replay(lambda *x: tape.withgradient(*x), loss, x1, f'{path} at the recording point')
        x2, same = second_point(lambda *x: tr.GradientTape(loss, *x), tape, self.points)
        try:
            got = tape.withgradient(*x2)
        except tr.TapeGuardError:
            if same:
                raise AssertionError(f'{path}: TapeGuardError at a point where eager evaluation '
                                     f'takes the recorded path (same instructions and guards)')
            return
        compare_replay(lambda *x: got, loss, x2, f'{path} at a new point')

    def check_autocompiled(self, compile=True, kind='quadratic'):
        """``tr.withgradient(loss, tr.AutoCompiled(), ...)`` at samples 0 (eager), 1
        (recorded, replayed in NumPy while it compiles) and, once compiled, 0 and 1
        again, against eager."""
        loss = self.loss(kind)
        ad = tr.AutoCompiled(compile=compile)
        for n, k in enumerate((0, 1, 0, 1)):
            if n == 2 and compile:
                assert ad.wait(), f'AutoCompiled: the background compilation failed: ' \
                    f'{[t.compile_error for _, ts in ad.tapes.values() for t in ts]}'
                assert all(t.compiled is not None for _, ts in ad.tapes.values() for t in ts)
            x = self.points(k)
            compare_replay(lambda *x: tr.withgradient(loss, ad, *x), loss, x,
                           f'AutoCompiled(compile={compile}) at sample {k}, call {n}')

    def check_hessian_tape(self, kind='quadratic', compiled=False):
        """For each differentiated argument (the others held at sample 0): record a
        ``HessianTape`` at sample 0, replay at another, compare with eager
        ``tr.hessian`` (forward over reverse), ``tr.gradient`` and the value."""
        loss = self.loss(kind)
        x1 = self.points(0)
        for i in range(len(x1)):
            if np.iscomplexobj(x1[i]):
                continue          # a Hessian w.r.t. a complex argument is refused (ambiguous)
            def fi(x, i=i):
                xs = list(x1)
                xs[i] = x
                return loss(*xs)
            fi.__name__ = f'{loss.__name__}[argument {i}]'
            tape = tr.HessianTape(fi, x1[i])
            if compiled:
                tape = tr.compile(tape, background=False)
            x2, same = second_point(lambda x: tr.HessianTape(fi, x), tape,
                                    lambda k: [self.points(k)[i]])
            for x, where in ((x1[i], 'the recording point'), (x2[0], 'a new point')):
                what = f'{"compiled " if compiled else ""}HessianTape, argument {i}, at {where}'
                try:
                    H, g, v = tape.hessian(x), tape.gradient(x), tape(x)
                except tr.TapeGuardError:
                    if same or x is x1[i]:
                        raise AssertionError(f'{what}: TapeGuardError where eager evaluation '
                                             f'takes the recorded path')
                    continue
                assert_close(v, fi(x), f'{what}: value')
                assert_close(g, tr.gradient(fi, x)[0], f'{what}: gradient')
                assert_close(H, tr.hessian(fi, x), f'{what}: Hessian')


def _as_list(v):
    """An array as Python lists and numbers (``tolist``)."""
    return v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v


def _numpy_accepts(c, given):
    """Whether plain NumPy runs case ``c`` with the arguments ``given`` (lists)."""
    full = c.sample(0)
    for i, v in given.items():
        full[i] = v
    try:
        c.fun(*full, **c.kwargs)
    except Exception:
        return False
    return True


def _joined(out):
    """One array from a function's output (several outputs raveled and joined)."""
    if isinstance(out, (tuple, list)):
        return np.concatenate([np.ravel(o) for o in out])
    return out


def path_of(tape):
    """What decides a recorded tape's path: its instructions (name, shape) and its
    guards (kind, recorded value).  Two recordings with equal paths took the same
    branches."""
    return ([(ins.name, tuple(np.shape(v) for v in ins.value) if isinstance(ins.value, tuple)
              else np.shape(ins.value)) for ins in tape.instructions],
            [(g.kind, g.recorded) for g in tape.guards])


def same_path(a, b):
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(
        ka == kb and _equal(ra, rb) for (ka, ra), (kb, rb) in zip(a[1], b[1]))


def _equal(a, b):
    """Recorded guard values: numbers, arrays, tuples of them (NaN equals NaN)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)
                and all(_equal(x, y) for x, y in zip(a, b)))
    try:
        return np.shape(a) == np.shape(b) and bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:                  # not numbers: equal_nan does not apply
        return bool(np.array_equal(a, b))


def second_point(record, tape, points, tries=8):
    """``(x2, same)``: arguments for a replay away from the recording point.

    Without guards any new sample does (``same`` is True: a raise is a failure).
    With guards, the first of the samples 1..``tries`` on which a fresh recording
    takes the same path as ``tape``; failing that, sample 1 with ``same`` False (a
    ``TapeGuardError`` there is legitimate)."""
    if not tape.guards:
        return points(1), True
    recorded = path_of(tape)
    for k in range(1, tries + 1):
        x = points(k)
        if same_path(path_of(record(*x)), recorded):
            return x, True
    return points(1), False


def assert_close(got, want, what, rtol=REPLAY_RTOL):
    """``got`` equals ``want`` (shape and values) up to ``rtol``; None only as None."""
    if got is None or want is None:
        assert got is None and want is None, f'{what}: got {got!r}, eager gives {want!r}'
        return
    if isinstance(want, (tuple, list, dict)):
        assert type(got) is type(want) and len(got) == len(want), \
            f'{what}: got {got!r}, eager gives {want!r}'
        keys = want.keys() if isinstance(want, dict) else range(len(want))
        for k in keys:
            assert_close(got[k], want[k], f'{what}[{k!r}]', rtol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f'{what}: shape {got.shape}, eager gives {want.shape}'
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2 * scale, err_msg=what)


def compare_replay(run, loss, x, what):
    """``run(*x)`` returns ``(val, grads)``; compare with eager ``tr.withgradient``."""
    val, grads = run(*x)
    ev, eg = tr.withgradient(loss, *x)
    assert_close(val, ev, f'{what}: value')
    assert_close(tuple(grads), tuple(eg), f'{what}: gradient')


def case(fun, *specs, **kw):
    return Case(fun, *specs, **kw)


def parametrize(cases):
    """Decorate a test taking ``c`` with one parameter per case."""
    return pytest.mark.parametrize('c', cases, ids=[c.id for c in cases])


def grad(f, x):
    """The gradient of ``f`` at ``x`` (one argument), for targeted tests."""
    return tr.gradient(f, x)[0]
