"""A retried extraction replaces what an earlier, interrupted attempt stored.

The consolidation parts run in the test process on real stores (SQLite + embedded Chroma,
or PostgreSQL + pgvector) with Mem0 and the development model: a replica that died half
way through a fold's extraction is played by taking the fold's lease, counting an attempt
and storing a fact tagged with it, then letting the lease lapse. The fact it stored is one
the model would never extract again (as with a model whose answers vary), so Mem0's own
deduplication cannot hide a second copy: only the delete-before-retry step removes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kaos_memory.consolidation import ConsolidationPolicy, Consolidator
from kaos_memory.deps import MemoryDeps, default_deps
from kaos_memory.executor import BackgroundExecutor, RetryPolicy
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Attribution
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import FoldPolicy, FoldTag, NewTurn, TurnRow
from kaos_memory.storage.mem0.terms import FOLD_KEY
from prometheus_client import CollectorRegistry

from tests.support.clock import FakeClock
from tests.support.devmodel import DevModel
from tests.support.memory import MemoryDb, consolidation_stores

WHO = Attribution(group="retry", session="s1", principal="alice", agent="kaos://agent/t/a")
NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)
FOLD_ALL = FoldPolicy(trigger_tokens=1, target_tokens=0, max_events=10_000)


@dataclass
class Parts:
    settings: MemorySettings
    deps: MemoryDeps
    clock: FakeClock
    db: MemoryDb


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
async def parts(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    devmodel: DevModel,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Parts]:
    settings, db = consolidation_stores(
        request, monkeypatch, tmp_path / "data", devmodel.base_url, "kaos_retry"
    )
    clock = FakeClock()
    deps = default_deps(settings, clock)  # the service's own parts for these settings
    try:
        await deps.conversation.start()
        await deps.longterm.start()
        yield Parts(settings, deps, clock, db)
    finally:
        await deps.longterm.close()
        await deps.conversation.close()


async def test_a_retried_extraction_replaces_an_interrupted_attempts_facts(
    parts: Parts,
) -> None:
    conversation, longterm = parts.deps.conversation, parts.deps.longterm
    turns = [
        NewTurn("user", "I grow tomatoes on my balcony", 10),
        NewTurn("assistant", "Lovely.", 3),
        NewTurn("user", "My cat is called Miso", 10),
    ]
    await conversation.append(WHO, turns, True, NO_FOLD)
    fold = await conversation.claim_fold(WHO.key, WHO.session, FOLD_ALL)
    assert fold is not None and len(fold.turns) == 3

    # The replica that died: lease, attempt 1, one fact stored, then nothing more.
    assert await conversation.acquire_lease(WHO.key, "extract", "dead-replica", 30)
    assert await conversation.begin_extraction(fold, "dead-replica") == 1
    stale = TurnRow(
        seq=0,
        role="user",
        content="I grow tomatoes, cucumbers and basil on my balcony",
        tokens=12,
        at=fold.turns[0].at,
        principal=WHO.principal,
        agent=WHO.agent,
        infer=False,
    )
    [stale_id] = await longterm.add([stale], WHO, False, FoldTag(fold.id, 1))
    parts.clock.advance(31)  # the dead replica's lease lapses

    registry = CollectorRegistry()
    metrics = MemoryMetrics.create(registry)
    executor = BackgroundExecutor(
        workers=1,
        queue_size=8,
        retry=RetryPolicy(retries=0, backoff=0.01, backoff_max=0.01),
        metrics=metrics,
    )
    summarizer = parts.deps.summarizer
    await summarizer.start()
    executor.start()
    consolidator = Consolidator(
        group=WHO.group,
        conversation=conversation,
        longterm=longterm,
        summarizer=summarizer,
        executor=executor,
        metrics=metrics,
        policy=ConsolidationPolicy(
            fold=FOLD_ALL, digest_retention=5, lease_ttl=30, max_attempts=5, sweep_interval=1
        ),
        clock=parts.clock,
    )
    try:
        assert consolidator.schedule(WHO.key, WHO.session, cause="outbox")
        assert await executor.drain(60), "the consolidation job did not finish"
    finally:
        await summarizer.close()

    [row] = [f for f in parts.db.folds() if f["id"] == fold.id]
    assert row["extraction_status"] == "done" and row["digest_status"] == "done"
    assert row["extraction_attempts"] == 2
    facts = [p for p in parts.db.vector_payloads() if p.get(FOLD_KEY) == str(fold.id)]
    assert sorted(p["data"] for p in facts) == [
        "I grow tomatoes on my balcony",
        "My cat is called Miso",
    ], "exactly the retry's facts, once each"
    assert all(p["kaos_attempt"] == "2" for p in facts)
    assert stale_id not in {p["id"] for p in parts.db.vector_payloads()}
