"""Bi-temporal facts through a real ``kaos-memory`` with Mem0 on both backends: a fact a
later one replaces is retired, not deleted; recall and listing give the current value by
default, the old one ``as_of`` a time before the change, and every version with
``history``; a fact about something else stays current; erasing the owner removes every
version. (The development model answers the supersession call by its documented rules:
``kaos_devmodel.supersede``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.encryption.support import make_kek
from tests.support.devmodel import DevModel
from tests.support.memory_http import AGENT_A, call, eventually, headers, list_all, uid

# ``sealed``: local, with fact text encrypted at rest (retiring rewrites a sealed payload).
BACKENDS = ["local", "sealed", pytest.param("external", marks=pytest.mark.postgres)]
IDLE = {"idle_flush_seconds": 1, "sweep_interval": 0.2}
LISBON = "I live in Lisbon, close to the river."
NURSE = "I work as a night nurse at the hospital."
PORTO = "Big news: we moved to Porto last month."
# Words of both facts: the development model embeds words, not meaning.
QUESTION = "Do I live in Lisbon, or did we move to Porto?"


async def said(mem: MemoryServer, ident: dict[str, str], text: str, folds: int) -> None:
    turns = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    status, doc, _ = await call(mem.url, "/v1/write", {"turns": turns}, hdrs=ident)
    assert status in (200, 202), doc

    async def probe() -> list[dict[str, Any]]:
        return mem.db.folds()

    await eventually(
        probe,
        lambda found: len(found) >= folds and all(f["extraction_status"] == "done" for f in found),
        what=f"{folds} folds extracted",
    )


async def sample(mem: MemoryServer, line: str) -> float:
    """One sample of the service's ``/metrics`` (0 when absent)."""
    async with aiohttp.ClientSession() as http, http.get(mem.url + "/metrics") as resp:
        text = await resp.text()
    for found in text.splitlines():
        name, _, value = found.rpartition(" ")
        if name == line:
            return float(value)
    return 0.0


async def recall(mem: MemoryServer, ident: dict[str, str], **extra: Any) -> dict[str, Any]:
    body = {"level": "agent", "query": QUESTION, "include": ["long_term"], **extra}
    status, doc, _ = await call(mem.url, "/v1/recall", body, hdrs=ident)
    assert status == 200, doc
    return {f["text"]: f for f in doc["long_term"]["facts"]}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_replaced_fact_is_retired_not_deleted(
    backend: str, memory_factory: MakeMemory, tmp_path: Path
) -> None:
    if backend == "sealed":
        kek = str(make_kek(tmp_path / "kek"))
        mem = memory_factory("local", encryption_kek_dir=kek, **IDLE)
    else:
        mem = memory_factory(backend, **IDLE)

    def ident(session: str) -> dict[str, str]:
        return headers(agent=AGENT_A, principal="alice", session=session)

    await said(mem, ident(uid("early")), LISBON, 1)
    await said(mem, ident(uid("early")), NURSE, 2)
    await said(mem, ident(uid("later")), PORTO, 3)
    # The user turns' times in the order they were said (their text may be sealed).
    turns = mem.db.relational("SELECT at FROM kaos_mem_turns WHERE role = 'user' ORDER BY at")
    at = dict(zip((LISBON, NURSE, PORTO), (when for (when,) in turns), strict=True))
    asking = ident(uid("ask"))

    now = await recall(mem, asking)
    assert PORTO in now and LISBON not in now, sorted(now)
    assert await sample(mem, "kaos_memory_retired_facts_total") == 1.0
    assert now[PORTO]["valid_from"] == at[PORTO] and now[PORTO]["valid_to"] is None

    # As of the time Lisbon was said (before the move), Lisbon was true and Porto not yet.
    then = await recall(mem, asking, as_of=at[LISBON])
    assert LISBON in then and PORTO not in then, sorted(then)

    every = await recall(mem, asking, history=True)
    old = every[LISBON]
    assert old["valid_from"] == at[LISBON]
    assert old["valid_to"] == at[PORTO]
    assert old["superseded_by"] == every[PORTO]["id"]
    assert old["retired_at"] is not None and old["retired_at"] >= old["created_at"]

    listed = {f["text"] for f in await list_all(mem.url, asking, "agent")}
    assert listed == {NURSE, PORTO}, "a fact about something else stays current"
    status, doc, _ = await call(
        mem.url,
        "/v1/list",
        {"level": "agent", "include": ["long_term"], "history": True},
        hdrs=asking,
    )
    assert status == 200, doc
    assert {f["text"] for f in doc["long_term"]["facts"]} == {LISBON, NURSE, PORTO}

    # Erasing the owner removes every version, retired ones too.
    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "agent"}, hdrs=asking)
    assert status == 200, doc
    assert await recall(mem, asking, history=True) == {}


@pytest.mark.parametrize(
    "extra",
    [
        {"as_of": "yesterday"},
        {"as_of": "2026-01-01T00:00:00"},
        {"as_of": "2026-01-01T00:00:00Z", "history": True},
        {"history": "yes"},
    ],
)
async def test_a_bad_view_is_refused(extra: dict[str, Any], memory_factory: MakeMemory) -> None:
    mem = memory_factory("local")
    ident = headers(agent=AGENT_A, principal="alice", session=uid("bad"))
    body = {"level": "agent", "query": QUESTION, **extra}
    status, doc, _ = await call(mem.url, "/v1/recall", body, hdrs=ident)
    assert status == 400, doc
    assert doc["error"]["code"] == "invalid_body", doc
    assert "Traceback" not in str(doc)


async def test_an_unusable_answer_retires_nothing(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    """The model's supersession answers are prose: after its retries nothing is retired,
    each answer is counted as unusable, and the extraction itself still stands."""
    mem = memory_factory("local", model_base_url=devmodel.base_url, **IDLE)

    def ident(session: str) -> dict[str, str]:
        return headers(agent=AGENT_A, principal="bob", session=session)

    await said(mem, ident(uid("early")), LISBON, 1)
    await devmodel.aset_faults(answer="not_json", routes=["supersede"])
    await said(mem, ident(uid("later")), PORTO, 2)
    both = await recall(mem, ident(uid("ask")))
    assert set(both) == {LISBON, PORTO}, sorted(both)
    assert all(f["valid_to"] is None for f in both.values())
    unusable = 'kaos_memory_unusable_answers_total{reason="not_json",step="supersession"}'
    # The first answer and each retry (``KAOS_MEMORY_ANSWER_RETRIES``, default two).
    assert await sample(mem, unusable) == 3.0
    assert await sample(mem, "kaos_memory_retired_facts_total") == 0.0
    assert [f["extraction_status"] for f in mem.db.folds()] == ["done", "done"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_erasing_the_change_reinstates_the_earlier_fact(
    backend: str, memory_factory: MakeMemory, tmp_path: Path
) -> None:
    """The user erases the session where they said they moved: the move is forgotten, so
    the earlier home holds again (current, no end of validity), as if never replaced."""
    if backend == "sealed":
        kek = str(make_kek(tmp_path / "kek"))
        mem = memory_factory("local", encryption_kek_dir=kek, **IDLE)
    else:
        mem = memory_factory(backend, **IDLE)

    def ident(session: str) -> dict[str, str]:
        return headers(agent=AGENT_A, principal="carol", session=session)

    later = ident(uid("later"))
    await said(mem, ident(uid("early")), LISBON, 1)
    await said(mem, later, PORTO, 2)
    assert set(await recall(mem, ident(uid("ask")))) == {PORTO}

    status, doc, _ = await call(mem.url, "/v1/forget", {"level": "session"}, hdrs=later)
    assert status == 200, doc
    assert doc["forgotten"]["long_term"] == 1, doc
    now = await recall(mem, ident(uid("ask")), history=True)
    assert set(now) == {LISBON}, sorted(now)
    assert (now[LISBON]["valid_to"], now[LISBON]["retired_at"]) == (None, None)
    assert now[LISBON]["superseded_by"] is None
