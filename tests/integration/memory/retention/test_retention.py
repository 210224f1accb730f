"""Retention that deletes: one sweep after a record passes its age, its rows, vectors and
Mem0 history are gone, counted per tier in ``kaos_memory_records_expired_total`` and
recorded in the erasure audit with the actor ``retention``; records younger than their
age stay. Time is the service's clock, moved by the test."""

from __future__ import annotations

from typing import Any

from tests.integration.memory.retention.conftest import MakeMemory, Memory
from tests.support.memory_http import AGENT_A, eventually, headers, long_text

DAY = 86400.0
EXPIRED = "kaos_memory_records_expired_total"
TIERS = ("short_term", "medium_term", "long_term")


def facts_of(memory: Memory, marker: str) -> list[dict[str, Any]]:
    return [p for p in memory.db.vector_payloads() if marker in str(p.get("data"))]


async def seed(memory: Memory, hdrs: dict[str, str], marker: str) -> None:
    """Two long turns (they fold), then wait until the fold's digest and facts are stored."""
    for part in ("one", "two"):
        status, doc, _ = await memory.write(hdrs, long_text(f"{marker}-{part}"))
        assert status in (200, 202), doc

    async def settled() -> bool:
        folds = memory.db.folds()
        done = bool(folds) and all(
            f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds
        )
        return done and bool(facts_of(memory, marker))

    await eventually(settled, bool, what=f"{marker}'s fold digested and extracted")


async def expired(memory: Memory) -> dict[str, float]:
    return {tier: await memory.metric(EXPIRED, tier=tier) for tier in TIERS}


def retention_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["actor"]["kind"] == "retention"]


async def test_a_session_idle_past_its_age_is_erased_whole_in_one_sweep(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(idle_session_days=10)
    old = headers(agent=AGENT_A, principal="alice", session="s-old")
    young = headers(agent=AGENT_A, principal="bob", session="s-young")
    await seed(memory, old, "OLDSESSION")
    memory.clock.advance(5 * DAY)
    await seed(memory, young, "YOUNGSESSION")
    old_turns = [t for t in memory.db.turns() if t["key"].endswith("|run:s-old")]
    old_digests = [d for d in memory.db.digests() if d["key"].endswith("|run:s-old")]
    old_facts = facts_of(memory, "OLDSESSION")
    assert old_turns and old_digests and old_facts
    young_before = (
        [t for t in memory.db.turns() if t["key"].endswith("|run:s-young")],
        [d for d in memory.db.digests() if d["key"].endswith("|run:s-young")],
        sorted(p["id"] for p in facts_of(memory, "YOUNGSESSION")),
    )
    before = await expired(memory)

    memory.clock.advance(6 * DAY)  # s-old idle 11 days, s-young 6
    await memory.sweep()

    # Gone: every row of the session, its facts' vectors, Mem0's text of it.
    assert "OLDSESSION" not in memory.db.everything_text()
    assert not [s for s in memory.db.sessions() if s["session"] == "s-old"]
    assert not [a for a in memory.db.attribution() if a["session"] == "s-old"]
    # Kept: the session younger than the age, whole.
    young_after = (
        [t for t in memory.db.turns() if t["key"].endswith("|run:s-young")],
        [d for d in memory.db.digests() if d["key"].endswith("|run:s-young")],
        sorted(p["id"] for p in facts_of(memory, "YOUNGSESSION")),
    )
    assert young_after == young_before
    # Counted per tier, and audited as retention's erasure of that session.
    after = await expired(memory)
    assert {t: after[t] - before[t] for t in TIERS} == {
        "short_term": len(old_turns),
        "medium_term": len(old_digests),
        "long_term": len(old_facts),
    }
    [record] = retention_records(await memory.audit())
    assert record["actor"] == {"kind": "retention", "name": "retention", "verified": True}
    assert record["scope"]["level"] == "session" and record["scope"]["session"] == "s-old"
    assert record["forgotten"] == {
        "short_term": len(old_turns),
        "medium_term": len(old_digests),
        "long_term": len(old_facts),
    }
    assert record["final"] is True

    # The next sweep finds nothing more to erase.
    await memory.sweep()
    assert await expired(memory) == after
    assert len(retention_records(await memory.audit())) == 1


async def test_facts_past_their_age_are_erased_in_one_sweep_and_younger_ones_kept(
    make_memory: MakeMemory,
) -> None:
    memory = await make_memory(fact_max_age_days=30)
    alice = headers(agent=AGENT_A, principal="alice", session="s1")
    await seed(memory, alice, "AGEDFACT")
    facts = sorted(p["id"] for p in facts_of(memory, "AGEDFACT"))
    turns, digests = memory.db.turns(), memory.db.digests()
    before = await expired(memory)

    memory.clock.advance(29 * DAY)
    await memory.sweep()
    assert sorted(p["id"] for p in facts_of(memory, "AGEDFACT")) == facts, "young facts kept"
    assert retention_records(await memory.audit()) == []

    memory.clock.advance(2 * DAY)
    await memory.sweep()
    # Gone: the vectors and rows, and their text in Mem0's history.
    assert facts_of(memory, "AGEDFACT") == []
    assert "AGEDFACT" not in memory.db.vector_store_text()
    assert "AGEDFACT" not in str(memory.db.mem0_history())
    status, doc, _ = await memory.post(
        "/v1/list", {"level": "user", "include": ["long_term"]}, alice
    )
    assert status == 200 and doc["long_term"]["facts"] == [], doc
    # Fact age reaches facts only: the conversation's tiers are as they were.
    assert memory.db.turns() == turns and memory.db.digests() == digests
    after = await expired(memory)
    assert after["long_term"] - before["long_term"] == len(facts)
    assert after["short_term"] == before["short_term"]
    [record] = retention_records(await memory.audit())
    assert record["scope"]["level"] == "store"
    assert record["forgotten"] == {"short_term": 0, "medium_term": 0, "long_term": len(facts)}
    assert record["final"] is True
