"""Well-conditioned matrix arguments for the matrix rules' cases (fixed values, so that
finite differences are accurate), real or complex (``dtype=np.complex128``)."""
import numpy as np

from .harness import arg

C = np.complex128


def _rng(shape, dtype):
    return np.random.default_rng(abs(hash((shape, np.dtype(dtype).num))) % 2**32)


def _normal(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == 'c':
        x = x + 1j * rng.standard_normal(shape)
    return x


def _orthonormal(rng, shape, dtype):
    q, _ = np.linalg.qr(_normal(rng, shape, dtype))
    return q


def dd(*shape, dtype=np.float64):
    """A (stack of) diagonally dominant matrices: invertible, well conditioned."""
    n = shape[-1]
    rng = _rng(shape, dtype)
    m = rng.uniform(-1, 1, shape) + (n + 1) * np.eye(n)
    if np.dtype(dtype).kind == 'c':
        m = m + 1j * rng.uniform(-1, 1, shape)
    return arg(shape, values=m, dtype=dtype)


def dd_negdet(n):
    """Diagonally dominant with two rows swapped: determinant < 0."""
    m = _rng((n, n), float).uniform(-1, 1, (n, n)) + (n + 1) * np.eye(n)
    return arg((n, n), values=m[[1, 0] + list(range(2, n))])


def spd(*shape, upper_noise=False, dtype=np.float64):
    """Symmetric (Hermitian) positive definite, with well separated eigenvalues 1..n.

    ``upper_noise`` perturbs the strict upper triangle: cholesky and eigh read only
    the lower one, so the input stays valid and the test checks that the gradient
    is the one of the function NumPy computes.
    """
    n = shape[-1]
    rng = _rng(shape, dtype)
    q = _orthonormal(rng, shape, dtype)
    m = (q * np.arange(1.0, n + 1)) @ np.conj(np.swapaxes(q, -1, -2))
    if upper_noise:
        m = m + np.triu(_normal(rng, shape, dtype), 1)
    return arg(shape, values=m, dtype=dtype)


def with_spectrum(*shape, spectrum=None, dtype=np.float64):
    """``U diag(spectrum) V^H`` with random orthonormal U, V: singular values
    ``spectrum`` (default 1..k, well separated), a full-rank rectangular matrix."""
    m, n = shape[-2:]
    k = min(m, n)
    s = np.linspace(1.0, 3.0, k) if spectrum is None else np.asarray(spectrum, float)
    rng = _rng(shape, dtype)
    u = _orthonormal(rng, shape[:-2] + (m, k), dtype)
    v = _orthonormal(rng, shape[:-2] + (n, k), dtype)
    return arg(shape, values=(u * s) @ np.conj(np.swapaxes(v, -1, -2)), dtype=dtype)


def full_rank(*shape, dtype=np.float64):
    return with_spectrum(*shape, dtype=dtype)


def distinct_eigs(n, batch=(), dtype=np.float64, complex_pairs=False):
    """``X diag(w) X^-1`` with well separated eigenvalues and a well conditioned X;
    ``complex_pairs``: a real matrix with a complex-conjugate pair among them."""
    shape = batch + (n, n)
    rng = _rng(shape + (complex_pairs,), dtype)
    x = np.eye(n) + 0.3 * _normal(rng, shape, dtype)
    w = np.diag(np.arange(1.0, n + 1))
    if complex_pairs:           # a rotation block: eigenvalues 1 +- 0.8i
        w[:2, :2] = [[1.0, 0.8], [-0.8, 1.0]]
    m = x @ w @ np.linalg.inv(x)
    return arg(shape, values=m, dtype=dtype)
