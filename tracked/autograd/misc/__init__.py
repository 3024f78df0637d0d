"""``tracked.autograd.misc``: autograd's ``flatten`` and its optimisers (``optimizers``)."""
from .flatten import flatten

__all__ = ['flatten']
