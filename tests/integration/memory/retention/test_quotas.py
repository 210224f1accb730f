"""Quotas on the write path: over the agent's write rate a write is 429 with
``Retry-After``; over a principal's facts, turns or bytes it is 403 ``quota_exceeded``; a
refused write changes no row, and a burst of concurrent writes never passes a quota.
Each refusal is counted by kind in ``kaos_memory_quota_rejections_total``."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from tests.integration.memory.retention.conftest import MakeMemory, Memory
from tests.integration.memory.retention.test_retention import seed
from tests.support.memory_http import AGENT_A, AGENT_B, headers

REJECTIONS = "kaos_memory_quota_rejections_total"
TABLES = (
    "kaos_mem_turns",
    "kaos_mem_digests",
    "kaos_mem_folds",
    "kaos_mem_attribution",
    "kaos_mem_sessions",
    "kaos_mem_write_rates",
)


def rows(memory: Memory) -> dict[str, Any]:
    """Every row of the conversational tables (a refused write must change none)."""
    return {t: sorted(map(repr, memory.db.relational(f"SELECT * FROM {t}"))) for t in TABLES}


async def test_over_the_write_rate_is_429_with_retry_after_and_writes_nothing(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(quota_writes_per_minute=2)
    # Twenty seconds into a minute: forty seconds to the next.
    memory.clock.now = math.floor(memory.clock.now / 60) * 60 + 20
    a = headers(agent=AGENT_A, principal="alice", session="s1")
    for text in ("one", "two"):
        status, doc, _ = await memory.write(a, text)
        assert status == 200, doc
    before = rows(memory)
    status, doc, hdrs = await memory.write(a, "three")
    assert status == 429, doc
    assert hdrs["Retry-After"] == "40"
    assert doc["error"]["code"] == "rate_limited"
    assert "2 per minute" in doc["error"]["message"]
    assert rows(memory) == before
    assert await memory.metric(REJECTIONS, kind="write_rate") == 1
    # Another agent has its own count; the next minute the agent writes again.
    b = headers(agent=AGENT_B, principal="bob", session="s2")
    assert (await memory.write(b, "hello"))[0] == 200
    memory.clock.advance(40)
    assert (await memory.write(a, "three"))[0] == 200


async def test_a_burst_of_writes_never_passes_the_rate(make_memory: MakeMemory) -> None:
    memory = await make_memory(quota_writes_per_minute=3)
    memory.clock.now = math.floor(memory.clock.now / 60) * 60 + 1
    statuses = await asyncio.gather(
        *(
            memory.write(headers(agent=AGENT_A, principal=f"p{i}", session=f"s{i}"), "hi")
            for i in range(10)
        )
    )
    assert sorted(s for s, _, _ in statuses) == [200] * 3 + [429] * 7
    assert len(memory.db.turns()) == 3


async def test_over_a_principals_turns_is_403_and_writes_nothing(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(quota_turns=3)
    alice = headers(agent=AGENT_A, principal="alice", session="s1")
    assert (await memory.write(alice, "one", "two"))[0] == 200
    before = rows(memory)
    status, doc, _ = await memory.write(alice, "three", "four")
    assert status == 403, doc
    assert doc["error"]["code"] == "quota_exceeded"
    assert "3 stored turns" in doc["error"]["message"]
    assert rows(memory) == before
    # Up to the quota, in another session too; another principal is not limited by it.
    other = headers(agent=AGENT_A, principal="alice", session="s2")
    assert (await memory.write(other, "three"))[0] == 200
    assert (await memory.write(other, "four"))[0] == 403
    assert (await memory.write(headers(principal="bob", session="s3"), "a", "b", "c"))[0] == 200
    assert await memory.metric(REJECTIONS, kind="turns") == 2


async def test_a_burst_of_writes_never_passes_a_principals_turns(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(quota_turns=4)
    statuses = await asyncio.gather(
        *(
            memory.write(headers(agent=AGENT_A, principal="alice", session=f"s{i}"), "hi")
            for i in range(10)
        )
    )
    assert sorted(s for s, _, _ in statuses) == [200] * 4 + [403] * 6
    assert len([t for t in memory.db.turns() if t["principal"] == "alice"]) == 4


async def test_over_a_principals_bytes_is_403_and_writes_nothing(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(quota_bytes=100)
    alice = headers(agent=AGENT_A, principal="alice", session="s1")
    assert (await memory.write(alice, "é" * 30))[0] == 200  # 60 bytes, 30 characters
    before = rows(memory)
    status, doc, _ = await memory.write(alice, "x" * 41)
    assert status == 403, doc
    assert doc["error"]["code"] == "quota_exceeded"
    assert "100 bytes" in doc["error"]["message"]
    assert rows(memory) == before
    assert (await memory.write(alice, "x" * 40))[0] == 200  # exactly the quota
    assert await memory.metric(REJECTIONS, kind="bytes") == 1


async def test_at_a_principals_facts_quota_a_write_is_403_and_writes_nothing(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(quota_facts=1)
    alice = headers(agent=AGENT_A, principal="alice", session="s1")
    await seed(memory, alice, "QUOTAFACT")
    before = rows(memory)
    status, doc, _ = await memory.write(alice, "one more")
    assert status == 403, doc
    assert doc["error"]["code"] == "quota_exceeded"
    assert "long-term facts" in doc["error"]["message"]
    assert rows(memory) == before
    assert await memory.metric(REJECTIONS, kind="facts") == 1
    # Bob holds no facts.
    assert (await memory.write(headers(principal="bob", session="s2"), "hi"))[0] == 200
