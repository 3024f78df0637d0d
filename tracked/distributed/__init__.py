"""Data-parallel gradients and training on ``dask.distributed`` (an optional extra).

The loss of a data set split into shards is the sum of the shards' losses, so its
gradient is the sum of theirs.  ``withgradient(client, loss, model, shards)`` computes
each shard's value and gradient in a task on the worker that holds the shard and adds
them up in a fixed order (the result does not depend on which worker finishes
first; many parts are summed on the workers first).  ``train`` keeps a replica of the
model and the optimiser state on the workers, next to their shards, for the whole
call (Dask actors): a step sends only the summed gradient out and each replica's
gradient back, one round trip, and every replica applies the same update.  Dask does
the scheduling, the data placement and the recovery: a task whose worker dies is run
again on any live worker, even when every worker died and the nanny started new ones,
and a replica lost with its worker is made again from the last completed step; a shard
that kills every worker it runs on (Dask's ``distributed.scheduler.allowed-failures``
+ 1 of them) raises ``ShardError``, and ``timeout=`` bounds a step.

Shards are given as a sequence (each shard a tuple of arguments, or one array), as
futures of such shards, as a ``dask.array`` (or a tuple of them: the blocks along
the first axis are the shards) or as a ``dask.bag`` whose items are shards.
In-memory shards travel inside their tasks, as ``dask.array.from_array``'s blocks
do, so Dask can send a shard again when the worker that held it dies; data too large
for the client should come as futures or a dask collection that loads it on the
workers.  Install with ``pip install -e '.[distributed]'``.

Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes NumPy
code with many large temporaries -- an eager tape's -- up to twice as slow; a
cluster started after ``dask.config.set({'distributed.nanny.pre-spawn-environ.
MALLOC_TRIM_THRESHOLD_': None})`` keeps glibc's default (notebooks/06_distributed).

The modules: ``shards`` (placement), ``gradients`` (one gradient in tasks),
``replicas`` (the actors ``train`` keeps), ``training`` (``train``), ``errors``.
"""
try:
    import dask  # noqa: F401
    import distributed  # noqa: F401
except ImportError as e:            # an optional extra: say which, not just "no module"
    raise ImportError(
        f"tracked.distributed needs Dask's distributed scheduler, an optional extra: "
        f"pip install -e '.[distributed]' (or pip install 'dask[distributed]'). "
        f"({e})") from e

from .errors import DivergedError, ShardError, StepTimeoutError
from .gradients import withgradient
from .shards import Placed, place
from .training import train

__all__ = ['withgradient', 'train', 'place', 'Placed', 'ShardError', 'StepTimeoutError',
           'DivergedError']
