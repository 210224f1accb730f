"""One SQLite file of the agent's own (the A2A task store, the triggers' delivery log), in
WAL mode on one connection owned by one worker thread: every operation is one call run
there, so the event loop never waits on the disk and no two operations interleave. A
driver error is logged by class only and raised as ``TaskStoreUnavailable``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kaos_agent.a2a.tasks import TaskStoreUnavailable

T = TypeVar("T")

log = logging.getLogger(__name__)

# The schema's statements, run in the opening transaction (BEGIN IMMEDIATE).
Schema = Callable[[sqlite3.Connection], None]


class SqliteThread:
    def __init__(self, path: Path, *, what: str, thread: str) -> None:
        self.path = path
        self._what = what
        self._thread = thread
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None

    async def start(self, schema: Schema) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread)
        await self.run(lambda _: self._open(schema))

    async def close(self) -> None:
        if self._executor is None:
            return
        await self.run(lambda _: self._close())
        self._executor.shutdown(wait=True)
        self._executor = None

    def _open(self, schema: Schema) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("BEGIN IMMEDIATE")
        try:
            schema(db)
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

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(connection, *args)`` on the thread (the connection is None before the
        file is open)."""
        if self._executor is None:
            raise RuntimeError(f"the {self._what} is not started")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, lambda: work(self._db, *args))
        except sqlite3.Error as exc:
            log.warning(f"{self._what} operation failed", extra={"error": type(exc).__name__})
            raise TaskStoreUnavailable() from None
