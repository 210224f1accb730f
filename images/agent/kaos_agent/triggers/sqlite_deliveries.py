"""The delivery log in the task store's SQLite file (``TASK_STORE_TYPE=local``), on a
connection of its own (WAL lets it write beside the task store's).

As the task store does (``kaos_agent.a2a.sqlite_thread``): ``sqlite3`` on one worker thread,
each admission one ``BEGIN IMMEDIATE`` transaction (the write lock: no other admission
interleaves), the event loop never waiting on the disk.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from kaos_agent.a2a.sqlite_thread import SqliteThread
from kaos_agent.triggers import deliveries as d


class SqliteDeliveryLog(d.DeliveryLog):
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._file = SqliteThread(path, what="trigger delivery log", thread="kaos-triggers")

    async def start(self) -> None:
        await self._file.start(_schema)

    async def close(self) -> None:
        await self._file.close()

    async def admit(self, delivery: d.Delivery, *, max_per_minute: int) -> d.Admission:
        return await self._file.run(self._admit, delivery, max_per_minute, self.clock())

    def _admit(
        self, db: sqlite3.Connection, delivery: d.Delivery, limit: int, now: float
    ) -> d.Admission:
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
        await self._file.run(_forget, delivery)


def _schema(db: sqlite3.Connection) -> None:
    for statement in d.SCHEMA:
        db.execute(statement)


def _forget(db: sqlite3.Connection, delivery: d.Delivery) -> None:
    db.execute(d.qmark(d.FORGET), (delivery.trigger, delivery.id))
