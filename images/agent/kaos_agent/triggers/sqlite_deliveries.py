"""The delivery log in the task store's SQLite file (``TASK_STORE_TYPE=local``), on a
connection of its own (WAL lets it write beside the task store's).

As the task store does: ``sqlite3`` on one worker thread, each admission one ``BEGIN
IMMEDIATE`` transaction (the write lock: no other admission interleaves), the event loop
never waiting on the disk; a driver error is logged by class only.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from kaos_agent.a2a.tasks import TaskStoreUnavailable
from kaos_agent.triggers import deliveries as d

T = TypeVar("T")

log = logging.getLogger(__name__)


class SqliteDeliveryLog(d.DeliveryLog):
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None

    async def start(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaos-triggers")
        await self._run(self._open)

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._run(self._close)
        self._executor.shutdown(wait=True)
        self._executor = None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in d.SCHEMA:
                db.execute(statement)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            db.close()
            raise
        self._db = db

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            raise RuntimeError("the delivery log is not started")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, lambda: work(*args))
        except sqlite3.Error as exc:
            log.warning("trigger delivery log failed", extra={"error": type(exc).__name__})
            raise TaskStoreUnavailable() from None

    async def admit(self, delivery: d.Delivery, *, max_per_minute: int) -> d.Admission:
        return await self._run(self._admit, delivery, max_per_minute, self.clock())

    def _admit(self, delivery: d.Delivery, limit: int, now: float) -> d.Admission:
        db = self._connection()
        name = delivery.trigger
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(d.qmark(d.FORGET_EXPIRED), (name, now - d.REPLAY_SECONDS))
            if db.execute(d.qmark(d.SEEN), (name, delivery.id, delivery.digest)).fetchone():
                verdict = d.Admission(replayed=True)
            else:
                count, oldest = db.execute(
                    d.qmark(d.RECENT), (name, now - d.RATE_WINDOW_SECONDS)
                ).fetchone()
                verdict = d.over_rate(count, oldest, limit, now) or self._insert(db, delivery, now)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return verdict

    @staticmethod
    def _insert(db: sqlite3.Connection, delivery: d.Delivery, now: float) -> d.Admission:
        params = (delivery.trigger, delivery.id, delivery.digest, now)
        inserted = db.execute(d.qmark(d.INSERT), params).rowcount == 1
        return d.Admission(admitted=inserted, replayed=not inserted)

    async def forget(self, delivery: d.Delivery) -> None:
        await self._run(self._forget, delivery)

    def _forget(self, delivery: d.Delivery) -> None:
        self._connection().execute(d.qmark(d.FORGET), (delivery.trigger, delivery.id))

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the delivery log is not started")
        return self._db
