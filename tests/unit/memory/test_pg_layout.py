"""The long-term table's layout in external mode, as the service creates it: partitioned by
principal for a new store (Mem0's indexes on every partition), Mem0's single table with
``pg_partitions=0``; in both, a principal's facts are stored, recalled and erased through
the service, and the erasure removes that principal's rows and no one else's."""

from __future__ import annotations

import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.postgres import pg_query
from tests.unit.memory.helpers import (
    AGENT_A,
    call,
    eventually,
    headers,
    long_text,
    seed_facts,
    uid,
)

pytestmark = pytest.mark.postgres

COLLECTION = "kaos_layout"


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
