"""The work queue: dedup per key, one run per key at a time, keys in parallel, backoff.

Delays run on a manual clock (``ManualTimer``): the tests move time, never wait for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from kaos_operator.queue import Workers, WorkQueue

from tests.support.operator_context import ManualTimer


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
    timer = ManualTimer()
    q = WorkQueue(timer=timer)
    q.add_after("k", 100)
    q.add_after("k", 10)
    q.add_after("k", 50)
    assert timer.pending == 1
    timer.advance(9)
    assert q.depth == 0
    timer.advance(1)
    assert q.depth == 1 and timer.pending == 0
    assert await q.get() == "k"
    q.close()


async def test_a_cancelled_delayed_add_never_comes() -> None:
    timer = ManualTimer()
    q = WorkQueue(timer=timer)
    q.add_after("k", 10)
    q.add_after("other", 10)
    q.cancel_delayed("k")
    q.cancel_delayed("absent")  # nothing pending: nothing to do
    timer.advance(10)
    assert q.depth == 1
    assert await q.get() == "other"
    q.close()


async def test_one_run_per_key_and_keys_in_parallel() -> None:
    q = WorkQueue()
    running: dict[Hashable, int] = {}
    overlap_same_key = False
    both_running = asyncio.Event()
    release = asyncio.Event()
    second_a = asyncio.Event()
    runs: list[Hashable] = []

    async def handler(key: Hashable) -> None:
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
    timer = ManualTimer()
    q = WorkQueue(backoff_base=1, backoff_max=2, timer=timer)
    attempts = 0
    attempted = asyncio.Event()

    async def handler(key: Hashable) -> None:
        nonlocal attempts
        attempts += 1
        attempted.set()
        if attempts < 3:
            raise RuntimeError("transient")

    async def attempt(trigger: Callable[[], None]) -> None:
        attempted.clear()
        trigger()
        await asyncio.wait_for(attempted.wait(), timeout=5)

    workers = Workers(q, handler, 1)
    workers.start()
    await attempt(lambda: q.add("k"))
    assert attempts == 1 and timer.pending == 1
    await attempt(lambda: timer.advance(1))
    assert attempts == 2 and timer.pending == 1
    await attempt(lambda: timer.advance(2))
    await workers.stop()
    assert attempts == 3 and timer.pending == 0
    assert q.backoff("k") == 1  # forgotten after the success


async def test_stop_lets_a_running_reconcile_finish() -> None:
    q = WorkQueue()
    started = asyncio.Event()
    finished = False

    async def handler(key: Hashable) -> None:
        nonlocal finished
        started.set()
        await asyncio.sleep(0.05)  # stands in for API calls of a reconcile
        finished = True

    workers = Workers(q, handler, 2)
    workers.start()
    q.add("k")
    await asyncio.wait_for(started.wait(), timeout=5)
    await workers.stop(grace=5)
    assert finished
