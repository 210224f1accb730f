"""The delivery log in the task store's PostgreSQL database (``TASK_STORE_TYPE=external``),
shared by every replica of the Agent, on a small pool of its own.

Imported only when configured (``kaos_agent.triggers.stores``). The table is created at
start under a transaction-scoped advisory lock (replicas starting together do not race
on it); an admission takes the trigger's advisory lock for its transaction, so replicas
admitting for one trigger at once count one after the other. The DSN is never logged: a
driver error is logged by class and SQLSTATE only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from kaos_agent.a2a.pg_tables import PgTables, driver_errors
from kaos_agent.triggers import deliveries as d

log = logging.getLogger(__name__)

POOL_SIZE = 2
_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"


def _driver_errors(operation: str) -> contextlib.AbstractContextManager[None]:
    return driver_errors("trigger delivery log", operation)


class PostgresDeliveryLog(d.DeliveryLog):
    def __init__(
        self, dsn: str, *, clock: Callable[[], float] = time.time, start_timeout: float = 30.0
    ) -> None:
        self._dsn = dsn
        self.clock = clock
        self.start_timeout = start_timeout
        self._tables = PgTables(dsn, what="delivery log", size=POOL_SIZE)

    def __repr__(self) -> str:  # never the DSN
        return "PostgresDeliveryLog()"

    async def start(self) -> None:
        with _driver_errors("start"):
            await self._tables.start(d.TABLE, d.SCHEMA, self.start_timeout)

    async def close(self) -> None:
        await self._tables.close()

    def _transaction(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncCursor[Any]]:
        return self._tables.transaction()

    async def admit(self, delivery: d.Delivery, *, max_per_minute: int) -> d.Admission:
        name, now = delivery.trigger, self.clock()
        with _driver_errors("admit"):
            async with self._transaction() as cur:
                await cur.execute(_LOCK, (f"{d.TABLE}:{name}",))
                await cur.execute(d.FORGET_EXPIRED, (name, now - d.REPLAY_SECONDS))
                await cur.execute(d.SEEN, (name, delivery.id, delivery.digest))
                if await cur.fetchone() is not None:
                    return d.Admission(replayed=True)
                await cur.execute(d.RECENT, (name, now - d.RATE_WINDOW_SECONDS))
                row = await cur.fetchone()
                assert row is not None  # an aggregate has one row
                refusal = d.over_rate(row[0], row[1], max_per_minute, now)
                if refusal is not None:
                    return refusal
                await cur.execute(d.INSERT, (name, delivery.id, delivery.digest, now))
                inserted = cur.rowcount == 1
        return d.Admission(admitted=inserted, replayed=not inserted)

    async def forget(self, delivery: d.Delivery) -> None:
        with _driver_errors("forget"):
            async with self._transaction() as cur:
                await cur.execute(d.FORGET, (delivery.trigger, delivery.id))
