"""Claiming and resuming the task of a replica that died, on the stores that outlive a
process (SQLite, a real file; PostgreSQL, a fresh database per test), and the checkpoint
a resumed run starts from. Time is the store's injected clock: leases lapse without
waiting."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from a2a.types import a2a_pb2 as pb
from kaos_agent.a2a.checkpoint import INTERRUPTED, decode, encode
from kaos_agent.a2a.sqlite_store import SqliteTaskStore
from kaos_agent.a2a.tasks import (
    MAX_RESUMES,
    TaskStore,
    completed,
    new_task,
    resume_limit,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from tests.support.task_stores import LEASE, Clock


async def created(store: TaskStore, runner: str) -> pb.Task:
    message = pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[pb.Part(text="go")])
    task = new_task(message, context_id="c1", metadata={})
    await store.create(task, principal="alice", runner=runner)
    return task


async def test_a_lapsed_task_is_claimed_once_with_its_last_checkpoint(
    pair: tuple[TaskStore, TaskStore, Clock],
) -> None:
    one, two, clock = pair
    task = await created(one, "pod-a")
    assert await one.checkpoint(task.id, "pod-a", b"step-1")
    assert await one.checkpoint(task.id, "pod-a", b"step-2")
    assert not await two.checkpoint(task.id, "pod-b", b"not mine")
    assert await two.claim_lapsed("pod-b") == []  # the lease still runs

    clock.now += LEASE + 1
    claims = await asyncio.gather(one.claim_lapsed("pod-c"), two.claim_lapsed("pod-b"))
    [claim] = [c for found in claims for c in found]
    assert claim.task.id == task.id and claim.principal == "alice"
    assert claim.checkpoint == b"step-2" and claim.resumes == 1
    winner = "pod-c" if claims[0] else "pod-b"

    # The dead replica's late step is refused: the task is the claimer's now.
    assert not await one.checkpoint(task.id, "pod-a", b"late")
    assert await two.checkpoint(task.id, winner, b"step-3")
    await two.renew(winner, [task.id])
    clock.now += LEASE - 1
    assert await one.claim_lapsed("pod-d") == []
    await two.finish(task.id, completed("done"))
    clock.now += LEASE + 1
    assert await one.claim_lapsed("pod-d") == []
    assert not await two.checkpoint(task.id, winner, b"after the end")


async def test_a_task_resumed_too_often_is_failed_with_why(
    pair: tuple[TaskStore, TaskStore, Clock],
) -> None:
    one, two, clock = pair
    task = await created(one, "pod-a")
    for resume in range(1, MAX_RESUMES + 1):
        clock.now += LEASE + 1
        assert await two.expire_leases() == 0
        [claim] = await two.claim_lapsed(f"pod-{resume}")
        assert claim.resumes == resume
    clock.now += LEASE + 1
    assert await two.claim_lapsed("pod-last") == []
    assert await two.expire_leases() == 1
    ended = await one.get(task.id, "alice")
    assert ended is not None and ended.status.state == pb.TASK_STATE_FAILED
    assert ended.status.message.parts[0].text == resume_limit(MAX_RESUMES)


async def test_a_table_of_the_previous_version_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    db = sqlite3.connect(path)
    db.execute(
        """CREATE TABLE kaos_agent_tasks (id TEXT PRIMARY KEY, context_id TEXT NOT NULL,
        principal TEXT, state TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, runner TEXT, lease_until DOUBLE PRECISION,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, task BLOB NOT NULL)"""
    )
    db.commit()
    db.close()
    clock = Clock()
    store = SqliteTaskStore(path, lease_seconds=LEASE, clock=clock)
    await store.start()
    try:
        task = await created(store, "pod-a")
        assert await store.checkpoint(task.id, "pod-a", b"kept")
        clock.now += LEASE + 1
        [claim] = await store.claim_lapsed("pod-b")
        assert claim.checkpoint == b"kept"
    finally:
        await store.close()


def test_a_resumed_history_reports_the_calls_in_flight_as_interrupted() -> None:
    call_done = ToolCallPart("count", {}, tool_call_id="c1")
    call_cut = ToolCallPart("block", {}, tool_call_id="c2")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[call_done, call_cut]),
        ModelRequest(parts=[ToolReturnPart("count", "1", tool_call_id="c1")], state="interrupted"),
    ]
    point = decode(encode(messages, facts="likes tea"))
    assert point.facts == "likes tea"
    last = point.history[-1]
    assert isinstance(last, ModelRequest) and last.state == "complete"
    returns = {p.tool_call_id: p for p in last.parts if isinstance(p, ToolReturnPart)}
    assert returns["c1"].content == "1" and returns["c1"].outcome == "success"
    assert returns["c2"].content == INTERRUPTED and returns["c2"].outcome == "interrupted"

    # A response checkpointed before any of its calls finished: all interrupted.
    point = decode(encode(messages[:2], facts=None))
    last = point.history[-1]
    assert isinstance(last, ModelRequest)
    assert [p.content for p in last.parts if isinstance(p, ToolReturnPart)] == [INTERRUPTED] * 2
    # A final answer checkpointed: nothing to close.
    answer: list[ModelMessage] = [messages[0], ModelResponse(parts=[])]
    assert len(decode(encode(answer, facts=None)).history) == 2
    with pytest.raises(ValueError):
        decode(b"{not json")
