"""A2A tasks in PostgreSQL (``TASK_STORE_TYPE=external``): shared by every replica of the
Agent, so any of them answers for any task and a finished task outlives its pod.

psycopg 3 on the event loop, with a small pool; imported only when this store is
configured (``kaos_agent.a2a.stores``), so an agent on another store never loads it.
The schema is created at start under a transaction-scoped advisory lock, so replicas
starting together do not race on it. A transition reads the row ``FOR UPDATE`` and
writes it back in one transaction; a claim of lapsed tasks (and the failing of those
resumed too often) takes its rows ``SKIP LOCKED`` in one statement, so replicas sweeping
together share the work and never claim the same task. A hand-over (``release``) notifies
``RELEASE_CHANNEL``, so the other replicas claim its tasks at once rather than at their next
beat. A cancel notifies ``CANCEL_CHANNEL`` with
the task's id (delivered at commit): the replica running it listens on a dedicated
connection (reconnected with backoff after a loss) and stops the run; the bounded poll
of ``cancel_requested`` (``kaos_agent.a2a.runs``) covers notifications missed meanwhile.
The DSN is never logged: a driver error is logged by class and SQLSTATE only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from a2a.types import a2a_pb2 as pb
from kaos_core.backoff import capped_backoff

from kaos_agent.a2a import sql_store as sql
from kaos_agent.a2a.pg_tables import PgTables, driver_errors
from kaos_agent.a2a.tasks import (
    CLAIM_LIMIT,
    MAX_RESUMES,
    SWEEP_LIMIT,
    Cancel,
    Claim,
    Listing,
    TaskStore,
    Transition,
    canceled,
    failed,
    resume_limit,
    visible,
)

log = logging.getLogger(__name__)

CANCEL_CHANNEL = "kaos_agent_task_cancel"
RELEASE_CHANNEL = "kaos_agent_task_release"
POOL_SIZE = 4


def _driver_errors(operation: str) -> contextlib.AbstractContextManager[None]:
    return driver_errors("task store", operation)


class PostgresTaskStore(TaskStore):
    shared = True

    def __init__(
        self,
        dsn: str,
        *,
        lease_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        start_timeout: float = 30.0,
        max_resumes: int = MAX_RESUMES,
    ) -> None:
        self._dsn = dsn
        self.max_resumes = max_resumes
        self.start_timeout = start_timeout
        self.lease_seconds = lease_seconds
        self.clock = clock
        self._tables = PgTables(dsn, what="task store", size=POOL_SIZE)

    def __repr__(self) -> str:  # never the DSN
        return "PostgresTaskStore()"

    async def start(self) -> None:
        async def migrate(cur: psycopg.AsyncCursor[Any]) -> None:
            for name, declaration in sql.added_columns("BYTEA"):
                await cur.execute(
                    f"ALTER TABLE {sql.TASKS} ADD COLUMN IF NOT EXISTS {name} {declaration}"
                )

        with _driver_errors("start"):
            await self._tables.start(
                sql.TASKS, sql.schema("BYTEA"), self.start_timeout, migrate=migrate
            )

    async def close(self) -> None:
        await self._tables.close()

    def _transaction(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncCursor[Any]]:
        return self._tables.transaction()

    async def create(self, task: pb.Task, *, principal: str | None, runner: str) -> None:
        params = sql.insert_params(
            task,
            principal=principal,
            runner=runner,
            now=self.clock(),
            lease_seconds=self.lease_seconds,
        )
        with _driver_errors("create"):
            async with self._transaction() as cur:
                await cur.execute(sql.INSERT, params)

    async def get(self, task_id: str, principal: str | None) -> pb.Task | None:
        with _driver_errors("get"):
            async with self._transaction() as cur:
                await cur.execute(sql.SELECT_ONE, (task_id,))
                row = await cur.fetchone()
        if row is None or not visible(row[0], principal):
            return None
        return sql.decode(row[1])

    async def list_tasks(self, listing: Listing) -> tuple[list[pb.Task], int]:
        where, params = sql.list_query(listing)
        limit = listing.limit
        page, count = sql.list_statements(where)
        with _driver_errors("list"):
            async with self._transaction() as cur:
                await cur.execute(page, (*params, limit))
                rows = await cur.fetchall()
                await cur.execute(count, params)
                total = await cur.fetchone()
        return [sql.decode(r[0]) for r in rows], int(total[0]) if total else 0

    async def _change(
        self,
        cur: psycopg.AsyncCursor[Any],
        task_id: str,
        change: Transition,
        *,
        principal: str | None = None,
        check_owner: bool = False,
        cancel: bool = False,
    ) -> tuple[pb.Task | None, bool]:
        await cur.execute(sql.SELECT_ONE + " FOR UPDATE", (task_id,))
        task, params = sql.transition(
            await cur.fetchone(),
            task_id,
            change,
            now=self.clock(),
            principal=principal,
            check_owner=check_owner,
            cancel=cancel,
        )
        if params is None:
            return task, False
        await cur.execute(sql.UPDATE, params)
        return task, True

    async def finish(self, task_id: str, change: Transition) -> pb.Task | None:
        with _driver_errors("finish"):
            async with self._transaction() as cur:
                task, _ = await self._change(cur, task_id, change)
        return task

    async def cancel(self, task_id: str, principal: str | None) -> Cancel:
        with _driver_errors("cancel"):
            async with self._transaction() as cur:
                task, done = await self._change(
                    cur, task_id, canceled, principal=principal, check_owner=True, cancel=True
                )
                if done:
                    await cur.execute("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, task_id))
        return Cancel(task, done)

    async def renew(self, runner: str, task_ids: Sequence[str]) -> None:
        if not task_ids:
            return
        statement = (
            f"UPDATE {sql.TASKS} SET lease_until = %s WHERE runner = %s"
            " AND lease_until IS NOT NULL AND id = ANY(%s)"
        )
        with _driver_errors("renew"):
            async with self._transaction() as cur:
                until = self.clock() + self.lease_seconds
                await cur.execute(statement, (until, runner, list(task_ids)))

    async def cancel_requested(self, task_ids: Sequence[str]) -> list[str]:
        if not task_ids:
            return []
        statement = f"SELECT id FROM {sql.TASKS} WHERE cancel_requested AND id = ANY(%s)"
        with _driver_errors("cancel_requested"):
            async with self._transaction() as cur:
                await cur.execute(statement, (list(task_ids),))
                return [r[0] for r in await cur.fetchall()]

    async def checkpoint(self, task_id: str, runner: str, data: bytes) -> bool:
        with _driver_errors("checkpoint"):
            async with self._transaction() as cur:
                await cur.execute(sql.CHECKPOINT, (data, self.clock(), task_id, runner))
                return cur.rowcount > 0

    async def release(self, runner: str, task_ids: Sequence[str]) -> int:
        now, count = self.clock(), 0
        with _driver_errors("release"):
            async with self._transaction() as cur:
                for task_id in task_ids:
                    await cur.execute(sql.RELEASE, (now, now, task_id, runner))
                    count += cur.rowcount
                if count:
                    await cur.execute("SELECT pg_notify(%s, '')", (RELEASE_CHANNEL,))
        return count

    async def claim_lapsed(self, runner: str, limit: int = CLAIM_LIMIT) -> list[Claim]:
        params = sql.claim_params(
            runner,
            now=self.clock(),
            lease_seconds=self.lease_seconds,
            max_resumes=self.max_resumes,
            limit=limit,
        )
        with _driver_errors("claim_lapsed"):
            async with self._transaction() as cur:
                await cur.execute(sql.claim_statement("FOR UPDATE SKIP LOCKED"), params)
                return sql.claimed(await cur.fetchall())

    async def owned(self, task_id: str) -> tuple[pb.Task, str | None] | None:
        with _driver_errors("owned"):
            async with self._transaction() as cur:
                await cur.execute(sql.SELECT_ONE, (task_id,))
                row = await cur.fetchone()
        return None if row is None else (sql.decode(row[1]), row[0])

    async def pause(
        self, task_id: str, runner: str, change: Transition, checkpoint: bytes, decide_by: float
    ) -> bool:
        with _driver_errors("pause"):
            async with self._transaction() as cur:
                await cur.execute(sql.SELECT_HELD + " FOR UPDATE", (task_id, runner))
                row = await cur.fetchone()
                params = sql.paused_params(
                    row, task_id, change, now=self.clock(), data=checkpoint, decide_by=decide_by
                )
                if params is not None:
                    await cur.execute(sql.PAUSE, params)
        return row is not None

    async def take_paused(self, task_id: str, runner: str, change: Transition) -> Claim | None:
        with _driver_errors("take_paused"):
            async with self._transaction() as cur:
                await cur.execute(sql.SELECT_PAUSED + " FOR UPDATE", (task_id,))
                claim, params = sql.resumed(
                    await cur.fetchone(),
                    task_id,
                    change,
                    runner=runner,
                    now=self.clock(),
                    lease_seconds=self.lease_seconds,
                )
                if params is not None:
                    await cur.execute(sql.RESUME, params)
        return claim

    async def paused_due(self, now: float, limit: int = CLAIM_LIMIT) -> list[str]:
        with _driver_errors("paused_due"):
            async with self._transaction() as cur:
                await cur.execute(sql.DUE, (now, limit))
                return [r[0] for r in await cur.fetchall()]

    async def expire_leases(self, limit: int = SWEEP_LIMIT) -> int:
        change = failed(resume_limit(self.max_resumes))
        params = (self.clock(), self.max_resumes, limit)
        with _driver_errors("expire_leases"):
            async with self._transaction() as cur:
                await cur.execute(sql.EXPIRED + " FOR UPDATE SKIP LOCKED", params)
                ids = [r[0] for r in await cur.fetchall()]
                count = 0
                for task_id in ids:
                    _, done = await self._change(cur, task_id, change)
                    count += done
        return count

    async def sweep(self, retention_seconds: float, limit: int = SWEEP_LIMIT) -> int:
        with _driver_errors("sweep"):
            async with self._transaction() as cur:
                await cur.execute(sql.SWEEP, (self.clock() - retention_seconds, limit))
                return cur.rowcount

    async def count_working(self) -> int:
        """The whole Agent's working tasks (``kaos_agent.load.CountsWorking``)."""
        with _driver_errors("count_working"):
            async with self._transaction() as cur:
                await cur.execute(sql.COUNT_WORKING)
                row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def try_lease(self, name: str, holder: str, seconds: float) -> bool:
        now = self.clock()
        with _driver_errors("try_lease"):
            async with self._transaction() as cur:
                await cur.execute(sql.TAKE_LEASE, (name, holder, now + seconds, now))
                return await cur.fetchone() is not None

    async def listen_cancels(
        self, on_cancel: Callable[[str], None], on_release: Callable[[], None] | None = None
    ) -> None:
        attempt = 0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CANCEL_CHANNEL}")
                    if on_release is not None:
                        await conn.execute(f"LISTEN {RELEASE_CHANNEL}")
                    attempt = 0
                    async for notice in conn.notifies():
                        if notice.channel == RELEASE_CHANNEL and on_release is not None:
                            on_release()
                        elif notice.channel == CANCEL_CHANNEL:
                            on_cancel(notice.payload)
            except psycopg.Error as exc:
                log.warning(
                    "task cancel listener lost its connection",
                    extra={"error": type(exc).__name__, "sqlstate": exc.sqlstate},
                )
            await asyncio.sleep(capped_backoff(attempt, base=0.5, cap=30.0))
            attempt += 1
