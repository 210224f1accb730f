"""Folding, erasure, degradation and drain of the real service, on both backends.

Assertions read the databases directly (``server.db``): the window, digest, fold and
attribution tables, the vector store and Mem0's history.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kaos_core.memory.contract import Level

from tests.fixtures.devmodel import devmodel_for
from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.devmodel import DevModel
from tests.support.memory_http import (
    AGENT_A,
    AGENT_B,
    break_vector_store,
    call,
    headers,
    long_text,
    seed_facts,
    uid,
    wait_sync,
)
from tests.support.procs import ServiceProcess


@pytest.fixture
def devmodel(private_devmodel_server: ServiceProcess) -> Iterator[DevModel]:
    """This module's own model: its tests slow every answer down and count the requests,
    which another module's services, still finishing their background work, must not
    share."""
    yield from devmodel_for(private_devmodel_server)


def settled(server: MemoryServer) -> bool:
    """Every fold digested and extracted, and nothing past the trigger left unfolded."""
    folds = server.db.folds()
    return bool(folds) and all(
        f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds
    )


def folded_turns(server: MemoryServer) -> list[dict[str, object]]:
    return [t for t in server.db.turns() if t["folded_by"] is not None]


async def test_writes_past_the_budget_fold_once_and_extract_once(
    memory_factory: MakeMemory, memory_backend: str, devmodel: DevModel
) -> None:
    server = memory_factory(memory_backend, token_budget=200)
    # Every model answer takes 2 s: a write that waited for one could not answer sooner.
    devmodel.set_faults(delay=2.0, routes=["chat"])
    ident = headers(agent=AGENT_A, principal="carol", session=uid("s"))
    # The model serves the whole module: count only the requests carrying this test's own
    # marker (an earlier test's server may still be draining into it).
    mark = uid("m").replace("-", "")
    slowest = 0.0
    statuses = []
    for i in range(8):
        started = time.perf_counter()
        status, doc, _ = await call(
            server.url,
            "/v1/write",
            {"turns": [{"role": "user", "content": long_text(f"{mark}turn{i}x")}]},
            hdrs=ident,
        )
        slowest = max(slowest, time.perf_counter() - started)
        assert status in (200, 202), doc
        statuses.append(status)
    assert 202 in statuses
    assert slowest < 1.0, f"a write waited {slowest:.2f}s: it must never wait for the model"

    # A write that finds the session's lock held leaves its fold to the background job,
    # which may then fold three turns at once: the newest turn may stay unfolded, under the
    # trigger (one turn is; two are not).
    wait_sync(
        lambda: settled(server) and len(folded_turns(server)) >= 7,
        timeout=120,
        what="every fold settled, at most the newest turn unfolded",
    )
    folds = server.db.folds()
    turns = server.db.turns()
    folded = [t for t in turns if t["folded_by"] is not None]
    unfolded = [t["seq"] for t in turns if t["folded_by"] is None]
    assert unfolded in ([], [max(t["seq"] for t in turns)]), unfolded
    for fold in folds:
        covered = [t for t in turns if t["folded_by"] == fold["id"]]
        assert len(covered) == fold["turns"]
        assert [t["seq"] for t in covered] == sorted(t["seq"] for t in covered)
        assert covered[0]["seq"] == fold["first_seq"] and covered[-1]["seq"] == fold["last_seq"]
        assert fold["digest_version"] is not None
    digests = server.db.digests()
    assert [d["version"] for d in digests] == list(range(1, len(digests) + 1))
    assert f"{mark}turn{len(folded) - 1}x" in digests[-1]["summary"]
    assert all(f["extraction_attempts"] == 1 for f in folds), folds
    ours = [
        r["kind"]
        for r in devmodel.requests()
        if any(mark in str(m.get("content")) for m in r["messages"])
    ]
    assert ours.count("extraction") == len(folds), (ours, folds)
    assert ours.count("digest") >= len(digests)
    facts = server.db.vector_payloads()
    expected = sorted(long_text(f"{mark}turn{i}x") for i in range(len(folded)))
    assert sorted(f["data"] for f in facts) == expected


# --- erasure --------------------------------------------------------------------------------

WRITERS = {
    # marker: (agent, principal, session)
    "alicealpha": (AGENT_A, "alice", "sess-a1"),
    "bobalpha": (AGENT_A, "bob", "sess-b1"),
    "anonbeta": (AGENT_B, None, "sess-n1"),
    "alicebeta": (AGENT_B, "alice", "sess-a2"),
}
ERASED_BY: dict[str, tuple[dict[str, str], set[str]]] = {
    "session": (headers(agent=AGENT_A, principal="alice", session="sess-a1"), {"alicealpha"}),
    "agent": (headers(agent=AGENT_A, principal="alice", session="sess-a1"), {"alicealpha"}),
    "user": (headers(principal="alice"), {"alicealpha", "alicebeta"}),
    "store": ({}, set(WRITERS)),
}


@pytest.mark.parametrize("level", ["session", "agent", "user", "store"])
async def test_forget_erases_every_tier_and_mem0_history(
    memory_factory: MakeMemory, memory_backend: str, level: Level
) -> None:
    server = memory_factory(memory_backend, token_budget=200, max_read_scope="user")
    for marker, (agent, principal, session) in WRITERS.items():
        ident = headers(agent=agent, principal=principal, session=session)
        # infer=True: Mem0 extracts with the model and keeps the turns in its history DB.
        await seed_facts(server.url, ident, [f"{marker}one", f"{marker}two"], infer=True)
    wait_sync(
        lambda: settled(server) and len(server.db.vector_payloads()) == 2 * len(WRITERS),
        timeout=120,
        what="all facts extracted",
    )
    everything = server.db.everything_text()
    assert all(f"{m}one says" in everything for m in WRITERS)
    if memory_backend == "local":
        assert server.db.mem0_history(), "Mem0 keeps a history of added facts"
    else:
        # External mode keeps no node-local history: no file, nothing to purge.
        assert not (server.db.data_dir / "mem0" / "history.db").exists()

    ident, erased = ERASED_BY[level]
    status, doc, _ = await call(server.url, "/v1/forget", {"level": level}, hdrs=ident)
    assert status == 200, doc
    assert doc["degraded"] is False
    assert doc["forgotten"]["long_term"] == 2 * len(erased)
    assert doc["forgotten"]["short_term"] == 2 * len(erased)
    assert doc["forgotten"]["medium_term"] >= len(erased)

    kept = set(WRITERS) - erased
    everything = server.db.everything_text()
    for marker in erased:
        assert marker not in everything, f"{marker} survived {level} forget"
    for marker in kept:
        assert f"{marker}one says" in everything
    sessions = {WRITERS[m][2] for m in erased}
    for table in (server.db.turns(), server.db.digests(), server.db.folds()):
        assert not [r for r in table if r["key"].split("|run:")[1] in sessions]
    assert not [r for r in server.db.attribution() if r["session"] in sessions]
    payload_markers = {f["data"].split(" says")[0][:-3] for f in server.db.vector_payloads()}
    assert payload_markers == kept
    if memory_backend == "local":
        history_ids = {h["memory_id"] for h in server.db.mem0_history()}
        assert history_ids == {f["id"] for f in server.db.vector_payloads()}


# --- degradation ----------------------------------------------------------------------------


async def test_degradation_model_down_then_vector_store_broken(
    memory_factory: MakeMemory, memory_backend: str, devmodel: DevModel
) -> None:
    server = memory_factory(memory_backend, token_budget=200, executor_retries=0)
    ident = headers(agent=AGENT_A, principal="dora", session=uid("s"))
    await seed_facts(server.url, ident, ["dora1", "dora2", "dora3"])
    wait_sync(lambda: settled(server), timeout=60, what="first folds")
    write = {"turns": [{"role": "user", "content": "still here"}]}
    recall = {"level": "session", "query": "dora1 says"}

    async def check_soft_and_degraded() -> None:
        status, doc, _ = await call(server.url, "/v1/write", write, hdrs=ident)
        assert status in (200, 202) and doc["accepted"] == 1, doc
        status, doc, _ = await call(server.url, "/v1/recall", recall, hdrs=ident)
        assert status == 200, doc
        assert doc["degraded"] is True
        assert doc["short_term"]["window"][-1]["content"] == "still here"
        assert doc["medium_term"]["version"] >= 1 and "dora1" in doc["medium_term"]["summary"]
        assert doc["long_term"]["facts"] == []

    # 1. The model server is down (every chat and embedding call fails).
    devmodel.set_faults(error_rate=1.0, status=500)
    await check_soft_and_degraded()
    status, doc, _ = await call(server.url, "/readyz", method="GET")
    assert status == 200, "a model outage must not make the service unready"

    # 2. The model is back, the vector store is broken.
    devmodel.reset()
    break_vector_store(server)
    await check_soft_and_degraded()
    status, doc, _ = await call(server.url, "/readyz", method="GET")
    assert status == 503 and doc["checks"]["vector_store"] != "ok"
    before = len(server.db.turns())
    status, doc, _ = await call(
        server.url, "/v1/write", {**write, "failure_mode": "strict"}, hdrs=ident
    )
    assert status == 500 and doc["error"]["code"] == "strict_failure", doc
    assert len(server.db.turns()) == before, "a failed strict write wrote nothing"
    status, doc, _ = await call(
        server.url, "/v1/forget", {"level": "session", "failure_mode": "strict"}, hdrs=ident
    )
    assert status == 500 and doc["error"]["code"] == "strict_failure", doc
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "session"}, hdrs=ident)
    assert status == 200 and doc["degraded"] is True, doc
    assert server.db.turns() == [], "soft forget still erased the conversational tiers"
    status, text, _ = await call(server.url, "/metrics", method="GET")
    assert 'kaos_memory_degraded_total{reason="recall_long_term"}' in text


# --- drain ----------------------------------------------------------------------------------


async def test_sigterm_drains_queued_extractions(
    memory_factory: MakeMemory, memory_backend: str, devmodel: DevModel
) -> None:
    server = memory_factory(memory_backend, token_budget=200, executor_workers=1, drain_timeout=60)
    devmodel.set_faults(delay=1.0, routes=["chat"])
    sessions = [uid("s") for _ in range(3)]
    for session in sessions:
        ident = headers(agent=AGENT_A, principal="erin", session=session)
        await seed_facts(server.url, ident, [f"{session}-a", f"{session}-b"])
    assert not settled(server), "work must still be queued when SIGTERM arrives"
    started = time.monotonic()
    assert server.stop(timeout=90) == 0
    assert time.monotonic() - started < 60
    folds = server.db.folds()
    assert len(folds) == 3
    assert all(f["extraction_status"] == "done" and f["digest_status"] == "done" for f in folds)
    assert len(server.db.vector_payloads()) == 6
    assert "background work drained" in server.proc.log_tail(200)


async def test_full_queue_degrades_the_write_but_keeps_it(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    server = memory_factory("local", token_budget=200, executor_workers=1, executor_queue_size=1)
    devmodel.set_faults(delay=2.0, routes=["chat"])
    answers = []
    for n in range(4):
        ident = headers(agent=AGENT_A, principal="fay", session=f"full-{n}")
        for part in ("a", "b"):
            status, doc, _ = await call(
                server.url,
                "/v1/write",
                {"turns": [{"role": "user", "content": long_text(f"full{n}{part}")}]},
                hdrs=ident,
            )
            assert status in (200, 202), doc
            answers.append(doc)
    degraded = [a for a in answers if a["degraded"]]
    assert degraded, "a write that found the queue full must say degraded"
    assert all(a["accepted"] == 1 and not a["scheduled"] for a in degraded)
    assert len(server.db.turns()) == 8, "degraded writes are still in the window"
    status, text, _ = await call(server.url, "/metrics", method="GET")
    assert 'kaos_memory_degraded_total{reason="queue_full"}' in text
