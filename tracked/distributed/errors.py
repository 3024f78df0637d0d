"""The errors of ``tracked.distributed``."""


class ShardError(RuntimeError):
    """A shard's loss or gradient failed on its worker, killed every worker that ran it,
    or its data was lost; the message names the shard."""


class StepTimeoutError(TimeoutError):
    """A step of ``train``, or a ``withgradient`` call, did not finish within its
    ``timeout=``; the message names the step and the timeout."""


class DivergedError(RuntimeError):
    """``train``'s replicas, which apply the same updates to the same values, hold
    parameters that differ from the client's copy; the message names the step."""
