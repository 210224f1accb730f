"""Which errors of Mem0, its vector stores and its model client become the storage family.

The long-term store wraps at its one edge (``store``): an error of Mem0, of Chroma or
PostgreSQL, or of the model client becomes ``StorageUnavailable`` when retrying later can
succeed (a connection, a timeout, a model that is down), ``UnusableAnswer`` when the
extraction model's answers could not be read, and ``StorageError`` otherwise. Anything
else is a bug and is left as it is.
"""

from __future__ import annotations

import sqlite3
import sys

from kaos_memory.storage.errors import StorageError, StorageUnavailable, UnusableAnswer

# How far down the chain of causes an error is looked for (Mem0 wraps what it raises).
_CHAIN = 5
_TEMPORARY: tuple[type[BaseException], ...] = (
    TimeoutError,
    ConnectionError,
    sqlite3.OperationalError,
)
# The model client's errors after which the same call may succeed later.
_OPENAI_TEMPORARY = (
    "APIConnectionError",
    "APITimeoutError",
    "RateLimitError",
    "InternalServerError",
)


def _loaded(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The exception classes ``names`` of ``module`` if it is loaded, else none: an error
    of a library cannot occur before the library is imported. This keeps psycopg (an
    optional driver, external mode only), Mem0 (which reads its environment when first
    imported, so only the store's start may import it) and its model client out of this
    module's imports."""
    loaded = sys.modules.get(module)
    if loaded is None:
        return ()
    return tuple(getattr(loaded, name) for name in names)


def _unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the backend or the model is down for now."""
    temporary: tuple[type[BaseException], ...] = (
        *_TEMPORARY,
        *_loaded("openai", *_OPENAI_TEMPORARY),
        *_loaded("psycopg", "OperationalError"),
    )
    seen: BaseException | None = exc
    for _ in range(_CHAIN):
        if seen is None:
            return False
        if isinstance(seen, temporary):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def raised_unusable(exc: BaseException) -> bool:
    """Whether ``exc`` is (or wraps, as Mem0's ``LLMError`` does) the ``UnusableAnswer``
    the checked extraction model (``llm.CheckedLlm``) raised into Mem0."""
    seen: BaseException | None = exc
    for _ in range(_CHAIN):
        if seen is None:
            return False
        if isinstance(seen, UnusableAnswer):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def wrap_longterm_error(exc: BaseException) -> StorageError | None:
    """The storage error for an error of Mem0, its vector store or its model client;
    ``None`` for anything else (a bug)."""
    known: tuple[type[BaseException], ...] = (
        sqlite3.Error,
        TimeoutError,
        ConnectionError,
        *_loaded("openai", "APIError"),
        *_loaded("mem0.exceptions", "MemoryError"),
        *_loaded("psycopg", "Error"),
    )
    module = type(exc).__module__ or ""
    if not isinstance(exc, known) and not module.startswith("chromadb"):
        return None
    if raised_unusable(exc):
        return UnusableAnswer("the extraction model gave no usable answer")
    if _unavailable(exc):
        return StorageUnavailable("long-term store unavailable")
    return StorageError("long-term store failed")
