"""The audit trail in the task store's SQLite file (``TASK_STORE_TYPE=local``), on a
connection of its own (WAL lets it write beside the task store's), on one worker thread
(``kaos_agent.a2a.sqlite_thread``): the event loop never waits on the disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kaos_agent.a2a.sqlite_thread import SqliteThread
from kaos_agent.audit_trail import sql


class SqliteAuditLog(sql.SqlAuditLog):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._file = SqliteThread(path, what="audit log", thread="kaos-audit")

    async def start(self) -> None:
        await self._file.start(_schema)

    async def close(self) -> None:
        await self._file.close()

    async def execute(self, operation: str, statement: str, params: tuple[Any, ...]) -> int:
        changed: int = await self._file.run(_execute, sql.qmark(statement), params)
        return changed

    async def fetch(
        self, operation: str, statement: str, params: tuple[Any, ...]
    ) -> list[Sequence[Any]]:
        rows: list[Sequence[Any]] = await self._file.run(_fetch, sql.qmark(statement), params)
        return rows


def _schema(db: sqlite3.Connection) -> None:
    for statement in sql.SQLITE_SCHEMA:
        db.execute(statement)


def _execute(db: sqlite3.Connection, statement: str, params: tuple[Any, ...]) -> int:
    return db.execute(statement, params).rowcount


def _fetch(db: sqlite3.Connection, statement: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
    return db.execute(statement, params).fetchall()
