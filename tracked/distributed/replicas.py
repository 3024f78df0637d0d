"""Replicas of the model on the workers, for ``train``: Dask actors that keep the model,
the optimiser state and a fixed group of shards between steps.

A synchronous step is one round trip: the client sends every replica the summed
gradient of the step before; each applies it with the optimiser (the same code on the
same values: the replicas stay identical bit for bit) and returns its group's value
and gradient; the client adds the groups' parts in group order (the sum does not
depend on which replica answers first, nor on which worker holds a group) and applies
the sum to its own copy while the replicas compute, so it always holds the state after
the last completed step.  A replica that is lost with its worker is made again from
that copy, on any live worker, and its group's part computed again: the same numbers.

The calls go straight to the worker holding the actor (the worker's ``actor_execute``
handler, as ``distributed.Actor`` uses it), all replicas in one pass of the client's
event loop: a ``distributed.Actor`` proxy routes its calls through the scheduler unless
the client was made with ``direct_to_workers=True``, which took 1.8 ms per round trip
of two replicas where this takes 1.4 (distributed 2026.8, 2 local workers).
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import time
import uuid
from typing import Any

import dask
import numpy as np
from distributed import CancelledError
from distributed import TimeoutError as DaskTimeout
from distributed.protocol import to_serialize

from ..arguments import Args
from ..optimise import OptLeaf, update
from ..tree_util import flatten, leaves
from .errors import ShardError, StepTimeoutError
from .gradients import gradient_part, lost_parts, shard_names, sum_parts


class Replica:
    """A worker's copy of the model and optimiser state with a group of shards (made by
    ``client.submit(Replica, ..., actor=True)``); ``held[i]`` is the data of the part
    whose ``(many, names)`` is ``parts[i]``."""

    def __init__(self, engine: Any, model: Any, state: Any, held: Any, parts: Any,
                 reduce: str) -> None:
        # a copy: on a cluster of threads (processes=False) the arguments are the
        # client's own objects, which the client updates too
        self.model, self.state = copy.deepcopy((model, state))
        self.engine, self.parts, self.reduce = engine, parts, reduce
        self.held = _aligned(held)
        self.args = Args((self.model,))

    def weight(self) -> Any:
        """The group's weight: its records (``reduce='mean'``) or its shards (``'sum'``)."""
        return sum(_weight(data, many, self.reduce) for data, (many, _) in
                   zip(self.held, self.parts))

    def step(self, flat: Any = None, digest: bool = False) -> Any:
        """Apply the summed gradient ``flat`` (None: none yet), then the group's part:
        ``((value, flat gradients, records, signatures), the state's hash or None)``."""
        if flat is not None:
            update(self.state, self.model, self.args.gradients(flat)[0])
        return self.part(), digest_of(self.model, self.state) if digest else None

    def part(self) -> Any:
        """``(value, flat gradients, records, signatures)`` of the group, in part order."""
        return sum_parts(*[gradient_part(self.engine, self.model, data, many, names, self.reduce)
                      for data, (many, names) in zip(self.held, self.parts)])

    def local(self, steps: int, scale: float, arrays: Any = None) -> Any:
        """``steps`` optimiser steps on the group's own gradient times ``scale`` (an
        estimate of the whole data's), after setting the state to ``arrays`` (None: as it
        is): ``(each step's value times scale, the state's arrays)``."""
        if arrays is not None:
            assign_groups(self.model, self.state, arrays)
        values = []
        for _ in range(steps):
            value, flat, _, _ = self.part()
            value *= scale
            if not np.isfinite(value):
                raise FloatingPointError(f'the loss estimated on a replica\'s shards is '
                                         f'{value}; its model was not updated')
            update(self.state, self.model, self.args.gradients(
                [None if g is None else g * scale for g in flat])[0])
            values.append(value)
        return values, _arrays(self.model, self.state)


def _aligned(x: Any) -> Any:
    """``x`` with a copy of each array that is not aligned.  Dask may hand over an array
    that views its message's bytes at any offset; NumPy multiplies such arrays with its
    own loops, not BLAS, which round differently: the bits of a gradient would then
    depend on how the shard travelled."""
    if isinstance(x, np.ndarray):
        return x if x.flags.aligned else x.copy()
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(_aligned(a) for a in x)
    return x


def _weight(data: Any, many: bool, reduce: str) -> Any:
    shards = data if many else [data]
    if reduce == 'sum':
        return len(shards)
    return sum(len(s[0] if isinstance(s, tuple) else s) for s in shards)


def _arrays(model: Any, state: Any) -> list[Any]:
    """The arrays of the model and of its optimiser state, in a fixed order."""
    out = [a for a in flatten(model)[0] if isinstance(a, np.ndarray)]
    for leaf in leaves(state, lambda x: isinstance(x, OptLeaf)):
        if isinstance(leaf, OptLeaf):
            out.extend(_state_arrays(leaf.state))
    return out


def _state_arrays(s: Any) -> list[Any]:
    if isinstance(s, np.ndarray):
        return [s]
    if isinstance(s, (list, tuple)):
        return [a for x in s for a in _state_arrays(x)]
    return []


def assign_groups(model: Any, state: Any, arrays: Any) -> None:
    for a, v in zip(_arrays(model, state), arrays):
        a[...] = v


def digest_of(model: Any, state: Any) -> str:
    """A hash of every array and number of the model and its optimiser state."""
    h = hashlib.blake2b(digest_size=16)
    for a in _arrays(model, state):
        h.update(np.ascontiguousarray(a).data)
    for leaf in leaves(state, lambda x: isinstance(x, OptLeaf)):
        if isinstance(leaf, OptLeaf) and isinstance(leaf.state, list):
            h.update(repr([x for x in leaf.state if isinstance(x, int)]).encode())
    return h.hexdigest()


def average(parts: Any, weights: Any) -> list[Any]:
    """The weighted mean of the replicas' arrays, added in replica order (floating arrays;
    any other is the first replica's, equal on all of them)."""
    total = sum(weights)
    out = []
    for arrays in zip(*parts):
        if np.issubdtype(arrays[0].dtype, np.floating):
            acc = arrays[0] * (weights[0] / total)
            for a, w in zip(arrays[1:], weights[1:]):
                acc = acc + a * (w / total)
            out.append(acc.astype(arrays[0].dtype, copy=False))
        else:
            out.append(arrays[0])
    return out


class _Died(Exception):
    """A replica's worker went away during a call."""


class Replicas:
    """The replicas of one ``train`` call, one per group of parts: their actors, made
    from the client's copy of the model and optimiser state, and made again when lost.

    A group whose call was under way when its worker died counts the death; once
    ``distributed.scheduler.allowed-failures`` + 1 died so, the group raises
    ``ShardError`` (a loss that ends its process), as Dask's tasks do."""

    def __init__(self, client: Any, engine: Any, groups: Any, reduce: str) -> None:
        self.client, self.engine, self.groups, self.reduce = client, engine, groups, reduce
        self.futures: list[Any] = [None] * len(groups)     # the actors' tasks: kept alive
        self.addresses = [''] * len(groups)
        self.deaths = [0] * len(groups)
        self.allowed = dask.config.get('distributed.scheduler.allowed-failures')
        self.token = uuid.uuid4().hex[:12]
        self.made = 0
        self.on_loop = False          # the last call was quick: run the next on the loop

    def close(self) -> None:
        for f in self.futures:
            if f is not None:
                f.release()
        self.futures = [None] * len(self.groups)
        self.addresses = [''] * len(self.groups)

    def _make(self, todo: Any, model: Any, state: Any, deadline: Any, where: str) -> None:
        """Actors for the groups ``todo`` from ``model`` and ``state``; no ``workers=``: the
        scheduler puts each next to its shards' data (and a task restricted to workers
        that all died would wait forever, distributed 2026.8)."""
        fresh = {}
        for g in todo:
            group = self.groups[g]
            self.made += 1
            fresh[g] = self.client.submit(
                Replica, self.engine, model, state, [p.future for p in group],
                [(p.many, p.names) for p in group], self.reduce, actor=True,
                key=f'tracked-replica-{g}-{self.made}-{self.token}')
        for g, f in fresh.items():
            try:
                self.addresses[g] = f.result(timeout=_left(deadline))._address
            except (DaskTimeout, TimeoutError):
                raise _timeout(where, deadline) from None
            except CancelledError as e:
                lost = lost_parts(self.groups[g], str(e))
                if not lost:
                    raise
                raise ShardError(
                    f'{where}: the cluster lost the data of {shard_names(lost)}: every worker '
                    f'that held it died, and Dask cannot compute data sent by '
                    f'client.scatter again. Scatter it again, or pass the shards themselves '
                    f'or td.place(client, shards), whose tasks Dask runs again.') from e
            self.futures[g] = f

    def call(self, method: str, args: Any, model: Any, state: Any, deadline: Any,
             where: str, again: Any = None, meanwhile: Any = None) -> list[Any]:
        """Each replica's ``method(*args(g))``, its result per group; ``meanwhile()`` runs on
        the client once the calls are sent.  A replica lost (before or during the call)
        is made again from ``model`` and ``state`` (as ``meanwhile`` left them) and
        called with ``again(g)`` (default ``args(g)``)."""
        results: dict[int, Any] = {}
        todo = [g for g in range(len(self.groups)) if self.futures[g] is None]
        if todo:
            self._make(todo, model, state, deadline, where)
        pending = list(range(len(self.groups)))
        first = True
        while pending:
            calls = [(g, self.addresses[g], self.futures[g].key, method,
                      args(g) if first or again is None else again(g)) for g in pending]
            started = time.monotonic()
            running = asyncio.run_coroutine_threadsafe(
                _call_all(self.client, calls, _left(deadline), self.on_loop),
                self.client.loop.asyncio_loop)
            if first and meanwhile is not None:
                meanwhile()
            out = running.result()
            self.on_loop = time.monotonic() - started < ON_LOOP_BELOW
            died, answered = [], set()
            for (g, address, *_), (status, value) in zip(calls, out):
                if status == 'ok':
                    results[g] = value
                    answered.add(address)
                elif status == 'died':
                    died.append((g, address, value))
                elif status == 'timeout':
                    raise _timeout(where, deadline)
                elif isinstance(value, ShardError):
                    raise ShardError(f'{where}: {value}') from value
                else:
                    raise value
            for g, address, error in died:
                self.deaths[g] += 1
                if self.deaths[g] > self.allowed:
                    raise ShardError(
                        f'{where}: {self._who(g)} killed every worker that ran it: '
                        f'{self.deaths[g]} died running it, the last {address} (Dask\'s '
                        f'distributed.scheduler.allowed-failures is {self.allowed}). A loss '
                        f'that ends its process does this: os._exit, a crash in compiled '
                        f'code, running out of memory.') from error
            lost = {g for g, *_ in died}
            gone = {a for _, a, _ in died}
            # replicas that answered on a worker that then died are gone too, uncounted
            lost |= {g for g in results if self.addresses[g] in gone}
            for g in lost:
                self.futures[g].release()
                self.futures[g], self.addresses[g] = None, ''
            again_todo = sorted(g for g in lost if g not in results)
            pending = again_todo
            if lost:
                self._make(sorted(lost), model, state, deadline, where)
            first = False
        return [results[g] for g in range(len(self.groups))]

    def _who(self, g: int) -> str:
        names = [n for p in self.groups[g] for n in p.labels()]
        return ' or '.join(names) + ' (one replica)' * (len(names) > 1)


# A replica's call runs on its worker's event loop when the call before took less than
# this (seconds, round trip; 0: never), else in the worker's actor thread: the hop to
# that thread and back cost 1.4 ms of a 4.5 ms step of a small model (2 workers, load
# average 6), and blocking the event loop for milliseconds is harmless, for seconds it
# is not (the worker answers nothing meanwhile: heartbeats, data for other tasks).  A
# loss that hangs after quick steps does block its worker's event loop until it
# returns; the step's timeout still fires on the client.
ON_LOOP_BELOW = 0.02


def _left(deadline: Any) -> Any:
    return None if deadline is None else max(deadline[0] - time.monotonic(), 0.0)


def _timeout(where: str, deadline: Any) -> StepTimeoutError:
    return StepTimeoutError(
        f'{where}: not finished within timeout={deadline[1]} s; its replicas were '
        f'released (a loss still running keeps its worker busy until it returns: '
        f'client.restart() ends it)')


async def _call_all(client: Any, calls: Any, timeout: Any, on_loop: bool) -> list[Any]:
    """``(status, value)`` per call ``(group, address, actor key, method, args)``: 'ok' and
    the result, 'error' and the exception raised there, 'died' and the connection's
    error, or 'timeout'; ``on_loop``: run on the workers' event loops, not their actor
    threads."""
    async def one(address: str, key: str, method: str, args: Any) -> Any:
        if not address:
            return 'died', OSError('its worker is gone')
        try:
            r = await client.rpc(address).actor_execute(
                function=method, actor=key, args=[to_serialize(a) for a in args],
                kwargs={'separate_thread': not on_loop})
        except OSError as e:
            return 'died', e
        if r['status'] == 'OK':
            return 'ok', r['result']
        if isinstance(r['exception'], KeyError) and key in str(r['exception']):
            return 'died', OSError(f'the worker {address} no longer holds the replica')
        return 'error', r['exception']
    tasks = [asyncio.ensure_future(one(*c[1:])) for c in calls]
    done, _ = await asyncio.wait(tasks, timeout=timeout)
    out = []
    for t in tasks:
        if t in done:
            out.append(t.result())
        else:
            t.cancel()
            out.append(('timeout', None))
    return out
