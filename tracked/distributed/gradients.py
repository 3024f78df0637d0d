"""One gradient over the shards, in tasks: ``withgradient``, and what every step uses
(the loss on a worker, a part's gradient, the checks of the shards)."""
from __future__ import annotations

import itertools
import threading
import time
import uuid
import weakref
from typing import Any

import numpy as np
from distributed import CancelledError, KilledWorker, as_completed
from distributed import TimeoutError as DaskTimeout    # asyncio's on Python 3.10

from .. import api
from ..arguments import Args, differentiable, loss_output
from ..tree_util import flatten, follow, leaves
from ..box import plain
from ..boxes import Tracked
from .errors import ShardError, StepTimeoutError
from .shards import placed, same_object

__all__ = ['withgradient']


# --------------------------------------------------------------------------
# One gradient: per-shard tasks and a fixed summation tree
# --------------------------------------------------------------------------

class ShardLoss:
    """What each shard's task differentiates: ``loss(model, *shard)`` with the eager
    tape, a backend (``adtype``) or a recorded ``tape`` (``send_model`` says how it
    travels).  A tape or backend is used by one task at a time on a worker."""

    def __init__(self, loss: Any, tape: Any = None, adtype: Any = None) -> None:
        if tape is not None and adtype is not None:
            raise TypeError('pass either tape= or adtype=, not both')
        self.loss, self.tape, self.adtype = loss, tape, adtype
        self.lock = threading.Lock()

    def __getstate__(self) -> Any:
        return {'loss': self.loss, 'tape': self.tape, 'adtype': self.adtype}

    def __setstate__(self, state: Any) -> Any:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def withgradient(self, model: Any, args: Any) -> Any:
        if self.tape is not None:
            with self.lock:          # a replay writes the tape's buffers: one at a time
                val, grads = self.tape.withgradient(model, *args)
            return val, grads[0]
        if self.adtype is not None:
            with self.lock:          # AutoCompiled keeps tapes it replays: the same
                val, grads = api.withgradient(self.loss, self.adtype, model, *args)
            return val, grads[0]
        # only the model is differentiated: the shard is closed over, as tr.train does
        val, (g,) = api.withgradient(lambda m: self.loss(m, *args), model)
        return val, g


def _signature(args: Any) -> Any:
    """What must agree between shards, per argument: its number of axes, its shape past
    the first axis and its dtype (its type, for a non-array)."""
    sig: list[Any] = []
    for a in args:
        a = plain(a)
        if isinstance(a, (np.ndarray, np.generic)):
            sig.append((a.ndim, a.shape[1:], a.dtype.str))
        else:
            sig.append(type(a))
    return tuple(sig)


def _describe(s: Any) -> Any:
    if type(s) is not tuple:
        return f'type {s.__name__}'
    ndim, rest, dtype = s
    shape = ', '.join(['n'] * bool(ndim) + [str(d) for d in rest])
    return f'shape ({shape}{"," if ndim == 1 else ""}) and dtype {np.dtype(dtype)}'


def check_signatures(sigs: Any) -> Any:
    """Name the shards whose signature differs from most shards' (``sigs``: signature
    -> names of the shards that have it)."""
    if len(sigs) == 1:
        return
    (common, others), *odd = sorted(sigs.items(), key=lambda kv: -len(kv[1]))
    why = []
    for sig, names in odd:
        if len(sig) != len(common):
            diff = f'{len(sig)} arguments, where the others have {len(common)}'
        else:
            k = next(k for k in range(len(sig)) if sig[k] != common[k])
            diff = (f'argument {k} of {_describe(sig[k])}, where the others have '
                    f'{_describe(common[k])}')
        why.append(f'{shard_names(names)} {"has" if len(names) == 1 else "have"} {diff}')
    raise ValueError(f'the shards do not match: {"; ".join(why)} (n: the number of '
                     f'records). Shards may differ only in the length of their first '
                     f'axis.')


def shard_names(names: Any, most: int = 4) -> Any:
    return ', '.join(names[:most]) + (f' and {len(names) - most} more' * (len(names) > most))


def gradient_part(loss: Any, model: Any, held: Any, many: Any, names: Any, reduce: Any) -> Any:
    """``(value, flat gradients, records, signatures)`` summed over the shards ``held``
    (a list if ``many``) with ``loss`` (a ``ShardLoss``); the gradients are aligned with
    the model's differentiable leaves, None where a shard gives none; ``signatures``
    maps each shard signature met to the shards' names."""
    paths = flatten(model, differentiable)[1].paths()
    shards = held if many else [held]
    total = None
    for j, shard in enumerate(shards):
        args = shard if isinstance(shard, tuple) else (shard,)
        name = names[j] if type(names) is tuple else f'item {j} of {names}'
        try:
            val, g = loss.withgradient(model, args)
            val = loss_output(val, 'tracked.distributed')[0]
            records = 1
            if reduce == 'mean':
                records = _records(args)
                val = val * records
            flat = [follow(g, p) for p in paths]
            if reduce == 'mean':
                flat = [None if x is None else x * records for x in flat]
        except Exception as e:
            raise ShardError(f'{name}: {type(e).__name__}: {e}') from e
        part = (float(plain(val)), flat, records, {_signature(args): [name]})
        total = part if total is None else _add(total, part)
    return total


def _records(args: Any) -> Any:
    """A shard's number of records: the length of its first argument."""
    n = np.shape(plain(args[0])) if args else ()
    if not n:
        raise ValueError("reduce='mean' weights each shard by its number of records, the "
                         "length of its first argument, and this shard's first argument "
                         "has none (a scalar)")
    return n[0]


def _add(a: Any, b: Any) -> Any:
    """The sum of two parts (in this order)."""
    grads = [y if x is None else x if y is None else x + y for x, y in zip(a[1], b[1])]
    sigs = {k: list(v) for k, v in a[3].items()}
    for k, v in b[3].items():
        sigs.setdefault(k, []).extend(v)
    return a[0] + b[0], grads, a[2] + b[2], sigs


def sum_parts(*parts: Any) -> Any:
    total = parts[0]
    for p in parts[1:]:
        total = _add(total, p)
    return total


_FAN_IN = 8                 # parts added by one task of the summation tree
_INLINE_BYTES = 4 << 20     # a model this size, times the tasks, travels inside them


def _gradient(client: Any, loss: Any, model: Any, parts: Any, reduce: Any,
              timeout: Any = None, where: str = 'td.withgradient') -> Any:
    """The value and gradient over all ``parts`` for ``model`` (``loss``: a ``ShardLoss`` or
    its future): one task per part, a summation tree on the workers if there are many,
    one result to the client.  ``where`` starts the messages of errors."""
    token = uuid.uuid4().hex[:12]
    # A small model goes inside the tasks; a large one in a task of its own, which the
    # others fetch (the same bytes, but one more round trip through the scheduler).
    sent = model
    if sum(getattr(x, 'nbytes', 8) for x in flatten(model)[0]) * len(parts) > _INLINE_BYTES:
        sent = client.submit(same_object, model, key=f'tracked-model-{token}')
    level = tasks = [client.submit(gradient_part, loss, sent, p.future, p.many, p.names,
                                   reduce, key=f'tracked-gradient-{i}-{token}')
                     for i, p in enumerate(parts)]
    count = itertools.count()
    while len(level) > _FAN_IN:  # in shard order: the sum does not depend on timing
        level = [client.submit(sum_parts, *level[i:i + _FAN_IN],
                               key=f'tracked-sum-{next(count)}-{token}')
                 for i in range(0, len(level), _FAN_IN)]
    value, flat, records, sigs = sum_parts(*_gather(client, level, timeout, where, parts, tasks))
    check_signatures(sigs)
    if reduce == 'mean':
        value = value / records
        flat = [None if g is None else g / records for g in flat]
    return value, Args((model,)).gradients(flat)[0]


def _gather(client: Any, futures: Any, timeout: Any, where: str, parts: Any,
            tasks: Any) -> Any:
    """``client.gather(futures)`` within ``timeout`` seconds (None: no limit), with Dask's
    failures said in terms of the ``parts`` (``tasks``: their gradients' futures)."""
    try:
        if timeout is not None:
            for f in as_completed(futures, timeout=timeout):
                if f.status != 'finished':
                    break                          # gather raises its error now
        return client.gather(futures)
    except ShardError as e:                        # raised on a worker: say when
        raise ShardError(f'{where}: {e}') from e
    except DaskTimeout:
        client.cancel(futures)
        raise StepTimeoutError(
            f'{where}: not finished within timeout={timeout} s; its tasks were cancelled '
            f'(a loss still running keeps its worker\'s thread until it returns: '
            f'client.restart() ends it)') from None
    except KilledWorker as e:
        owners = {f.key: p for f, p in zip(tasks, parts)} | {p.future.key: p for p in parts}
        part = owners.get(e.task)
        if part is None:
            raise
        names = part.labels()
        who = ' or '.join(names) + ' (one task)' * (len(names) > 1)
        raise ShardError(
            f'{where}: {who} killed every worker that ran it: {e.allowed_failures + 1} '
            f'died running it, the last {e.last_worker.address} (Dask\'s '
            f'distributed.scheduler.allowed-failures is {e.allowed_failures}). A loss '
            f'that ends its process does this: os._exit, a crash in compiled code, '
            f'running out of memory.') from e
    except CancelledError as e:
        lost = lost_parts(parts, str(e))
        if not lost:
            raise
        raise ShardError(
            f'{where}: the cluster lost the data of {shard_names(lost)}: every worker that held '
            f'it died, and Dask cannot compute data sent by client.scatter again. Scatter '
            f'it again, or pass the shards themselves or td.place(client, shards), whose '
            f'tasks Dask runs again.') from e


def lost_parts(parts: Any, why: str, wait: float = 2.0) -> list[str]:
    """The names of the shards whose data the cluster lost.  The futures learn it from the
    scheduler a moment after the task that needed them was cancelled, so their states
    are read again for up to ``wait`` seconds; a task cancelled for lost dependencies
    whose shards still look fine names them all."""
    deadline = time.monotonic() + wait
    while True:
        lost = [n for p in parts if p.future.status in ('lost', 'cancelled')
                for n in p.labels()]
        if lost or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if not lost and 'lost dependencies' in why:
        lost = [n for p in parts for n in p.labels()]
    return lost


# tape or adtype -> (client, loss, its future)
_SENT: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Any]] = weakref.WeakKeyDictionary()


def send_model(client: Any, loss: Any, tape: Any, adtype: Any) -> Any:
    """The ``ShardLoss`` for the workers: itself (it travels inside the tasks) for the eager
    tape; else a future, so that each worker unpickles a tape (compiling it) or keeps
    an ``AutoCompiled``'s tapes once, for every call with the same objects.  The
    future is a task (not ``client.scatter``'s data, which is gone when every worker
    holding it dies): Dask computes it again, and the tape with it."""
    engine = ShardLoss(loss, tape, adtype)
    key = tape if tape is not None else adtype
    if key is None:
        return engine
    hit = _SENT.get(key)
    if hit is None or hit[0] is not client or hit[1] is not loss or \
            hit[2].status in ('error', 'cancelled'):          # e.g. client.restart()
        hit = _SENT[key] = (client, loss, client.submit(
            same_object, engine, key=f'tracked-loss-{uuid.uuid4().hex[:12]}'))
    return hit[2]


def check_reduce(reduce: Any) -> Any:
    if reduce not in ('sum', 'mean'):
        raise ValueError(f"reduce must be 'sum' or 'mean', got {reduce!r}")


def check_model(model: Any, who: str) -> None:
    # Said here, before Dask wraps the refusal to pickle in its own serialisation error.
    if any(isinstance(a, Tracked) for a in leaves(model, _is_value)):
        raise TypeError(f'td.{who}: the model holds tracked values (tr.param\'s), which '
                        f'cannot travel to the workers; pass the plain model, tr.data(model): '
                        f'the workers differentiate it')


def _is_value(x: Any) -> bool:
    return isinstance(x, (Tracked, np.ndarray, float, int))


def withgradient(client: Any, loss: Any, model: Any, shards: Any, *, reduce: str = 'sum',
                 tape: Any = None, adtype: Any = None, timeout: float | None = None) -> Any:
    """``withgradient(client, loss, model, shards, reduce='sum') -> (val, grad)``: the sum
    over the shards of ``loss(model, *shard)`` and its gradient, shaped like ``model``
    as ``tr.gradient``'s is, computed on the workers next to the shards.

    ``reduce='mean'`` weights each shard by its number of records (the length of its
    first argument) and divides by the total: for a loss that is a mean over its
    records, the mean over all of them, as on the concatenated data.  ``tape=`` (a
    ``tr.GradientTape(loss, model, *shard, wrt=(0,))``, compiled or not) or
    ``adtype=`` (e.g. ``tr.AutoCompiled()``) choose how the workers differentiate, as
    in ``tr.train``.  Auxiliary outputs of the loss are dropped.  A shard that fails,
    kills every worker that runs it, or whose shapes differ from another's past the
    first axis, raises an error naming it (``ShardError``, ``ValueError``); with
    ``timeout=`` (seconds), a result that takes longer raises ``StepTimeoutError``.
    See the module docstring for the forms ``shards`` may take.

    >>> import numpy as np, tracked.distributed as td
    >>> from dask.distributed import Client
    >>> x = np.arange(6.0)
    >>> with Client(processes=False, n_workers=1, threads_per_worker=1,
    ...             dashboard_address=':0') as client:
    ...     val, g = td.withgradient(client, lambda w, x: np.sum((w * x) ** 2), 1.0,
    ...                              [(x[:3],), (x[3:],)])
    >>> val, g                          # sum(x**2), sum(2 * x**2)
    (55.0, np.float64(110.0))
    """
    check_reduce(reduce)
    check_model(model, 'withgradient')
    parts = placed(client, shards)
    return api.WithGradient(*_gradient(client, send_model(client, loss, tape, adtype), model, parts,
                                       reduce, timeout))
