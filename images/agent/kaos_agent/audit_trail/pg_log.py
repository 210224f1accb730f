"""The audit trail in the task store's PostgreSQL database (``TASK_STORE_TYPE=external``),
shared by every replica of the Agent, on a small pool of its own (``kaos_agent.a2a.pg_tables``).

Imported only when configured (``kaos_agent.audit_trail.stores``). The table is created at start
under a transaction-scoped advisory lock (replicas starting together do not race on it).
The DSN is never logged: a driver error is logged by class and SQLSTATE only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaos_agent.a2a.pg_tables import PgTables, driver_errors
from kaos_agent.audit_trail import sql

POOL_SIZE = 2


class PostgresAuditLog(sql.SqlAuditLog):
    def __init__(self, dsn: str, *, start_timeout: float = 30.0) -> None:
        super().__init__()
        self.start_timeout = start_timeout
        self._tables = PgTables(dsn, what="audit log", size=POOL_SIZE)

    def __repr__(self) -> str:  # never the DSN
        return "PostgresAuditLog()"

    async def start(self) -> None:
        with driver_errors("audit log", "start"):
            await self._tables.start(sql.TABLE, sql.PG_SCHEMA, self.start_timeout)

    async def close(self) -> None:
        await self._tables.close()

    async def execute(self, operation: str, statement: str, params: tuple[Any, ...]) -> int:
        with driver_errors("audit log", operation):
            async with self._tables.transaction() as cur:
                await cur.execute(statement, params)
                return cur.rowcount

    async def fetch(
        self, operation: str, statement: str, params: tuple[Any, ...]
    ) -> list[Sequence[Any]]:
        with driver_errors("audit log", operation):
            async with self._tables.transaction() as cur:
                await cur.execute(statement, params)
                return list(await cur.fetchall())
