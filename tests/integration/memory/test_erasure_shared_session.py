"""A forget of one principal's session leaves Mem0's context of another principal's
conversation under the same session id: a session id is each principal's own. Both
backends, through the HTTP API; Mem0's history database read directly (local mode keeps
one, external mode none)."""

from __future__ import annotations

from typing import Any

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.memory_http import AGENT_A, call, headers, seed_facts, uid, wait_sync


def settled(server: MemoryServer, facts: int) -> bool:
    folds = server.db.folds()
    return (
        bool(folds)
        and all(f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds)
        and len(server.db.vector_payloads()) == facts
    )


def messages_of(server: MemoryServer, principal: str) -> list[dict[str, Any]]:
    return [m for m in server.db.mem0_messages() if f"user_id={principal}" in m["session_scope"]]


async def test_forgetting_bobs_session_keeps_alices_mem0_context_of_the_same_id(
    memory_factory: MakeMemory, memory_backend: str
) -> None:
    server = memory_factory(memory_backend, token_budget=200)
    session = uid("alice-1")
    alice_id, bob_id = uid("alice"), uid("bob")
    alice = headers(agent=AGENT_A, principal=alice_id, session=session)
    bob = headers(agent=AGENT_A, principal=bob_id, session=session)
    # infer=True: Mem0 extracts with the model and keeps the turns as message context.
    await seed_facts(server.url, alice, ["alicectx1", "alicectx2"], infer=True)
    await seed_facts(server.url, bob, ["bobctx1", "bobctx2"], infer=True)
    wait_sync(lambda: settled(server, 4), timeout=120, what="both principals' facts extracted")
    alice_before = messages_of(server, alice_id)
    if memory_backend == "local":
        assert alice_before and "alicectx1" in str(alice_before)
        assert "bobctx1" in str(messages_of(server, bob_id))
    else:
        # External mode keeps no node-local history: nothing of it to purge or keep.
        assert not (server.db.data_dir / "mem0" / "history.db").exists()

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "session"}, hdrs=bob)
    assert status == 200 and not doc["degraded"], doc
    assert doc["forgotten"]["long_term"] == 2, doc

    assert messages_of(server, alice_id) == alice_before
    assert messages_of(server, bob_id) == []
    assert "bobctx" not in server.db.everything_text()
    payloads = server.db.vector_payloads()
    assert {p["data"].split(" says")[0] for p in payloads} == {"alicectx1", "alicectx2"}
