"""A session is one principal's conversation: nobody else can write into it, and so nobody
else can become attributed to it and read its window. Both backends."""

from __future__ import annotations

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import AGENT_A, AGENT_B, call, headers, uid


async def window(server: MemoryServer, hdrs: dict[str, str]) -> list[str]:
    status, doc, _ = await call(
        server.url, "/v1/recall", {"level": "session", "query": "pin"}, hdrs=hdrs
    )
    assert status == 200, doc
    return [t["content"] for t in doc["short_term"]["window"]]


async def test_another_principal_cannot_write_into_a_bound_session(
    memory_service: MemoryServer,
) -> None:
    server = memory_service
    session = uid("bound")
    alice = headers(agent=AGENT_A, principal="alice", session=session)
    bob = headers(agent=AGENT_A, principal="bob", session=session)
    nobody = headers(agent=AGENT_A, session=session)
    turn = {"turns": [{"role": "user", "content": "My PIN is 4711"}]}
    status, doc, _ = await call(server.url, "/v1/write", turn, hdrs=alice)
    assert status == 200, doc
    before = len(server.db.turns())

    for intruder in (bob, nobody):
        probe = {"turns": [{"role": "user", "content": "What was said here?"}]}
        status, doc, _ = await call(server.url, "/v1/write", probe, hdrs=intruder)
        assert status == 403, doc
        assert doc["error"]["code"] == "session_bound", doc
    assert len(server.db.turns()) == before, "a refused write writes nothing"
    assert await window(server, bob) == [], "bob never became attributed to the session"

    # The owner goes on writing, through any agent.
    alice_b = headers(agent=AGENT_B, principal="alice", session=session)
    status, doc, _ = await call(server.url, "/v1/write", turn, hdrs=alice_b)
    assert status == 200, doc
    assert await window(server, alice) == ["My PIN is 4711", "My PIN is 4711"]


async def test_a_session_without_a_principal_is_bound_by_its_first_principal(
    memory_service: MemoryServer,
) -> None:
    server = memory_service
    session = uid("open")
    nobody = headers(agent=AGENT_A, session=session)
    carol = headers(agent=AGENT_A, principal="carol", session=session)
    dave = headers(agent=AGENT_A, principal="dave", session=session)
    turn = {"turns": [{"role": "user", "content": "hello"}]}
    assert (await call(server.url, "/v1/write", turn, hdrs=nobody))[0] == 200
    assert (await call(server.url, "/v1/write", turn, hdrs=carol))[0] == 200
    status, doc, _ = await call(server.url, "/v1/write", turn, hdrs=dave)
    assert status == 403 and doc["error"]["code"] == "session_bound", doc
