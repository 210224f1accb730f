"""Several replicas on one PostgreSQL: no lost or double folds, crash-durable extraction.

Real ``kaos-memory`` processes in external mode on one database, driven concurrently over
loopback; every assertion reads the database (turns, folds, digests, leases and Mem0's
pgvector rows), never the services' own account of what they did.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import aiohttp
import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.replica_load import (
    LoadResult,
    audit,
    drive,
    metric_values,
    settle,
    write_pair,
)
from tests.support.devmodel import DevModel
from tests.support.memory_http import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TRIGGER = 400
REPLICA: dict[str, Any] = {
    "token_budget": TRIGGER,  # a fold every dozen writes or so
    "digest_retention": 100_000,  # keep every version, to check they are gapless
    "idle_flush_seconds": 0,
    "sweep_interval": 0.5,
    "lease_ttl": 5,
    "executor_queue_size": 4096,
    "executor_workers": 4,
}


async def counter_total(servers: list[MemoryServer], name: str, **labels: str) -> float:
    total = 0.0
    for server in servers:
        for key, value in (await metric_values(server.url, name)).items():
            if all((k, v) in key for k, v in labels.items()):
                total += value
    return total


async def test_two_then_three_replicas_fold_and_extract_every_turn_exactly_once(
    memory_factory: MakeMemory,
) -> None:
    replicas = [memory_factory("external", **REPLICA) for _ in range(2)]
    started = time.monotonic()
    first = await drive([r.url for r in replicas], sessions=60, pairs_per_session=42)
    replicas.append(memory_factory("external", **REPLICA))
    second = await drive([r.url for r in replicas], sessions=60, pairs_per_session=42, start=42)
    written = time.monotonic() - started
    assert not first.failures and not second.failures, (first.failures + second.failures)[:5]
    assert first.turns + second.turns == 10_080

    db = replicas[0].db
    await settle(db, replicas, trigger=TRIGGER, within=600)
    figures = audit(db, trigger=TRIGGER, expect_single_attempt=True)
    assert figures.turns == 10_080
    assert figures.sessions == 60
    assert figures.folds > 60  # several folds per session, spread over the replicas

    # Every fold was extracted by exactly one replica, and all three took part.
    done = [
        await counter_total([r], "kaos_memory_extractions_total", outcome="done") for r in replicas
    ]
    assert sum(done) == figures.folds, done
    assert all(n > 0 for n in done), done
    digests_done = await counter_total(replicas, "kaos_memory_folds_total", outcome="done")
    assert digests_done == figures.digests
    print(
        f"\n{figures.turns} turns, {figures.sessions} sessions: written in {written:.1f}s,"
        f" {figures.folds} folds, {figures.digests} digest versions, {figures.facts} facts;"
        f" extractions per replica {done}"
    )


async def test_sigkill_during_extraction_leaves_every_fact_exactly_once(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    # Slow extractions, so the kill lands while one is in flight.
    await devmodel.aset_faults(delay=0.6, routes=["extraction"])
    victim, survivor = (memory_factory("external", **REPLICA) for _ in range(2))
    db = victim.db
    pid = victim.proc.proc.pid

    burst = asyncio.ensure_future(
        drive(
            [victim.url, survivor.url],
            sessions=12,
            pairs_per_session=200,
            agents_per_session=2,
            pace=0.05,
        )
    )

    def victim_mid_extraction() -> list[dict[str, Any]]:
        """Folds the victim holds the extract lease of, with facts of theirs already stored
        while the fold is still pending: a half-done extraction."""
        held = {
            lease["key"]
            for lease in db.leases()
            if lease["kind"] == "extract" and f":{pid}:" in lease["owner"]
        }
        pending = {
            f["id"]: f
            for f in db.folds()
            if f["key"] in held and f["extraction_status"] == "pending"
        }
        stored = {str(p.get("kaos_fold")) for p in db.vector_payloads()}
        return [f for i, f in pending.items() if str(i) in stored]

    deadline = time.monotonic() + 120
    half_done: list[dict[str, Any]] = []
    while not half_done:
        assert time.monotonic() < deadline, "the victim never had an extraction in flight"
        assert not burst.done(), "the burst ended before an extraction was in flight"
        await asyncio.sleep(0.02)  # polling interval, not synchronisation
        half_done = victim_mid_extraction()
    victim.proc.stop(sig=signal.SIGKILL, timeout=10)
    assert victim.proc.proc.returncode == -signal.SIGKILL

    result = await burst
    # Writes the victim was serving when it died fail; everything answered is durable.
    survived = {t["content"] for t in db.turns() if t["role"] == "user"}
    assert result.answered <= survived
    await devmodel.aset_faults(delay=0.0, routes=["extraction"])

    # The survivor takes over once the victim's leases lapse; then the victim restarts.
    await settle(db, [survivor], trigger=TRIGGER, within=300)
    restarted = memory_factory("external", **REPLICA)
    await settle(db, [survivor, restarted], trigger=TRIGGER, within=300)

    figures = audit(db, trigger=TRIGGER, expect_single_attempt=False)
    retried = {f["id"]: f["extraction_attempts"] for f in db.folds()}
    for fold in half_done:
        assert retried[fold["id"]] >= 2, f"half-done fold {fold['id']} was not redone"
    assert figures.facts > 0
    assert not [lease for lease in db.leases() if f":{pid}:" in lease["owner"]]


async def test_readiness_follows_postgres_and_answered_writes_survive_a_restart(
    memory_factory: MakeMemory, private_postgres: Any
) -> None:
    pg = private_postgres
    dsn = pg.create_database("kaos_restart")
    server = memory_factory("external", dsn=dsn, **REPLICA)
    url = server.url
    pid = server.proc.proc.pid

    async def ready() -> int:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/readyz") as resp:
            return resp.status

    async def wait_ready(want: int, within: float) -> None:
        await eventually(
            ready, lambda status: status == want, within=within, what=f"/readyz {want}"
        )

    result = LoadResult()
    statuses: list[int] = []
    stop = asyncio.Event()

    async def writer() -> None:
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            n = 0
            while not stop.is_set():
                statuses.append(
                    await write_pair(
                        http, url, f"restart-{n % 5}", "alice", n, result, failure_mode="strict"
                    )
                )
                n += 1

    load = asyncio.ensure_future(writer())
    await wait_ready(200, 30)
    pg.stop()
    await wait_ready(503, 60)

    # Down until the write path has seen it too: a strict write fails (nothing written).
    async def failed_writes() -> int:
        return sum(1 for s in statuses if s >= 500 or s == 0)

    await eventually(failed_writes, bool, what="a write failing during the outage")
    pg.start()
    await wait_ready(200, 120)
    # A few more answered writes after the recovery, then stop the load.
    answered_before = result.writes

    async def answered() -> int:
        return result.writes

    await eventually(
        answered, lambda n: n >= answered_before + 20, what="writes resuming after the restart"
    )
    stop.set()
    await load

    # The long-term search's pool and the session reads' pool held connections the
    # restart killed: the first recall after it still answers whole (not degraded), every
    # tier read on a replaced connection.
    headers = {
        "X-Agent-Identity": "kaos://agent/bench/restart",
        "X-Principal": "alice",
        "X-Session-Id": "after-restart",
    }
    body = {
        "level": "agent",
        "query": "restart",
        "include": ["long_term", "medium_term", "short_term"],
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/recall", json=body, headers=headers) as resp,
    ):
        doc = await resp.json()
    assert resp.status == 200 and doc["degraded"] is False, doc

    assert server.proc.proc.poll() is None and server.proc.proc.pid == pid, "service restarted"
    stored = {t["content"] for t in server.db.turns()}
    assert result.answered, "no write was answered"
    assert result.answered <= stored, f"{len(result.answered - stored)} answered writes lost"
    # The background work that failed during the outage completes once it is back.
    await settle(server.db, [server], trigger=TRIGGER, within=300)
    audit(server.db, trigger=TRIGGER, expect_single_attempt=False)
