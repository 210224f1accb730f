"""Backend reads run beside the work queue: a reconcile never waits for one; its end wakes
the resource; a value is kept per generation; a failure stands until its delay has passed;
a read for a generation that is gone is cancelled."""

from __future__ import annotations

import asyncio

import pytest
from kaos_core.crds import ModelAPI
from kaos_operator.reconcilers.reads import READING, BackendReads, ReadFailure

from tests.support.operator_context import raw


def model_api(generation: int = 1) -> ModelAPI:
    obj = raw("ModelAPI", "llm", {"mode": "Proxy", "proxyConfig": {"models": ["m"]}})
    obj["metadata"]["generation"] = generation
    return ModelAPI.model_validate(obj)


class Backend:
    """A read that answers only when the test lets it, counting the reads started."""

    def __init__(self) -> None:
        self.started = 0
        self.answers: asyncio.Queue[str | Exception] = asyncio.Queue()
        self._began = asyncio.Event()

    async def until_started(self, count: int) -> None:
        while self.started < count:
            self._began.clear()
            await asyncio.wait_for(self._began.wait(), 10)

    async def read(self) -> str:
        self.started += 1
        self._began.set()
        answer = await self.answers.get()
        if isinstance(answer, Exception):
            raise answer
        return answer


class Wakes:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.event = asyncio.Event()

    def __call__(self, res: ModelAPI) -> None:
        self.names.append(res.name)
        self.event.set()

    async def next(self) -> None:
        await asyncio.wait_for(self.event.wait(), 10)
        self.event.clear()


async def test_a_read_under_way_never_holds_the_reconcile() -> None:
    backend, wakes = Backend(), Wakes()
    reads: BackendReads[str] = BackendReads(wakes)
    res = model_api()
    # The backend has not answered: the caller gets READING at once, and asking again
    # starts no second read.
    assert reads.read(res, backend.read) is READING
    assert reads.read(res, backend.read) is READING
    await backend.until_started(1)
    assert backend.started == 1 and wakes.names == []

    backend.answers.put_nowait("caps")
    await wakes.next()
    assert wakes.names == ["llm"]
    assert reads.read(res, backend.read) == "caps"
    assert reads.read(res, backend.read) == "caps"  # kept for the generation
    assert backend.started == 1


async def test_a_failure_stands_until_its_delay_has_passed() -> None:
    now = [1000.0]
    backend, wakes = Backend(), Wakes()
    reads: BackendReads[str] = BackendReads(wakes, clock=lambda: now[0])
    res = model_api()
    assert reads.read(res, backend.read) is READING
    backend.answers.put_nowait(ConnectionError("refused"))
    await wakes.next()

    failure = reads.read(res, backend.read)
    assert isinstance(failure, ReadFailure) and isinstance(failure.error, ConnectionError)
    assert failure.delay == 2.0
    now[0] += 1.5
    again = reads.read(res, backend.read)
    assert isinstance(again, ReadFailure) and again.delay == pytest.approx(0.5)
    assert backend.started == 1

    # Due: read again; a second failure in a row waits twice as long.
    now[0] += 0.5
    assert reads.read(res, backend.read) is READING
    backend.answers.put_nowait(ConnectionError("refused"))
    await wakes.next()
    second = reads.read(res, backend.read)
    assert isinstance(second, ReadFailure) and second.delay == 4.0
    assert backend.started == 2

    # A new generation is read at once, whatever the last one's failures.
    assert reads.read(model_api(generation=2), backend.read) is READING
    backend.answers.put_nowait("caps")
    await wakes.next()
    assert reads.read(model_api(generation=2), backend.read) == "caps"


async def test_a_read_for_a_generation_that_is_gone_is_cancelled() -> None:
    backend, wakes = Backend(), Wakes()
    reads: BackendReads[str] = BackendReads(wakes)
    assert reads.read(model_api(1), backend.read) is READING
    await backend.until_started(1)
    assert reads.read(model_api(2), backend.read) is READING
    await backend.until_started(2)
    backend.answers.put_nowait("for generation 2")
    await wakes.next()
    assert wakes.names == ["llm"]  # one wake: generation 2's
    # The first read was cancelled (no wake of its own): the answer is generation 2's.
    assert reads.read(model_api(2), backend.read) == "for generation 2"
    assert reads.read(model_api(1), backend.read) is READING  # an old generation: read anew
    await reads.close()
    assert backend.answers.empty()


async def test_close_cancels_the_reads_under_way() -> None:
    backend, wakes = Backend(), Wakes()
    reads: BackendReads[str] = BackendReads(wakes)
    assert reads.read(model_api(), backend.read) is READING
    await backend.until_started(1)
    await reads.close()
    # Cancelled, not answered: nothing is kept, and the next ask starts a new read.
    assert reads.read(model_api(), backend.read) is READING
    await reads.close()
