"""A user's program, type-checked by CI's mypy run against tracked's annotations (the
files setting in pyproject.toml) and run by tests/test_typing.py: the types must accept
what the documentation shows."""
import importlib.util
from collections.abc import Callable
from typing import Any
import numpy as np
import numpy.typing as npt

import tracked as tr
import tracked.numpy as tnp


def loss(model: tr.Chain, x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> Any:
    return tr.nn.mse(model(x), y)          # a tracked scalar while differentiated


def main() -> None:
    x = tr.param(np.ones(3))
    y = np.sum(x * x)
    y.back()
    g = x.grad
    assert g is not None
    print(g.shape, x.data, x.shape, x.T, -x, x @ x, 2.0 * x)

    grads = tr.gradient(lambda a, b: a * b, 2.0, 3.0)
    val, (gx,) = tr.withgradient(lambda v: np.sum(v ** 2), np.arange(3.0))
    J = tr.jacobian(np.sin, np.arange(3.0), mode='forward')
    H = tr.hessian(lambda v: np.sum(v ** 3), np.arange(3.0))
    print(grads, val, gx, J, H)
    if importlib.util.find_spec('scipy') is not None:         # the tracked[scipy] extra
        c: tr.Coloring = tr.coloring(tr.jacobian_sparsity(np.sin, np.zeros(3)))
        Js, = tr.jacobian(np.sin, np.arange(3.0), sparsity=c)
        Hs = tr.hessian(lambda v: np.sum(v ** 3), np.arange(3.0), sparsity='auto')
        print(c.ncolors, Js.nnz, Hs.nnz, tr.hessian_sparsity(lambda v: v @ v, np.ones(2)).nnz)

    model = tr.Chain(tr.Dense(2, 3, tr.relu), tr.Dense(3, 1))
    state = tr.setup(tr.Adam(1e-2), model)
    data = [(np.ones((4, 2)), np.zeros((4, 1)))] * 3
    losses: list[float] = tr.train(loss, model, data, state, progress=False)
    print(losses[-1], tr.nparams(model))

    tape = tr.GradientTape(lambda v: np.sum(np.sin(v)), np.zeros(3))
    print(tape.gradient(np.ones(3))[0], tape.fallbacks, tape.wait(0.0))

    @tr.rule
    def softplus(v: npt.NDArray[np.float64]
                 ) -> tuple[npt.NDArray[np.float64], Callable[..., tuple[npt.NDArray[np.float64]]]]:
        out = np.logaddexp(0.0, v)
        return out, lambda dy: (dy / (1 + np.exp(-v)),)
    print(tr.gradient(lambda v: np.sum(softplus(v)), np.zeros(2)))

    @tr.non_differentiable
    def top(v: npt.NDArray[np.float64]) -> int:
        return int(np.argmax(v))
    print(top(np.arange(3.0)) + 1)

    dup = tr.Duplicated(model)
    print(tr.gradient(loss, dup, tr.Const(np.ones((4, 2))), tr.Const(np.zeros((4, 1)))))
    print(tnp.array([x[0], 1.0]), tr.tree_util.leaves({'w': np.ones(2)}))
    print(tr.gradcheck(lambda v: np.sum(np.sin(v)), np.ones(2)))


if __name__ == '__main__':
    main()
