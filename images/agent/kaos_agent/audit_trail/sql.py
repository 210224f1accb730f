"""The audit trail's table, shared by its SQLite and PostgreSQL logs: the schema of each
dialect, the statements in psycopg's parameter style (SQLite's ``?`` by ``qmark``), an
entry to and from its row, and the log's operations on them (``SqlAuditLog``).

Rows are kept in call order by their start time, ties broken by the row's serial id (the
order they were written in). A query asks for the latest ``limit`` matches newest first
(the index on ``at`` answers it without a sort of the whole table) and turns them around.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, cast

from kaos_agent.audit.log import AuditEntry, AuditLog, AuditQuery, Kind

TABLE = "kaos_agent_audit"

# Every column but the id, in the order of ``row`` and ``entry``.
COLUMNS = (
    "at",
    "kind",
    "name",
    "outcome",
    "task",
    "session",
    "identity",
    "principal",
    "arguments_digest",
    "arguments",
    "duration_ms",
    "decided_by",
)
_COLUMN_TYPES = (
    " at DOUBLE PRECISION NOT NULL,"
    " kind TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " outcome TEXT NOT NULL,"
    " task TEXT,"
    " session TEXT,"
    " identity TEXT,"
    " principal TEXT,"
    " arguments_digest TEXT,"
    " arguments TEXT,"
    " duration_ms DOUBLE PRECISION,"
    " decided_by TEXT)"
)
_INDEXES = (
    f"CREATE INDEX IF NOT EXISTS {TABLE}_at ON {TABLE} (at, id)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_task ON {TABLE} (task, at, id)",
)
PG_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGSERIAL PRIMARY KEY," + _COLUMN_TYPES,
    *_INDEXES,
)
SQLITE_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY AUTOINCREMENT," + _COLUMN_TYPES,
    *_INDEXES,
)
INSERT = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
SWEEP = f"DELETE FROM {TABLE} WHERE at < %s"


def qmark(statement: str) -> str:
    return statement.replace("%s", "?")


def row(entry: AuditEntry) -> tuple[Any, ...]:
    return (
        entry.at,
        entry.kind,
        entry.name,
        entry.outcome,
        entry.task,
        entry.session,
        entry.identity,
        entry.user,
        entry.arguments_digest,
        entry.arguments,
        entry.duration_ms,
        entry.decided_by,
    )


def entry(values: Sequence[Any]) -> AuditEntry:
    return AuditEntry(
        at=float(values[0]),
        kind=cast(Kind, values[1]),
        name=values[2],
        outcome=values[3],
        task=values[4],
        session=values[5],
        identity=values[6],
        user=values[7],
        arguments_digest=values[8],
        arguments=values[9],
        duration_ms=None if values[10] is None else float(values[10]),
        decided_by=values[11],
    )


def select(query: AuditQuery) -> tuple[str, tuple[Any, ...]]:
    """The statement of the latest ``query.limit`` matching rows, newest first, and its
    parameters."""
    where: list[str] = []
    params: list[Any] = []
    for clause, value in (
        ("task = %s", query.task),
        ("principal = %s", query.user),
        ("at >= %s", query.since),
        ("at < %s", query.until),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    statement = (
        f"SELECT {', '.join(COLUMNS)} FROM {TABLE}{condition} ORDER BY at DESC, id DESC LIMIT %s"
    )
    return statement, (*params, query.limit)


class SqlAuditLog(AuditLog):
    """The trail in a table of either dialect: each log runs these statements its way
    (``execute``, ``fetch``: psycopg's ``%s`` placeholders, the operation's name for the
    log of a failure)."""

    async def write(self, entry: AuditEntry) -> None:
        await self.execute("write", INSERT, row(entry))

    async def select(self, query: AuditQuery) -> list[AuditEntry]:
        statement, params = select(query)
        rows = await self.fetch("query", statement, params)
        return [entry(r) for r in reversed(rows)]

    async def sweep(self, before: float) -> int:
        return await self.execute("sweep", SWEEP, (before,))

    @abc.abstractmethod
    async def execute(self, operation: str, statement: str, params: tuple[Any, ...]) -> int:
        """Run ``statement`` in a transaction of its own; the rows it changed."""

    @abc.abstractmethod
    async def fetch(
        self, operation: str, statement: str, params: tuple[Any, ...]
    ) -> list[Sequence[Any]]:
        """The rows ``statement`` selects."""
