"""W1-W3 on the eager tape, beside plain NumPy, hand-written gradients and peers."""
import numpy as np

import tracked as tr
from common import interleaved_us, peer

# -------------------------------------------------------------------- W1 ------
W1_STEPS = 200
W1_OPS = 3 * W1_STEPS + 2        # sin, *, + per step; then x * x and sum


def w1_f(x, xp=np):
    for _ in range(W1_STEPS):
        x = xp.sin(x) * 1.01 + 0.1
    return xp.sum(x * x)


def w1_numpy_grad(x):
    xs = []
    for _ in range(W1_STEPS):
        xs.append(x)
        x = np.sin(x) * 1.01 + 0.1
    val = np.sum(x * x)
    g = 2 * x
    for xi in reversed(xs):
        g = g * 1.01 * np.cos(xi)
    return val, g


def w1(report, x0):
    def tracked_eager():
        x = tr.param(x0)
        tr.back(w1_f(x))
        return x.grad
    _measure(report, 'W1 µs/op', {
        'NumPy forward (no gradient)': lambda: w1_f(x0),
        'hand-written NumPy gradient': lambda: w1_numpy_grad(x0),
        'tracked eager (param/back)': tracked_eager,
        **_peers(w1_f, (x0,))}, scale=lambda us: us / W1_OPS)


# -------------------------------------------------------------------- W2 ------
def w2_init(rng):
    sizes = [784, 256, 128, 10]
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params += [rng.standard_normal((a, b)) / np.sqrt(a), np.zeros(b)]
    x = rng.standard_normal((128, 784))
    y = np.eye(10)[rng.integers(0, 10, 128)]
    return params, x, y


def w2_loss(W1, b1, W2, b2, W3, b3, x, y, xp=np):
    h = xp.tanh(x @ W1 + b1)
    h = xp.tanh(h @ W2 + b2)
    z = h @ W3 + b3
    z = z - xp.amax(z, axis=1, keepdims=True)   # amax: torch.max returns (values, indices)
    logp = z - xp.log(xp.sum(xp.exp(z), axis=1, keepdims=True))
    return -xp.sum(logp * y) / x.shape[0]


def w2_numpy_grad(W1, b1, W2, b2, W3, b3, x, y):
    h1 = np.tanh(x @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -np.sum((z - np.log(e.sum(axis=1, keepdims=True))) * y) / n
    dz = (p - y) / n
    dW3, db3 = h2.T @ dz, dz.sum(0)
    dh2 = (dz @ W3.T) * (1 - h2 ** 2)
    dW2, db2 = h1.T @ dh2, dh2.sum(0)
    dh1 = (dh2 @ W2.T) * (1 - h1 ** 2)
    dW1, db1 = x.T @ dh1, dh1.sum(0)
    return loss, (dW1, db1, dW2, db2, dW3, db3)


def w2(report, rng):
    params, x, y = w2_init(rng)
    _measure(report, 'W2 MLP step', {
        'NumPy forward (no gradient)': lambda: w2_loss(*params, x, y),
        'hand-written NumPy gradient': lambda: w2_numpy_grad(*params, x, y),
        'tracked eager (withgradient)':
            lambda: tr.withgradient(lambda *p: w2_loss(*p, x, y), *params),
        **_peers(w2_loss, (*params, x, y), nargs=len(params))})


# -------------------------------------------------------------------- W3 ------
def w3_f(x, xp=np):
    return xp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def w3_numpy_grad(x):
    a = x[1:] - x[:-1] ** 2
    b = 1 - x[:-1]
    val = np.sum(100 * a * a + b * b)
    g = np.zeros_like(x)
    g[1:] += 200 * a
    g[:-1] += -400 * a * x[:-1] - 2 * b
    return val, g


def w3(report, rng, n):
    x0 = rng.standard_normal(n)
    _measure(report, f'W3 n={n:g}', {
        'hand-written NumPy gradient': lambda: w3_numpy_grad(x0),
        'NumPy forward (no gradient)': lambda: w3_f(x0),
        'tracked eager (withgradient)': lambda: tr.withgradient(w3_f, x0),
        **_peers(w3_f, (x0,))})


def _measure(report, name, fns, scale=lambda us: us):
    """Report every implementation of one workload, timed in interleaved rounds (the
    first is the reference of the ratios)."""
    for label, us in interleaved_us(fns).items():
        report(name, label, scale(us))


# ------------------------------------------------------------------ peers -----
def _peers(f, args, nargs=None):
    """{label: call} for autograd and PyTorch eager, when installed (jax.jit is in
    compiled.py).  ``f`` takes ``xp=`` (the array module) after ``args``."""
    nargs = len(args) if nargs is None else nargs
    out = {}
    ag = peer('autograd')
    if ag is not None:
        import autograd.numpy as anp
        g = ag.value_and_grad(lambda *a: f(*a, xp=anp), list(range(nargs)))
        out['HIPS autograd'] = lambda: g(*args)
    torch = peer('torch')
    if torch is not None:
        targs = [torch.tensor(a) for a in args]

        def run():
            ps = [a.detach().requires_grad_() for a in targs[:nargs]]
            v = f(*ps, *targs[nargs:], xp=torch)
            v.backward()
            return [p.grad for p in ps]
        try:
            run()
            out['PyTorch eager (1 thread)'] = run
        except Exception as e:   # a workload spelled with NumPy-only calls
            print(f'  (PyTorch skipped: {e})')
    return out


def run(report, wanted):
    rng = np.random.default_rng(0)
    if not wanted or 'W1' in wanted:
        w1(report, rng.standard_normal(10))
    if not wanted or 'W2' in wanted:
        w2(report, rng)
    if not wanted or 'W3' in wanted:
        w3(report, rng, 100)
        w3(report, rng, 100_000)
