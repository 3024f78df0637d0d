"""Placing the shards on the cluster: ``place`` and the ``_Part``s the steps use."""
from __future__ import annotations

import uuid
from typing import Any

import dask
import dask.array
import dask.bag
from distributed import Future

__all__ = ['place', 'Placed']


def place(client: Any, shards: Any) -> Any:
    """``place(client, shards) -> Placed``: the shards on the workers, for repeated
    ``withgradient`` calls that do not send the data again; pass it as ``shards``.

    In-memory shards are grouped, in order, into one future per worker thread (one
    task per thread and step, next to its data); their data travels inside the
    tasks, so Dask can recompute a future whose worker died, on any live worker
    (``client.scatter``'s could not).  Futures and dask collections keep their own
    granularity.

    >>> import numpy as np, tracked.distributed as td
    >>> from dask.distributed import Client
    >>> with Client(processes=False, n_workers=1, threads_per_worker=1,
    ...             dashboard_address=':0') as client:
    ...     print(td.place(client, [(np.ones(2),), (np.zeros(2),), (np.ones(2),)]))
    <3 shards in 1 futures on the cluster>
    """
    return Placed(placed(client, shards))


class Placed:
    """Shards on the cluster (made by ``place``): ``parts``, one per future."""

    def __init__(self, parts: Any) -> None:
        self.parts = parts

    def __repr__(self) -> Any:
        n = sum(len(p.labels()) for p in self.parts)
        bag = any(type(p.names) is str for p in self.parts)
        return (f'<{n} {"partitions" if bag else "shards"} in {len(self.parts)} futures '
                f'on the cluster>')


class _Part:
    """One future's share of the work: a list of shards (``many``) or one shard, and
    their names for errors (a tuple, or a bag partition's name for its items)."""

    __slots__ = ('future', 'many', 'names')

    def __init__(self, future: Any, many: Any, names: Any) -> None:
        self.future, self.many, self.names = future, many, names

    def labels(self) -> tuple[str, ...]:
        """What it holds, for messages: its shards' names, or a partition's."""
        return self.names if type(self.names) is tuple else (f'an item of {self.names}',)


def placed(client: Any, shards: Any) -> Any:
    """``shards`` as ``_Part``s (see the module docstring for what ``shards`` may be)."""
    if isinstance(shards, Placed):
        return shards.parts
    if isinstance(shards, dask.bag.Bag):
        return [_Part(f, True, f'partition {p}') for p, f in
                enumerate(client.compute(shards.to_delayed()))]
    arrays = (shards,) if isinstance(shards, dask.array.Array) else tuple(shards) \
        if isinstance(shards, (tuple, list)) and shards and all(
            isinstance(a, dask.array.Array) for a in shards) else None
    if arrays is not None:
        return [_Part(f, False, (f'shard {i} (block {i} along the first axis)',))
                for i, f in enumerate(client.compute(_blocks(arrays)))]
    if isinstance(shards, Future) or not isinstance(shards, (list, tuple)):
        raise TypeError(f'shards must be a sequence of shards (tuples of arguments), of '
                        f'futures, a dask.array or a dask.bag; got {type(shards).__name__}')
    if not shards:
        raise ValueError('no shards: pass at least one')
    parts = [_Part(s, False, (f'shard {i}',)) for i, s in enumerate(shards)
             if isinstance(s, Future)]
    local = [(i, s) for i, s in enumerate(shards) if not isinstance(s, Future)]
    # One group per worker thread: a task per shard and step would cost a scheduler
    # round trip each, more than a small shard's gradient.  The groups are fixed
    # here, so every step sums in the same order.  The data goes inside its task
    # (not client.scatter): Dask can recompute it if its worker dies.  No workers=,
    # even with allow_other_workers=True: a restricted task left waiting when all its
    # workers died is never given to the workers started later (distributed 2026.8),
    # so the step would wait forever; the scheduler spreads new tasks over the least
    # busy workers anyway.
    k = min(sum(client.nthreads().values()) or len(local), len(local))
    token = uuid.uuid4().hex[:12]
    for g in range(k):
        members = local[g * len(local) // k:(g + 1) * len(local) // k]
        future = client.submit(same_object, [s for _, s in members],
                               key=f'tracked-shards-{g}-{token}')
        parts.append(_Part(future, True, tuple(f'shard {i}' for i, _ in members)))
    return parts


def same_object(x: Any) -> Any:
    """The task that holds ``x`` on a worker, recomputable from its own arguments."""
    return x


def _blocks(arrays: Any) -> Any:
    """One delayed tuple of blocks per chunk of the first axis of ``arrays``."""
    first = arrays[0]
    aligned = []
    for a in arrays:
        if a.ndim == 0:
            raise ValueError('a dask.array of shards needs at least one axis (the records)')
        a = a.rechunk({0: first.chunks[0], **{k: -1 for k in range(1, a.ndim)}})
        if a.shape[0] != first.shape[0]:
            raise ValueError(f'the dask arrays have {first.shape[0]} and {a.shape[0]} '
                             f'records: shards need the same number in each argument')
        aligned.append(a.to_delayed().reshape(-1))
    return [dask.delayed(tuple)([d[i] for d in aligned]) for i in range(len(aligned[0]))]


