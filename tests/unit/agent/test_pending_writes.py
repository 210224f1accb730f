"""Writes after the answer (kaos_agent.memory.pending): a conversation reads its own writes,
they go out in order, and stopping waits for them, within its bound."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kaos_agent.memory.pending import PendingWrites


async def settle_loop() -> None:
    """Run every callback that is ready, until nothing new became ready: no I/O here, so
    whatever is still pending is waiting on an event this test holds."""
    for _ in range(20):
        await asyncio.sleep(0)


class Gate:
    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.done: list[str] = []

    def write(self, name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await self.open.wait()
            self.done.append(name)

        return run


async def test_a_conversation_waits_for_its_own_write_and_no_other() -> None:
    gate, pending = Gate(), PendingWrites()
    await pending.submit(("alice", "s1"), gate.write("w1"))
    mine = asyncio.create_task(pending.settled(("alice", "s1")))
    await pending.settled(("bob", "s1"))  # another conversation does not wait
    await settle_loop()
    assert not mine.done()
    gate.open.set()
    await mine
    assert gate.done == ["w1"]
    assert len(pending) == 0


async def test_writes_of_one_conversation_go_out_in_order() -> None:
    order: list[int] = []
    first_may_end = asyncio.Event()

    async def first() -> None:
        await first_may_end.wait()
        order.append(1)

    async def second() -> None:
        order.append(2)

    pending = PendingWrites()
    await pending.submit("k", first)
    await pending.submit("k", second)
    await settle_loop()
    assert order == []  # the second waits behind the first
    first_may_end.set()
    await pending.settled("k")
    assert order == [1, 2]


async def test_a_failed_write_does_not_block_the_conversation() -> None:
    async def broken() -> None:
        raise RuntimeError("store refused")

    done: list[str] = []

    async def fine() -> None:
        done.append("next")

    pending = PendingWrites()
    await pending.submit("k", broken)
    await pending.submit("k", fine)
    await pending.settled("k")
    assert done == ["next"]


async def test_past_the_limit_a_write_is_awaited_in_line() -> None:
    gate, pending = Gate(), PendingWrites(limit=1)
    await pending.submit("a", gate.write("a"))
    inline = asyncio.create_task(pending.submit("b", gate.write("b")))
    await settle_loop()
    assert not inline.done()  # the caller is held while its write runs
    gate.open.set()
    await inline
    await pending.settled("a")
    assert sorted(gate.done) == ["a", "b"]


async def test_drain_waits_for_pending_writes_and_abandons_them_at_its_bound() -> None:
    gate, pending = Gate(), PendingWrites()
    await pending.submit("k", gate.write("kept"))
    draining = asyncio.create_task(pending.drain(within=30))
    await settle_loop()
    assert not draining.done()
    gate.open.set()
    await draining
    assert gate.done == ["kept"]

    stuck = Gate()
    await pending.submit("k", stuck.write("never"))
    await pending.drain(within=0.01)
    await settle_loop()
    assert stuck.done == [] and len(pending) == 0
