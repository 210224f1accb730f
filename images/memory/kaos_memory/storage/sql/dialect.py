"""What a SQL backend supplies, and the one transaction every storage function works in.

A ``Dialect`` opens and closes the driver's connections, turns the project's ``%s``
placeholders into the driver's style, runs a transaction and takes the per-key lock. A
``Tx`` is one open transaction handed to the storage functions, with the clock read once
when it began: every row a call writes carries the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from kaos_memory.clock import iso


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def execute(self, query: Any, params: Any = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


# One statement with ``%s`` placeholders and its parameters.
Statement: TypeAlias = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class ColumnTypes:
    """The column types the two dialects spell differently."""

    identity: str
    bigint: str
    boolean: str
    double: str
    # The stored size in bytes of a text column (``{}`` is the column): the bytes quota.
    octets: str = "octet_length({})"


@runtime_checkable
class LoopReads(Protocol):
    """A dialect that also reads on the event loop (``Dialect.read`` without the thread
    hop), between ``open_async`` and ``close_async``."""

    async def open_async(self) -> None: ...

    async def close_async(self) -> None: ...

    async def read_async(self, statements: Sequence[Statement]) -> list[list[Any]]: ...


class Dialect(Protocol):
    """What a SQL backend provides to ``SqlConversationStore``."""

    threads: int
    types: ColumnTypes

    def open(self) -> None: ...

    def close(self) -> None: ...

    def sql(self, text: str) -> str:
        """``text`` with ``%s`` placeholders turned into the driver's style."""
        ...

    def transaction(self) -> AbstractContextManager[Cursor]: ...

    def read(self, statements: Sequence[Statement]) -> list[list[Any]]:
        """Run read-only ``statements`` as one unit, every row of each: sent together where
        the driver can (PostgreSQL's pipeline: one wait on the server, not one per
        statement plus ``BEGIN`` and ``COMMIT``)."""
        ...

    def lock_schema(self, cur: Cursor) -> None:
        """Serialise schema migrations of replicas starting at once (inside the transaction)."""
        ...

    def lock_key(self, cur: Cursor, key: str) -> None:
        """Serialise fold and digest work on one key (across replicas where possible)."""
        ...

    def try_lock_key(self, cur: Cursor, key: str) -> bool:
        """``lock_key`` if nobody holds it now; whether it is held by this transaction."""
        ...

    def reclaim(self) -> None:
        """After an erasure, outside any transaction: make the deleted rows unreadable in
        the files where the backend can (see each dialect)."""
        ...


class WriterBusy(Exception):
    """Another connection holds the database's write lock: no transaction was begun."""


@runtime_checkable
class LoopWrites(Dialect, Protocol):
    """A dialect that can also run a short write on the event loop's own connection, at
    once or not at all (between ``open_async`` and ``close_async``)."""

    def transaction_now(self) -> AbstractContextManager[Cursor]:
        """``Dialect.transaction`` on the loop's connection; ``WriterBusy`` on entering
        when the write lock is held elsewhere, instead of waiting for it."""
        ...

    def checkpoint(self) -> None:
        """Copy the log's committed pages into the database (on the store's thread: it
        may wait on the disk), which the loop's connection never does by itself."""
        ...


@dataclass(frozen=True)
class Tx:
    """One open transaction: its cursor, its dialect, and the time it began."""

    cur: Cursor
    dialect: Dialect
    now: float

    @property
    def now_iso(self) -> str:
        return iso(self.now)

    def execute(self, text: str, params: tuple[Any, ...] = ()) -> Cursor:
        """Run one statement (``%s`` placeholders); the cursor, for its rows and rowcount."""
        self.cur.execute(self.dialect.sql(text), params)
        return self.cur

    def one(self, text: str, params: tuple[Any, ...] = ()) -> Any:
        return self.execute(text, params).fetchone()

    def all(self, text: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return self.execute(text, params).fetchall()

    def lock_key(self, key: str) -> None:
        self.dialect.lock_key(self.cur, key)

    def try_lock_key(self, key: str) -> bool:
        return self.dialect.try_lock_key(self.cur, key)
