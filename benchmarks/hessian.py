"""W5: the full Hessian of ``sum(tanh(W @ x)) + 0.5 * sum(x**2)``, n = 50.

Reference: the hand-written Hessian ``W.T diag(-2 t (1 - t^2)) W + I`` with
``t = tanh(W x)``.  ``tr.hessian`` is forward over reverse: one forward pass carrying
n tangents at once through the reverse-mode gradient.  ``tr.hessian_reverse`` is
reverse over reverse: one reverse sweep per row over a recording of the gradient.
"""
import numpy as np

import tracked as tr
from common import median_us, peer

N = 50
NAME = f'W5 hessian n={N}'


def make(rng, n=N):
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n)


def f(x, W, xp=np):
    return xp.sum(xp.tanh(W @ x)) + 0.5 * xp.sum(x ** 2)


def hand_hessian(x, W):
    t = np.tanh(W @ x)
    d = -2.0 * t * (1.0 - t * t)
    return (W.T * d) @ W + np.eye(len(x))


def run(report, wanted):
    if wanted and 'W5' not in wanted:
        return
    W, x = make(np.random.default_rng(0))
    H = hand_hessian(x, W)
    report(NAME, 'hand-written NumPy Hessian', median_us(lambda: hand_hessian(x, W)))

    assert np.allclose(tr.hessian(lambda x: f(x, W), x), H, rtol=1e-10, atol=1e-12)
    report(NAME, 'tracked tr.hessian (fwd over rev)',
           median_us(lambda: tr.hessian(lambda x: f(x, W), x)))
    report(NAME, 'tracked tr.hessian_reverse',
           median_us(lambda: tr.hessian_reverse(lambda x: f(x, W), x)))

    ag = peer('autograd')
    if ag is not None:
        import autograd.numpy as anp
        h = ag.hessian(lambda x: f(x, W, xp=anp))
        assert np.allclose(h(x), H)
        report(NAME, 'HIPS autograd hessian', median_us(lambda: h(x)))
    torch = peer('torch')
    if torch is not None:
        import torch.func
        Wt, xt = torch.tensor(W), torch.tensor(x)
        h = torch.func.hessian(lambda x: f(x, Wt, xp=torch))
        assert np.allclose(h(xt).numpy(), H)
        report(NAME, 'PyTorch torch.func.hessian (1 thread)', median_us(lambda: h(xt)))
    jax = peer('jax')
    if jax is not None:
        import jax.numpy as jnp
        Wj, xj = jnp.asarray(W), jnp.asarray(x)
        h = jax.jit(jax.hessian(lambda x: f(x, Wj, xp=jnp)))
        assert np.allclose(np.asarray(h(xj)), H)
        report(NAME, 'JAX jax.jit(jax.hessian)', median_us(lambda: h(xj).block_until_ready()))
