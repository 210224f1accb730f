"""The bounded background executor: bounded queue, bounded retries, drain with a deadline."""

from __future__ import annotations

import asyncio

from kaos_memory.executor import BackgroundExecutor, PermanentJobError, RetryPolicy
from kaos_memory.metrics import MemoryMetrics
from prometheus_client import CollectorRegistry


def make(
    workers: int = 1, queue: int = 2, retries: int = 2
) -> tuple[BackgroundExecutor, CollectorRegistry]:
    registry = CollectorRegistry()
    executor = BackgroundExecutor(
        workers=workers,
        queue_size=queue,
        retry=RetryPolicy(retries=retries, backoff=0.0, backoff_max=0.0),
        metrics=MemoryMetrics.create(registry),
    )
    return executor, registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_full_queue_refuses_without_waiting() -> None:
    executor, registry = make(workers=1, queue=1)
    release = asyncio.Event()
    started = asyncio.Event()

    async def blocker() -> None:
        started.set()
        await release.wait()

    async def noop() -> None:
        return None

    executor.start()
    assert executor.submit("fold", blocker)
    await started.wait()
    assert executor.submit("fold", noop)  # fills the one queue slot
    assert not executor.has_room()
    assert executor.submit("fold", noop) is False
    assert value(registry, "kaos_memory_degraded_total", reason="queue_full") == 1
    release.set()
    assert await executor.drain(5)


async def test_retries_are_bounded_and_failures_counted() -> None:
    executor, registry = make(retries=2)
    attempts = 0

    async def flaky() -> None:
        nonlocal attempts
        attempts += 1
        raise RuntimeError("model down")

    async def permanent() -> None:
        nonlocal attempts
        attempts += 1
        raise PermanentJobError("input gone")

    assert await executor.run_with_retry("extraction", flaky) is False
    assert attempts == 3
    assert value(registry, "kaos_memory_executor_failures_total", kind="extraction") == 1
    assert value(registry, "kaos_memory_executor_retries_total", kind="extraction") == 2
    attempts = 0
    assert await executor.run_with_retry("digest", permanent) is False
    assert attempts == 1


async def test_drain_finishes_queued_work_and_refuses_new() -> None:
    executor, registry = make(workers=1, queue=10)
    done: list[int] = []

    def job(n: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            await asyncio.sleep(0)
            done.append(n)

        return run

    executor.start()
    for n in range(5):
        assert executor.submit("fold", job(n))
    assert await executor.drain(5) is True
    assert done == [0, 1, 2, 3, 4]
    assert executor.submit("fold", job(9)) is False
    assert value(registry, "kaos_memory_executor_jobs_total", kind="fold") == 5


async def test_drain_gives_up_at_the_deadline() -> None:
    executor, _ = make(workers=1, queue=10)
    forever = asyncio.Event()

    async def stuck() -> None:
        await forever.wait()

    executor.start()
    executor.submit("fold", stuck)
    assert await executor.drain(0.2) is False
