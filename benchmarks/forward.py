"""Forward mode: jvp against the function itself, a tall Jacobian, a Jacobian in a loss.

- F1: ``tr.jvp`` of a chain of 40 elementwise operations on 2000 elements, against one
  call of the function (forward mode costs about twice the function: every operation
  also computes its derivative); ``tr.gradient`` of the summed chain beside it.
- F2: the Jacobian of ``z -> tanh(W @ z) * 2`` from R^4 to R^4000, against one call of
  the function: ``mode='auto'`` takes forward mode (4 tangents in one pass) where
  reverse mode would sweep back 4000 times.
- F3: the Lux example, a loss holding the Jacobian of a 2-4-2 tanh model with respect
  to its 2-element input, differentiated with respect to the parameters: the inner
  Jacobian in forward mode (``mode='auto'``) against reverse mode.
Peers (``jax.jvp``/``jax.jacfwd``, ``torch.func.jvp``/``jacfwd``) when installed.
"""
import numpy as np

import tracked as tr
from common import interleaved_us, peer


def chain(x, xp=np):
    for _ in range(10):
        x = xp.sin(x) * 1.01
        x = xp.tanh(x) + 0.1
    return x


def f1(report, rng):
    x, v = rng.uniform(0.1, 0.9, 2000), rng.standard_normal(2000)
    fns = {'NumPy function alone': lambda: chain(x),
           'tracked tr.jvp': lambda: tr.jvp(chain, (x,), (v,)),
           'tracked tr.gradient of the sum': lambda: tr.gradient(lambda x: np.sum(chain(x)), x)}
    jax = peer('jax')
    if jax is not None:
        import jax.numpy as jnp
        xj, vj = jnp.asarray(x), jnp.asarray(v)
        jj = jax.jit(lambda x, v: jax.jvp(lambda x: chain(x, jnp), (x,), (v,)))
        fns['JAX jax.jit(jax.jvp)'] = lambda: jj(xj, vj)[1].block_until_ready()
    torch = peer('torch')
    if torch is not None:
        import torch.func
        xt, vt = torch.tensor(x), torch.tensor(v)
        fns['PyTorch torch.func.jvp'] = lambda: torch.func.jvp(lambda x: chain(x, torch),
                                                               (xt,), (vt,))
    for impl, us in interleaved_us(fns).items():
        report('F1 jvp chain', impl, us)


def f2(report, rng):
    W, z = rng.standard_normal((4000, 4)), rng.standard_normal(4)
    f = lambda z, xp=np: xp.tanh(W @ z) * 2          # noqa: E731
    fns = {'NumPy function alone': lambda: f(z),
           "tracked tr.jacobian (mode='auto')": lambda: tr.jacobian(f, z)}
    jax = peer('jax')
    if jax is not None:
        import jax.numpy as jnp
        Wj, zj = jnp.asarray(W), jnp.asarray(z)
        jf = jax.jit(jax.jacfwd(lambda z: jnp.tanh(Wj @ z) * 2))
        fns['JAX jax.jit(jax.jacfwd)'] = lambda: jf(zj).block_until_ready()
    torch = peer('torch')
    if torch is not None:
        import torch.func
        Wt, zt = torch.tensor(W), torch.tensor(z)
        fns['PyTorch torch.func.jacfwd'] = lambda: torch.func.jacfwd(
            lambda z: torch.tanh(Wt @ z) * 2)(zt)
    for impl, us in interleaved_us(fns, rounds=5).items():
        report('F2 jacobian R4->R4000', impl, us)


def lux_loss(mode):
    def model(p, x):
        return np.tanh(x @ p['W1'].T + p['b1']) @ p['W2'].T + p['b2']

    def loss(p, x):
        J = tr.jacobian(lambda xi: model(p, xi), x, mode=mode)[0]
        return np.sum(J ** 2) + np.sum(model(p, x) ** 2)
    return loss


def f3(report, rng):
    p = {'W1': rng.standard_normal((4, 2)), 'b1': rng.standard_normal(4),
         'W2': rng.standard_normal((2, 4)), 'b2': rng.standard_normal(2)}
    x = rng.standard_normal(2)
    fns = {'inner Jacobian reverse mode': lambda: tr.gradient(lux_loss('reverse'), p, x),
           "inner Jacobian mode='auto' (forward)": lambda: tr.gradient(lux_loss('auto'), p, x)}
    for impl, us in interleaved_us(fns, rounds=5).items():
        report('F3 Lux gradient step', impl, us)


def run(report, wanted):
    rng = np.random.default_rng(0)
    for name, fn in (('F1', f1), ('F2', f2), ('F3', f3)):
        if not wanted or name in wanted:
            fn(report, rng)
