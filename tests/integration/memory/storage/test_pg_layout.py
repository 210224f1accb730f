"""The long-term table's layout in external mode, as the service creates it: partitioned by
principal for a new store (Mem0's indexes on every partition), Mem0's single table with
``pg_partitions=0``; in both, a principal's facts are stored, recalled and erased through
the service, and the erasure removes that principal's rows and no one else's."""

from __future__ import annotations

import random
import uuid
from typing import Any

import aiohttp
import pytest
from kaos_memory.storage.mem0.pgvector.cache import MIN_FACTS

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.memory_http import (
    AGENT_A,
    call,
    eventually,
    headers,
    long_text,
    seed_facts,
    uid,
)
from tests.support.postgres import insert_facts, pg_query

pytestmark = pytest.mark.postgres

COLLECTION = "kaos_layout"
WORDS = ("apple", "river", "stone", "cloud", "violin", "garden", "copper", "lantern")


def rows_by_principal(server: MemoryServer) -> dict[str, int]:
    assert server.db.dsn is not None
    rows = pg_query(
        server.db.dsn,
        f"SELECT payload->>'user_id', count(*) FROM {COLLECTION} GROUP BY 1",
    )
    return {str(principal): int(count) for principal, count in rows}


async def stored(server: MemoryServer, principals: list[str], markers: list[str]) -> None:
    for principal in principals:
        ident = headers(agent=AGENT_A, principal=principal, session=uid(principal))
        await seed_facts(server.url, ident, [f"{principal}-{m}" for m in markers])

    def all_extracted() -> bool:
        folds = server.db.folds()
        return len(folds) >= len(principals) and all(
            f["extraction_status"] == "done" for f in folds
        )

    async def probe() -> bool:
        return all_extracted() and set(rows_by_principal(server)) >= set(principals)

    await eventually(probe, bool, what="facts of every principal extracted")


@pytest.mark.parametrize(("partitions", "relkind"), [(None, "p"), (0, "r")])
async def test_a_principal_is_stored_recalled_and_erased_in_either_layout(
    memory_factory: MakeMemory, partitions: int | None, relkind: str
) -> None:
    overrides: dict[str, object] = {
        "collection": COLLECTION,
        "token_budget": 200,
        "max_read_scope": "user",
    }
    if partitions is not None:
        overrides["pg_partitions"] = partitions
    server = memory_factory("external", **overrides)
    assert server.db.dsn is not None
    dsn = server.db.dsn
    kind = pg_query(dsn, "SELECT relkind FROM pg_class WHERE relname = %s", [COLLECTION])
    assert kind == [(relkind,)]
    if relkind == "p":
        # The default count of partitions, each with Mem0's HNSW index.
        count = pg_query(
            dsn,
            "SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass",
            [COLLECTION],
        )
        assert count == [(64,)]
        hnsw = pg_query(
            dsn,
            "SELECT count(*) FROM pg_indexes WHERE tablename LIKE %s AND indexdef LIKE %s",
            [f"{COLLECTION}_p%", "%USING hnsw%"],
        )
        assert hnsw == [(64,)]

    await stored(server, ["alice", "bob"], ["apples", "pears"])
    before = rows_by_principal(server)
    assert before["alice"] >= 1 and before["bob"] >= 1

    alice = headers(agent=AGENT_A, principal="alice")
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {"level": "user", "query": long_text("alice-apples"), "include": ["long_term"]},
        hdrs=alice,
    )
    assert status == 200, doc
    assert doc["long_term"]["facts"], doc
    assert all("alice-" in f["text"] for f in doc["long_term"]["facts"]), doc

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=alice)
    assert status == 200, doc
    assert doc["forgotten"]["long_term"] == before["alice"], doc
    assert rows_by_principal(server) == {"bob": before["bob"]}
    # And again: nothing left to erase, nothing else touched.
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=alice)
    assert status == 200 and doc["forgotten"]["long_term"] == 0, doc
    assert rows_by_principal(server) == {"bob": before["bob"]}


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


async def test_a_large_principal_is_searched_from_held_vectors_and_stays_current(
    memory_factory: MakeMemory,
) -> None:
    server = memory_factory(
        "external", collection=COLLECTION, token_budget=200, max_read_scope="user"
    )
    assert server.db.dsn is not None
    dsn = server.db.dsn
    dims = pg_query(
        dsn,
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'vector'",
        [COLLECTION],
    )[0][0]
    # A principal past the threshold, stored as the service stores facts.
    rng = random.Random(9)
    rows = []
    for i in range(MIN_FACTS + 100):
        vector = [rng.uniform(-1, 1) for _ in range(dims)]
        payload = {
            "data": f"carol fact {i} " + " ".join(rng.choice(WORDS) for _ in range(6)),
            "user_id": "carol",
            "agent_id": AGENT_A,
            "run_id": "bulk",
            "kaos_group": COLLECTION,
            "created_at": f"2026-01-01T00:00:00.{i:06d}",
        }
        rows.append((str(uuid.uuid4()), vector, payload))
    insert_facts(dsn, COLLECTION, rows)
    carol = headers(agent=AGENT_A, principal="carol")

    async def recall(query: str) -> list[dict[str, Any]]:
        body = {"level": "user", "query": query, "include": ["long_term"], "top_k": 10}
        status, doc, _ = await call(server.url, "/v1/recall", body, hdrs=carol)
        assert status == 200 and doc["degraded"] is False, doc
        facts: list[dict[str, Any]] = doc["long_term"]["facts"]
        return facts

    async def held() -> tuple[float, float]:
        async with aiohttp.ClientSession() as http, http.get(f"{server.url}/metrics") as resp:
            text = await resp.text()
        return (
            _metric(text, "kaos_memory_held_principals"),
            _metric(text, "kaos_memory_vector_loads"),
        )

    queries = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(5)]
    from_database = [await recall(q) for q in queries]
    await eventually(held, lambda h: h == (1.0, 0.0), what="carol's vectors held")
    # The same answers from the held vectors: same facts, same order, same scores.
    for query, expected in zip(queries, from_database, strict=True):
        got = await recall(query)
        assert [(f["id"], f["text"]) for f in got] == [(f["id"], f["text"]) for f in expected]
        assert [f["score"] for f in got] == pytest.approx([f["score"] for f in expected])

    # A fact extracted now (another write path, the triggers' version) is found at once.
    await stored(server, ["carol"], ["kiwis", "figs"])
    texts = [f["text"] for f in await recall(long_text("carol-kiwis"))]
    assert any("carol-kiwis" in t for t in texts), texts
    await eventually(held, lambda h: h == (1.0, 0.0), what="carol's vectors reloaded")
    texts = [f["text"] for f in await recall(long_text("carol-kiwis"))]
    assert any("carol-kiwis" in t for t in texts), texts

    # Erased: nothing comes back, held or not.
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=carol)
    assert status == 200 and doc["forgotten"]["long_term"] >= MIN_FACTS + 100, doc
    assert await recall(long_text("carol-kiwis")) == []
    assert await recall(queries[0]) == []
