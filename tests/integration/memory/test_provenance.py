"""Provenance on every long-term fact, through a real ``kaos-memory`` with Mem0 on both
backends: an extracted fact names the user's turns it came from, when they were said and
the model that extracted it; a fact an agent saved names that origin (``saved``, or
``tool`` after a tool's output) and no model; recall and listing give it out, and erasing
the scope leaves no fact of it. (Export and import carry it: the cross-backend test in
``portable/test_export_import.py`` compares it.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.memory_http import AGENT_A, call, eventually, headers, list_all, uid

BACKENDS = ["local", pytest.param("external", marks=pytest.mark.postgres)]
# Every write is folded once the session is idle for a second.
IDLE = {"idle_flush_seconds": 1, "sweep_interval": 0.2}
TURNS = [
    {"role": "user", "content": "I moved to Porto in March and I work as a night nurse."},
    {"role": "assistant", "content": "Porto has lovely tiled churches worth a visit."},
]


async def write(mem: MemoryServer, ident: dict[str, str], body: dict[str, Any]) -> None:
    status, doc, _ = await call(mem.url, "/v1/write", body, hdrs=ident)
    assert status in (200, 202), doc


async def flushed(mem: MemoryServer, folds: int) -> None:
    async def probe() -> list[dict[str, Any]]:
        return mem.db.folds()

    await eventually(
        probe,
        lambda found: len(found) >= folds and all(f["extraction_status"] == "done" for f in found),
        what=f"{folds} folds extracted",
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_every_fact_says_where_it_came_from(backend: str, memory_factory: MakeMemory) -> None:
    mem = memory_factory(backend, **IDLE)
    ident = headers(agent=AGENT_A, principal="alice", session=uid("prov"))
    await write(mem, ident, {"turns": TURNS})
    await flushed(mem, 1)
    saved = {"role": "assistant", "content": "Alice prefers green tea in the evening."}
    await write(mem, ident, {"turns": [saved], "origin": "saved"})
    await flushed(mem, 2)
    # A tool's words (an instruction would be quarantined: ``test_quarantine``).
    planted = {"role": "assistant", "content": "The March invoice from Acme totals 420 euros."}
    await write(mem, ident, {"turns": [planted], "origin": "tool"})
    await flushed(mem, 3)

    facts = {f["text"]: f for f in await list_all(mem.url, ident, "session")}
    turns = mem.db.relational("SELECT seq, role, at FROM kaos_mem_turns ORDER BY seq")
    user_seq, _, user_at = turns[0]
    extracted = facts[TURNS[0]["content"]]
    assert extracted["provenance"] == {
        "source": "user",
        "turns": [user_seq],
        "observed_at": user_at,
        "recorded_at": extracted["created_at"],
        "model": "dev-summarizer",
    }
    assert all("churches" not in text for text in facts), "the dev model keeps user lines"
    kept = facts[saved["content"]]["provenance"]
    # The third turn of the session: after the conversation's two.
    assert (kept["source"], kept["model"], kept["turns"]) == ("saved", None, [turns[2][0]])
    assert kept["observed_at"] == turns[2][2]
    assert facts[planted["content"]]["provenance"]["source"] == "tool"

    # Recall gives the same provenance out.
    status, doc, _ = await call(
        mem.url, "/v1/recall", {"level": "session", "query": "Porto nurse"}, hdrs=ident
    )
    assert status == 200, doc
    recalled = {f["text"]: f["provenance"] for f in doc["long_term"]["facts"]}
    assert recalled[TURNS[0]["content"]] == extracted["provenance"]

    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "session"}, hdrs=ident)
    assert status == 200, doc
    assert await list_all(mem.url, ident, "session") == []


async def test_an_origin_other_than_the_three_is_refused(memory_factory: MakeMemory) -> None:
    mem = memory_factory("local")
    ident = headers(agent=AGENT_A, principal="alice", session=uid("prov"))
    body = {"turns": TURNS, "origin": "user"}
    status, doc, _ = await call(mem.url, "/v1/write", body, hdrs=ident)
    assert status == 400 and doc["error"]["code"] == "invalid_body", doc
    assert mem.db.relational("SELECT COUNT(*) FROM kaos_mem_turns")[0][0] == 0
