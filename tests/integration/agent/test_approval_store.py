"""Paused tasks in the stores that outlive a process (SQLite, a real file; PostgreSQL, a
fresh database per test), two replicas' views of one store on one injected clock: a pause
keeps the checkpoint and drops the lease (nothing claims a paused task); a decision takes
it once, whichever replica and however many decide together; overdue ones are found for
the timeout; a list filters by state."""

from __future__ import annotations

import asyncio

from a2a.types import a2a_pb2 as pb
from kaos_agent.a2a.tasks import Listing, TaskStore, new_task
from kaos_agent.approvals.pending import Decision, approval_of, decided, paused
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests

from tests.support.task_stores import LEASE, Clock


def waiting() -> DeferredToolRequests:
    return DeferredToolRequests(approvals=[ToolCallPart("charge", {"n": 1}, tool_call_id="c1")])


async def created(store: TaskStore, runner: str) -> pb.Task:
    message = pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[pb.Part(text="pay")])
    task = new_task(message, context_id="c1", metadata={})
    await store.create(task, principal="alice", runner=runner)
    return task


async def test_a_paused_task_is_taken_once_by_a_decision_from_any_replica(
    pair: tuple[TaskStore, TaskStore, Clock],
) -> None:
    one, two, clock = pair
    task = await created(one, "r1")
    # Only the runner holding the task pauses it.
    assert not await two.pause(task.id, "r2", paused(waiting(), clock.now + 60), b"x", 0.0)
    decide_by = clock.now + 60
    assert await one.pause(task.id, "r1", paused(waiting(), decide_by), b"ckpt", decide_by)
    found = await two.owned(task.id)
    assert found is not None and found[1] == "alice"
    assert found[0].status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert approval_of(found[0])["calls"][0]["tool"] == "charge"

    # No lease: long after, nothing claims or fails it; its deadline is not due yet.
    clock.now += LEASE * 2
    assert await two.claim_lapsed("r2") == []
    assert await two.expire_leases() == 0
    assert await two.paused_due(clock.now) == []
    assert await one.checkpoint(task.id, "r1", b"late") is False  # the run is not running

    page, total = await two.list_tasks(Listing("alice", None, 10, pb.TASK_STATE_INPUT_REQUIRED))
    assert [t.id for t in page] == [task.id] and total == 1
    assert (await two.list_tasks(Listing("alice", None, 10, pb.TASK_STATE_COMPLETED)))[1] == 0

    # Two replicas decide at once: one takes it, with the checkpoint, under a new lease.
    approve, deny = Decision("approve", "alice"), Decision("deny", "carol")
    taken = await asyncio.gather(
        one.take_paused(task.id, "r1", decided(approve)),
        two.take_paused(task.id, "r2", decided(deny)),
    )
    [claim] = [c for c in taken if c is not None]
    assert claim.checkpoint == b"ckpt" and claim.principal == "alice"
    assert claim.task.status.state == pb.TASK_STATE_WORKING
    winner = "r1" if taken[0] is not None else "r2"
    assert await (one if winner == "r1" else two).checkpoint(task.id, winner, b"next")
    stored = await one.owned(task.id)
    assert stored is not None and approval_of(stored[0])["state"] in ("approved", "denied")
    assert await one.take_paused(task.id, "r1", decided(approve)) is None


async def test_overdue_paused_tasks_are_found_oldest_first_and_a_cancel_ends_one(
    pair: tuple[TaskStore, TaskStore, Clock],
) -> None:
    one, two, clock = pair
    first, second = await created(one, "r1"), await created(one, "r1")
    for task, due in ((first, clock.now + 20), (second, clock.now + 10)):
        assert await one.pause(task.id, "r1", paused(waiting(), due), b"c", due)
    assert await two.paused_due(clock.now + 15) == [second.id]
    assert await two.paused_due(clock.now + 25) == [second.id, first.id]
    canceled = await two.cancel(second.id, "alice")
    assert canceled.canceled
    assert await two.paused_due(clock.now + 25) == [first.id]
    assert await two.take_paused(second.id, "r2", decided(Decision("deny", "timeout"))) is None
