"""A write never queues behind background work on its session.

Fold, digest and extraction steps of a session hold the session's lock (a transaction
advisory lock on PostgreSQL, so replicas serialise them) for several round trips. A write
that crosses the fold trigger used to take the same lock to record its fold, and so
waited for whatever background step held it: under a slow model and a loaded machine,
tens to hundreds of milliseconds. Here a test holds that lock itself, as a background
step would, and the write crossing the trigger is answered while it is held; the fold is
recorded by the background job once the lock is free.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.memory import MakeMemory
from tests.support.memory_http import AGENT_A, call, eventually, headers, uid
from tests.support.postgres import connect

pytestmark = pytest.mark.postgres


async def test_a_write_crossing_the_trigger_does_not_wait_for_the_sessions_lock(
    memory_factory: MakeMemory,
) -> None:
    mem = memory_factory("external", token_budget=64, sweep_interval=3600)
    session = uid("s")
    hdrs = headers(agent=AGENT_A, principal="alice", session=session)
    first = {"turns": [{"role": "user", "content": "I keep bees on the roof."}]}
    status, doc, _ = await call(mem.url, "/v1/write", first, hdrs=hdrs)
    assert status == 200 and doc["scheduled"] is False, doc
    key = mem.db.relational("SELECT key FROM kaos_mem_sessions")[0][0]

    # Background work on this session holds its lock (as a digest step does).
    holder = connect(mem.env["KAOS_MEMORY_DSN"], autocommit=False)
    try:
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        crossing = {
            "turns": [
                {"role": "user", "content": "The bees made forty kilos of honey this year. " * 8}
            ]
        }
        status, doc, _ = await call(mem.url, "/v1/write", crossing, hdrs=hdrs)
        # Answered with the lock still held: the old write blocked here until release.
        assert status == 202, doc
        assert doc == {"accepted": 1, "scheduled": True, "degraded": False, "erased": False}
        assert [f for f in mem.db.folds() if f["key"] == key] == []
        assert len(mem.db.turns()) == 2
    finally:
        holder.rollback()
        holder.close()

    # The scheduled job records the fold once the lock is free, and digests it.
    async def folds() -> list[dict[str, Any]]:
        return mem.db.folds()

    done = await eventually(
        folds,
        lambda rows: any(f["digest_status"] == "done" for f in rows),
        what="the fold recorded and digested by the background job",
    )
    assert {f["key"] for f in done} == {key}
