"""The usage ledger in the task store's PostgreSQL database (``TASK_STORE_TYPE=external``),
shared by every replica of the Agent, on a small pool of its own
(``kaos_agent.a2a.pg_tables``).

Imported only when configured (``kaos_agent.usage.stores``). A run's tokens are added in
one upsert, so replicas adding to one row at once each add theirs. The DSN is never
logged: a driver error is logged by class and SQLSTATE only.
"""

from __future__ import annotations

import contextlib

from kaos_agent.a2a.pg_tables import PgTables, driver_errors
from kaos_agent.usage import ledger as u

POOL_SIZE = 2


def _driver_errors(operation: str) -> contextlib.AbstractContextManager[None]:
    return driver_errors("usage ledger", operation)


class PostgresLedger(u.Ledger):
    def __init__(self, dsn: str, *, start_timeout: float = 30.0) -> None:
        self.start_timeout = start_timeout
        self._tables = PgTables(dsn, what="usage ledger", size=POOL_SIZE)

    def __repr__(self) -> str:  # never the DSN
        return "PostgresLedger()"

    async def start(self) -> None:
        with _driver_errors("start"):
            await self._tables.start(u.TABLE, u.SCHEMA, self.start_timeout)

    async def close(self) -> None:
        await self._tables.close()

    async def add(
        self, agent: str, principal: str, day: str, input_tokens: int, output_tokens: int
    ) -> None:
        with _driver_errors("add"):
            async with self._tables.transaction() as cur:
                await cur.execute(u.ADD, (agent, principal, day, input_tokens, output_tokens))

    async def spent(self, agent: str, principal: str, day: str) -> u.Spent:
        with _driver_errors("spent"):
            async with self._tables.transaction() as cur:
                await cur.execute(u.SPENT, (principal, agent, day))
                row = await cur.fetchone()
        assert row is not None  # an aggregate has one row
        return u.Spent(agent=int(row[0]), principal=int(row[1]))

    async def query(
        self, agent: str, since: str, until: str, principal: str | None = None
    ) -> list[u.UsageRow]:
        with _driver_errors("query"):
            async with self._tables.transaction() as cur:
                await cur.execute(u.QUERY, (agent, since, until, principal, principal))
                rows = await cur.fetchall()
        return [u.UsageRow(*row) for row in rows]

    async def sweep(self, before: str) -> None:
        with _driver_errors("sweep"):
            async with self._tables.transaction() as cur:
                await cur.execute(u.SWEEP, (before,))
