"""A session is one principal's conversation, and a session id is a string the client
chooses: another principal writing to the same id, even first, starts a conversation of
its own, so it can neither squat the id nor read or erase what the owner writes there.
Both backends, through the HTTP API: windows, digests and long-term facts."""

from __future__ import annotations

from typing import Any

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import (
    AGENT_A,
    AGENT_B,
    call,
    eventually,
    headers,
    list_all,
    seed_facts,
    uid,
)


async def recall(server: MemoryServer, hdrs: dict[str, str]) -> dict[str, Any]:
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {"level": "session", "query": "pin", "include": ["short_term", "medium_term"]},
        hdrs=hdrs,
    )
    assert status == 200 and not doc["degraded"], doc
    return doc


async def window(server: MemoryServer, hdrs: dict[str, str]) -> list[str]:
    return [t["content"] for t in (await recall(server, hdrs))["short_term"]["window"]]


async def write(server: MemoryServer, hdrs: dict[str, str], text: str) -> None:
    turn = {"turns": [{"role": "user", "content": text}], "infer": False}
    status, doc, _ = await call(server.url, "/v1/write", turn, hdrs=hdrs)
    assert status == 200, doc


async def test_a_session_id_written_first_by_another_principal_is_not_squatted(
    memory_service: MemoryServer,
) -> None:
    server = memory_service
    session = uid("alice")  # alice's next session id, which bob guessed
    bob = headers(agent=AGENT_A, principal="bob", session=session)
    alice = headers(agent=AGENT_A, principal="alice", session=session)
    nobody = headers(agent=AGENT_A, session=session)
    await write(server, bob, "bob was here first")

    await write(server, alice, "My PIN is 4711")
    assert await window(server, alice) == ["My PIN is 4711"]
    assert await window(server, bob) == ["bob was here first"]
    assert await window(server, nobody) == [], "without a principal it is neither's"
    await write(server, nobody, "anonymous")
    assert await window(server, alice) == ["My PIN is 4711"]

    # The owner goes on writing, through any agent.
    await write(server, headers(agent=AGENT_B, principal="alice", session=session), "again")
    assert await window(server, alice) == ["My PIN is 4711", "again"]
    assert await window(server, bob) == ["bob was here first"]


async def test_forgetting_one_principals_session_leaves_the_others_of_the_same_id(
    memory_service: MemoryServer,
) -> None:
    server = memory_service
    session = uid("shared-id")
    alice = headers(agent=AGENT_A, principal=uid("alice"), session=session)
    bob = headers(agent=AGENT_A, principal=uid("bob"), session=session)
    # Long turns: they fold, so each has a digest and extracted facts besides its window.
    alice_texts = await seed_facts(server.url, alice, ["alicemarker1", "alicemarker2"])
    bob_texts = await seed_facts(server.url, bob, ["bobmarker1", "bobmarker2"])
    for who, texts in ((alice, alice_texts), (bob, bob_texts)):
        await eventually(
            lambda who=who: list_all(server.url, who, "session"),
            lambda facts, texts=texts: {f["text"] for f in facts} == set(texts),
            what="each principal's facts of the session extracted, and only theirs",
        )
        await eventually(
            lambda who=who: recall(server, who),
            lambda doc: doc["medium_term"]["summary"] is not None,
            what="each principal's digest",
        )
    bob_digest = (await recall(server, bob))["medium_term"]["summary"]
    assert "alicemarker" not in bob_digest

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "session"}, hdrs=bob)
    assert status == 200 and not doc["degraded"], doc
    assert doc["forgotten"]["long_term"] == 2, doc

    assert {f["text"] for f in await list_all(server.url, alice, "session")} == set(alice_texts)
    assert {f["text"] for f in await list_all(server.url, alice, "user")} == set(alice_texts)
    assert (await recall(server, alice))["medium_term"]["summary"] is not None
    assert await list_all(server.url, bob, "session") == []
    gone = await recall(server, bob)
    assert gone["medium_term"]["summary"] is None and gone["short_term"]["window"] == []
