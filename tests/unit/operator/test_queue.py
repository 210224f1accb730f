"""The work queue: dedup per key, one run per key at a time, keys in parallel, backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from kaos_operator.queue import Result, Workers, WorkQueue


async def test_adds_of_a_queued_key_collapse() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert q.depth == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_key_added_while_processing_runs_again_after() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # while processing: remembered, not queued concurrently
    assert q.depth == 0
    q.done(key)
    assert q.depth == 1


async def test_backoff_doubles_and_caps_and_forget_resets() -> None:
    q = WorkQueue(backoff_base=1.0, backoff_max=5.0)
    delays = [q.add_rate_limited("k") for _ in range(5)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    q.forget("k")
    assert q.backoff("k") == 1.0
    q.close()


async def test_add_after_keeps_the_earliest() -> None:
    q = WorkQueue()
    q.add_after("k", 100)
    q.add_after("k", 0.01)
    q.add_after("k", 50)
    key = await asyncio.wait_for(q.get(), timeout=5)
    assert key == "k"
    q.close()


async def test_one_run_per_key_and_keys_in_parallel() -> None:
    q = WorkQueue()
    running: dict[Hashable, int] = {}
    overlap_same_key = False
    both_running = asyncio.Event()
    release = asyncio.Event()
    second_a = asyncio.Event()
    runs: list[Hashable] = []

    async def handler(key: Hashable) -> Result:
        nonlocal overlap_same_key
        running[key] = running.get(key, 0) + 1
        overlap_same_key |= running[key] > 1
        runs.append(key)
        if runs.count("a") == 2:
            second_a.set()
        if sum(1 for v in running.values() if v) == 2:
            both_running.set()
        await release.wait()
        running[key] -= 1
        return Result()

    workers = Workers(q, handler, 4)
    workers.start()
    q.add("a")
    q.add("b")
    await asyncio.wait_for(both_running.wait(), timeout=5)
    q.add("a")  # arrives while "a" runs
    release.set()
    await asyncio.wait_for(second_a.wait(), timeout=5)
    await workers.stop(grace=5)
    assert not overlap_same_key
    assert runs.count("a") == 2 and runs.count("b") == 1


async def test_failures_are_retried_with_backoff() -> None:
    q = WorkQueue(backoff_base=0.01, backoff_max=0.02)
    attempts = 0
    done = asyncio.Event()

    async def handler(key: Hashable) -> Result:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise RuntimeError("transient")
        done.set()
        return Result()

    errors: list[BaseException] = []
    workers = Workers(q, handler, 1, on_error=lambda k, e: errors.append(e))
    workers.start()
    q.add("k")
    await asyncio.wait_for(done.wait(), timeout=5)
    await workers.stop()
    assert attempts == 3 and len(errors) == 2
    assert q.backoff("k") == 0.01  # forgotten after the success


async def test_stop_lets_a_running_reconcile_finish() -> None:
    q = WorkQueue()
    started = asyncio.Event()
    finished = False

    async def handler(key: Hashable) -> Result:
        nonlocal finished
        started.set()
        await asyncio.sleep(0.05)  # stands in for API calls of a reconcile
        finished = True
        return Result()

    workers = Workers(q, handler, 2)
    workers.start()
    q.add("k")
    await asyncio.wait_for(started.wait(), timeout=5)
    await workers.stop(grace=5)
    assert finished
