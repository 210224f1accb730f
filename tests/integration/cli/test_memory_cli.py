"""``kaos memory recall|list|forget|audit`` against a real local memory service (``--url``):
tables for people, the contract response with ``--json``, refusals as one error line."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kaos_cli.main import main

from tests.fixtures.memory import MakeMemory, MemoryServer

AGENT = "kaos://agent/team/helper"
FACT = "My favourite colour is teal"


def kaos_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def remember(server: MemoryServer, session: str, principal: str, *lines: str) -> None:
    async def write() -> None:
        async with server.client(agent=AGENT) as client:
            for line in lines:
                await client.write(
                    [("user", line), ("assistant", "Noted.")],
                    session_id=session,
                    principal=principal,
                )

    asyncio.run(write())


def wait_for_facts(capsys: pytest.CaptureFixture[str], url: str, count: int) -> list[Any]:
    """Extraction runs in the background: poll the store-level listing with a deadline."""
    deadline = time.monotonic() + 60
    while True:
        facts: list[Any] = kaos_json(capsys, "memory", "list", "--url", url, "--level", "store")[
            "long_term"
        ]["facts"]
        if len(facts) >= count or time.monotonic() > deadline:
            return facts
        time.sleep(0.1)  # polling interval of a wait with a deadline


@pytest.fixture
def remembered(memory_factory: MakeMemory) -> MemoryServer:
    """A store that folded two sessions into long-term facts (a tiny token budget makes
    every write cross the compaction trigger)."""
    server = memory_factory("local", token_budget=16, max_read_scope="user")
    remember(server, "s1", "alice", FACT, "I live in Lisbon", "I work as a baker")
    remember(server, "s2", "bob", "I like chess", "I play the violin")
    return server


def test_list_recall_and_forget_round_trip(
    remembered: MemoryServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = remembered.url
    facts = wait_for_facts(capsys, url, 4)
    texts = {f["text"] for f in facts}
    assert FACT in texts and "I like chess" in texts
    teal = next(f for f in facts if f["text"] == FACT)
    assert (teal["user_id"], teal["agent_id"], teal["session_id"]) == ("alice", AGENT, "s1")
    assert teal["provenance"]["source"] == "user", teal

    # A table for people: headers, the fact, its source and attribution.
    assert main(["memory", "list", "--url", url, "--level", "store"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("long-term facts (")
    assert out.splitlines()[1].split()[:4] == ["ID", "TEXT", "SOURCE", "USER"]
    teal_row = next(line for line in out.splitlines() if FACT in line)
    assert teal_row.split(FACT)[1].split()[:2] == ["user", "alice"], teal_row

    # The agent's view of one user, scored by relevance.
    recalled = kaos_json(
        capsys, "memory", "recall", "--url", url, "--level", "agent", "--agent", "team/helper",
        "--principal", "alice", "--query", "favourite colour",
    )  # fmt: skip
    recalled_texts = [f["text"] for f in recalled["long_term"]["facts"]]
    assert FACT in recalled_texts
    assert "I like chess" not in recalled_texts
    assert all(f["score"] is not None for f in recalled["long_term"]["facts"])

    # The session's conversational tiers.
    session = kaos_json(
        capsys, "memory", "list", "--url", url, "--level", "session", "--session", "s1",
        "--principal", "alice",
    )  # fmt: skip
    assert session["short_term"]["window"], session
    assert main(["memory", "list", "--url", url, "--level", "session", "--session", "s1"]) == 0
    out = capsys.readouterr().out
    assert "digest (version" in out and "window (" in out

    # Cross-user erasure of bob (every agent and session), then the store no longer lists
    # his fact; the answer's receipt is the audit record, which the audit lists.
    forgotten = kaos_json(capsys, "memory", "forget", "--url", url, "--principal", "bob")
    assert forgotten["forgotten"]["long_term"] >= 1
    audit = kaos_json(capsys, "memory", "audit", "--url", url)
    record = audit["records"][0]
    assert record["id"] == forgotten["receipt"]
    assert record["scope"] == {"level": "user", "principal": "bob", "agent": None, "session": None}
    assert record["actor"] == {"kind": "admin", "name": None, "verified": False}
    assert record["forgotten"] == forgotten["forgotten"]
    assert "I like chess" not in json.dumps(audit)
    texts = {f["text"] for f in wait_for_facts(capsys, url, 0)}
    assert "I like chess" not in texts and FACT in texts

    assert main(["memory", "forget", "--url", url, "--level", "store"]) == 0
    out = capsys.readouterr().out
    assert "LONG_TERM" not in out and "long_term" in out and "FORGOTTEN" in out
    assert "receipt: audit record " in out
    assert main(["memory", "audit", "--url", url, "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "BY" in out and "(unverified)" in out and "store" in out and "more: --cursor" in out
    assert wait_for_facts(capsys, url, 0) == []

    # An export is audited beside the forgets: its action, what it moved, how it ended.
    dump = tmp_path / "store.jsonl"
    assert main(["memory", "export", "--url", url, "-f", str(dump)]) == 0
    capsys.readouterr()
    assert main(["memory", "audit", "--url", url, "--limit", "2"]) == 0
    header, exported, erased = capsys.readouterr().out.splitlines()[:3]
    assert header.split() == [
        "ID", "AT", "ACTION", "BY", "LEVEL", "PRINCIPAL", "AGENT", "SESSION", "TURNS",
        "DIGESTS", "FACTS", "SKIPPED", "STATUS",
    ]  # fmt: skip
    assert exported.split()[2:] == [
        "export", "admin", "(unverified)", "store", "-", "-", "-", "0", "0", "0", "0", "complete",
    ]  # fmt: skip
    assert erased.split()[2:6] == ["forget", "admin", "(unverified)", "store"]
    assert erased.split()[-2:] == ["-", "final"]
    exports = kaos_json(capsys, "memory", "audit", "--url", url, "--action", "export")
    (record,) = exports["records"]
    assert (record["action"], record["outcome"], record["scope"]["level"]) == (
        "export", "complete", "store",
    )  # fmt: skip
    assert record["moved"] == {"turns": 0, "digests": 0, "facts": 0, "skipped": 0}


def test_refusals_are_one_error_line(
    memory_factory: MakeMemory, capsys: pytest.CaptureFixture[str]
) -> None:
    url = memory_factory("local").url

    # An agent-level read without an agent identity has no owner: 400 before any store
    # access.
    assert main(["memory", "recall", "--url", url, "--level", "agent", "--query", "x"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: memory service refused (400 ")
    assert len(err.splitlines()) == 1

    # The store view is administrative: an agent identity may not use it.
    assert main(["memory", "list", "--url", url, "--level", "store", "--agent", "team/a"]) == 1
    assert capsys.readouterr().err.startswith("error: memory service refused (403 ")

    # An agent's level above the store's ceiling (agent by default) is refused too; an
    # admin call (no agent) is not bound by it.
    status = main(
        ["memory", "forget", "--url", url, "--level", "user", "--principal", "bob",
         "--agent", "team/a"]
    )  # fmt: skip
    assert status == 1
    assert "above_ceiling" in capsys.readouterr().err

    # forget without --level needs --principal alone.
    assert main(["memory", "forget", "--url", url, "--session", "s"]) == 2
    assert "give --level" in capsys.readouterr().err


def test_history_and_as_of_show_a_replaced_fact(
    remembered: MemoryServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = remembered.url
    wait_for_facts(capsys, url, 5)
    remember(remembered, "s3", "alice", "We moved to Porto last month")
    deadline = time.monotonic() + 60
    while True:
        listed = kaos_json(capsys, "memory", "list", "--url", url, "--level", "store", "--history")
        facts = {f["text"]: f for f in listed["long_term"]["facts"]}
        if len(facts) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling interval of a wait with a deadline
    lisbon, porto = facts["I live in Lisbon"], facts["We moved to Porto last month"]
    assert lisbon["valid_to"] == porto["valid_from"], (lisbon, porto)

    # The table says until when each version held; without --history only current ones.
    assert main(["memory", "list", "--url", url, "--level", "store", "--history"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[-2:] == ["VALID", "TO"]
    assert (
        next(line for line in out.splitlines() if "Lisbon" in line).split()[-1]
        == (lisbon["valid_to"])
    )
    assert next(line for line in out.splitlines() if "Porto" in line).split()[-1] == "current"
    assert main(["memory", "list", "--url", url, "--level", "store"]) == 0
    assert "Lisbon" not in capsys.readouterr().out

    # As of when Lisbon was said, the agent's view of alice had Lisbon and not yet Porto.
    then = kaos_json(
        capsys, "memory", "recall", "--url", url, "--level", "agent", "--agent", "team/helper",
        "--principal", "alice", "--query", "live Lisbon moved Porto",
        "--as-of", lisbon["valid_from"],
    )  # fmt: skip
    texts = [f["text"] for f in then["long_term"]["facts"]]
    assert "I live in Lisbon" in texts and "We moved to Porto last month" not in texts
    # A time without its offset is refused by the service, as one error line.
    assert main(["memory", "recall", "--url", url, "--level", "store", "--query", "x",
                 "--as-of", "2026-01-01T00:00:00"]) == 1  # fmt: skip
    assert "as_of must give its UTC offset" in capsys.readouterr().err
