"""Erasure against background work, local mode: nothing of an erased scope survives or
reaches the model again.

A forget at session, agent and user level is issued while an extraction of that scope is
at the (slowed) model. Afterwards the same principal writes again into the same session,
and that new work is consolidated. Then every table of every database file, the raw bytes
of every file in the data dir (freed pages, write-ahead logs, Chroma's files) and every
model call that started after the forget answered are searched for the erased text.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kaos_core.memory.contract import Level

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.erasure_checks import (
    extraction_in_flight,
    leaks,
    model_texts_since,
    raw_hits,
    table_text,
)
from tests.support.devmodel import DevModel
from tests.support.memory_http import (
    AGENT_A,
    AGENT_B,
    call,
    eventually,
    headers,
    seed_facts,
    wait_sync,
)

SETTINGS = {
    "token_budget": 200,
    "max_read_scope": "user",
    "idle_flush_seconds": 0,
    "lease_ttl": 5,
    "sweep_interval": 0.5,
}


def forget_headers(level: Level, agent: str, principal: str, session: str) -> dict[str, str]:
    if level == "user":
        return headers(principal=principal)
    return headers(agent=agent, principal=principal, session=session)


def consolidated(server: MemoryServer, marker: str) -> bool:
    folds = server.db.folds()
    facts = server.db.vector_payloads()
    return (
        bool(folds)
        and all(f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds)
        and any(marker in str(f.get("data")) for f in facts)
    )


@pytest.mark.parametrize("level", ["session", "agent", "user"])
async def test_forget_during_extraction_leaves_no_trace_local(
    memory_factory: MakeMemory, devmodel: DevModel, level: Level
) -> None:
    server = memory_factory("local", **SETTINGS)
    tag = uuid.uuid4().hex[:8]
    erased, fresh, kept = f"gonex{tag}", f"freshx{tag}", f"keptx{tag}"
    principal, session = f"p{tag}", f"s{tag}"
    ident = headers(agent=AGENT_A, principal=principal, session=session)
    bystander = headers(agent=AGENT_B, principal=f"q{tag}", session=f"t{tag}")
    await seed_facts(server.url, bystander, [f"{kept}one", f"{kept}two"], infer=True)
    wait_sync(lambda: consolidated(server, kept), timeout=60, what="bystander consolidated")

    # Every model call now takes 3 s: the forget lands while the extraction is at the model.
    devmodel.set_faults(delay=3.0, routes=["chat"])
    await seed_facts(server.url, ident, [f"{erased}one", f"{erased}two"], infer=True)
    wait_sync(lambda: extraction_in_flight(server.db), timeout=30, what="extraction in flight")
    status, doc, _ = await call(
        server.url,
        "/v1/forget",
        {"level": level},
        hdrs=forget_headers(level, AGENT_A, principal, session),
    )
    answered = time.time()
    assert status == 200, doc
    assert doc["degraded"] is False, doc

    # After the forget answered, nothing of the erased text is left anywhere.
    assert erased not in table_text(server.db)
    assert raw_hits(server.db.data_dir, [erased]) == {}

    # The same principal writes again into the same session; that work is consolidated
    # (with Mem0's "last messages" context of the session) without the erased turns.
    devmodel.set_faults(delay=0.2, routes=["chat"])
    await seed_facts(server.url, ident, [f"{fresh}one", f"{fresh}two"], infer=True)
    wait_sync(lambda: consolidated(server, fresh), timeout=60, what="new writes consolidated")

    after = model_texts_since(devmodel, answered)
    assert [t for t in after if fresh in t], "the new writes reached the model"
    assert leaks(after, [erased]) == []
    assert erased not in table_text(server.db)
    assert raw_hits(server.db.data_dir, [erased]) == {}
    # What was not erased is still there.
    assert kept in table_text(server.db)


@pytest.mark.parametrize("level", ["session", "agent", "user", "store"])
async def test_after_a_forget_no_file_in_the_data_dir_holds_erased_bytes(
    memory_factory: MakeMemory, level: Level
) -> None:
    server = memory_factory("local", **SETTINGS)
    tag = uuid.uuid4().hex[:8]
    erased, principal, session = f"gonex{tag}", f"p{tag}", f"s{tag}"
    ident = headers(agent=AGENT_A, principal=principal, session=session)
    await seed_facts(server.url, ident, [f"{erased}one", f"{erased}two"], infer=True)
    wait_sync(lambda: consolidated(server, erased), timeout=60, what="consolidated")
    hits = raw_hits(server.db.data_dir, [erased])
    if server.db.kek_dir is None:  # sealed texts are never in the files (encryption/)
        assert {"conversation.sqlite3-wal", "chroma/chroma.sqlite3", "mem0/history.db"} & set(hits)

    forget = {} if level == "store" else forget_headers(level, AGENT_A, principal, session)
    status, doc, _ = await call(server.url, "/v1/forget", {"level": level}, hdrs=forget)
    assert status == 200 and doc["degraded"] is False, doc
    assert doc["forgotten"]["long_term"] == 2
    assert raw_hits(server.db.data_dir, [erased]) == {}


async def test_an_erasure_cut_short_by_a_crash_is_finished_at_restart(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    first = memory_factory("local", **SETTINGS)
    data_dir = first.db.data_dir
    tag = uuid.uuid4().hex[:8]
    erased, principal, session = f"gonex{tag}", f"p{tag}", f"s{tag}"
    ident = headers(agent=AGENT_A, principal=principal, session=session)
    devmodel.set_faults(delay=5.0, routes=["chat"])
    await seed_facts(first.url, ident, [f"{erased}one", f"{erased}two"], infer=True)
    wait_sync(lambda: extraction_in_flight(first.db), timeout=30, what="extraction in flight")

    # The forget records its tombstone, then waits for the extraction at the model: the
    # process dies there.
    forget = asyncio.ensure_future(
        call(first.url, "/v1/forget", {"level": "user"}, hdrs=headers(principal=principal))
    )

    def recorded() -> list[tuple[object, ...]]:
        return first.db.relational("SELECT id, done_at FROM kaos_mem_erasures")

    await eventually(lambda: asyncio.to_thread(recorded), bool, within=30, what="tombstone")
    first.proc.kill()
    with pytest.raises(Exception):  # noqa: B017  (the connection dies with the process)
        await forget
    assert [done for _, done in recorded()] == [None], "the erasure was pending at the crash"

    devmodel.set_faults(delay=0.2, routes=["chat"])
    second = memory_factory("local", data_dir=str(data_dir), **SETTINGS)
    # The first sweep at start finishes the erasure.
    wait_sync(lambda: all(done is not None for _, done in recorded()), timeout=60, what="final")
    finished = time.time()
    assert erased not in table_text(second.db)
    assert raw_hits(data_dir, [erased]) == {}

    fresh = f"freshx{tag}"
    await seed_facts(second.url, ident, [f"{fresh}one", f"{fresh}two"], infer=True)
    wait_sync(lambda: consolidated(second, fresh), timeout=60, what="new writes consolidated")
    after = model_texts_since(devmodel, finished)
    assert [t for t in after if fresh in t]
    assert leaks(after, [erased]) == []
    assert raw_hits(data_dir, [erased]) == {}
