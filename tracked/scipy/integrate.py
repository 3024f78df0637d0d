"""``tracked.scipy.integrate``: ``odeint`` and ``solve_ivp`` differentiated by the adjoint
method (as ``autograd.scipy.integrate.odeint``), so neural-ODE code runs.

The right-hand side is the user's NumPy function; the parameters to differentiate
are the tracked values among ``y0`` and ``args`` (trees of them too: a list of
``(W, b)`` layers).  One primitive integrates the state with SciPy's own solver on
plain values.  Its pullback integrates the adjoint system backwards, segment by
segment between the output times (Chen et al., 2018)::

    dy/dt = f(y, t, p),   da/dt = -a^T df/dy,   da_p/dt = -a^T df/dp

with ``a^T df/d(y, p)`` from tracked's own reverse mode on ``f``; its tangent rule
integrates the forward sensitivities ``dv/dt = df/dy v + df/dp dp`` with tracked's
forward mode on ``f``.  Both are integrations by the same primitive with an
augmented right-hand side, so derivatives nest to any order, and a recorded tape
re-runs SciPy's solver on replay.  Gradients are as accurate as the solver's
tolerances (``rtol``/``atol``) allow.  The output times are differentiable too
(``odeint``'s ``t``, ``solve_ivp``'s ``t_span`` and ``t_eval``): an output moves with
its time along ``f``, and the start time moves every later output (as
``autograd.scipy.integrate.odeint``'s, but exact for a time-dependent ``f``).

A right-hand side that uses a tracked value it does not receive as an argument (a
closure over a parameter) cannot be differentiated this way: it raises a
``TypeError`` saying to pass the value through ``args``.  Every other name is
``scipy.integrate``'s own (plain values).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.integrate as _si

from ..reverse import vjp
from ..jacobians import jvp
from ..registry import Primitive, nondifferentiable
from ..tree_util import flatten, unflatten
from ..boxes import Tracked
from ..dispatch import apply, call

__all__ = ['odeint', 'solve_ivp']


def __getattr__(name: str) -> Any:
    """Every other name is ``scipy.integrate``'s (plain values)."""
    return getattr(_si, name)


# --------------------------------------------------------------------------
# A problem: the right-hand side with its parameters packed in one vector
# --------------------------------------------------------------------------

class _Problem:
    """``dy/dt = rhs(y, t, params)`` for a state of ``n`` numbers and parameters of
    ``shapes``, packed with the initial state in one vector ``z = [y0, p...]``;
    ``solver(f, y0, t)`` integrates ``dy/dt = f(y, t)`` on plain values (SciPy's
    odeint, or solve_ivp with the user's method and options)."""

    def __init__(self, rhs: Any, n: Any, shapes: Any, solver: Any) -> None:
        self.rhs, self.n, self.shapes, self.solver = rhs, n, tuple(shapes), solver

    def split(self, z: Any) -> Any:
        """``(y0, [params])`` of a packed vector (plain or tracked)."""
        out, k = [], self.n
        for shape in self.shapes:
            size = int(np.prod(shape))
            out.append(np.reshape(z[k:k + size], shape))
            k += size
        return z[:self.n], out

    def solve(self, z: Any, t: Any) -> Any:
        """The states at times ``t``, shape ``(len(t), n)``: SciPy's solver, plain values."""
        y0, params = self.split(z)

        def f(y: Any, tt: Any) -> Any:
            dy = self.rhs(y, tt, params)
            if isinstance(dy, Tracked):
                raise TypeError(
                    'odeint/solve_ivp: the right-hand side returned a tracked value for '
                    'plain arguments: it uses a tracked value it does not receive (a '
                    'closure over a parameter). Pass the parameters through args=(...) '
                    'so that they are differentiated.')
            return dy
        return self.solver(f, y0, t)

    def adjoint(self) -> Any:
        """The problem of the state ``[y, a, a_p]`` integrated backwards by the pullback."""
        n, rhs = self.n, self.rhs

        def aug(s: Any, tt: Any, params: Any) -> Any:
            fy, back = vjp(lambda y, *p: rhs(y, tt, p), s[:n], *params)
            cts = back(s[n:2 * n])
            return _pack([fy] + [-_zeros_if_none(c, x) for c, x in zip(cts, [fy] + list(params))])
        return _Problem(aug, 2 * n + _size(self.shapes), self.shapes, self.solver)

    def sensitivity(self) -> Any:
        """The problem of the state ``[y, v]`` (``v`` the tangent) with parameters
        ``[p..., dp...]``, integrated forwards by the tangent rule."""
        n, rhs, k = self.n, self.rhs, len(self.shapes)

        def aug(s: Any, tt: Any, params: Any) -> Any:
            fy, ft = jvp(lambda y, *p: rhs(y, tt, p), (s[:n], *params[:k]),
                         (s[n:], *params[k:]))
            return _pack([fy, ft])
        return _Problem(aug, 2 * n, self.shapes * 2, self.solver)


def _size(shapes: Any) -> Any:
    return sum(int(np.prod(s)) for s in shapes)


def _pack(parts: Any) -> Any:
    """One flat vector of ``parts`` (plain or tracked)."""
    return np.concatenate([np.ravel(p) for p in parts])


def _zeros_if_none(c: Any, x: Any) -> Any:
    return np.zeros(np.shape(x)) if c is None else c


# --------------------------------------------------------------------------
# The primitive
# --------------------------------------------------------------------------

def _integrate_fwd(z: Any, t: Any, problem: Any) -> Any:
    return problem.solve(z, t)


def _adjoint_start(g: Any, ans: Any, z: Any, t: Any, problem: Any) -> Any:
    """The cotangent of the packed ``z = [y0, p...]``: the adjoint integrated backwards
    from the last output time, collecting each earlier cotangent on the way (the state
    restarts from the forward solution at each output time: no drift from integrating
    it backwards)."""
    n = problem.n
    aug = problem.adjoint()
    theta = z[n:]
    a = g[-1]
    ap = np.zeros(np.shape(theta))
    for i in range(np.shape(t)[0] - 1, 0, -1):
        s = _integrate(aug, _pack([ans[i], a, ap, theta]), t[i - 1:i + 1][::-1])[-1]
        a = s[n:2 * n] + g[i - 1]
        ap = s[2 * n:]
    return _pack([a, ap])


def _integrate_vjp(g: Any, ans: Any, z: Any, t: Any, problem: Any) -> Any:
    return _adjoint_start(g, ans, z, t, problem)


def _rates(ans: Any, z: Any, t: Any, problem: Any) -> Any:
    """``f(y(t_i), t_i)`` at every output time: the derivative of each output in its time."""
    params = problem.split(z)[1]
    return np.stack([problem.rhs(ans[i], t[i], params) for i in range(np.shape(t)[0])])


def _integrate_t_vjp(g: Any, ans: Any, z: Any, t: Any, problem: Any) -> Any:
    # Moving t_i (i >= 1) moves output i along f; moving t_0 starts the same state
    # earlier or later: every later output moves by -Phi(t_i, t_0) f(y0, t_0), whose
    # weighted sum is the adjoint at t_0 (without output 0's own cotangent: y(t_0) is
    # y0 whatever t_0 is) against f(y0, t_0).  Exact for a time-dependent f too.
    rates = _rates(ans, z, t, problem)
    per_output = np.sum(g * rates, axis=1)
    if np.shape(t)[0] < 2:
        return per_output * 0.0
    adjoint0 = _adjoint_start(g, ans, z, t, problem)[:problem.n] - g[0]
    first = -np.sum(adjoint0 * rates[0])
    return np.concatenate([np.reshape(first, (1,)), per_output[1:]])


def _integrate_jvp(tangents: Any, ans: Any, z: Any, t: Any, problem: Any) -> Any:
    # Forward sensitivities from v(t_0) = dy0 - f(y0, t_0) dt_0, plus f(y(t_i), t_i) dt_i
    # for the moved output times (see _integrate_t_vjp).
    n = problem.n
    tz, tt = tangents[0], tangents[1]
    if tz is None:
        tz = np.zeros(np.shape(z))
    rates: Any = None if tt is None else _rates(ans, z, t, problem)
    v0 = tz[:n] if tt is None else tz[:n] - rates[0] * tt[0]
    z2 = _pack([z[:n], v0, z[n:], tz[n:]])
    out = _integrate(problem.sensitivity(), z2, t)[:, n:]
    return out if tt is None else out + rates * np.reshape(tt, (-1, 1))


_INTEGRATE = Primitive(_integrate_fwd, (_integrate_vjp, _integrate_t_vjp, None),
                       name='scipy.integrate', jvp=_integrate_jvp)


def _integrate(problem: Any, z: Any, t: Any) -> Any:
    return apply(_INTEGRATE, (z, t, problem), {})


def _setup(rhs_of: Any, y0: Any, args: Any) -> Any:
    """The problem of ``rhs_of(y, t, args)`` and its packed vector ``z``: the
    differentiated parameters are the tracked leaves of ``args``."""
    leaves, treedef = flatten(tuple(args))
    slots = [i for i, v in enumerate(leaves) if isinstance(v, Tracked)]

    def rhs(y: Any, t: Any, params: Any) -> Any:
        full = list(leaves)
        for i, p in zip(slots, params):
            full[i] = p
        dy = rhs_of(y, t, unflatten(treedef, full))
        if isinstance(dy, (list, tuple)):        # [dy0, dy1]: a list of (tracked) scalars
            dy = np.stack(dy)
        return np.ravel(dy)
    return rhs, [np.shape(leaves[i]) for i in slots], [leaves[i] for i in slots]


# --------------------------------------------------------------------------
# odeint and solve_ivp
# --------------------------------------------------------------------------

def odeint(func: Any, y0: Any, t: Any, args: Any = (), tfirst: bool = False,
           full_output: bool = False, **options: Any) -> Any:
    """``odeint(func, y0, t, args=())``: ``scipy.integrate.odeint``, differentiable in
    ``y0`` and in the (tracked) parameters among ``args`` by the adjoint method.

    ``func(y, t, *args)`` (``func(t, y, *args)`` with ``tfirst=True``) is NumPy code;
    the result has shape ``(len(t), len(y0))``; ``rtol``, ``atol``, ``mxstep``, ...
    are SciPy's.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.integrate import odeint
    >>> decay = lambda y, t, k: -k * y
    >>> g = tr.gradient(lambda k: odeint(decay, np.ones(1), np.array([0.0, 2.0]), (k,),
    ...                                  rtol=1e-10, atol=1e-10)[-1, 0], 0.5)[0]
    >>> round(float(g), 6), round(-2 * float(np.exp(-1.0)), 6)         # d/dk exp(-2k)
    (-0.735759, -0.735759)
    """
    if full_output:
        raise NotImplementedError('tracked.scipy.integrate.odeint: full_output=True is not '
                                  'supported; call scipy.integrate.odeint on plain values')

    def rhs_of(y: Any, tt: Any, a: Any) -> Any:
        return func(tt, y, *a) if tfirst else func(y, tt, *a)

    def solver(f: Any, y: Any, ts: Any) -> Any:
        return _si.odeint(f, y, ts, **options)
    return _solve(rhs_of, y0, t, args, solver)


def _solve(rhs_of: Any, y0: Any, t: Any, args: Any, solver: Any) -> Any:
    rhs, shapes, params = _setup(rhs_of, y0, args)
    y0 = np.ravel(y0)
    problem = _Problem(rhs, np.shape(y0)[0], shapes, solver)
    z = _pack([y0] + params) if params else y0
    return _integrate(problem, z, _times(t))


def _times(t: Any) -> Any:
    """The output times as an array: tracked when any of them is (a list [0.0, T] too)."""
    if isinstance(t, Tracked):
        return t
    if type(t) in (list, tuple) and any(isinstance(v, Tracked) for v in t):
        return np.stack([v if isinstance(v, Tracked) else np.asarray(v, dtype=float) for v in t])
    return np.asarray(t, dtype=float)


class OdeResult(dict):
    """``solve_ivp``'s result: a dict with attribute access (``sol.t``, ``sol.y``, ...)."""

    def __getattr__(self, name: Any) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def solve_ivp(fun: Any, t_span: Any, y0: Any, method: str = 'RK45', t_eval: Any = None,
              dense_output: bool = False, events: Any = None, vectorized: bool = False,
              args: Any = None, **options: Any) -> Any:
    """``solve_ivp(fun, t_span, y0, method='RK45', t_eval=None, args=None)``:
    ``scipy.integrate.solve_ivp``, whose ``.y`` (shape ``(len(y0), len(t))``) is
    differentiable in ``y0`` and in the tracked parameters among ``args``.

    Without ``t_eval`` the times are the solver's own steps (as SciPy's), found on
    plain values and then held fixed.  ``dense_output`` and ``events`` are not
    supported on tracked values.

    >>> import numpy as np, tracked as tr
    >>> from tracked.scipy.integrate import solve_ivp
    >>> def final(k):
    ...     sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), np.ones(1), args=(k,),
    ...                     t_eval=[2.0], rtol=1e-10, atol=1e-10)
    ...     return sol.y[0, -1]
    >>> round(float(tr.gradient(final, 0.5)[0]), 6)
    -0.735759
    """
    if dense_output or events is not None or vectorized:
        raise NotImplementedError('tracked.scipy.integrate.solve_ivp: dense_output, events '
                                  'and vectorized are not supported; call '
                                  'scipy.integrate.solve_ivp on plain values')
    args = () if args is None else tuple(args)

    def rhs_of(y: Any, tt: Any, a: Any) -> Any:
        return fun(tt, y, *a)

    def solver(f: Any, y: Any, ts: Any) -> Any:
        sol = _si.solve_ivp(lambda tt, yy: f(yy, tt), (ts[0], ts[-1]), y, method=method,
                            t_eval=ts, **options)
        if sol.status < 0:
            raise RuntimeError(f'solve_ivp failed: {sol.message}')
        return sol.y.T
    if t_eval is None:
        # The solver's own steps for these values, held fixed; a tuple, so that a
        # recorded tape guards them (a replay that would step elsewhere is refused).
        # With a tracked span they are held at fixed fractions of it, so that the last
        # output moves with t_span[1] (its derivative there is f).
        steps = np.asarray(call(_solver_steps, fun, tuple(t_span), y0, args, method, options))
        if any(isinstance(v, Tracked) for v in t_span):
            frac = (steps - steps[0]) / (steps[-1] - steps[0]) if steps.size > 1 else steps * 0.0
            t = t_span[0] + (t_span[1] - t_span[0]) * frac
        else:
            t = steps
    else:
        t = _times(t_eval)
    # y0 is the state at t_span[0], which t_eval need not hold: integrate from there
    start = t_span[0]
    first = np.shape(t)[0] == 0 or bool(t[0] != start)
    ys = _solve(rhs_of, y0, np.concatenate([np.reshape(_times([start]), (1,)), t]) if first
                else t, args, solver)
    if first:
        ys = ys[1:]
    return OdeResult(t=t, y=np.swapaxes(ys, 0, 1), sol=None, t_events=None, y_events=None,
                     status=0, message='The solver successfully reached the end of the '
                     'integration interval.', success=True)


def _solver_steps(fun: Any, t_span: Any, y0: Any, args: Any, method: Any, options: Any) -> Any:
    """The times ``scipy.integrate.solve_ivp`` steps to (non-differentiable)."""
    sol = _si.solve_ivp(fun, t_span, np.ravel(y0), method=method, args=args or None, **options)
    return tuple(sol.t.tolist())


nondifferentiable(_solver_steps)
