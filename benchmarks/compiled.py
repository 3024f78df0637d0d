"""Compiled tapes (tr.compile): W1, W3, W4a, W4b, W5 (HessianTape), W6.

Each workload reports first its reference (the hand-written numba gradient, the
fastest a competent user would write: BLAS through ``@`` inside ``@njit`` where it
applies; for W6 the NumPy primal), then the compiled tape (value and gradient in
one call) with the default call, which allocates the gradient, and with ``out=``,
all timed in interleaved rounds; then ``jax.jit`` when JAX is installed.  Start-up
and compile times are in startup.py.
"""
import numpy as np
from numba import njit

import tracked as tr
from common import interleaved_us, median_us, peer

# -------------------------------------------------------------------- W1 ------
W1_STEPS = 200


def w1_f(x, xp=np):
    for _ in range(W1_STEPS):
        x = xp.sin(x) * 1.01 + 0.1
    return xp.sum(x * x)


@njit(cache=True)
def w1_numba(x0, xs, g):
    val = 0.0
    for j in range(x0.size):
        x = x0[j]
        for k in range(W1_STEPS):
            xs[k] = x
            x = np.sin(x) * 1.01 + 0.1
        val += x * x
        gj = 2.0 * x
        for k in range(W1_STEPS - 1, -1, -1):
            gj = gj * 1.01 * np.cos(xs[k])
        g[j] = gj
    return val


# -------------------------------------------------------------------- W2 ------
W2_BATCHES = (16, 128, 1024)   # the MLP of eager.py; compiled, NumPy beats fused tanh loops


# -------------------------------------------------------------------- W3 ------
def w3_f(x, xp=np):
    return xp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@njit(cache=True)
def w3_numba(x, g):
    val = 0.0
    for i in range(x.size):
        g[i] = 0.0
    for i in range(x.size - 1):
        a = x[i]
        t = x[i + 1] - a * a
        u = 1.0 - a
        val += 100.0 * t * t + u * u
        g[i] += -400.0 * t * a - 2.0 * u
        g[i + 1] += 200.0 * t
    return val


# -------------------------------------------------------------------- W4a -----
def w4a_init(rng):
    m = {'W1': rng.standard_normal((16, 2)) / np.sqrt(2), 'b1': np.zeros(16),
         'W2': rng.standard_normal((16, 16)) / 4, 'b2': np.zeros(16),
         'W3': rng.standard_normal((1, 16)) / 4, 'b3': np.zeros(1)}
    return m, rng.standard_normal((32, 2)), rng.standard_normal((32, 1))


def w4a_f(m, x, y, xp=np):
    h = xp.tanh(x @ m['W1'].T + m['b1'])
    h = xp.tanh(h @ m['W2'].T + m['b2'])
    out = h @ m['W3'].T + m['b3']
    return xp.mean((out - y) ** 2)


@njit(cache=True)
def w4a_numba(W1, b1, W2, b2, W3, b3, x, y, gW1, gb1, gW2, gb2, gW3, gb3):
    """The reference: products through BLAS (``@`` inside ``@njit``), the rest in loops."""
    B = x.shape[0]
    h1 = np.tanh(x @ W1.T + b1)
    h2 = np.tanh(h1 @ W2.T + b2)
    r = h2 @ W3.T + b3 - y
    loss = np.sum(r * r) / B
    go = 2.0 * r / B
    gW3[:] = go.T @ h2
    gb3[0] = np.sum(go)
    d2 = (go @ W3) * (1.0 - h2 * h2)
    gW2[:] = d2.T @ h1
    d1 = (d2 @ W2) * (1.0 - h1 * h1)
    gW1[:] = d1.T @ x
    for j in range(d2.shape[1]):
        s2 = 0.0
        s1 = 0.0
        for n in range(B):
            s2 += d2[n, j]
            s1 += d1[n, j]
        gb2[j] = s2
        gb1[j] = s1
    return loss


@njit(cache=True)
def w4a_numba_loops(W1, b1, W2, b2, W3, b3, x, y, gW1, gb1, gW2, gb2, gW3, gb3, h1, h2, d2,
                    d1):
    """Scalar loops only, one example at a time (slower here than BLAS: not the reference)."""
    B = x.shape[0]
    H = W1.shape[0]
    gW1[:] = 0.0
    gb1[:] = 0.0
    gW2[:] = 0.0
    gb2[:] = 0.0
    gW3[:] = 0.0
    gb3[:] = 0.0
    loss = 0.0
    for n in range(B):
        for j in range(H):
            s = b1[j]
            for i in range(x.shape[1]):
                s += W1[j, i] * x[n, i]
            h1[j] = np.tanh(s)
        for j in range(H):
            s = b2[j]
            for i in range(H):
                s += W2[j, i] * h1[i]
            h2[j] = np.tanh(s)
        o = b3[0]
        for i in range(H):
            o += W3[0, i] * h2[i]
        r = o - y[n, 0]
        loss += r * r
        go = 2.0 * r / B
        gb3[0] += go
        for i in range(H):
            gW3[0, i] += go * h2[i]
            d2[i] = go * W3[0, i] * (1.0 - h2[i] * h2[i])
        for j in range(H):
            gb2[j] += d2[j]
            for i in range(H):
                gW2[j, i] += d2[j] * h1[i]
        for i in range(H):
            s = 0.0
            for j in range(H):
                s += d2[j] * W2[j, i]
            d1[i] = s * (1.0 - h1[i] * h1[i])
        for j in range(H):
            gb1[j] += d1[j]
            for i in range(x.shape[1]):
                gW1[j, i] += d1[j] * x[n, i]
    return loss / B


# -------------------------------------------------------------------- W4b -----
def w4b_f(w, X, y, xp=np):
    z = X @ w
    return xp.mean(xp.logaddexp(0.0, z) - y * z)


def w4b_data(rng):
    """(w, X, y): 100 features, 50 samples, labels 0 or 1."""
    return (rng.standard_normal(100) * 0.1, rng.standard_normal((50, 100)),
            (rng.standard_normal(50) > 0).astype(np.float64))


@njit(cache=True)
def w4b_numba(w, X, y, g):
    """The reference: BLAS for both products, one scalar loop for the loss and residual."""
    n = X.shape[0]
    z = X @ w
    tot = 0.0
    r = np.empty(n, X.dtype)          # X.dtype: the same code serves float32
    for i in range(n):
        zi = z[i]
        tot += max(zi, 0.0) + np.log1p(np.exp(-abs(zi))) - y[i] * zi
        r[i] = (1.0 / (1.0 + np.exp(-zi)) - y[i]) / n
    g[:] = X.T @ r
    return tot / n


# -------------------------------------------------------------------- W5 ------
W5_N = 50


def w5_f(x, W, xp=np):
    return xp.sum(xp.tanh(W @ x)) + 0.5 * xp.sum(x ** 2)


@njit(cache=True)
def w5_numba(x, W, H, d):
    n = x.size
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += W[i, j] * x[j]
        t = np.tanh(s)
        d[i] = -2.0 * t * (1.0 - t * t)
    for a in range(n):
        for b in range(n):
            H[a, b] = 1.0 if a == b else 0.0
    for i in range(n):
        for a in range(n):
            wa = d[i] * W[i, a]
            for b in range(n):
                H[a, b] += wa * W[i, b]
    return H


# -------------------------------------------------------------------- W6 ------
def w6_f(a, b, xp=np):
    return xp.sum(a.T @ b + a @ b.T)


# --------------------------------------------------------------------------
def _jax(report, name, f, args, wrt, hessian=False):
    jax = peer('jax')
    if jax is None:
        return
    jnp = jax.numpy
    fj = (lambda *a: f(*a, xp=jnp))
    if hessian:
        g = jax.jit(jax.hessian(fj))
    else:
        g = jax.jit(jax.value_and_grad(fj, argnums=wrt))
    jargs = jax.tree_util.tree_map(jnp.asarray, args)

    def call():
        return jax.block_until_ready(g(*jargs))
    report(name, 'jax.jit', median_us(call))


def _compiled(report, name, tape, args, refs, eager=None):
    """Report ``refs`` ({label: call}, the reference first), the tape's NumPy replay (what
    a compiled tape runs until its kernels load), the eager tape (``eager``: a call) and
    the compiled tape, called with the default (allocating) call and with ``out=``, all
    timed in interleaved rounds; the compiled rows note their ratio to the replay and to
    eager (target: at most 1.0)."""
    ctape = tr.compile(tape, background=False)
    g = ctape.gradient(*args)
    calls = dict(refs)
    calls['tracked NumPy replay (uncompiled tape)'] = lambda: tape.withgradient(*args)
    if eager is not None:
        calls['tracked eager (withgradient)'] = eager
    calls['tracked compiled (default call)'] = lambda: ctape.withgradient(*args)
    calls['tracked compiled (out=)'] = lambda: ctape.withgradient(*args, out=g)
    _report_against(report, name, interleaved_us(calls), ctape)
    return ctape


def _report_against(report, name, times, ctape):
    """Report ``times``; compiled rows note their ratios to the replay and eager rows,
    the fallbacks and the units measured faster in NumPy (``ctape.chosen_numpy``)."""
    replay = times.get('tracked NumPy replay (uncompiled tape)')
    eager = next((us for label, us in times.items() if label.startswith('tracked eager')),
                 None)
    n_fb, n_np = len(ctape.fallbacks or ()), len(getattr(ctape, 'chosen_numpy', None) or ())
    for label, us in times.items():
        note = []
        if label.startswith('tracked compiled'):
            if replay:
                note.append(f'{us / replay:.2f}x replay')
            if eager:
                note.append(f'{us / eager:.2f}x eager')
            if n_fb:
                note.append(f'{n_fb} fallbacks')
            if n_np:
                note.append(f'{n_np} ops measured faster in NumPy')
        report(name, label, us, note=', '.join(note))


def run(report, wanted):
    rng = np.random.default_rng(0)

    def want(w):
        return not wanted or w.upper() in wanted

    if want('W1'):
        name = 'W1 compiled'
        x0 = rng.standard_normal(10)
        xs, g = np.empty(W1_STEPS), np.empty(10)
        _compiled(report, name, tr.GradientTape(w1_f, x0), (x0,),
                  {'hand-written numba gradient': lambda: w1_numba(x0, xs, g)},
                  eager=lambda: tr.withgradient(w1_f, x0))
        _jax(report, name, w1_f, (x0,), 0)
    if want('W2'):
        from eager import w2_init, w2_loss, w2_numpy_grad
        params, _, _ = w2_init(rng)
        for batch in W2_BATCHES:
            x = rng.standard_normal((batch, 784))
            y = np.eye(10)[rng.integers(0, 10, batch)]
            _compiled(report, f'W2 b={batch} compiled',
                      tr.GradientTape(w2_loss, *params, x, y, wrt=tuple(range(6))),
                      (*params, x, y),
                      {'hand-written NumPy gradient': lambda: w2_numpy_grad(*params, x, y)},
                      eager=lambda: tr.withgradient(lambda *p: w2_loss(*p, x, y), *params))
    if want('W3'):
        for n, label in ((100, '100'), (100_000, '1e5')):
            name = f'W3 n={label} compiled'
            x = rng.standard_normal(n)
            g = np.empty(n)
            _compiled(report, name, tr.GradientTape(w3_f, x), (x,),
                      {'hand-written numba gradient': lambda: w3_numba(x, g)},
                      eager=lambda: tr.withgradient(w3_f, x))
            _jax(report, name, w3_f, (x,), 0)
    if want('W4a'):
        name = 'W4a compiled'
        m, x, y = w4a_init(rng)
        order = ['W1', 'b1', 'W2', 'b2', 'W3', 'b3']
        ps = [m[k] for k in order]
        grads = [np.empty_like(p) for p in ps]
        tmp = [np.empty(16) for _ in range(4)]
        _compiled(report, name, tr.GradientTape(w4a_f, m, x, y, wrt=(0,)), (m, x, y), {
            'hand-written numba gradient (BLAS)': lambda: w4a_numba(*ps, x, y, *grads),
            'hand-written numba, scalar loops': lambda: w4a_numba_loops(*ps, x, y, *grads, *tmp)},
            eager=lambda: tr.withgradient(lambda m: w4a_f(m, x, y), m))
        _jax(report, name, w4a_f, (m, x, y), 0)
    if want('W4b'):
        name = 'W4b compiled'
        w, X, y = w4b_data(rng)
        g = np.empty(100)
        _compiled(report, name, tr.GradientTape(w4b_f, w, X, y, wrt=(0,)), (w, X, y),
                  {'hand-written numba gradient (BLAS)': lambda: w4b_numba(w, X, y, g)},
                  eager=lambda: tr.withgradient(lambda w: w4b_f(w, X, y), w))
        _jax(report, name, w4b_f, (w, X, y), 0)
        # float32: the tape runs float32 kernels; the reference is the same numba code
        # specialised for float32 arrays
        w32, X32, y32 = (a.astype(np.float32) for a in (w, X, y))
        g32 = np.empty(100, np.float32)
        _compiled(report, 'W4b float32', tr.GradientTape(w4b_f, w32, X32, y32, wrt=(0,)),
                  (w32, X32, y32),
                  {'hand-written numba gradient (BLAS)': lambda: w4b_numba(w32, X32, y32, g32)},
                  eager=lambda: tr.withgradient(lambda w: w4b_f(w, X32, y32), w32))
    if want('W5'):
        name = 'W5 compiled hessian'
        W = rng.standard_normal((W5_N, W5_N)) / np.sqrt(W5_N)
        x = rng.standard_normal(W5_N)
        H, d = np.empty((W5_N, W5_N)), np.empty(W5_N)
        plain = tr.HessianTape(lambda v: w5_f(v, W), x)
        htape = tr.compile(plain, background=False)
        Hout = htape.hessian(x)
        _report_against(report, name, interleaved_us({
            'hand-written numba Hessian': lambda: w5_numba(x, W, H, d),
            'tracked NumPy replay (uncompiled tape)': lambda: plain.hessian(x),
            'tracked eager (tr.hessian)': lambda: tr.hessian(lambda v: w5_f(v, W), x),
            'tracked compiled HessianTape (default call)': lambda: htape.hessian(x),
            'tracked compiled HessianTape (out=)': lambda: htape.hessian(x, out=Hout)}),
            htape)
        jax = peer('jax')
        if jax is not None:
            jW = jax.numpy.asarray(W)
            hj = jax.jit(jax.hessian(lambda v: w5_f(v, jW, xp=jax.numpy)))
            jx = jax.numpy.asarray(x)
            report(name, 'jax.jit', median_us(lambda: jax.block_until_ready(hj(jx))))
    if want('W6'):
        name = 'W6 compiled'
        a, b = rng.standard_normal((100, 100)), rng.standard_normal((100, 100))
        _compiled(report, name, tr.GradientTape(w6_f, a, b), (a, b),
                  {'NumPy primal (no gradient)': lambda: w6_f(a, b)},
                  eager=lambda: tr.withgradient(w6_f, a, b))
        _jax(report, name, w6_f, (a, b), (0, 1))
