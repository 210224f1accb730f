"""A dump of the real Mem0 library's ``get_all`` imports into a KAOS store with its user,
agent and run ids mapped to principal, agent and session; importing it again stores
nothing twice; a mapping naming anything but Mem0's ids is refused."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.portable.portable_http import counts, import_
from tests.support.devmodel import DevModel
from tests.support.memory_http import headers, list_all

MEMORIES = [
    ("I live in Lisbon", "alice", "planner", "trip-1"),
    ("I work as a nurse", "alice", None, "trip-1"),
    ("My favourite dish is bacalhau", "alice", "planner", None),
    ("I collect old maps", "bob", "planner", "maps-1"),
]


@pytest.fixture(scope="module")
def memory_cls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        if "mem0" not in sys.modules:
            mp.setenv("MEM0_TELEMETRY", "False")
            mp.setenv("MEM0_DIR", str(tmp_path_factory.mktemp("mem0-dir")))
        from mem0 import Memory

        yield Memory


def mem0_dump(memory_cls: Any, devmodel: DevModel, tmp_path: Path) -> dict[str, Any]:
    embedder = {
        "model": "devmodel-embed",
        "api_key": "x",
        "openai_base_url": devmodel.base_url,
        "embedding_dims": devmodel.embedding_dims,
    }
    config = {
        "llm": {
            "provider": "openai",
            "config": {"model": "devmodel", "api_key": "x", "openai_base_url": devmodel.base_url},
        },
        "embedder": {"provider": "openai", "config": embedder},
        "vector_store": {
            "provider": "chroma",
            "config": {"collection_name": "dump", "path": str(tmp_path / "chroma")},
        },
        "history_db_path": str(tmp_path / "history.db"),
    }
    memory = memory_cls.from_config(config)
    try:
        for text, user, agent, run in MEMORIES:
            ids = {"user_id": user, "agent_id": agent, "run_id": run}
            memory.add(
                [{"role": "user", "content": text}],
                **{k: v for k, v in ids.items() if v is not None},
                metadata={"source": "crm"},
                infer=False,
            )
        results = []
        for user in ("alice", "bob"):
            results += memory.get_all(filters={"user_id": user})["results"]
        return {"results": results}
    finally:
        memory.close()


async def test_a_mem0_dump_imports_with_its_attribution(
    memory_factory: MakeMemory, memory_cls: Any, devmodel: DevModel, tmp_path: Path
) -> None:
    dump = mem0_dump(memory_cls, devmodel, tmp_path)
    assert len(dump["results"]) == len(MEMORIES)
    server = memory_factory("local", max_read_scope="user")
    mapping = {
        "source": "mem0",
        "principal": "{user_id}",
        "agent": "kaos://agent/team/{agent_id}",
        "session": "{run_id}",
        "default_session": "imported",
    }
    body = json.dumps(dump).encode()
    status, doc = await import_(
        server, body, query="?" + urlencode(mapping), content_type="application/json"
    )
    assert status == 200, doc
    assert (doc["facts"], doc["skipped"], doc["reembedded"]) == (len(MEMORIES), 0, True), doc

    alice = await list_all(server.url, headers(principal="alice"), "user")
    got = {(f["text"], f["user_id"], f["agent_id"], f["session_id"]) for f in alice}
    assert got == {
        ("I live in Lisbon", "alice", "kaos://agent/team/planner", "trip-1"),
        ("I work as a nurse", "alice", None, "trip-1"),
        ("My favourite dish is bacalhau", "alice", "kaos://agent/team/planner", "imported"),
    }
    bob = await list_all(server.url, headers(principal="bob"), "user")
    assert [(f["text"], f["session_id"]) for f in bob] == [("I collect old maps", "maps-1")]
    payloads = server.db.vector_payloads()
    assert {p["source"] for p in payloads} == {"crm"}
    assert {p["mem0_id"] for p in payloads} == {m["id"] for m in dump["results"]}

    rows = counts(server)
    status, doc = await import_(
        server, body, query="?" + urlencode(mapping), content_type="application/json"
    )
    assert status == 200 and (doc["facts"], doc["skipped"]) == (0, len(MEMORIES)), doc
    assert counts(server) == rows


async def test_a_mapping_names_only_mem0_ids(memory_factory: MakeMemory) -> None:
    server = memory_factory("local")
    query = "?" + urlencode({"source": "mem0", "principal": "{email}"})
    status, doc = await import_(
        server, b'{"results": []}', query=query, content_type="application/json"
    )
    assert status == 400 and doc["error"]["code"] == "invalid_mapping", doc
    assert "{email}" in doc["error"]["message"]
    status, doc = await import_(
        server,
        b'{"results": [{"id": "1", "memory": ""}]}',
        query="?source=mem0",
        content_type="application/json",
    )
    assert status == 400 and doc["error"]["message"].startswith("result 1: "), doc
    assert counts(server)["facts"] == 0
