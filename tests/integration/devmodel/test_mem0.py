"""Mem0 (the real library) pointed at ``kaos-devmodel``: extracted facts land in the stores.

Mem0 is synchronous, so these tests are plain functions; the devmodel serves from its own
process. ``MEM0_DIR`` and ``MEM0_TELEMETRY`` are set before mem0 is first imported.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.devmodel import DevModel
from tests.support.postgres import pg_query

CONVERSATION = [
    {"role": "user", "content": "I live in Lisbon"},
    {"role": "assistant", "content": "Lisbon is a lovely city."},
    {"role": "user", "content": "My favourite dish is bacalhau\n\nI work as a nurse"},
]
FACTS = {"I live in Lisbon", "My favourite dish is bacalhau", "I work as a nurse"}


@pytest.fixture(scope="session")
def memory_cls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        if "mem0" not in sys.modules:
            mp.setenv("MEM0_TELEMETRY", "False")
            mp.setenv("MEM0_DIR", str(tmp_path_factory.mktemp("mem0-dir")))
        from mem0 import Memory

        yield Memory


KEY = "mem0-direct-test"
KEY_SHA256 = hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()


def _config(devmodel: DevModel, tmp_path: Path, vector_store: dict[str, Any]) -> dict[str, Any]:
    return {
        "llm": {
            "provider": "openai",
            # The key tells this test's calls apart on the session's shared model server.
            "config": {"model": "devmodel", "api_key": KEY, "openai_base_url": devmodel.base_url},
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": "devmodel-embed",
                "api_key": "x",
                "openai_base_url": devmodel.base_url,
                "embedding_dims": devmodel.embedding_dims,
            },
        },
        "vector_store": vector_store,
        "history_db_path": str(tmp_path / "history.db"),
    }


def _add_search_and_dedup(memory: Any, devmodel: DevModel) -> None:
    added = memory.add(CONVERSATION, user_id="u1", infer=True)
    assert {r["memory"] for r in added["results"]} == FACTS
    assert all(r["event"] == "ADD" for r in added["results"])

    stored = memory.get_all(filters={"user_id": "u1"})["results"]
    assert {m["memory"] for m in stored} == FACTS
    assert memory.get_all(filters={"user_id": "someone-else"})["results"] == []

    found = memory.search("where does the user live? Lisbon", filters={"user_id": "u1"}, top_k=3)
    assert found["results"][0]["memory"] == "I live in Lisbon"

    # The same fact again: deterministic embeddings find it, Mem0's hash check skips it.
    again = memory.add([{"role": "user", "content": "I live in Lisbon"}], user_id="u1", infer=True)
    assert again["results"] == []
    assert len(memory.get_all(filters={"user_id": "u1"})["results"]) == len(FACTS)

    # Only this test's calls: a memory service of an earlier test may still be folding.
    mine = [r for r in devmodel.requests() if r["authorization_sha256"] == KEY_SHA256]
    assert [r["kind"] for r in mine] == ["extraction", "extraction"]  # Mem0's only chat call
    (first, _) = mine
    assert "## New Messages" in first["messages"][1]["content"]


def test_mem0_add_infer_stores_extracted_facts_in_chroma(
    memory_cls: Any, devmodel: DevModel, tmp_path: Path
) -> None:
    store = {
        "provider": "chroma",
        "config": {"collection_name": "facts", "path": str(tmp_path / "chroma")},
    }
    with memory_cls.from_config(_config(devmodel, tmp_path, store)) as memory:
        _add_search_and_dedup(memory, devmodel)


@pytest.mark.postgres
def test_mem0_add_infer_stores_extracted_facts_in_pgvector(
    memory_cls: Any, devmodel: DevModel, tmp_path: Path, pg_dsn: str
) -> None:
    store = {
        "provider": "pgvector",
        "config": {
            "connection_string": pg_dsn,
            "collection_name": "facts",
            "embedding_model_dims": devmodel.embedding_dims,
            "hnsw": True,
        },
    }
    memory = memory_cls.from_config(_config(devmodel, tmp_path, store))
    try:
        _add_search_and_dedup(memory, devmodel)
        rows = pg_query(pg_dsn, "SELECT payload->>'data', payload->>'user_id' FROM facts")
        assert {tuple(r) for r in rows} == {(fact, "u1") for fact in FACTS}
    finally:
        for store in (memory.vector_store, memory._entity_store):
            if store is not None:
                store.connection_pool.close()
        memory.close()


def test_mem0_reads_an_unusable_extraction_answer_as_no_facts(
    memory_cls: Any, devmodel: DevModel, tmp_path: Path
) -> None:
    """Why the memory service judges extraction answers itself (``storage.mem0.llm``):
    Mem0 2.2.1 raises nothing for an answer it cannot parse, it stores no facts and says so
    only in its log. If an upgrade starts raising, this test says so."""
    store = {
        "provider": "chroma",
        "config": {"collection_name": "unusable", "path": str(tmp_path / "chroma")},
    }
    with memory_cls.from_config(_config(devmodel, tmp_path, store)) as memory:
        for mode in ("not_json", "empty", "cut_off"):
            devmodel.set_faults(answer=mode, routes=["extraction"])
            assert memory.add(CONVERSATION, user_id="u1", infer=True) == {"results": []}, mode
        assert memory.get_all(filters={"user_id": "u1"})["results"] == []


def test_mem0s_own_prompts_are_recognised(memory_cls: Any) -> None:
    from kaos_devmodel.prompts import extraction_answer, recognise
    from kaos_devmodel.protocol import Message
    from mem0.configs.prompts import (
        ADDITIVE_EXTRACTION_PROMPT,
        AGENT_CONTEXT_SUFFIX,
        PROCEDURAL_MEMORY_SYSTEM_PROMPT,
        generate_additive_extraction_prompt,
    )
    from mem0.memory.utils import parse_messages

    user_prompt = generate_additive_extraction_prompt(
        existing_memories=[{"id": "0", "text": "User has a cat"}],
        new_messages=parse_messages(CONVERSATION),
        last_k_messages=[{"role": "user", "content": "earlier: not new"}],
        custom_instructions="## Extra\nuser: not a message",
    )
    for system in (ADDITIVE_EXTRACTION_PROMPT, ADDITIVE_EXTRACTION_PROMPT + AGENT_CONTEXT_SUFFIX):
        messages = [
            Message(role="system", content=system),
            Message(role="user", content=user_prompt),
        ]
        assert recognise(messages) == "extraction"
        facts = json.loads(extraction_answer(messages))["memory"]
        assert [f["text"] for f in facts] == [
            "I live in Lisbon",
            "My favourite dish is bacalhau",
            "I work as a nurse",
        ]
    assert recognise([Message(role="system", content=PROCEDURAL_MEMORY_SYSTEM_PROMPT)]) == (
        "procedural"
    )


def test_mem0_procedural_memory_gets_a_summary(
    memory_cls: Any, devmodel: DevModel, tmp_path: Path
) -> None:
    store = {
        "provider": "chroma",
        "config": {"collection_name": "procedures", "path": str(tmp_path / "chroma")},
    }
    with memory_cls.from_config(_config(devmodel, tmp_path, store)) as memory:
        added = memory.add(
            [user for user in CONVERSATION if user["role"] == "user"],
            agent_id="a1",
            memory_type="procedural_memory",
        )
        (item,) = added["results"]
        assert item["memory"].startswith("Procedural summary:\n1. user: I live in Lisbon")
    assert devmodel.stats()["procedural"] == 1
