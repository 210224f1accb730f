"""A2A tasks: created by ``SendMessage``, read by ``GetTask``/``ListTasks``, ended by the
run or ``CancelTask``; the store they live in, and its in-process implementation.

A task records the principal that created it, and only that principal (or, for anonymous
tasks, anyone) can read or cancel it: someone else's task does not exist for the caller.
A terminal state (completed, failed, canceled, rejected) sticks: a later transition of the
same task changes nothing, whichever replica attempts it.

``TaskStore`` is the narrow interface the server and the run bookkeeping
(``kaos_agent.a2a.runs``) use. A running task holds a lease: the replica running it
(``runner``) renews ``lease_until`` while the run goes on and checkpoints each step of it
(``checkpoint``, kept only while it still holds the task). A task whose lease lapsed (its
pod died) is claimed by whichever replica finds it first (``claim_lapsed``: one atomic
update makes it the runner), which resumes the run from its last checkpoint; a task
resumed ``MAX_RESUMES`` times is failed instead (``resume_limit``), so a task that kills
its replicas cannot go round them forever. A replica stopping with runs it could not
finish hands them over: it ends their leases at once (``release``), and they are claimed
as lapsed ones are (a hand-over counts as a resume). The in-process store has no other replica to
hand over to: there a lapsed lease fails the task (``LAPSED_LEASE``). A cancel may be
requested from any replica: it ends the task as canceled at once and marks it
``cancel_requested`` for the replica running it to stop the run. Finished tasks are
deleted after the retention, a bounded number per sweep. Stores: ``MemoryTaskStore``
(here: one pod, bounded, lost with it), ``kaos_agent.a2a.sqlite_store`` (one file, one
replica) and ``kaos_agent.a2a.pg_store`` (PostgreSQL, shared by every replica).
"""

from __future__ import annotations

import abc
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from a2a.types import a2a_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp  # type: ignore[import-untyped]
from kaos_core.errors import KaosError

MAX_TASKS = 1000
# At most this many tasks are failed (lapsed leases) or deleted (retention) per sweep.
SWEEP_LIMIT = 500

TERMINAL_STATES = frozenset(
    {
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELED,
        pb.TASK_STATE_REJECTED,
    }
)

LAPSED_LEASE = "the replica running this task stopped before it finished"
# How often a task is resumed after its replica stopped, at most.
MAX_RESUMES = 3
# At most this many lapsed tasks are claimed by one replica per beat.
CLAIM_LIMIT = 10


def resume_limit(resumes: int) -> str:
    return (
        f"the replicas running this task stopped {resumes + 1} times before it finished;"
        " it is not resumed again"
    )


# A change of a stored task: edits it in place, True when it changed.
Transition = Callable[[pb.Task], bool]


def now_timestamp() -> Timestamp:
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


def new_task(message: pb.Message, *, context_id: str, metadata: dict[str, object]) -> pb.Task:
    """A working task for ``message``, with a new id."""
    task_id = uuid.uuid4().hex
    user_message = pb.Message()
    user_message.CopyFrom(message)
    user_message.context_id = context_id
    user_message.task_id = task_id
    task = pb.Task(
        id=task_id,
        context_id=context_id,
        status=pb.TaskStatus(state=pb.TASK_STATE_WORKING, timestamp=now_timestamp()),
        history=[user_message],
    )
    task.metadata.update(metadata)
    return task


def is_terminal(task: pb.Task) -> bool:
    return task.status.state in TERMINAL_STATES


def completed(text: str) -> Transition:
    def change(task: pb.Task) -> bool:
        if is_terminal(task):
            return False
        reply = agent_message(text, context_id=task.context_id, task_id=task.id)
        task.artifacts.append(
            pb.Artifact(artifact_id=uuid.uuid4().hex, name="answer", parts=[pb.Part(text=text)])
        )
        task.history.append(reply)
        task.status.CopyFrom(
            pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, timestamp=now_timestamp())
        )
        return True

    return change


def failed(reason: str) -> Transition:
    def change(task: pb.Task) -> bool:
        if is_terminal(task):
            return False
        task.status.CopyFrom(
            pb.TaskStatus(
                state=pb.TASK_STATE_FAILED,
                message=agent_message(reason, context_id=task.context_id, task_id=task.id),
                timestamp=now_timestamp(),
            )
        )
        return True

    return change


def canceled(task: pb.Task) -> bool:
    if is_terminal(task):
        return False
    task.status.CopyFrom(pb.TaskStatus(state=pb.TASK_STATE_CANCELED, timestamp=now_timestamp()))
    return True


def visible(owner: str | None, caller: str | None) -> bool:
    """Whether a task of ``owner`` exists for ``caller``."""
    return owner is None or owner == caller


class TaskStoreUnavailable(KaosError):
    """The store could not be reached or refused an operation (the driver's error is
    logged by the store, by class only: its text may name the server)."""

    status = 503
    code = "task_store_unavailable"

    def __init__(self) -> None:
        super().__init__("the task store is unavailable")


@dataclass(frozen=True)
class Cancel:
    """What a cancel request found: the task (``None``: not found for the caller), and
    whether this request canceled it (False: it had already ended)."""

    task: pb.Task | None
    canceled: bool


@dataclass(frozen=True)
class Listing:
    """Which tasks a list asks for: the newest ``limit`` visible to ``principal`` (every
    user's with ``every_owner``: an approver's view), of one context and in one state
    (``TaskState``; 0: any), if given."""

    principal: str | None
    context_id: str | None = None
    limit: int = 50
    state: int = 0
    every_owner: bool = False

    def shows(self, owner: str | None, task: pb.Task) -> bool:
        """Whether ``task`` of ``owner`` belongs to this listing."""
        return (
            (self.every_owner or visible(owner, self.principal))
            and (not self.context_id or task.context_id == self.context_id)
            and (not self.state or task.status.state == self.state)
        )


@dataclass(frozen=True)
class Claim:
    """A working task this replica took over: its run's last checkpoint (``None``: no step
    was kept, the run starts again from the task's message) and how often it was resumed,
    this time included."""

    task: pb.Task
    principal: str | None
    checkpoint: bytes | None
    resumes: int


class TaskStore(abc.ABC):
    """Where A2A tasks live. Every method is safe to call from any replica sharing it."""

    # Whether other replicas read and write the same tasks (leases and cancel requests
    # then cross processes).
    shared: bool = False

    async def start(self) -> None:  # noqa: B027 - a hook: a store in memory opens nothing
        """Open connections and create the schema (idempotent)."""

    async def close(self) -> None:  # noqa: B027 - a hook, as ``start``
        """Release connections; the store is not used afterwards."""

    @abc.abstractmethod
    async def create(self, task: pb.Task, *, principal: str | None, runner: str) -> None:
        """Store a new working task owned by ``principal``, its lease held by ``runner``."""

    @abc.abstractmethod
    async def get(self, task_id: str, principal: str | None) -> pb.Task | None:
        """The task, if it exists for ``principal``."""

    @abc.abstractmethod
    async def list_tasks(self, listing: Listing) -> tuple[list[pb.Task], int]:
        """The tasks ``listing`` asks for, newest first, and how many there are in all."""

    @abc.abstractmethod
    async def finish(self, task_id: str, change: Transition) -> pb.Task | None:
        """Apply a terminal transition unless the task already ended; the stored task
        afterwards (``None``: gone). The lease is cleared."""

    @abc.abstractmethod
    async def cancel(self, task_id: str, principal: str | None) -> Cancel:
        """End the task as canceled for ``principal`` and ask its runner to stop it."""

    @abc.abstractmethod
    async def renew(self, runner: str, task_ids: Sequence[str]) -> None:
        """Extend the leases ``runner`` holds on these working tasks."""

    @abc.abstractmethod
    async def cancel_requested(self, task_ids: Sequence[str]) -> list[str]:
        """Which of these tasks a cancel was requested for."""

    @abc.abstractmethod
    async def checkpoint(self, task_id: str, runner: str, data: bytes) -> bool:
        """Keep ``data`` as the task's last checkpoint if ``runner`` still holds it; whether
        it does."""

    async def claim_lapsed(self, runner: str, limit: int = CLAIM_LIMIT) -> list[Claim]:
        """Make ``runner`` the runner of working tasks whose lease lapsed and that may be
        resumed again, atomically (two replicas never claim the same task); a store with no
        other replica claims nothing."""
        return []

    async def release(self, runner: str, task_ids: Sequence[str]) -> int:
        """End now the leases ``runner`` holds on these working tasks (its runs stopped
        without ending them: a hand-over), so that ``claim_lapsed`` takes them at once;
        how many. A store with no other replica releases nothing."""
        return 0

    @abc.abstractmethod
    async def owned(self, task_id: str) -> tuple[pb.Task, str | None] | None:
        """The task and its owner, whoever asks (``None``: no such task): for the checks
        that are not the owner's alone (an approval's, ``kaos_agent.approvals``)."""

    @abc.abstractmethod
    async def pause(
        self, task_id: str, runner: str, change: Transition, checkpoint: bytes, decide_by: float
    ) -> bool:
        """End ``runner``'s run of the task without ending the task: apply ``change`` (to
        ``input-required``), keep ``checkpoint`` to resume from, and drop the lease (nothing
        runs and nothing claims it) until a decision, due by ``decide_by``; whether
        ``runner`` still held it."""

    @abc.abstractmethod
    async def take_paused(self, task_id: str, runner: str, change: Transition) -> Claim | None:
        """Atomically make ``runner`` the runner of the paused task under a new lease,
        applying ``change`` (the decision); the claim to resume from (``None``: the task is
        not paused, or was taken by another decision first)."""

    @abc.abstractmethod
    async def paused_due(self, now: float, limit: int = CLAIM_LIMIT) -> list[str]:
        """Paused tasks whose decision was due before ``now``, the longest overdue first."""

    @abc.abstractmethod
    async def expire_leases(self, limit: int = SWEEP_LIMIT) -> int:
        """Fail working tasks whose lease lapsed and that are not claimed instead (those
        resumed ``MAX_RESUMES`` times; in memory, all); how many."""

    @abc.abstractmethod
    async def sweep(self, retention_seconds: float, limit: int = SWEEP_LIMIT) -> int:
        """Delete finished tasks not updated for ``retention_seconds``; how many."""

    @abc.abstractmethod
    async def try_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Take (or keep) the named lease for ``seconds``; False while another holds it."""

    async def listen_cancels(  # noqa: B027
        self, on_cancel: Callable[[str], None], on_release: Callable[[], None] | None = None
    ) -> None:
        """Call ``on_cancel(task_id)`` for each cancel requested on another replica, and
        ``on_release()`` when a replica released leases (tasks to claim now), until
        cancelled; a store without notifications returns at once (``cancel_requested``
        is polled instead, and lapsed tasks claimed on the beat)."""


@dataclass
class _Row:
    task: pb.Task
    principal: str | None
    runner: str | None
    lease_until: float | None
    updated_at: float
    cancel_requested: bool = False
    checkpoint: bytes | None = None
    decide_by: float | None = None


class MemoryTaskStore(TaskStore):
    """One pod's tasks in its memory: bounded (oldest first out), lost with the pod."""

    def __init__(
        self,
        *,
        lease_seconds: float = 30.0,
        max_tasks: int = MAX_TASKS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lease_seconds = lease_seconds
        self.max_tasks = max_tasks
        self.clock = clock
        self._rows: OrderedDict[str, _Row] = OrderedDict()
        self._leases: dict[str, tuple[str, float]] = {}

    async def create(self, task: pb.Task, *, principal: str | None, runner: str) -> None:
        now = self.clock()
        self._rows[task.id] = _Row(_copy(task), principal, runner, now + self.lease_seconds, now)
        while len(self._rows) > self.max_tasks:
            self._rows.popitem(last=False)

    async def get(self, task_id: str, principal: str | None) -> pb.Task | None:
        row = self._rows.get(task_id)
        if row is None or not visible(row.principal, principal):
            return None
        return _copy(row.task)

    async def list_tasks(self, listing: Listing) -> tuple[list[pb.Task], int]:
        rows = [r for r in reversed(self._rows.values()) if listing.shows(r.principal, r.task)]
        return [_copy(r.task) for r in rows[: listing.limit]], len(rows)

    async def finish(self, task_id: str, change: Transition) -> pb.Task | None:
        row = self._rows.get(task_id)
        if row is None:
            return None
        if change(row.task):
            row.updated_at = self.clock()
            row.lease_until = None
        return _copy(row.task)

    async def cancel(self, task_id: str, principal: str | None) -> Cancel:
        row = self._rows.get(task_id)
        if row is None or not visible(row.principal, principal):
            return Cancel(None, False)
        done = canceled(row.task)
        if done:
            row.cancel_requested = True
            row.updated_at = self.clock()
            row.lease_until = None
        return Cancel(_copy(row.task), done)

    async def renew(self, runner: str, task_ids: Sequence[str]) -> None:
        until = self.clock() + self.lease_seconds
        for task_id in task_ids:
            row = self._rows.get(task_id)
            if row is not None and row.runner == runner and not is_terminal(row.task):
                row.lease_until = until

    async def cancel_requested(self, task_ids: Sequence[str]) -> list[str]:
        return [i for i in task_ids if (r := self._rows.get(i)) is not None and r.cancel_requested]

    async def checkpoint(self, task_id: str, runner: str, data: bytes) -> bool:
        # One process: nothing resumes from it, so only the ownership is answered.
        row = self._rows.get(task_id)
        return row is not None and row.runner == runner and row.lease_until is not None

    async def owned(self, task_id: str) -> tuple[pb.Task, str | None] | None:
        row = self._rows.get(task_id)
        return None if row is None else (_copy(row.task), row.principal)

    async def pause(
        self, task_id: str, runner: str, change: Transition, checkpoint: bytes, decide_by: float
    ) -> bool:
        row = self._rows.get(task_id)
        if row is None or row.runner != runner or row.lease_until is None:
            return False
        if change(row.task):
            row.checkpoint, row.decide_by = checkpoint, decide_by
            row.updated_at, row.lease_until = self.clock(), None
        return True

    async def take_paused(self, task_id: str, runner: str, change: Transition) -> Claim | None:
        row = self._rows.get(task_id)
        if row is None or row.task.status.state != pb.TASK_STATE_INPUT_REQUIRED:
            return None
        if not change(row.task):
            return None
        now = self.clock()
        row.runner, row.lease_until, row.updated_at = runner, now + self.lease_seconds, now
        row.decide_by = None
        return Claim(_copy(row.task), row.principal, row.checkpoint, 0)

    async def paused_due(self, now: float, limit: int = CLAIM_LIMIT) -> list[str]:
        due = [
            (row.decide_by, task_id)
            for task_id, row in self._rows.items()
            if row.task.status.state == pb.TASK_STATE_INPUT_REQUIRED
            and row.decide_by is not None
            and row.decide_by < now
        ]
        return [task_id for _, task_id in sorted(due)[:limit]]

    async def expire_leases(self, limit: int = SWEEP_LIMIT) -> int:
        now, change, count = self.clock(), failed(LAPSED_LEASE), 0
        for row in self._rows.values():
            if count >= limit:
                break
            lapsed = row.lease_until is not None and row.lease_until < now
            if lapsed and change(row.task):
                row.updated_at, row.lease_until = now, None
                count += 1
        return count

    async def sweep(self, retention_seconds: float, limit: int = SWEEP_LIMIT) -> int:
        cutoff = self.clock() - retention_seconds
        old = [
            task_id
            for task_id, row in self._rows.items()
            if is_terminal(row.task) and row.updated_at < cutoff
        ][:limit]
        for task_id in old:
            del self._rows[task_id]
        return len(old)

    async def try_lease(self, name: str, holder: str, seconds: float) -> bool:
        now = self.clock()
        current = self._leases.get(name)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[name] = (holder, now + seconds)
        return True


def _copy(task: pb.Task) -> pb.Task:
    out = pb.Task()
    out.CopyFrom(task)
    return out
