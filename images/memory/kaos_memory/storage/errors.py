"""The one error family every store raises: driver errors are wrapped at the store's edge.

``StorageError`` is the root: the store could not do what was asked. ``StorageUnavailable``
is the temporary case (the backend does not answer, a connection or lock timed out, the
model behind the vector index is down): retrying later can succeed. Anything else a store
raises is a bug, and the service lets it become a 500 instead of a ``degraded`` answer.
``UnusableAnswer`` is the model's fault, not the store's: its extraction answer could not be
read, also after the retries, and calling again later would likely answer the same.
The message names the store and the operation only; the driver's error stays chained as
``__cause__`` for the log, and never reaches a client.
"""

from __future__ import annotations

from kaos_memory.errors import StorageError, StorageUnavailable

__all__ = ["StorageError", "StorageUnavailable", "UnusableAnswer"]


class UnusableAnswer(StorageError):
    """The model's extraction answers were unusable (not Mem0's JSON), retries included."""
