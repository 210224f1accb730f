"""The usage ledger in each of its three homes (in the process, the task store's SQLite
file, its PostgreSQL database): additions to one row all count, also from two ledgers on
one file or database at once (two replicas); the day's spend of the agent and of one
principal; queries by day range and user, in day then user order, one agent's only; the
sweep of days past the retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kaos_agent.usage.ledger import Ledger, MemoryLedger, Spent
from kaos_agent.usage.pg_ledger import PostgresLedger
from kaos_agent.usage.sqlite_ledger import SqliteLedger

Make = Callable[[], Ledger]


@pytest.fixture(params=["memory", "local", "external"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Ledger] = []
    shared = MemoryLedger()
    if request.param == "external":
        dsn = request.getfixturevalue("pg_dsn")

    def new() -> Ledger:
        if request.param == "memory":
            return shared  # one process: one ledger
        ledger: Ledger = (
            SqliteLedger(tmp_path / "tasks.db") if request.param == "local" else PostgresLedger(dsn)
        )
        made.append(ledger)
        return ledger

    yield new
    for ledger in made:
        await ledger.close()


async def test_replicas_add_to_one_row_and_read_it_together(make: Make) -> None:
    one, two = make(), make()
    await one.start()
    await two.start()
    await asyncio.gather(
        *(ledger.add("billing", "alice", "2026-03-01", 10, 5) for ledger in (one, two) * 20)
    )
    await one.add("billing", "bob", "2026-03-01", 1, 1)
    await one.add("other-agent", "alice", "2026-03-01", 1000, 1000)
    rows = await two.query("billing", "2026-03-01", "2026-03-01")
    assert [(r.user, r.input_tokens, r.output_tokens, r.runs) for r in rows] == [
        ("alice", 400, 200, 40),
        ("bob", 1, 1, 1),
    ]
    assert await one.spent("billing", "alice", "2026-03-01") == Spent(agent=602, principal=600)
    assert await two.spent("billing", "carol", "2026-03-01") == Spent(agent=602, principal=0)
    assert await two.spent("billing", "alice", "2026-03-02") == Spent()


async def test_queries_by_days_and_user_and_the_sweep(make: Make) -> None:
    ledger = make()
    await ledger.start()
    for day in ("2026-02-27", "2026-02-28", "2026-03-01"):
        for user in ("bob", "alice"):
            await ledger.add("billing", user, day, 1, 2)
    rows = await ledger.query("billing", "2026-02-28", "2026-03-01")
    assert [(r.day, r.user) for r in rows] == [
        ("2026-02-28", "alice"),
        ("2026-02-28", "bob"),
        ("2026-03-01", "alice"),
        ("2026-03-01", "bob"),
    ]
    only = await ledger.query("billing", "2026-01-01", "2026-12-31", "bob")
    assert [(r.day, r.total_tokens) for r in only] == [
        ("2026-02-27", 3),
        ("2026-02-28", 3),
        ("2026-03-01", 3),
    ]
    await ledger.sweep("2026-03-01")
    rows = await ledger.query("billing", "2026-01-01", "2026-12-31")
    assert {r.day for r in rows} == {"2026-03-01"}
