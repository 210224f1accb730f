"""Per-role model bindings and store tuning, end to end on both backends.

Real ``kaos-memory`` processes (SQLite + embedded Chroma, or PostgreSQL + pgvector) with
Mem0, and two ``kaos-devmodel`` processes: one serves the embedding role, a second
the summarisation role, both this module's own. Each endpoint's own request logs
(``/control/requests``, ``/control/embeddings``) show which calls reached it, and with
which key (the SHA-256 of the ``Authorization`` header). The default model URL points at
a port nobody listens on, so a role that fell back to it would fail visibly.

Also here: a store without long-term memory (no collection, no extraction), the digest
and extraction prompt overrides, extraction concurrency, and the request concurrency
limit (429 with ``Retry-After``, nothing written).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.devmodel import devmodel_for, start_devmodel
from tests.fixtures.memory import COLLECTION, MakeMemory, MemoryServer
from tests.support.devmodel import DevModel
from tests.support.memory_http import AGENT_A, call, eventually, headers, uid
from tests.support.postgres import pg_query
from tests.support.procs import ServiceProcess

BACKENDS = ["local", pytest.param("external", marks=pytest.mark.postgres)]
# Nobody listens here: a role that fell back to the shared base URL would fail.
NOWHERE = "http://127.0.0.1:9/v1"
# Small window: the turns of one write cross the fold trigger (64 tokens).
SMALL = {"token_budget": 64, "sweep_interval": 0.5}
TURNS = [
    {"role": "user", "content": "I grow tomatoes and basil on my balcony in Lisbon."},
    {"role": "assistant", "content": "A sunny balcony is perfect for tomatoes and basil."},
    {"role": "user", "content": "My cat Miso likes to sleep between the tomato pots."},
    {"role": "assistant", "content": "Miso has picked a warm and fragrant spot to nap."},
]


def fingerprint(key: str) -> str:
    return hashlib.sha256(f"Bearer {key}".encode()).hexdigest()


@pytest.fixture(scope="module")
def summarizer_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A second development model server: the summarisation role's endpoint."""
    svc = start_devmodel("devmodel-summarizer", tmp_path_factory.mktemp("devmodel-summarizer"))
    try:
        yield svc
    finally:
        svc.stop(timeout=10)


@pytest.fixture
def summarizer(summarizer_server: ServiceProcess) -> Iterator[DevModel]:
    yield from devmodel_for(summarizer_server)


@pytest.fixture
def devmodel(private_devmodel_server: ServiceProcess) -> Iterator[DevModel]:
    """The embedding role's endpoint, this module's own: the tests count its requests."""
    yield from devmodel_for(private_devmodel_server)


async def write_session(mem: MemoryServer, session: str) -> None:
    hdrs = headers(agent=AGENT_A, principal="alice", session=session)
    status, body, _ = await call(mem.url, "/v1/write", {"turns": TURNS}, hdrs=hdrs)
    assert status == 202 and body["scheduled"] is True, body


async def settled(mem: MemoryServer, count: int = 1) -> list[dict[str, Any]]:
    """The store's folds once ``count`` of them are digested and extracted."""

    async def probe() -> list[dict[str, Any]]:
        return await asyncio.to_thread(mem.db.folds)

    return await eventually(
        probe,
        lambda folds: (
            len(folds) >= count
            and all(
                f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds
            )
        ),
        what="folds digested and extracted",
    )


async def recall(mem: MemoryServer, session: str, query: str) -> dict[str, Any]:
    hdrs = headers(agent=AGENT_A, principal="alice", session=session)
    status, body, _ = await call(
        mem.url,
        "/v1/recall",
        {"level": "session", "query": query, "include": ["long_term", "medium_term"]},
        hdrs=hdrs,
    )
    assert status == 200, body
    return dict(body)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_each_role_calls_only_its_own_endpoint_with_its_own_key(
    backend: str, memory_factory: MakeMemory, devmodel: DevModel, summarizer: DevModel
) -> None:
    mem = memory_factory(
        backend,
        model_base_url=NOWHERE,
        api_key="shared-key",
        embedding_base_url=devmodel.base_url,
        embedding_api_key="emb-key",
        summarization_base_url=summarizer.base_url,
        summarization_api_key="sum-key",
        **SMALL,
    )
    session = uid("roles")
    await write_session(mem, session)
    await settled(mem)
    body = await recall(mem, session, "tomatoes on the balcony")
    assert body["degraded"] is False
    assert body["medium_term"]["summary"], body
    assert any("tomatoes" in f["text"] for f in body["long_term"]["facts"]), body

    # The summarisation endpoint got the digest and Mem0's extraction, and no embedding.
    chats = await asyncio.to_thread(summarizer.requests)
    assert {"digest", "extraction"} <= {r["kind"] for r in chats}, chats
    assert {r["model"] for r in chats} == {"dev-summarizer"}
    assert {r["authorization_sha256"] for r in chats} == {fingerprint("sum-key")}
    assert await asyncio.to_thread(summarizer.embedding_requests) == []

    # The embedding endpoint got every embedding (facts and the query), and no chat.
    embeddings = await asyncio.to_thread(devmodel.embedding_requests)
    texts = [t for r in embeddings for t in r["input"]]
    assert "tomatoes on the balcony" in texts
    assert any("tomatoes" in t and t != "tomatoes on the balcony" for t in texts), texts
    assert {r["model"] for r in embeddings} == {"dev-embedder"}
    assert {r["authorization_sha256"] for r in embeddings} == {fingerprint("emb-key")}
    assert await asyncio.to_thread(devmodel.requests) == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_without_long_term_memory_there_is_no_index_and_no_extraction(
    backend: str, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    mem = memory_factory(backend, long_term_enabled=False, embedding_base_url=NOWHERE, **SMALL)
    session = uid("window-only")
    await write_session(mem, session)
    [fold] = await settled(mem)
    assert fold["digest_version"] == 1

    body = await recall(mem, session, "tomatoes")
    # Long-term answers empty and not degraded; the digest is there.
    assert body["long_term"] == {"facts": [], "block": ""}
    assert body["degraded"] is False
    assert body["medium_term"]["summary"]

    hdrs = headers(agent=AGENT_A, principal="alice", session=session)
    status, err, _ = await call(
        mem.url, "/v1/list", {"level": "session", "cursor": "abc"}, hdrs=hdrs
    )
    assert (status, err["error"]["code"]) == (400, "bad_cursor")
    status, forgot, _ = await call(mem.url, "/v1/forget", {"level": "session"}, hdrs=hdrs)
    assert status == 200 and forgot["forgotten"]["long_term"] == 0
    assert forgot["forgotten"]["short_term"] == len(TURNS)

    # Nothing was extracted or embedded, and no vector collection exists.
    kinds = {r["kind"] for r in await asyncio.to_thread(devmodel.requests)}
    assert "digest" in kinds and "extraction" not in kinds
    assert await asyncio.to_thread(devmodel.embedding_requests) == []
    if backend == "local":
        assert not (mem.db.data_dir / "chroma").exists()
        assert not (mem.db.data_dir / "mem0").exists()
    else:
        assert mem.db.dsn is not None
        [(table,)] = pg_query(mem.db.dsn, "SELECT to_regclass(%s)::text", (COLLECTION,))
        assert table is None


async def test_digest_and_extraction_prompts_are_overridable(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    digest_prompt = "Summarise this conversation in one short paragraph for a support team."
    extraction_prompt = "Keep facts about gardening; never keep the names of pets."
    mem = memory_factory(
        "local", digest_prompt=digest_prompt, extraction_prompt=extraction_prompt, **SMALL
    )
    session = uid("prompts")
    await write_session(mem, session)
    await settled(mem)
    chats = await asyncio.to_thread(devmodel.requests)
    digests = [r for r in chats if r["messages"][0]["content"] == digest_prompt]
    assert len(digests) == 1, chats
    assert "tomatoes" in digests[0]["messages"][1]["content"]
    extractions = [r for r in chats if r["kind"] == "extraction"]
    assert extractions and all(
        extraction_prompt in r["messages"][-1]["content"] for r in extractions
    )
    digest = await asyncio.to_thread(mem.db.digests)
    assert len(digest) == 1 and digest[0]["summary"]


async def test_extraction_concurrency_bounds_extractions_across_sessions(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    mem = memory_factory("local", extraction_concurrency=1, executor_workers=4, **SMALL)
    # Extraction calls are held at the model; digests are not.
    await devmodel.aset_faults(hang=True, routes=["extraction"])
    for i in range(3):
        await write_session(mem, uid(f"conc{i}"))

    async def folds() -> list[dict[str, Any]]:
        return await asyncio.to_thread(mem.db.folds)

    # All three sessions' jobs run (their digests are written) while the first extraction
    # is held: the others wait for the one slot, so none of them began an attempt.
    running = await eventually(
        folds,
        lambda fs: (
            len(fs) == 3
            and all(f["digest_status"] == "done" for f in fs)
            and any(f["extraction_attempts"] for f in fs)
        ),
        what="three digests and one extraction under way",
    )
    assert sum(1 for f in running if f["extraction_attempts"]) == 1
    await devmodel.aset_faults()
    await settled(mem, 3)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_requests_do_not_wait_for_extractions_held_at_a_slow_model(
    memory_factory: MakeMemory, devmodel: DevModel, backend: str
) -> None:
    """Every thread Mem0 runs on is held by an extraction waiting at the model: a recall
    still finds the facts stored before (not degraded), a strict write (which checks the
    vector store first) is still accepted, and readiness stays green."""
    mem = memory_factory(
        backend, mem0_threads=1, extraction_concurrency=1, recall_timeout=3, **SMALL
    )
    before = uid("slow")
    await write_session(mem, before)
    await settled(mem)
    await devmodel.aset_faults(hang=True, routes=["extraction"])
    await write_session(mem, uid("slow"))
    await eventually(
        devmodel.astats, lambda stats: stats["hangs"] >= 1, what="an extraction at the model"
    )

    found = await recall(mem, before, "tomatoes balcony")
    assert found["degraded"] is False, found
    assert any("tomatoes" in f["text"] for f in found["long_term"]["facts"]), found
    hdrs = headers(agent=AGENT_A, principal="alice", session=uid("slow"))
    body = {"turns": TURNS[:1], "failure_mode": "strict"}
    status, answer, _ = await call(mem.url, "/v1/write", body, hdrs=hdrs)
    assert status == 200 and answer["degraded"] is False, answer
    status, ready, _ = await call(mem.url, "/readyz", method="GET")
    assert status == 200, ready
    assert (await devmodel.astats())["hangs"] >= 1, "the extraction was held throughout"
    await devmodel.aset_faults()
    await settled(mem, 2)


async def test_requests_beyond_the_limit_are_refused_with_retry_after(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    mem = memory_factory("local", max_concurrent_requests=1)
    await devmodel.aset_faults(hang=True, routes=["embeddings"])
    session = uid("limit")
    hdrs = headers(agent=AGENT_A, principal="alice", session=session)
    held = asyncio.create_task(
        call(mem.url, "/v1/recall", {"level": "session", "query": "held"}, hdrs=hdrs)
    )
    try:
        # The recall is in flight once its query embedding reached the model.
        await eventually(
            lambda: asyncio.to_thread(devmodel.embedding_requests),
            lambda reqs: any("held" in r["input"] for r in reqs),
            what="the held recall at the model",
        )
        status, body, resp_headers = await call(
            mem.url, "/v1/write", {"turns": TURNS[:1]}, hdrs=hdrs
        )
        assert status == 429
        assert resp_headers["Retry-After"] == "1"
        assert body["error"]["code"] == "too_many_requests"
        assert "limit of 1 requests" in body["error"]["message"]
        assert body["request_id"]
        # Probes are never limited.
        status, _, _ = await call(mem.url, "/healthz", method="GET")
        assert status == 200
    finally:
        await devmodel.aset_faults()
        recalled = await held
    assert recalled[0] == 200
    # The refused write changed nothing; once the slot is free the same write is accepted.
    assert await asyncio.to_thread(mem.db.turns) == []
    status, _, _ = await call(mem.url, "/v1/write", {"turns": TURNS[:1]}, hdrs=hdrs)
    assert status == 200
    assert [t["content"] for t in await asyncio.to_thread(mem.db.turns)] == [TURNS[0]["content"]]
