"""Fixtures the agent's integration tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kaos_agent.a2a.pg_store import PostgresTaskStore
from kaos_agent.a2a.sqlite_store import SqliteTaskStore
from kaos_agent.a2a.tasks import TaskStore

from tests.support.task_stores import LEASE, Clock


@pytest.fixture(params=["sqlite", "postgres"])
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[TaskStore, TaskStore, Clock]]:
    """Two replicas' views of one shared store (a SQLite file, a PostgreSQL database), on
    one clock."""
    clock = Clock()
    make: Callable[[], TaskStore]
    if request.param == "sqlite":

        def make() -> TaskStore:
            return SqliteTaskStore(tmp_path / "tasks.db", lease_seconds=LEASE, clock=clock)

    else:
        dsn = request.getfixturevalue("pg_dsn")

        def make() -> TaskStore:
            return PostgresTaskStore(dsn, lease_seconds=LEASE, clock=clock)

    one, two = make(), make()
    await one.start()
    await two.start()
    try:
        yield one, two, clock
    finally:
        await one.close()
        await two.close()
