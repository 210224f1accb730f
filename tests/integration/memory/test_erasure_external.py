"""Erasure against background work, external mode: two replicas on one PostgreSQL, one of
them killed with SIGKILL during the erasure.

An extraction of the erased scope is at the (slowed) model on one replica when the other
is asked to forget. Either the working replica dies meanwhile (the erasure waits for its
lease to lapse and answers final), or the erasing one dies after recording the tombstone
(the survivor's sweeper finishes the erasure). Afterwards the same principal writes again,
and every table of the database and every model call that started after the erasure was
final are searched for the erased text.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any

import pytest
from kaos_core.memory.contract import Level

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.erasure_checks import (
    extraction_in_flight,
    leaks,
    model_texts_since,
    table_text,
)
from tests.support.devmodel import DevModel
from tests.support.memory_http import (
    AGENT_A,
    AGENT_B,
    call,
    eventually,
    headers,
    seed_facts,
    wait_sync,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPLICA: dict[str, Any] = {
    "token_budget": 200,
    "max_read_scope": "user",
    "idle_flush_seconds": 0,
    "lease_ttl": 3,
    "sweep_interval": 0.5,
}


def forget_headers(level: Level, principal: str, session: str) -> dict[str, str]:
    if level == "user":
        return headers(principal=principal)
    return headers(agent=AGENT_A, principal=principal, session=session)


def consolidated(server: MemoryServer, marker: str) -> bool:
    folds = server.db.folds()
    return (
        bool(folds)
        and all(f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds)
        and any(marker in str(f.get("data")) for f in server.db.vector_payloads())
    )


def erasures(server: MemoryServer) -> list[tuple[Any, ...]]:
    return server.db.relational("SELECT id, level, done_at FROM kaos_mem_erasures ORDER BY id")


def vacuumed(server: MemoryServer) -> bool:
    """Whether the erased tables (KAOS's turns, Mem0's collection: each of its partitions
    when partitioned, since a partitioned table keeps no rows itself) were vacuumed."""
    collection = server.db.collection
    rows = server.db.relational(
        "SELECT relname, last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relid IN"
        " (SELECT 'kaos_mem_turns'::regclass UNION SELECT inhrelid FROM pg_inherits"
        "  WHERE inhparent = %s::regclass UNION SELECT %s::regclass"
        "  WHERE NOT EXISTS (SELECT FROM pg_inherits WHERE inhparent = %s::regclass))",
        (collection, collection, collection),
    )
    return len(rows) >= 2 and all(done for _, done in rows)


def extracting_pid(server: MemoryServer) -> int:
    """The process holding an extract lease (a lease owner is ``host:pid:nonce/...``)."""
    (owner,) = [row["owner"] for row in server.db.leases() if row["kind"] == "extract"]
    return int(str(owner).split(":")[1])


def by_pid(replicas: list[MemoryServer], pid: int) -> MemoryServer:
    (found,) = [r for r in replicas if r.proc.proc.pid == pid]
    return found


async def start_erased_work(
    replicas: list[MemoryServer], devmodel: DevModel, tag: str
) -> tuple[dict[str, str], str, MemoryServer, MemoryServer]:
    """A bystander consolidated, then the erased turns' extraction at the slowed model;
    the replica working on it and another one."""
    writer = replicas[0]
    bystander = headers(agent=AGENT_B, principal=f"q{tag}", session=f"t{tag}")
    await seed_facts(writer.url, bystander, [f"keptx{tag}one", f"keptx{tag}two"], infer=True)
    wait_sync(lambda: consolidated(writer, f"keptx{tag}"), timeout=60, what="bystander")

    devmodel.set_faults(delay=3.0, routes=["chat"])
    ident = headers(agent=AGENT_A, principal=f"p{tag}", session=f"s{tag}")
    await seed_facts(writer.url, ident, [f"gonex{tag}one", f"gonex{tag}two"], infer=True)
    wait_sync(lambda: extraction_in_flight(writer.db), timeout=30, what="extraction in flight")
    worker = by_pid(replicas, extracting_pid(writer))
    other = next(r for r in replicas if r is not worker)
    return ident, f"gonex{tag}", worker, other


async def write_again_and_check(
    survivor: MemoryServer, devmodel: DevModel, ident: dict[str, str], tag: str, since: float
) -> None:
    erased, fresh = f"gonex{tag}", f"freshx{tag}"
    assert erased not in table_text(survivor.db)
    devmodel.set_faults(delay=0.2, routes=["chat"])
    await seed_facts(survivor.url, ident, [f"{fresh}one", f"{fresh}two"], infer=True)
    wait_sync(lambda: consolidated(survivor, fresh), timeout=60, what="new writes consolidated")
    after = model_texts_since(devmodel, since)
    assert [t for t in after if fresh in t], "the new writes reached the model"
    assert leaks(after, [erased]) == []
    everything = table_text(survivor.db)
    assert erased not in everything
    assert f"keptx{tag}" in everything


@pytest.mark.parametrize("level", ["session", "agent", "user"])
async def test_forget_while_the_working_replica_is_killed(
    memory_factory: MakeMemory, devmodel: DevModel, level: Level
) -> None:
    replicas = [memory_factory("external", **REPLICA) for _ in range(2)]
    tag = uuid.uuid4().hex[:8]
    ident, _, worker, other = await start_erased_work(replicas, devmodel, tag)

    forget = asyncio.ensure_future(
        call(
            other.url,
            "/v1/forget",
            {"level": level},
            hdrs=forget_headers(level, f"p{tag}", f"s{tag}"),
        )
    )
    # Polled off the event loop: the forget request runs on it meanwhile.
    await eventually(
        lambda: asyncio.to_thread(erasures, other), bool, within=30, what="tombstone recorded"
    )
    os.kill(worker.proc.proc.pid, signal.SIGKILL)
    status, doc, _ = await forget
    answered = time.time()
    assert status == 200, doc
    assert doc["degraded"] is False, doc
    assert all(done is not None for _, _, done in erasures(other)), "the erasure is final"
    # The dead tuples the erasure left are vacuumed in the background.
    wait_sync(lambda: vacuumed(other), timeout=60, what="erased tables vacuumed")
    await write_again_and_check(other, devmodel, ident, tag, answered)


async def test_an_erasure_whose_replica_died_is_finished_by_the_other(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    replicas = [memory_factory("external", **REPLICA) for _ in range(2)]
    tag = uuid.uuid4().hex[:8]
    ident, _, worker, other = await start_erased_work(replicas, devmodel, tag)

    # The erasing replica records the tombstone, then waits for the worker's extraction:
    # it dies there, before anything but the conversational rows is deleted.
    forget = asyncio.ensure_future(
        call(other.url, "/v1/forget", {"level": "user"}, hdrs=headers(principal=f"p{tag}"))
    )
    # Polled off the event loop: the forget request runs on it meanwhile.
    await eventually(
        lambda: asyncio.to_thread(erasures, other), bool, within=30, what="tombstone recorded"
    )
    os.kill(other.proc.proc.pid, signal.SIGKILL)
    with pytest.raises(Exception):  # noqa: B017  (the connection dies with the replica)
        await forget

    # The worker's sweeper takes the erasure over once the dead holder's lease lapsed.
    wait_sync(
        lambda: all(done is not None for _, _, done in erasures(worker)),
        timeout=60,
        what="erasure finished by the survivor",
    )
    final = float(erasures(worker)[0][2])
    await write_again_and_check(worker, devmodel, ident, tag, final)
