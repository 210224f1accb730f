"""The usage ledger in the task store's SQLite file (``TASK_STORE_TYPE=local``), on a
connection of its own (WAL lets it write beside the task store's), one worker thread
(``kaos_agent.a2a.sqlite_thread``): each operation one statement, the event loop never
waiting on the disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kaos_agent.a2a.sqlite_thread import SqliteThread
from kaos_agent.usage import ledger as u


class SqliteLedger(u.Ledger):
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SqliteThread(path, what="usage ledger", thread="kaos-usage")

    async def start(self) -> None:
        await self._file.start(_schema)

    async def close(self) -> None:
        await self._file.close()

    async def add(
        self, agent: str, principal: str, day: str, input_tokens: int, output_tokens: int
    ) -> None:
        await self._file.run(_execute, u.ADD, (agent, principal, day, input_tokens, output_tokens))

    async def spent(self, agent: str, principal: str, day: str) -> u.Spent:
        return await self._file.run(_spent, principal, agent, day)

    async def query(
        self, agent: str, since: str, until: str, principal: str | None = None
    ) -> list[u.UsageRow]:
        return await self._file.run(_query, (agent, since, until, principal, principal))

    async def sweep(self, before: str) -> None:
        await self._file.run(_execute, u.SWEEP, (before,))


def _schema(db: sqlite3.Connection) -> None:
    for statement in u.SCHEMA:
        db.execute(statement)


def _execute(db: sqlite3.Connection, statement: str, params: tuple[object, ...]) -> None:
    db.execute(u.qmark(statement), params)


def _spent(db: sqlite3.Connection, principal: str, agent: str, day: str) -> u.Spent:
    total, mine = db.execute(u.qmark(u.SPENT), (principal, agent, day)).fetchone()
    return u.Spent(agent=int(total), principal=int(mine))


def _query(db: sqlite3.Connection, params: tuple[object, ...]) -> list[u.UsageRow]:
    return [u.UsageRow(*row) for row in db.execute(u.qmark(u.QUERY), params).fetchall()]
