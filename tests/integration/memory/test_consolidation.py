"""Background consolidation as an operator sees it: idle-session flush, crash recovery from
the outbox, and local mode's single writer. Real services, both backends where it applies.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer, memory_env
from tests.integration.memory.replica_load import audit, drive, metric_values, settle
from tests.support.devmodel import DevModel
from tests.support.memory_http import AGENT_A, call, eventually, headers, seed_facts, uid
from tests.support.procs import console_script, free_port


async def sweeps(server: MemoryServer) -> float:
    return sum((await metric_values(server.url, "kaos_memory_sweeps_total")).values())


async def test_idle_session_is_flushed_to_digest_and_long_term(
    memory_factory: MakeMemory, memory_backend: str
) -> None:
    server = memory_factory(memory_backend, idle_flush_seconds=1, sweep_interval=0.2)
    ident = headers(agent=AGENT_A, principal="alice", session=uid("idle"))
    turns = [
        {"role": "user", "content": "I keep bees on my roof in Porto"},
        {"role": "assistant", "content": "Lovely, rooftop bees."},
    ]
    status, doc, _ = await call(server.url, "/v1/write", {"turns": turns}, hdrs=ident)
    assert status == 200 and doc["scheduled"] is False, "far below the fold trigger"

    async def flushed() -> bool:
        folds = server.db.folds()
        return bool(folds) and all(f["extraction_status"] == "done" for f in folds)

    await eventually(flushed, bool, what="idle flush")
    recall = {"level": "session", "query": "bees Porto"}
    status, doc, _ = await call(server.url, "/v1/recall", recall, hdrs=ident)
    assert status == 200, doc
    assert doc["short_term"]["window"] == [], "the whole window was folded"
    assert doc["medium_term"]["version"] == 1
    assert [f["text"] for f in doc["long_term"]["facts"]] == ["I keep bees on my roof in Porto"]
    [session] = server.db.sessions()
    assert session["flushed"]

    # The next write opens the window again; idle once more, it is flushed again.
    more = [{"role": "user", "content": "The bees are Italian"}]
    await call(server.url, "/v1/write", {"turns": more}, hdrs=ident)
    assert not server.db.sessions()[0]["flushed"]

    async def twice() -> bool:
        folds = server.db.folds()
        return len(folds) == 2 and all(f["extraction_status"] == "done" for f in folds)

    await eventually(twice, bool, what="second idle flush")
    status, doc, _ = await call(server.url, "/v1/recall", recall, hdrs=ident)
    assert doc["medium_term"]["version"] == 2


async def test_idle_flush_off_leaves_the_window_alone(memory_factory: MakeMemory) -> None:
    server = memory_factory("local", idle_flush_seconds=0, sweep_interval=0.1)
    ident = headers(agent=AGENT_A, principal="alice", session=uid("kept"))
    turns = [{"role": "user", "content": "Short and sweet"}]
    await call(server.url, "/v1/write", {"turns": turns}, hdrs=ident)
    written = await sweeps(server)

    async def swept_a_while() -> bool:
        return await sweeps(server) >= written + 10

    await eventually(swept_a_while, bool, what="ten sweeps after the write")
    assert server.db.folds() == []
    status, doc, _ = await call(
        server.url, "/v1/recall", {"level": "session", "query": "sweet"}, hdrs=ident
    )
    assert status == 200, doc
    assert [t["content"] for t in doc["short_term"]["window"]] == ["Short and sweet"]


async def test_local_store_resumes_work_a_killed_process_left(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    settings = {"token_budget": 400, "sweep_interval": 0.2, "idle_flush_seconds": 0}
    await devmodel.aset_faults(delay=0.5, routes=["extraction"])
    first = memory_factory("local", **settings)
    load = await drive([first.url], sessions=4, pairs_per_session=40, agents_per_session=2)
    assert not load.failures, load.failures[:3]

    def pending() -> int:
        return first.db.outbox_depth()

    deadline = time.monotonic() + 60
    while not (pending() and first.db.leases()):
        assert time.monotonic() < deadline, "no extraction in flight"
        await asyncio.sleep(0.02)  # polling interval, not synchronisation
    first.proc.stop(sig=signal.SIGKILL, timeout=10)
    assert first.db.outbox_depth() > 0 and first.db.leases(), "work and leases left behind"
    await devmodel.aset_faults(delay=0.0, routes=["extraction"])

    # Same data dir: the kernel released the dead process's lock; its leases are void.
    second = memory_factory("local", data_dir=first.db.data_dir, **settings)
    await settle(second.db, [second], trigger=400, within=300)
    audit(second.db, trigger=400, expect_single_attempt=False)
    assert second.db.leases() == []


def test_a_second_local_process_on_the_same_data_dir_refuses_to_start(
    memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    running = memory_factory("local")
    env = memory_env(
        backend="local",
        data_dir=running.db.data_dir,
        dsn=None,
        model_base_url=devmodel.base_url,
        port=free_port(),
        overrides={},
    )
    done = subprocess.run(
        [console_script("kaos-memory")],
        env={**running.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "single-writer" in done.stderr
    assert str(running.db.data_dir) in done.stderr
    assert running.proc.alive(), "the first process is untouched"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("backend", ["external"])
@pytest.mark.postgres
def test_external_replicas_share_a_data_dir_path_without_locking(
    memory_factory: MakeMemory, backend: str
) -> None:
    """External mode keeps nothing in the data dir that needs a single writer."""
    first = memory_factory(backend)
    second = memory_factory(backend, data_dir=first.db.data_dir)
    assert first.proc.alive() and second.proc.alive()


async def test_work_failed_in_a_model_outage_completes_after_it_without_new_writes(
    memory_factory: MakeMemory, memory_backend: str, devmodel: DevModel
) -> None:
    server = memory_factory(
        memory_backend, token_budget=200, sweep_interval=0.2, executor_retries=0
    )
    await devmodel.aset_faults(error_rate=1.0, routes=["digest", "extraction"])
    ident = headers(agent=AGENT_A, principal="alice", session=uid("outage"))
    texts = await seed_facts(server.url, ident, ["first", "second", "third"], infer=True)

    def failures() -> list[int]:
        return [int(r[0]) for r in server.db.relational("SELECT failures FROM kaos_mem_folds")]

    async def backing_off() -> bool:
        counts = failures()
        return bool(counts) and min(counts) >= 2

    # Both steps fail, are deferred, and are retried by sweeps (no write schedules them).
    await eventually(backing_off, bool, what="two failed jobs per fold")
    assert all(f["digest_status"] == "pending" for f in server.db.folds())
    await devmodel.aset_faults(error_rate=0.0, routes=["digest", "extraction"])

    async def done() -> bool:
        folds = server.db.folds()
        return all(f["digest_status"] == "done" and f["extraction_status"] == "done" for f in folds)

    await eventually(done, bool, what="the outbox drained after the outage")
    stored = {p["data"] for p in server.db.vector_payloads()}
    folded = {t["content"] for t in server.db.turns() if t["folded_by"] is not None}
    assert folded and folded <= set(texts)
    assert folded <= stored, "every folded turn reached long-term memory"
