"""Forward mode: jvp against the function itself, a tall Jacobian, a Jacobian in a loss.

- F1: ``tr.jvp`` of a chain of 40 elementwise operations on 2000 elements, against one
  call of the function (forward mode costs about twice the function: every operation
  also computes its derivative); ``tr.gradient`` of the summed chain beside it.
- F2: the Jacobian of ``z -> tanh(W @ z) * 2`` from R^4 to R^4000, against one call of
  the function: ``mode='auto'`` takes forward mode (4 tangents in one pass) where
  reverse mode would sweep back 4000 times.
- F3: the Lux example, a loss holding the Jacobian of
  ``Chain(Dense(2, 4, tanh), BatchNorm(4), Dense(4, 2))`` with respect to its input,
  differentiated with respect to the parameters, per gradient step: the inner
  Jacobian in forward mode (what ``mode='auto'`` takes: the Jacobian is square)
  against reverse mode.  Once for one 2-element input (BatchNorm in test mode: in
  training mode one sample normalises to a constant), once for the manual's batch
  of 10 samples in training mode (a 20 x 20 Jacobian: every output depends on every
  sample through the batch statistics).
Peers (``jax.jvp``/``jax.jacfwd``, ``torch.func.jvp``/``jacfwd``) when installed.

``python benchmarks/forward.py`` runs F1-F3 and W5 (the Hessian: ``tr.hessian``, forward
over reverse, beside ``tr.hessian_reverse``) through ``run.py``.
"""
if __name__ == '__main__':
    import run as runner  # run.py's set-up first: one thread, this checkout's tracked

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
    def loss(model, x):
        J = tr.jacobian(model, x, mode=mode)[0]
        return np.sum(J ** 2) + np.sum(model(x) ** 2)
    return loss


def lux_model():
    return tr.Chain(tr.Dense(2, 4, tr.tanh, rng=1), tr.BatchNorm(4), tr.Dense(4, 2, rng=2))


def f3(report, rng):
    for name, x, mode_of in (('F3 Lux 2-element input', rng.standard_normal(2), tr.testmode),
                             ('F3 Lux batch of 10', rng.standard_normal((10, 2)), tr.trainmode)):
        model = mode_of(lux_model())
        g_fwd, g_rev = (tr.destructure(tr.gradient(lux_loss(m), model, x)[0])[0]
                        for m in ('forward', 'reverse'))
        assert np.allclose(g_fwd, g_rev, rtol=1e-10, atol=1e-10 * np.max(np.abs(g_rev)))
        fns = {'inner Jacobian reverse mode': lambda: tr.gradient(lux_loss('reverse'), model, x),
               'inner Jacobian forward mode': lambda: tr.gradient(lux_loss('forward'), model, x),
               "inner Jacobian mode='auto'": lambda: tr.gradient(lux_loss('auto'), model, x)}
        for impl, us in interleaved_us(fns, rounds=5).items():
            report(name, impl, us)


def run(report, wanted):
    rng = np.random.default_rng(0)
    for name, fn in (('F1', f1), ('F2', f2), ('F3', f3)):
        if not wanted or name in wanted:
            fn(report, rng)


if __name__ == '__main__':
    import sys
    runner.main(sys.argv[1:] or ['F1', 'F2', 'F3', 'W5'])
