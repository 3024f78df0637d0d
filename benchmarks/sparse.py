"""Sparse Jacobians: the 2-D Bratu residual ``-Laplace(u) - lam exp(u)`` (five-point
stencil, u = 0 on the border) at N = 10^4 (S1) and 10^5 (S2) unknowns.

    python benchmarks/sparse.py            # S1 and S2 (also part of run.py)
    python benchmarks/sparse.py S1         # one size

Per size, three workloads, each row's ratio to the workload's first one:

- ``jacobian``: the hand-written sparse Jacobian (``L / h^2 - lam diag(exp u)``, SciPy)
  as reference; tracked's coloured Jacobian (``tr.jacobian(F, u, sparsity=coloring)``:
  one forward pass carrying one tangent per colour), a ``JacobianTape`` holding the
  colouring replayed in NumPy and compiled with numba; SciPy's coloured finite
  differences (``approx_derivative`` with ``sparsity=(pattern, groups)``, its own
  grouping computed once, as ``least_squares`` does); tracked's dense Jacobian
  (reverse mode, one call: forward mode would carry 10^4 tangents of 10^4 elements
  through every operation; skipped at 10^5, where J alone is 80 GB); ``jax.jacfwd``
  (dense, jitted) when JAX is installed.  Notes give the colours and the largest
  error against the hand-written Jacobian, relative to its largest entry, and the
  compiled tape's ratio to the replay (the two timed in interleaved rounds);
- ``once``: what a Newton loop pays before its first step: detection, colouring,
  recording the tape (the function alone as reference);
- ``newton``: one Newton step (residual, Jacobian, ``spsolve``), with the coloured
  Jacobian eager and from the compiled tape; the note gives the steps to converge.
"""
if __name__ == '__main__':
    import run as runner  # run.py's set-up first: one thread, this checkout's tracked

import time

import numpy as np

import tracked as tr
from common import interleaved_us, median_us, peer

LAM = 6.0
SIZES = {'S1': 100, 'S2': 316}          # grid sides: 10^4 and 99,856 unknowns


def bratu(n, xp=np):
    h2 = 1.0 / (n + 1) ** 2

    def F(u):
        U = xp.pad(u.reshape(n, n), 1)
        lap = U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:] - 4 * U[1:-1, 1:-1]
        return (-lap / h2 - LAM * xp.exp(U[1:-1, 1:-1])).ravel()
    return F


def hand_jacobian(n, sp):
    h2 = 1.0 / (n + 1) ** 2
    T = sp.diags_array([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], offsets=[-1, 0, 1])
    L = sp.csr_array(sp.kron(sp.eye_array(n), T) + sp.kron(T, sp.eye_array(n))) / h2

    def J(u):
        return sp.csr_array(L - sp.diags_array(LAM * np.exp(u)))
    return J


def _error(J, ref):
    return float(abs(J - ref).max() / abs(ref).max())


def newton(F, jac, u, spsolve, tol=1e-9, steps=20):
    for k in range(steps):
        r = F(u)
        if np.max(np.abs(r)) < tol:
            return u, k
        u = u - spsolve(jac(u), r)
    raise RuntimeError('Newton did not converge')


def size(report, key, n):
    import scipy.sparse as sp
    from scipy.optimize._numdiff import approx_derivative, group_columns
    from scipy.sparse.linalg import spsolve
    N = n * n
    name = f'{key} N={N:,}'
    F = bratu(n)
    J_hand = hand_jacobian(n, sp)
    u = np.random.default_rng(0).uniform(0.0, 0.5, N)
    ref = J_hand(u)

    # -- once per problem: detection, colouring, a tape -----------------------------
    tr.coloring(np.eye(2))        # numba's colouring kernels, loaded once per process
    t = {}
    start = time.perf_counter()
    P = tr.jacobian_sparsity(F, u)
    t['detect'] = time.perf_counter() - start
    start = time.perf_counter()
    col = tr.coloring(P)
    t['colour'] = time.perf_counter() - start
    start = time.perf_counter()
    tape = tr.JacobianTape(F, u, sparsity=col)
    t['tape'] = time.perf_counter() - start
    start = time.perf_counter()
    compiled = tr.compile(tape, background=False)
    t['compile'] = time.perf_counter() - start
    groups = group_columns(P)
    report(f'{name} once', 'the residual F alone', median_us(lambda: F(u)))
    report(f'{name} once', 'tr.jacobian_sparsity', t['detect'] * 1e6,
           f'{P.nnz:,} non-zeros')
    report(f'{name} once', 'tr.coloring (column and row)', t['colour'] * 1e6,
           f'{col.ncolors} colours ({col.kind}); SciPy group_columns: {groups.max() + 1}')
    report(f'{name} once', 'tr.JacobianTape(F, u, sparsity=col)', t['tape'] * 1e6)
    report(f'{name} once', 'tr.compile(tape) (kernels cached on disk)', t['compile'] * 1e6)

    # -- the Jacobian ------------------------------------------------------------------
    work = f'{name} jacobian'
    report(work, 'hand-written sparse Jacobian (SciPy)', median_us(lambda: J_hand(u)))
    eager = lambda: tr.jacobian(F, u, sparsity=col)[0]
    replay = lambda: tape.jacobian(u)[0]
    fast = lambda: compiled.jacobian(u)[0]
    us = {}
    impls = ((f'tracked coloured, eager ({col.ncolors} passes in one)', eager),
             ('tracked coloured JacobianTape, NumPy replay', replay),
             ('tracked coloured JacobianTape, compiled', fast))
    errs = {impl: _error(fn(), ref) for impl, fn in impls}
    assert max(errs.values()) < 1e-12, errs
    us[impls[0][0]] = median_us(eager, min_time=0.5)
    # the replay and the compiled tape interleaved: their ratio is not the machine's drift
    us.update(interleaved_us(dict(impls[1:]), rounds=11))
    for impl, _ in impls:
        note = f'max rel err {errs[impl]:.1e}'
        if impl.endswith('compiled'):
            note += (f'; {us[impl] / us[impls[1][0]]:.2f}x replay'
                     f'{"" if compiled.compiled is not None else " (keeps the replay)"}')
        report(work, impl, us[impl], note)
    fd = lambda: approx_derivative(F, u, sparsity=(P, groups))
    fd_us = median_us(fd, min_time=0.5, warmup=1)
    eager_us = next(iter(us.values()))
    report(work, 'SciPy coloured finite differences', fd_us,
           f'{groups.max() + 1} groups; max rel err {_error(sp.csr_array(fd()), ref):.1e}; '
           f'{fd_us / eager_us:.0f}x the coloured eager time')
    if N <= 10_000:
        start = time.perf_counter()
        J_dense, = tr.jacobian(F, u, mode='reverse')
        dense_us = (time.perf_counter() - start) * 1e6
        err = float(np.max(np.abs(J_dense - ref.toarray())) / abs(ref).max())
        report(work, 'tracked dense, reverse mode (one call)', dense_us,
               f'max rel err {err:.1e}')
        del J_dense
    else:
        print(f'{work:<14} tracked dense: skipped (J alone would be {N * N * 8 / 1e9:.0f} GB)')
    jax = peer('jax')
    if jax is None:
        print(f'{work:<14} jax.jacfwd: JAX not installed')
    elif N <= 10_000:
        import jax.numpy as jnp
        jf = jax.jit(jax.jacfwd(bratu(n, jnp)))
        uj = jnp.asarray(u)
        jf(uj).block_until_ready()
        report(work, 'JAX jax.jit(jax.jacfwd), dense', median_us(
            lambda: jf(uj).block_until_ready(), min_time=0.5, warmup=1))

    # -- a Newton step -------------------------------------------------------------------
    u0 = np.zeros(N)
    work = f'{name} newton'
    for impl, jac in (('hand-written Jacobian + spsolve', J_hand),
                      ('tracked coloured, eager + spsolve', lambda v: tr.jacobian(
                          F, v, sparsity=col)[0]),
                      ('tracked compiled JacobianTape + spsolve', lambda v: compiled.jacobian(
                          v)[0])):
        sol, steps = newton(F, jac, u0, spsolve)
        per_step = median_us(lambda: spsolve(jac(u), F(u)), min_time=0.5, warmup=1)
        report(work, impl, per_step, f'{steps} steps to |F| < 1e-9')


def run(report, wanted):
    for key, n in SIZES.items():
        if not wanted or key in wanted:
            size(report, key, n)


if __name__ == '__main__':
    import sys
    runner.main(sys.argv[1:] or list(SIZES))
