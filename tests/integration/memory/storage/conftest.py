"""The conversation store on both backends, on a ``FakeClock`` the tests move forward."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[SqlConversationStore]:
    """An SQLite file, or a fresh PostgreSQL database."""
    if request.param == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        s = SqlConversationStore(SqliteDialect(tmp_path / "conversation.sqlite3"), clock=clock)
    else:
        from kaos_memory.storage.sql.postgres import PostgresDialect

        dsn = request.getfixturevalue("pg_dsn")
        s = SqlConversationStore(PostgresDialect(dsn, pool_size=2), clock=clock)
    await s.start()
    try:
        yield s
    finally:
        await s.close()
