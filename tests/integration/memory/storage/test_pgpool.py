"""Reads that share round trips (``kaos_memory.storage.pgpool.Coalesced``), on a real
PostgreSQL: reads requested together go in one pipeline on one connection, each caller
gets its own rows, a group's statements see one snapshot, a failing group fails alone, a
connection the server closed is replaced, and a caller that stops waiting harms nobody."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from kaos_memory.storage import pgpool
from kaos_memory.storage.pgpool import Coalesced

from tests.support.postgres import pg_query

pytestmark = pytest.mark.postgres


@pytest.fixture
async def reads(pg_dsn: str) -> AsyncIterator[Coalesced]:
    pool = await pgpool.open_pool(pg_dsn, 4)
    coalesced = Coalesced(pool)
    try:
        yield coalesced
    finally:
        await coalesced.close()


def _requests(reads: Coalesced) -> int:
    return int(reads.pool.get_stats().get("requests_num", 0))


async def test_reads_requested_together_share_one_round_trip_and_get_their_own_rows(
    reads: Coalesced,
) -> None:
    before = _requests(reads)
    groups = [
        [("SELECT %s::int, pg_backend_pid()", [i]), ("SELECT now(), %s::text", [f"g{i}"])]
        for i in range(40)
    ]
    answers = await asyncio.gather(*(reads.read(g) for g in groups))
    assert _requests(reads) - before == 1, "one connection checkout for the 40 reads"
    for i, (first, second) in enumerate(answers):
        assert first[0][0] == i and second[0][1] == f"g{i}"
    # One backend, one implicit transaction: the same server process and the same now().
    assert len({a[0][0][1] for a in answers}) == 1
    assert len({a[1][0][0] for a in answers}) == 1
    # Apart, in two turns of the loop: two round trips, two transactions.
    first = await reads.read([("SELECT now()", None)])
    second = await reads.read([("SELECT now()", None)])
    assert first[0][0][0] < second[0][0][0]


async def test_a_failing_read_fails_alone(reads: Coalesced) -> None:
    good = [reads.read([("SELECT %s::int", [i])]) for i in range(5)]
    bad = reads.read([("SELECT 1", None), ("SELECT 1 / %s::int", [0])])
    answers = await asyncio.gather(*good, bad, return_exceptions=True)
    assert [a[0][0][0] for a in answers[:5]] == list(range(5))  # type: ignore[index]
    assert isinstance(answers[5], psycopg.errors.DivisionByZero)
    assert (await reads.read([("SELECT 7", None)]))[0] == [(7,)]


async def test_connections_the_server_closed_are_replaced(reads: Coalesced, pg_dsn: str) -> None:
    pids = await asyncio.gather(
        *(reads.read([("SELECT pg_backend_pid()", None)]) for _ in range(3))
    )
    killed = pg_query(
        pg_dsn,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE pid <> pg_backend_pid() AND datname = current_database()"
        " AND application_name = ''",
    )
    assert killed, pids
    answers = await asyncio.gather(*(reads.read([("SELECT %s::int", [i])]) for i in range(6)))
    assert [a[0][0][0] for a in answers] == list(range(6))


async def test_a_caller_that_stops_waiting_harms_nobody(reads: Coalesced) -> None:
    slow = asyncio.ensure_future(reads.read([("SELECT pg_sleep(0.2), 1", None)]))
    others = [asyncio.ensure_future(reads.read([("SELECT %s::int", [i])])) for i in range(3)]
    await asyncio.sleep(0)  # all four requested, none sent yet
    slow.cancel()
    answers: list[Any] = await asyncio.gather(*others)
    assert [a[0][0][0] for a in answers] == [0, 1, 2]
    assert slow.cancelled()
    assert (await reads.read([("SELECT 8", None)]))[0] == [(8,)]


async def test_closing_cancels_what_waits(pg_dsn: str) -> None:
    pool = await pgpool.open_pool(pg_dsn, 2)
    reads = Coalesced(pool)
    try:
        waiting = asyncio.ensure_future(reads.read([("SELECT pg_sleep(5)", None)]))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # flushed: the pipeline is under way
        await reads.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.closed, "closing the reads closes their pool"
    finally:
        await pool.close()
