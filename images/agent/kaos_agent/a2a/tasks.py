"""A2A tasks of this pod: created by ``SendMessage``, read by ``GetTask``/``ListTasks``.

Tasks live in memory (bounded, oldest first out): a task outlives its request only long
enough for a client to read or cancel it. A task records the principal that created it,
and only that principal (or, for anonymous tasks, anyone) can read or cancel it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from a2a.types import a2a_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]

MAX_TASKS = 1000

TERMINAL_STATES = frozenset(
    {
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELED,
        pb.TASK_STATE_REJECTED,
    }
)


@dataclass
class TaskRecord:
    task: pb.Task
    principal: str | None
    runner: asyncio.Task[None] | None = field(default=None, repr=False)


def _now() -> Timestamp:
    ts = Timestamp()
    ts.GetCurrentTime()
    return ts


def agent_message(text: str, *, context_id: str, task_id: str) -> pb.Message:
    return pb.Message(
        message_id=uuid.uuid4().hex,
        context_id=context_id,
        task_id=task_id,
        role=pb.ROLE_AGENT,
        parts=[pb.Part(text=text)],
    )


class TaskStore:
    def __init__(self, max_tasks: int = MAX_TASKS) -> None:
        self.max_tasks = max_tasks
        self._records: OrderedDict[str, TaskRecord] = OrderedDict()

    def create(
        self,
        message: pb.Message,
        *,
        context_id: str,
        principal: str | None,
        metadata: dict[str, object],
    ) -> TaskRecord:
        task_id = uuid.uuid4().hex
        user_message = pb.Message()
        user_message.CopyFrom(message)
        user_message.context_id = context_id
        user_message.task_id = task_id
        task = pb.Task(
            id=task_id,
            context_id=context_id,
            status=pb.TaskStatus(state=pb.TASK_STATE_WORKING, timestamp=_now()),
            history=[user_message],
        )
        task.metadata.update(metadata)
        record = TaskRecord(task=task, principal=principal)
        self._records[task_id] = record
        while len(self._records) > self.max_tasks:
            self._records.popitem(last=False)
        return record

    def get(self, task_id: str, principal: str | None) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is None:
            return None
        if record.principal is not None and record.principal != principal:
            # Someone else's task does not exist for this caller.
            return None
        return record

    def list(self, principal: str | None, context_id: str | None) -> list[TaskRecord]:
        return [
            r
            for r in reversed(self._records.values())
            if (r.principal is None or r.principal == principal)
            and (not context_id or r.task.context_id == context_id)
        ]

    @staticmethod
    def complete(record: TaskRecord, text: str) -> None:
        task = record.task
        if task.status.state in TERMINAL_STATES:
            return
        reply = agent_message(text, context_id=task.context_id, task_id=task.id)
        task.artifacts.append(
            pb.Artifact(artifact_id=uuid.uuid4().hex, name="answer", parts=[pb.Part(text=text)])
        )
        task.history.append(reply)
        task.status.CopyFrom(pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, timestamp=_now()))

    @staticmethod
    def fail(record: TaskRecord, reason: str) -> None:
        task = record.task
        if task.status.state in TERMINAL_STATES:
            return
        task.status.CopyFrom(
            pb.TaskStatus(
                state=pb.TASK_STATE_FAILED,
                message=agent_message(reason, context_id=task.context_id, task_id=task.id),
                timestamp=_now(),
            )
        )

    @staticmethod
    def cancel(record: TaskRecord) -> bool:
        """Cancel a task that is still running; False when it already ended."""
        task = record.task
        if task.status.state in TERMINAL_STATES:
            return False
        if record.runner is not None:
            record.runner.cancel()
        task.status.CopyFrom(pb.TaskStatus(state=pb.TASK_STATE_CANCELED, timestamp=_now()))
        return True

    async def close(self) -> None:
        runners = [r.runner for r in self._records.values() if r.runner is not None]
        for runner in runners:
            runner.cancel()
        if runners:
            await asyncio.gather(*runners, return_exceptions=True)
