"""A2A tasks in one SQLite file (``TASK_STORE_TYPE=local``): one replica, kept across its
restarts.

The standard library's ``sqlite3`` in WAL mode, on one connection owned by one worker
thread: every operation is one transaction run there, so the event loop never waits on
the disk and no two operations interleave. A restarted pod finds the working tasks of
its previous life with lapsed leases and resumes them from their checkpoints (or fails
those resumed too often) on its first beat.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar, cast

from a2a.types import a2a_pb2 as pb

from kaos_agent.a2a import sql_store as sql
from kaos_agent.a2a.sqlite_thread import SqliteThread
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

T = TypeVar("T")

log = logging.getLogger(__name__)


def _schema(db: sqlite3.Connection) -> None:
    for statement in sql.schema("BLOB"):
        db.execute(statement)
    have = {r[1] for r in db.execute(f"PRAGMA table_info({sql.TASKS})")}
    for name, declaration in sql.added_columns("BLOB"):
        if name not in have:
            db.execute(f"ALTER TABLE {sql.TASKS} ADD COLUMN {name} {declaration}")


class SqliteTaskStore(TaskStore):
    def __init__(
        self,
        path: Path,
        *,
        lease_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        max_resumes: int = MAX_RESUMES,
    ) -> None:
        self.path = path
        self.lease_seconds = lease_seconds
        self.max_resumes = max_resumes
        self.clock = clock
        self._file = SqliteThread(path, what="task store", thread="kaos-tasks")

    async def start(self) -> None:
        await self._file.start(_schema)

    async def close(self) -> None:
        await self._file.close()

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        return await self._file.run(work, *args)

    async def create(self, task: pb.Task, *, principal: str | None, runner: str) -> None:
        params = sql.insert_params(
            task,
            principal=principal,
            runner=runner,
            now=self.clock(),
            lease_seconds=self.lease_seconds,
        )
        await self._run(_write, sql.qmark(sql.INSERT), params)

    async def get(self, task_id: str, principal: str | None) -> pb.Task | None:
        row = await self._run(_one, sql.qmark(sql.SELECT_ONE), (task_id,))
        if row is None:
            return None
        owner, data = cast("tuple[str | None, bytes]", row)
        return sql.decode(data) if visible(owner, principal) else None

    async def list_tasks(self, listing: Listing) -> tuple[list[pb.Task], int]:
        where, params = sql.list_query(listing)
        limit = listing.limit
        page, count = (sql.qmark(s) for s in sql.list_statements(where))

        def work(db: sqlite3.Connection) -> tuple[list[pb.Task], int]:
            rows = db.execute(page, (*params, limit)).fetchall()
            total = db.execute(count, params).fetchone()[0]
            return [sql.decode(r[0]) for r in rows], int(total)

        return await self._run(work)

    def _change(
        self,
        db: sqlite3.Connection,
        task_id: str,
        change: Transition,
        principal: str | None = None,
        check_owner: bool = False,
        cancel: bool = False,
    ) -> tuple[pb.Task | None, bool]:
        with _transaction(db, immediate=True):
            task, params = sql.transition(
                db.execute(sql.qmark(sql.SELECT_ONE), (task_id,)).fetchone(),
                task_id,
                change,
                now=self.clock(),
                principal=principal,
                check_owner=check_owner,
                cancel=cancel,
            )
            if params is None:
                return task, False
            db.execute(sql.qmark(sql.UPDATE), params)
            return task, True

    async def finish(self, task_id: str, change: Transition) -> pb.Task | None:
        task, _ = await self._run(self._change, task_id, change)
        return task

    async def cancel(self, task_id: str, principal: str | None) -> Cancel:
        task, done = await self._run(
            lambda db: self._change(
                db, task_id, canceled, principal=principal, check_owner=True, cancel=True
            )
        )
        return Cancel(task, done)

    async def renew(self, runner: str, task_ids: Sequence[str]) -> None:
        if not task_ids:
            return
        marks = ", ".join("?" for _ in task_ids)
        statement = (
            f"UPDATE {sql.TASKS} SET lease_until = ? WHERE runner = ?"
            f" AND lease_until IS NOT NULL AND id IN ({marks})"
        )
        await self._run(_write, statement, (self.clock() + self.lease_seconds, runner, *task_ids))

    async def cancel_requested(self, task_ids: Sequence[str]) -> list[str]:
        if not task_ids:
            return []
        marks = ", ".join("?" for _ in task_ids)
        statement = f"SELECT id FROM {sql.TASKS} WHERE cancel_requested AND id IN ({marks})"

        def work(db: sqlite3.Connection) -> list[str]:
            return [r[0] for r in db.execute(statement, tuple(task_ids)).fetchall()]

        return await self._run(work)

    async def checkpoint(self, task_id: str, runner: str, data: bytes) -> bool:
        params = (data, self.clock(), task_id, runner)
        return await self._run(_write, sql.qmark(sql.CHECKPOINT), params) > 0

    async def release(self, runner: str, task_ids: Sequence[str]) -> int:
        now, statement = self.clock(), sql.qmark(sql.RELEASE)

        def work(db: sqlite3.Connection) -> int:
            with _transaction(db, immediate=True):
                return sum(db.execute(statement, (now, now, i, runner)).rowcount for i in task_ids)

        return await self._run(work)

    async def claim_lapsed(self, runner: str, limit: int = CLAIM_LIMIT) -> list[Claim]:
        statement = sql.qmark(sql.claim_statement())
        params = sql.claim_params(
            runner,
            now=self.clock(),
            lease_seconds=self.lease_seconds,
            max_resumes=self.max_resumes,
            limit=limit,
        )

        def work(db: sqlite3.Connection) -> list[Claim]:
            with _transaction(db, immediate=True):
                return sql.claimed(db.execute(statement, params).fetchall())

        return await self._run(work)

    async def owned(self, task_id: str) -> tuple[pb.Task, str | None] | None:
        row = await self._run(_one, sql.qmark(sql.SELECT_ONE), (task_id,))
        if row is None:
            return None
        owner, data = cast("tuple[str | None, bytes]", row)
        return sql.decode(data), owner

    async def pause(
        self, task_id: str, runner: str, change: Transition, checkpoint: bytes, decide_by: float
    ) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            with _transaction(db, immediate=True):
                row = db.execute(sql.qmark(sql.SELECT_HELD), (task_id, runner)).fetchone()
                params = sql.paused_params(
                    row, task_id, change, now=self.clock(), data=checkpoint, decide_by=decide_by
                )
                if params is not None:
                    db.execute(sql.qmark(sql.PAUSE), params)
                return row is not None

        return await self._run(work)

    async def take_paused(self, task_id: str, runner: str, change: Transition) -> Claim | None:
        def work(db: sqlite3.Connection) -> Claim | None:
            with _transaction(db, immediate=True):
                claim, params = sql.resumed(
                    db.execute(sql.qmark(sql.SELECT_PAUSED), (task_id,)).fetchone(),
                    task_id,
                    change,
                    runner=runner,
                    now=self.clock(),
                    lease_seconds=self.lease_seconds,
                )
                if params is not None:
                    db.execute(sql.qmark(sql.RESUME), params)
                return claim

        return await self._run(work)

    async def paused_due(self, now: float, limit: int = CLAIM_LIMIT) -> list[str]:
        def work(db: sqlite3.Connection) -> list[str]:
            return [r[0] for r in db.execute(sql.qmark(sql.DUE), (now, limit)).fetchall()]

        return await self._run(work)

    async def expire_leases(self, limit: int = SWEEP_LIMIT) -> int:
        def work(db: sqlite3.Connection) -> int:
            params = (self.clock(), self.max_resumes, limit)
            ids = [r[0] for r in db.execute(sql.qmark(sql.EXPIRED), params)]
            change = failed(resume_limit(self.max_resumes))
            return sum(1 for i in ids if self._change(db, i, change)[1])

        return await self._run(work)

    async def sweep(self, retention_seconds: float, limit: int = SWEEP_LIMIT) -> int:
        params = (self.clock() - retention_seconds, limit)
        return await self._run(_write, sql.qmark(sql.SWEEP), params)

    async def try_lease(self, name: str, holder: str, seconds: float) -> bool:
        now = self.clock()
        row = await self._run(_one, sql.qmark(sql.TAKE_LEASE), (name, holder, now + seconds, now))
        return row is not None


class _transaction:
    """``BEGIN`` (``IMMEDIATE``: the write lock first) ... ``COMMIT``, or ``ROLLBACK``."""

    def __init__(self, db: sqlite3.Connection, *, immediate: bool = False) -> None:
        self.db, self.immediate = db, immediate

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE" if self.immediate else "BEGIN")

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


def _write(db: sqlite3.Connection, statement: str, params: Sequence[object]) -> int:
    with _transaction(db, immediate=True):
        return db.execute(statement, tuple(params)).rowcount


def _one(
    db: sqlite3.Connection, statement: str, params: Sequence[object]
) -> tuple[object, ...] | None:
    with _transaction(db, immediate=True):
        row: tuple[object, ...] | None = db.execute(statement, tuple(params)).fetchone()
        return row
