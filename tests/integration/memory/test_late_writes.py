"""A write that arrives after a forget of its conversation cannot outlive it.

An agent sends a turn's write after its answer (or retries one); a forget that came in
between must still win. The write says when its turns were said (``said_at``): an erasure
of its conversation recorded later drops it whole (200, ``accepted: 0``, ``erased: true``),
counted in ``kaos_memory_writes_erased_total``. Erasures of other conversations, and writes
said after the forget, are untouched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fixtures.memory import MakeMemory
from tests.support.memory_http import AGENT_A, AGENT_B, call, headers, uid

BACKENDS = ["local", pytest.param("external", marks=pytest.mark.postgres)]


def write(text: str, said_at: datetime | str) -> dict[str, Any]:
    when = said_at if isinstance(said_at, str) else said_at.isoformat()
    return {"turns": [{"role": "user", "content": text}], "infer": False, "said_at": when}


async def window(url: str, hdrs: dict[str, str]) -> list[str]:
    status, doc, _ = await call(url, "/v1/list", {"level": "session"}, hdrs=hdrs)
    assert status == 200, doc
    return [t["content"] for t in doc["short_term"]["window"]]


async def erased_count(url: str) -> float:
    status, text, _ = await call(url, "/metrics", method="GET")
    assert status == 200
    for line in str(text).splitlines():
        if line.startswith("kaos_memory_writes_erased_total "):
            return float(line.split()[1])
    raise AssertionError("no kaos_memory_writes_erased_total")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("level", ["session", "agent", "user"])
async def test_a_write_said_before_a_forget_is_dropped_when_it_arrives_after(
    memory_factory: MakeMemory, backend: str, level: str
) -> None:
    mem = memory_factory(backend, max_read_scope="user")
    session = uid("s")
    alice = headers(agent=AGENT_A, principal="alice", session=session)
    status, doc, _ = await call(mem.url, "/v1/write", write("first", datetime.now(UTC)), hdrs=alice)
    assert status == 200 and doc["accepted"] == 1, doc
    before_forget = datetime.now(UTC) - timedelta(seconds=1)

    status, doc, _ = await call(mem.url, "/v1/forget", {"level": level}, hdrs=alice)
    assert status == 200, doc

    status, doc, _ = await call(mem.url, "/v1/write", write("late", before_forget), hdrs=alice)
    assert status == 200, doc
    assert doc == {"accepted": 0, "scheduled": False, "degraded": False, "erased": True}
    assert await window(mem.url, alice) == []
    assert await erased_count(mem.url) == 1

    # Said after the forget: written as usual.
    after = datetime.now(UTC) + timedelta(seconds=1)
    status, doc, _ = await call(mem.url, "/v1/write", write("new", after), hdrs=alice)
    assert status == 200 and doc["accepted"] == 1 and doc["erased"] is False, doc
    assert await window(mem.url, alice) == ["new"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_forget_of_another_conversation_drops_nothing(
    memory_factory: MakeMemory, backend: str
) -> None:
    mem = memory_factory(backend, max_read_scope="user")
    session = uid("s")
    alice = headers(agent=AGENT_A, principal="alice", session=session)
    before = datetime.now(UTC) - timedelta(seconds=1)
    # Alice's other session, bob's session of the same id, alice with another agent.
    status, _, _ = await call(mem.url, "/v1/write", write("x", before), hdrs=alice)
    assert status == 200
    other_session = headers(agent=AGENT_A, principal="alice", session=uid("s"))
    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "session"}, hdrs=other_session)
    assert status == 200, doc
    bob = headers(agent=AGENT_A, principal="bob", session=session)
    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "user"}, hdrs=bob)
    assert status == 200, doc
    alice_b = headers(agent=AGENT_B, principal="alice", session=session)
    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "agent"}, hdrs=alice_b)
    assert status == 200, doc

    status, doc, _ = await call(mem.url, "/v1/write", write("kept", before), hdrs=alice)
    assert status == 200 and doc["accepted"] == 1 and doc["erased"] is False, doc
    assert await window(mem.url, alice) == ["x", "kept"]


async def test_said_at_without_its_offset_is_refused_and_writes_nothing(
    memory_factory: MakeMemory,
) -> None:
    mem = memory_factory("local")
    alice = headers(agent=AGENT_A, principal="alice", session=uid("s"))
    status, doc, _ = await call(mem.url, "/v1/write", write("x", "2026-12-06T10:00:00"), hdrs=alice)
    assert status == 400, doc
    assert "said_at must give its UTC offset" in str(doc)
    assert await window(mem.url, alice) == []
