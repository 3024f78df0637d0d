"""The checks: each runs one path of tracked on a program and compares what it gives
with a value computed without it (the reference implementation, or finite
differences of the whole function), or with the same quantity at the plain level
(the invariant of API.md §3: a function's value and derivatives do not depend on
whether its arguments are differentiated at an outer level).

Every check is a function of a ``Run`` (the program at its sample point, with the
baselines it needs computed once) that returns normally, raises ``Skip`` (the check
does not apply: no parameters, a documented refusal), ``NotSmoothHere`` (the program
is not differentiable at its sample point, or a finite difference crosses a kink: a
derivative there means nothing, or not what differences measure), ``Undecided`` (the
reference implementation's own error, measured by its values at three steps, exceeds
the tolerance) or ``Failure``, whose ``kind`` names the symptom (the campaign groups by
it) and whose message gives both numbers.  The campaign counts the programs not
judged for each reason: a fuzzer that skipped many would lose its power.  An
exception from tracked on a program NumPy runs is a failure unless ``REFUSALS`` lists
it.

The finite differences perturb the parameters of the argument trees as
``semantics.py`` defines them: a tied array is one parameter in all its places, each
repeated number its own.  They take ``ignore_derivatives``' values from the central
evaluation (``_Tracked``), since a derivative treats those as constants.
"""
from __future__ import annotations

import re
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import tracked

from .programs import OPAQUE_RULES, Program, build, make_args, render, rules_used, statements
from .reference import STEP, NotSmooth, Reference, StepsDisagree
from .semantics import CONTAINERS, Parameters, is_array, is_integer, is_number, items, leaves

FIRST_ORDER_RTOL = 1e-5        # central differences at 1e-6: error ~1e-9 of the value
SECOND_ORDER_RTOL = 1e-4       # second differences at 1e-4: error ~1e-7
SAME_RTOL = 1e-8               # one computation at two levels: equal up to rounding
VALUE_RTOL = 1e-6              # the reference's nested differences: ~1e-8
REFERENCE_ROUNDING = 1e-4      # more than the reference's rounding ever is (3e-6 seen)

# Exceptions that are documented refusals, not findings: (type, message pattern,
# what must hold of the program, why).
REFUSALS: list[tuple[type, str, Callable[[Program], bool], str]] = [
    (TypeError, r'second derivatives through @tr\.rule r_\w+_opaque need its (forward|pullback)',
     lambda p: bool(set(rules_used(p)) & set(OPAQUE_RULES)),
     'an opaque @tr.rule whose pullback cannot be rebuilt over the tracked arguments is '
     'first order only (tr.rule docstring, API.md §4)'),
    (TypeError, r'a tr\.Duplicated argument stores plain gradients, but this one depends on an '
                r'outer differentiation or is recorded by a GradientTape|Duplicated\(model\) '
                r'holds a model of plain arrays .* under an outer differentiation use tr\.gradient',
     lambda p: 'Duplicated' in render(p),
     'Duplicated stores plain gradients: under an outer level or a recording they would be '
     'recorded values (duplicated.py); tr.gradient is the way there'),
]


class Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Skip(Exception):
    pass


class NotSmoothHere(Skip):
    """The program has a kink (or jumps) at the sample point or within a difference step."""


class Undecided(Skip):
    """The reference implementation is not accurate enough here to judge."""


class Rejected(Exception):
    """The program is unusable at its sample point (not finite, or huge)."""


class _Replay(Exception):
    pass


class _Tracked:
    """tracked as a program's ``tr``, with ``ignore_derivatives`` recording the values of
    a central evaluation and replaying them in the evaluations around it."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.values: list[Any] = []
        self.position = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(tracked, name)

    def ignore_derivatives(self, x: Any) -> Any:
        if self.mode == 'replay':
            if self.position >= len(self.values):
                raise _Replay('another path than at the centre')
            self.position += 1
            return self.values[self.position - 1]
        v = tracked.ignore_derivatives(x)
        if self.mode == 'record':
            self.values.append(v)
        return v


def _describe(x: Any) -> str:
    if x is None:
        return 'None'
    if isinstance(x, CONTAINERS):
        return f'a {type(x).__name__} of {len(x)}'
    return f'{type(x).__name__} of shape {np.shape(x)}'


def _place(path: list[Any]) -> str:
    return 'args' + ''.join(f'[{k!r}]' for k in path)


def per_leaf(args: Any, grad: Any, what: str, arrays_only: bool = False) -> list[Any]:
    """The derivative at each leaf of ``args`` from a tree that must mirror it (None: no
    derivative below); a ``Failure`` where it does not."""
    out: list[Any] = []

    def walk(arg: Any, g: Any, path: list[Any]) -> None:
        if g is None:
            out.extend([None] * len(leaves(arg)))
            return
        if isinstance(arg, CONTAINERS):
            if type(g) is not type(arg) or len(g) != len(arg) or (
                    isinstance(arg, dict) and list(g) != list(arg)):
                raise Failure(f'{what} does not mirror the arguments',
                              f'at {_place(path)} the argument is {_describe(arg)}, '
                              f'the {what} is {_describe(g)}')
            for (k, a), (_, d) in zip(items(arg), items(g)):
                walk(a, d, path + [k])
            return
        if is_array(arg) or is_number(arg):
            if np.shape(g) != np.shape(arg):
                raise Failure(f'{what} does not mirror the arguments',
                              f'at {_place(path)} the argument is {_describe(arg)}, '
                              f'the {what} is {_describe(g)}')
            if arrays_only and not is_array(arg):
                raise Failure(f'{what} of a number',
                              f'at {_place(path)}: {g!r}; only arrays are differentiated here')
        elif isinstance(arg, str):
            raise Failure(f'{what} of a string', f'at {_place(path)}: {g!r}')
        out.append(g)
    for i, (a, g) in enumerate(zip(args, grad)):
        walk(a, g, [i])
    if len(grad) != len(args):
        raise Failure(f'{what} does not mirror the arguments',
                      f'{len(args)} arguments, {len(grad)} entries')
    return out


def flat(params: Parameters, values: list[Any]) -> Any:
    """The per-leaf derivatives as one vector (tracked values allowed); a tied array's
    from its first place that has one (``_ties`` checks the others), None as zeros."""
    parts = []
    for k, ps in enumerate(params.places):
        v = next((values[p] for p in ps if values[p] is not None), None)
        n = int(params.offsets[k + 1] - params.offsets[k])
        parts.append(np.zeros(n) if v is None else np.ravel(v))
    return np.concatenate(parts) if parts else np.zeros(0)


def _ties(params: Parameters, values: list[Any], what: str) -> None:
    """A tied array gets the total gradient in every place it occurs (API.md §3)."""
    for ps in params.places:
        first = values[ps[0]]
        for p in ps[1:]:
            other = values[p]
            if (first is None) != (other is None) or (
                    first is not None and not np.allclose(first, other, rtol=1e-12)):
                raise Failure(f'{what}: a tied array gets different gradients',
                              f'{first!r} and {other!r} at two places of one array')


def escaped(x: Any, what: str) -> Any:
    """``x``, after checking that no tracked value escaped into a top-level result."""
    for leaf in leaves(x):
        if tracked.istracked(leaf):
            raise Failure('a tracked value escapes', f'{what} holds {leaf!r}')
    return x


class Run:
    """A program at its sample point, and the baselines its checks compare with."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.tr = _Tracked()
        self.f = build(program, self.tr)
        self.params = Parameters(make_args(program), arguments=True)
        self.theta = self.params.theta()
        rng = np.random.default_rng(program.seed)
        self.u = rng.standard_normal(self.params.size)     # directions of the differences
        self.w = rng.standard_normal(self.params.size)
        self._centre: float | None = None
        self._g0: np.ndarray | None = None
        self._slopes: dict[Any, float] = {}
        self._seconds: dict[Any, float] = {}

    def args(self, theta: np.ndarray | None = None) -> tuple[Any, ...]:
        return self.params.rebuild(self.theta if theta is None else theta)

    @property
    def centre(self) -> float:
        """``f(*args)`` (plain), recording the ignored values the differences replay."""
        if self._centre is None:
            self.tr.mode, self.tr.values = 'record', []
            try:
                y = float(escaped(self.f(*self.args()), 'f(*args)'))
            finally:
                self.tr.mode = None
            if not np.isfinite(y) or abs(y) > 1e4:      # differences would lose digits
                raise Rejected(f'f(*args) = {y}')
            self._centre = y
        return self._centre

    def replaying(self, fn: Callable[[], Any]) -> Any:
        self.centre                                          # records the ignored values
        self.tr.mode, self.tr.position = 'replay', 0
        try:
            return fn()
        except _Replay:
            raise NotSmoothHere('a finite difference takes another path') from None
        finally:
            self.tr.mode = None

    def value_at(self, theta: np.ndarray) -> float:
        return float(self.replaying(lambda: self.f(*self.args(theta))))

    def slope(self, u: np.ndarray, h: float = 1e-6) -> float:
        """The derivative of ``f`` along ``u`` by central differences (NotSmoothHere at a
        kink or a jump)."""
        key = u.tobytes()
        if key not in self._slopes:
            f0 = self.centre
            fp, fm = self.value_at(self.theta + h * u), self.value_at(self.theta - h * u)
            central = (fp - fm) / (2 * h)
            if abs((fp - f0) - (f0 - fm)) / h > 1e-2 * (1 + abs(central)):
                raise NotSmoothHere('f is not differentiable along the direction here (a kink)')
            # A jump at the point whose value there is the mean of its two sides (a tie of
            # np.maximum, whose derivative tracked splits, read by an inner jvp or gradient)
            # is symmetric: the one-sided differences agree, the central ones at two steps
            # (jump / 2h) do not.
            fp2, fm2 = self.value_at(self.theta + 2 * h * u), self.value_at(self.theta - 2 * h * u)
            if abs(central - (fp2 - fm2) / (4 * h)) > 1e-4 * (1 + abs(central)):
                raise NotSmoothHere('f is not continuous along the direction here (a jump)')
            self._slopes[key] = central
        return self._slopes[key]

    @property
    def g0(self) -> np.ndarray:
        """The plain-level gradient as a vector."""
        if self._g0 is None:
            args = self.args()
            g = tracked.gradient(self.f, *args)
            self._g0 = np.asarray(flat(self.params, per_leaf(args, g, 'gradient')), dtype=float)
        return self._g0

    def second(self, u: np.ndarray, w: np.ndarray) -> float:
        """``w' H u`` by central differences of ``f`` itself (not of tracked's gradient),
        at steps h and 2h: NotSmoothHere where they disagree (a kink)."""
        key = u.tobytes() + w.tobytes()
        if key not in self._seconds:
            f0 = self.centre
            at = {(h, a, b): self.value_at(self.theta + h * (a * u + b * w))
                  for h in (1e-4, 2e-4) for a in (1, -1) for b in (1, -1)}

            def mixed(h: float) -> float:
                return (at[h, 1, 1] - at[h, 1, -1] - at[h, -1, 1] + at[h, -1, -1]) / (4 * h * h)
            d1, d2 = mixed(1e-4), mixed(2e-4)
            if abs(d1 - d2) > 1e-3 * (1 + abs(d1)):
                raise NotSmoothHere('f is not twice differentiable along the directions here')
            # A kink or jump at the point itself is symmetric and cancels in the mixed
            # differences (each diagonal has one point on either side: a branch on a
            # number that is exactly 0); the second differences along each diagonal,
            # which read f at the point, see it.
            for b in (1, -1):
                s1, s2 = ((at[h, 1, b] - 2 * f0 + at[h, -1, -b]) / (h * h) for h in (1e-4, 2e-4))
                if abs(s1 - s2) > 1e-3 * (1 + abs(s1)):
                    raise NotSmoothHere('f is not twice differentiable at the point')
            # Richardson: the h^2 error term of the two steps cancels (a curvy f's
            # second differences at 1e-4 alone can be off by more than the tolerance)
            self._seconds[key] = (4 * d1 - d2) / 3
        return self._seconds[key]

    def owners(self) -> list[int]:
        """The argument each leaf belongs to."""
        return [i for i, a in enumerate(self.args()) for _ in leaves(a)]


def _close(got: float, want: float, rtol: float, scale: float = 0.0) -> bool:
    return bool(abs(got - want) <= rtol * (abs(want) + scale) + 1e-10)


def _compare(kind: str, got: Any, want: Any, rtol: float, what: str) -> None:
    got = np.asarray(got, dtype=float)
    want = np.asarray(want, dtype=float)
    scale = float(np.max(np.abs(want), initial=0.0))
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol,
                                                  atol=rtol * (1e-2 + scale)):
        raise Failure(kind, f'{what}: tracked gives {np.round(got, 10).tolist()}, '
                            f'expected {np.round(want, 10).tolist()}')


def _second(kind: str, run: Run, hu: Any, u: np.ndarray, what: str) -> None:
    hu = np.asarray(hu, dtype=float)
    fd = run.second(u, run.w)
    ad = float(np.dot(run.w, hu))
    # the differences' own rounding, as in _directional, divided by h^2 = 1e-8 (1e-6 for
    # |f| ~ 1; it matters where f is large and H u small: seed 3000307, |f| = 133, H = 0)
    rounding = 50 * np.finfo(float).eps * (1 + abs(run.centre)) / 1e-8
    if not _close(ad, fd, SECOND_ORDER_RTOL, float(np.sum(np.abs(run.w * hu))) + 1e-2) and \
            abs(ad - fd) > rounding:
        raise Failure(kind, f"w' H u for random u, w: {what} gives {ad!r}, second differences "
                            f"of f give {fd!r}")


def _directional(kind: str, run: Run, g: np.ndarray, u: np.ndarray, what: str) -> None:
    fd = run.slope(u)
    ad = float(np.dot(g, u))
    # the differences' own rounding: f's values carry some tens of ulps of the values
    # computed on the way, divided by 2h = 2e-6 (5e-9 for |f| ~ 1: it matters where the
    # slope is tiny, seeds 2002052, 2004413, 2004692 of the campaign with seed 2)
    rounding = 50 * np.finfo(float).eps * (1 + abs(run.centre)) / 2e-6
    if not _close(ad, fd, FIRST_ORDER_RTOL, float(np.sum(np.abs(g * u)))) and \
            abs(ad - fd) > rounding:
        raise Failure(kind, f'{what} along a random direction: tracked gives {ad!r}, '
                            f'finite differences of f give {fd!r}')


def _need_parameters(run: Run) -> None:
    if run.params.size == 0:
        raise Skip('no float leaves')


# --------------------------------------------------------------------------
# The checks (paths)
# --------------------------------------------------------------------------

# The reference's values by program source and step: it runs without tracked, so a
# program checked again (the CI slice's teeth, with a rule of tracked changed) reuses them.
_REFERENCE_VALUES: dict[tuple[str, float], float | NotSmooth] = {}


def _reference_value(run: Run, step: float) -> float:
    key = (render(run.program), step)
    if key not in _REFERENCE_VALUES:
        if len(_REFERENCE_VALUES) > 2000:
            _REFERENCE_VALUES.clear()
        try:
            _REFERENCE_VALUES[key] = float(build(run.program, Reference(step))(*run.args()))
        except NotSmooth as e:
            _REFERENCE_VALUES[key] = e
        except Exception as e:           # a bug of the fuzzer's own, not of tracked
            raise Failure('reference raises', f'{type(e).__name__}: {e}') from e
    value = _REFERENCE_VALUES[key]
    if isinstance(value, NotSmooth):
        raise value
    return value


def check_value(run: Run) -> None:
    """f(*args) with tracked (plain, no differentiation around it) equals the reference
    implementation's value: inner derivatives, fmap, destructure... computed without
    tracked.

    Nested finite differences amplify rounding (by 1/step a level): three or four levels
    can be off by 1e-7, or disagree with themselves at two steps.  Where tracked and the
    reference differ by less than ``REFERENCE_ROUNDING``, or the reference's steps
    disagree, it is asked again at larger steps (less amplification, more truncation):
    at twice the step, then, unless that agrees with the first value, at four times; the
    first two values that agree judge, and if none do, the reference cannot."""
    ref: float | None
    try:
        ref = _reference_value(run, STEP)
    except StepsDisagree:
        ref = None              # a kink within a few steps, or rounding: larger steps tell
    except NotSmooth:
        raise NotSmoothHere('the reference cannot differentiate at this point') from None
    if ref is not None and _close(run.centre, ref, VALUE_RTOL, 1e-2):
        return
    if ref is not None and not _close(run.centre, ref, REFERENCE_ROUNDING, 1e-2):
        raise Failure('value', f'f(*args) = {run.centre!r} with tracked, {ref!r} with the '
                               f'reference implementation')
    ref4: float | None = None
    try:
        ref2 = _reference_value(run, 2 * STEP)
        if ref is None or not _close(ref, ref2, VALUE_RTOL, 1e-2):
            ref4 = _reference_value(run, 4 * STEP)
    except NotSmooth:
        if ref is None:
            raise NotSmoothHere('the reference cannot differentiate at this point') from None
        raise Undecided('the reference at larger steps finds a kink') from None
    if ref4 is not None and not _close(ref2, ref4, VALUE_RTOL, 1e-2):
        raise Undecided(f'the reference is not accurate here: {ref!r}, {ref2!r}, {ref4!r} at '
                        f'steps {STEP}, {2 * STEP}, {4 * STEP}')
    if not _close(run.centre, ref2, VALUE_RTOL, 1e-2):
        raise Failure('value', f'f(*args) = {run.centre!r} with tracked, {ref!r}, {ref2!r} '
                               f'and {ref4!r} with the reference implementation at steps '
                               f'{STEP}, {2 * STEP} and {4 * STEP} (None: not needed)')


def check_withgradient(run: Run) -> None:
    """withgradient: the value (invariant) and the gradient (finite differences)."""
    args = run.args()
    val, grad = escaped(tracked.withgradient(run.f, *args), 'tr.withgradient(f, *args)')
    if not _close(float(val), run.centre, SAME_RTOL):
        raise Failure('value under withgradient',
                      f'f(*args) = {run.centre!r}, tr.withgradient(f, *args).val = {val!r}')
    values = per_leaf(args, grad, 'gradient')
    _ties(run.params, values, 'gradient')
    _need_parameters(run)
    _directional('gradient', run, np.asarray(flat(run.params, values), dtype=float), run.u,
                 'the gradient')


def _tangents(run: Run, u: np.ndarray) -> tuple[tuple[Any, ...], np.ndarray]:
    """A tangent tree for the arguments along ``u`` (sometimes None for the whole of an
    argument holding an int), and the direction it stands for."""
    # an int is a differentiated leaf (API.md §2): its tangent is a number, here 0
    tangents = run.params.mirror(u, lambda leaf: 0.0 if is_integer(leaf) else None)
    args = run.args()
    owners = run.owners()
    shared = {id(leaf) for leaf, i in zip(leaves(args), owners) if is_array(leaf)
              and any(j != i for other, j in zip(leaves(args), owners) if other is leaf)}
    # None for an argument that holds an int, unless all do, or it shares an array with
    # another argument (one array, a tangent in one place and None in the other: ambiguous)
    with_ints = [any(isinstance(v, int) and not isinstance(v, bool) for v in leaves(a))
                 and not any(id(v) in shared for v in leaves(a)) for a in args]
    if all(with_ints):
        return tangents, u
    tangents = tuple(None if w else t for t, w in zip(tangents, with_ints))
    direction = run.params.flat(sum((leaves(t) if t is not None else [None] * len(leaves(a))
                                     for t, a in zip(tangents, args)), []))
    return tangents, direction


def check_jvp(run: Run) -> None:
    """Forward mode on the whole program: the value (invariant) and the tangent."""
    _need_parameters(run)
    tangents, u = _tangents(run, run.u)
    y, t = escaped(tracked.jvp(run.f, run.args(), tangents), 'tr.jvp(f, args, tangents)')
    if not _close(float(y), run.centre, SAME_RTOL):
        raise Failure('value under jvp', f'f(*args) = {run.centre!r}, tr.jvp gives {y!r}')
    fd = run.slope(u)
    t = 0.0 if t is None else float(t)
    if not _close(t, fd, FIRST_ORDER_RTOL, 1e-2):
        raise Failure('jvp', f'the tangent along a random direction: tracked gives {t!r}, '
                             f'finite differences of f give {fd!r}')


def check_jvp_of_gradient(run: Run) -> None:
    """tr.jvp over tr.gradient, on the argument trees: the gradient computed while its
    arguments carry tangents equals the plain one, and its tangent is H u."""
    _need_parameters(run)
    g0 = run.g0
    tangents, u = _tangents(run, run.u)
    args = run.args()

    def gradient(*a: Any) -> Any:
        return flat(run.params, per_leaf(a, tracked.gradient(run.f, *a), 'gradient'))
    y, t = escaped(tracked.jvp(gradient, args, tangents), 'tr.jvp(gradient of f, ...)')
    _compare('gradient under jvp', y, g0, SAME_RTOL, 'the gradient at the plain level vs '
             'computed inside tr.jvp')
    _second('jvp of gradient', run, t, u, 'tr.jvp of tr.gradient (forward over reverse)')


def check_gradient_of_gradient(run: Run) -> None:
    """tr.withgradient over tr.gradient (reverse over reverse): <gradient, u> as a value
    (invariant) and its gradient H u."""
    _need_parameters(run)
    g0, u = run.g0, run.u
    args = run.args()

    def along(*a: Any) -> Any:
        g = flat(run.params, per_leaf(a, tracked.gradient(run.f, *a), 'gradient'))
        return np.sum(g * u)
    val, grad = escaped(tracked.withgradient(along, *args), 'tr.withgradient(<gradient, u>)')
    want = float(np.dot(g0, u))
    if not _close(float(val), want, SAME_RTOL, float(np.sum(np.abs(g0 * u)))):
        raise Failure('gradient under withgradient',
                      f'<gradient, u> = {want!r} at the plain level, {val!r} inside '
                      f'tr.withgradient')
    hu = flat(run.params, per_leaf(args, grad, 'gradient of gradient'))
    _second('gradient of gradient', run, hu, u, 'tr.gradient of tr.gradient '
            '(reverse over reverse)')


def check_hvp(run: Run) -> None:
    """tr.hvp of f on one flat vector of its parameters (tracked numbers in the trees)."""
    _need_parameters(run)
    hv = escaped(tracked.hvp(lambda v: run.f(*run.params.rebuild(v)), run.theta, run.u),
                 'tr.hvp(...)')
    _second('hvp', run, hv, run.u, 'tr.hvp on the flat vector of parameters')


def check_tape(run: Run) -> None:
    """A GradientTape recorded at the sample point, replayed there and nearby, equals
    eager evaluation (or refuses nearby with TapeGuardError)."""
    _need_parameters(run)
    tape = tracked.GradientTape(run.f, *run.args())
    # A tape replays the values of ignore_derivatives as recorded (README, Limits: what
    # guards cannot see): elsewhere than the recording point it may differ from eager.
    ignores = any('tr.ignore_derivatives' in line for s in statements(run.program)
                  for line in s.lines)
    theta2 = run.theta + 0.05 * np.random.default_rng(run.program.seed + 1).standard_normal(
        run.params.size)
    for where, theta in (('at the recording point', run.theta), ('nearby', theta2)):
        args = run.args(theta)
        try:
            val, grad = escaped(tape.withgradient(*args), 'tape.withgradient(*args)')
        except tracked.TapeGuardError:
            if theta is run.theta:
                raise
            continue
        if ignores and theta is not run.theta:
            continue
        eval_, egrad = tracked.withgradient(run.f, *run.args(theta))
        _compare('tape value', val, eval_, SAME_RTOL, f'replayed value {where} vs eager')
        got = flat(run.params, per_leaf(args, grad, 'replayed gradient'))
        want = flat(run.params, per_leaf(args, egrad, 'gradient'))
        _compare('tape gradient', got, want, SAME_RTOL, f'replayed gradient {where} vs eager')


def check_param_back(run: Run) -> None:
    """Tracker's workflow: fmap(param) over the arguments, back, grad."""
    _need_parameters(run)
    ps = tracked.fmap(tracked.param, run.args())
    y = run.f(*ps)
    if not tracked.istracked(y):
        raise Skip('f does not depend on its parameters')
    if not _close(float(tracked.data(y)), run.centre, SAME_RTOL):
        raise Failure('value with params', f'f(*args) = {run.centre!r}, with '
                                           f'fmap(param, args): {tracked.data(y)!r}')
    tracked.back(y)
    values = per_leaf(run.args(), escaped(tracked.grad(ps), 'tr.grad(params)'), 'grad')
    _ties(run.params, values, 'grad')
    _directional('param/back gradient', run, np.asarray(flat(run.params, values), dtype=float),
                 run.u, 'grad(fmap(param, args)) after back')


def check_duplicated(run: Run) -> None:
    """gradient with every argument that holds a float array Duplicated, others Const:
    the arrays' gradients, None for numbers."""
    args = run.args()
    owner: dict[int, int] = {}
    for i, a in enumerate(args):
        for leaf in leaves(a):
            if is_array(leaf) and owner.setdefault(id(leaf), i) != i:
                raise Skip('an array shared by two arguments')
    wrapped = [tracked.Duplicated(a) if any(is_array(v) for v in leaves(a)) else tracked.Const(a)
               for a in args]
    if not any(isinstance(w, tracked.Duplicated) for w in wrapped):
        raise Skip('no float arrays')
    grad = escaped(tracked.gradient(run.f, *wrapped), 'the Duplicated gradient')
    dup = [isinstance(w, tracked.Duplicated) for w in wrapped]
    values = per_leaf(args, tuple(g if d else None for g, d in zip(grad, dup)),
                      'Duplicated gradient', arrays_only=True)
    for g, d in zip(grad, dup):
        if not d and g is not None:
            raise Failure('Const gradient', f'a Const argument got {g!r}')
    owners = run.owners()
    mask = np.concatenate([np.full(int(run.params.offsets[k + 1] - run.params.offsets[k]),
                                   float(s is not None and dup[owners[ps[0]]]))
                           for k, (s, ps) in enumerate(zip(run.params.slots, run.params.places))]
                          or [np.zeros(0)])
    u = run.u * mask
    _directional('Duplicated gradient', run, np.asarray(flat(run.params, values), dtype=float),
                 u, 'the stored gradient')


CHECKS: dict[str, Callable[[Run], None]] = {
    'value': check_value, 'withgradient': check_withgradient, 'jvp': check_jvp,
    'jvp of gradient': check_jvp_of_gradient, 'gradient of gradient': check_gradient_of_gradient,
    'hvp': check_hvp, 'tape': check_tape, 'param/back': check_param_back,
    'Duplicated': check_duplicated,
}


def signature(f: Failure) -> str:
    """What makes two failures the same finding: the check's kind, and for an exception
    its message without numbers or location."""
    if not f.kind.startswith('raises'):
        return f.kind
    text = re.sub(r' \(at [^)]*\)$', '', f.message)
    return re.sub(r'\d+', 'N', text)[:120]


def _refused(program: Program, e: BaseException) -> str | None:
    for kind, pattern, applies, why in REFUSALS:
        if isinstance(e, kind) and re.search(pattern, str(e)) and applies(program):
            return why
    return None


PASSED, SKIPPED, NOT_SMOOTH, UNDECIDED = 'passed', 'skipped', 'not smooth', 'undecided'


def run_check(run: Run, name: str) -> Failure | str:
    """One check on one program: PASSED, SKIPPED, NOT_SMOOTH, UNDECIDED or the Failure."""
    try:
        with warnings.catch_warnings(), np.errstate(all='ignore'):
            warnings.simplefilter('ignore')
            try:
                run.centre
            except Rejected:
                raise
            except Exception:
                if name != 'value':          # reported once, by the plain path
                    raise Skip('f(*args) raises') from None
                raise
            CHECKS[name](run)
    except NotSmoothHere:
        return NOT_SMOOTH
    except Undecided:
        return UNDECIDED
    except (Skip, Rejected):
        return SKIPPED
    except Failure as f:
        return f
    except Exception as e:
        why = _refused(run.program, e)
        if why is not None:
            return SKIPPED
        where = traceback.extract_tb(e.__traceback__)[-1]
        first = str(e).split('\n')[0]
        return Failure(f'raises {type(e).__name__}',
                       f'{type(e).__name__}: {first[:400]} (at {where.name}, '
                       f'{where.filename.split("/")[-1]}:{where.lineno})')
    return PASSED


def usable(run: Run) -> bool:
    """The program has a finite plain value of moderate size at its sample point."""
    try:
        with warnings.catch_warnings(), np.errstate(all='ignore'):
            warnings.simplefilter('ignore')
            run.centre
    except Rejected:
        return False
    except Exception:            # tracked raises at the plain level: check 'value' says so
        pass
    return True
