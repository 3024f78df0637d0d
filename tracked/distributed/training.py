"""``train``: data-parallel training with replicas of the model on the workers."""
from __future__ import annotations

import math
import time
import warnings
from typing import Any

from ..arguments import Args
from ..optimise import Rule, update
from .gradients import check_model, check_reduce, check_signatures, send_model, sum_parts
from .errors import DivergedError
from .replicas import Replicas, assign_groups, digest_of, average
from .shards import placed

__all__ = ['train']

_CHECK_EVERY = 10     # steps between two comparisons of the replicas' hashes


def train(client: Any, loss: Any, model: Any, shards: Any, state: Any, *, steps: int = 1,
          reduce: str = 'sum', tape: Any = None, adtype: Any = None, progress: bool = True,
          desc: Any = None, timeout: float | None = None, sync_every: int = 1) -> Any:
    """``train(client, loss, model, shards, state, steps=1) -> losses``: ``steps`` steps of
    data parallel training, each on the gradient over all the shards.

    Each worker keeps a replica of the model and the optimiser ``state`` (from
    ``tr.setup``) next to its shards for the whole call; a step sends each replica the
    summed gradient of the step before, which all of them and the client apply with
    the same optimiser code (so the replicas stay identical bit for bit: their hashes
    are compared every 10 steps), and brings back each replica's value and gradient,
    summed on the client in a fixed order.  ``model`` and ``state`` change in place as
    with ``tr.train``; a tqdm bar shows the running loss.  ``reduce``, ``tape``,
    ``adtype``: as in ``withgradient``; ``timeout=`` (seconds) bounds each step.
    Returns the loss of each step.  A replica lost with its worker is made again from
    the last completed step, with the same result; after an error (``ShardError``,
    ``StepTimeoutError``) the model and ``state`` are those after the last step done,
    which the message names.

    ``sync_every=k`` (local SGD): each replica takes ``k`` steps on its own shards'
    gradient (scaled to estimate the whole data's), then the replicas' parameters and
    optimiser states are averaged (weighted by their records with ``reduce='mean'``,
    by their shards with ``'sum'``): one exchange per ``k`` steps instead of one per
    step, for a result that depends on how the shards are grouped and follows the
    whole data's gradient less closely.  ``k=1`` is the synchronous training above.

    >>> import numpy as np, tracked as tr, tracked.distributed as td
    >>> from dask.distributed import Client
    >>> x = np.linspace(-1, 1, 8)
    >>> model = {'w': np.zeros(1)}
    >>> loss = lambda m, x: np.mean((m['w'] * x - 3 * x) ** 2)
    >>> with Client(processes=False, n_workers=1, threads_per_worker=1,
    ...             dashboard_address=':0') as client:
    ...     losses = td.train(client, loss, model, [(x[:4],), (x[4:],)],
    ...                       tr.setup(tr.Descent(0.5), model), steps=30, reduce='mean',
    ...                       progress=False)
    >>> round(float(model['w'][0]), 6), len(losses)
    (3.0, 30)
    """
    check_reduce(reduce)
    check_model(model, 'train')
    if isinstance(state, Rule):
        raise TypeError(f'td.train(client, loss, model, shards, state): state must be the '
                        f'optimiser state tree, state = tr.setup({state!r}, model), not the '
                        f'rule itself')
    if type(sync_every) is not int or sync_every < 1:
        raise ValueError(f'sync_every must be a whole number of steps >= 1, got '
                         f'{sync_every!r} (1: every step on the whole data\'s gradient)')
    parts = placed(client, shards)
    # Groups are fixed for the call: the order of the sum, hence every bit of the
    # result, does not depend on which worker holds which group, nor on failures.
    n = min(sum(client.nthreads().values()) or 1, len(parts))
    groups = [parts[g * len(parts) // n:(g + 1) * len(parts) // n] for g in range(n)]
    replicas = Replicas(client, send_model(client, loss, tape, adtype), groups, reduce)
    bar = _bar(steps, desc, progress)
    try:
        if sync_every == 1:
            return _synchronous(replicas, model, state, steps, timeout, bar)
        return _local(replicas, model, state, steps, sync_every, timeout, bar)
    finally:
        bar.close()
        replicas.close()


def _where(done: int) -> str:
    return (f'td.train at step {done} (counting from 0; the model and optimiser state are '
            f'those after the steps before it)')


def _deadline(timeout: Any) -> Any:
    return None if timeout is None else (time.monotonic() + timeout, timeout)


def _synchronous(replicas: Any, model: Any, state: Any, steps: int, timeout: Any,
                 bar: Any) -> list[float]:
    losses: list[float] = []
    pending: Any = None           # the last step's summed gradient, not yet applied

    def apply() -> None:
        if pending is not None:
            update(state, model, replicas_args.gradients(pending)[0])

    replicas_args = Args((model,))
    smooth = 0.0
    for i in range(steps):
        check = i % _CHECK_EVERY == _CHECK_EVERY - 1 or i == steps - 1
        sent = pending
        out = replicas.call('step', lambda g: (sent, check), model, state, _deadline(timeout),
                            _where(i), again=lambda g: (None, check), meanwhile=apply)
        value, flat, records, sigs = sum_parts(*[part for part, _ in out])
        if i == 0:
            check_signatures(sigs)
        if check:
            _compare([d for _, d in out], digest_of(model, state), i)
        if replicas.reduce == 'mean':
            value /= records
            flat = [None if g is None else g / records for g in flat]
        if not math.isfinite(value):
            raise FloatingPointError(f'td.train: the loss is {value} at step {i}; the model '
                                     f'was not updated with this step')
        pending = flat
        losses.append(value)
        smooth = 0.9 * smooth + 0.1 * value
        bar.update(1)
        bar.set_postfix(loss=f'{smooth / (1 - 0.9 ** len(losses)):.4g}', refresh=False)
    apply()
    return losses


def _compare(digests: Any, own: str, step: int) -> None:
    odd = [g for g, d in enumerate(digests) if d != own]
    if odd:
        raise DivergedError(
            f'td.train at step {step}: the replicas of groups {odd} hold parameters or '
            f'optimiser state that differ from the client\'s copy (hashes compared every '
            f'{_CHECK_EVERY} steps): the optimiser gave different results on the same '
            f'values (e.g. workers with another NumPy or CPU). The model and state are '
            f'those after step {step}; run on workers with the client\'s versions.')


def _local(replicas: Any, model: Any, state: Any, steps: int, k: int, timeout: Any,
           bar: Any) -> list[float]:
    weights = replicas.call('weight', lambda g: (), model, state, _deadline(timeout),
                            _where(0))
    total = sum(weights)
    scale = [(1.0 if replicas.reduce == 'mean' else total) / w for w in weights]
    losses: list[float] = []
    arrays: Any = None
    done = 0
    while done < steps:
        m = min(k, steps - done)
        sent = arrays
        out = replicas.call('local', lambda g: (m, scale[g], sent), model, state,
                            _deadline(timeout), _where(done),
                            again=lambda g: (m, scale[g], None))
        arrays = average([a for _, a in out], weights)
        assign_groups(model, state, arrays)
        for j in range(m):
            losses.append(sum(w / total * values[j] for w, (values, _) in zip(weights, out)))
        done += m
        bar.update(m)
        bar.set_postfix(loss=f'{losses[-1]:.4g}', refresh=False)
    return losses


def _bar(steps: int, desc: Any, progress: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        if progress:
            warnings.warn('td.train shows its progress bar with tqdm, which is not installed '
                          '(pip install tqdm); training without one', stacklevel=3)
        return _NoBar()
    return tqdm(total=steps, desc=desc, disable=not progress, mininterval=0.5, unit='step',
                dynamic_ncols=True)


class _NoBar:
    """Stands in for a tqdm bar when tqdm is not installed."""

    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass
