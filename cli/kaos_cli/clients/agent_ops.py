"""What an agent did and what waits on a person, as a client reads it: its token usage,
its audit trail of tool calls, and the A2A tasks paused for an approval, with the
decision that resumes one.

One client, ``AgentOps`` (opened by ``agent_ops``), serves the CLI's commands and the
console alike. Usage and the audit trail are plain HTTP (``GET /v1/usage``,
``GET /v1/audit``), read through an aiohttp session; their failures are
``kaos_cli.clients.agent``'s (``AgentRefused`` with the status, ``AgentUnreachable`` in
plain words). The paused tasks and the decision are A2A, through
``kaos_cli.clients.a2a``'s ``TaskClient``: ``ListTasks`` of the tasks in
``input-required`` (kept to that state here too, for an agent that does not filter), and
``SendMessage`` to the paused task with a DataPart ``{"decision": "approve"|"deny",
"reason": ...}``; their failures are ``TaskCallFailed``.

A paused task carries its pending calls in its metadata under ``kaos.dev/approval``
(``{"state": "pending", "calls": [{"tool", "arguments", "toolCallId"}], "deadline"}``,
``kaos_agent.approvals.pending``), and the same in its status message's DataPart
(``{"approval": ...}``); the metadata is read first.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from a2a.types import Message, Part, Role, TaskState
from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]

from kaos_cli.clients.a2a import TaskClient, task_client
from kaos_cli.clients.agent import AgentError, AgentUnreachable, refusal

USAGE_PATH = "/v1/usage"
AUDIT_PATH = "/v1/audit"
APPROVAL_KEY = "kaos.dev/approval"
KAOS_KEY = "kaos"  # the task metadata the agent writes when it starts a task
PAUSED = "TASK_STATE_INPUT_REQUIRED"
Decision = Literal["approve", "deny"]
DECISIONS: tuple[str, ...] = ("approve", "deny")
REASON_MAX = 1000


@dataclass(frozen=True)
class UsageRecord:
    """Tokens one user spent with one agent on one UTC day."""

    agent: str
    user: str
    day: str  # YYYY-MM-DD
    input_tokens: int
    output_tokens: int
    total_tokens: int
    runs: int
    # The row as the agent answered it (what ``-o json`` prints and ``--by`` sums).
    item: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class AuditRecord:
    """One tool call, delegation or approval decision as the agent recorded it."""

    at: float  # epoch seconds the call started (or the decision)
    kind: str  # tool | delegation | approval
    name: str
    outcome: str
    task: str | None = None
    session: str | None = None
    identity: str | None = None
    user: str | None = None
    arguments_digest: str | None = None
    arguments: str | None = None
    duration_ms: float | None = None
    decided_by: str | None = None
    # The entry as the agent answered it (what ``-o json`` prints).
    item: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class PendingCall:
    """A call a paused task waits on: the tool (or peer) and its arguments as the task
    carries them."""

    tool: str
    arguments: Any
    call_id: str | None


@dataclass(frozen=True)
class PausedTask:
    id: str
    session: str
    principal: str | None
    calls: tuple[PendingCall, ...]
    deadline: str | None  # when the timeout decides it (RFC 3339, UTC)


class AnswerUnreadable(AgentError):
    """The agent answered 200 with something that is not the documented shape."""


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def usage_record(item: Mapping[str, Any]) -> UsageRecord:
    return UsageRecord(
        agent=str(item.get("agent") or ""),
        user=str(item.get("user") or ""),
        day=str(item.get("day") or ""),
        input_tokens=_int(item.get("inputTokens")),
        output_tokens=_int(item.get("outputTokens")),
        total_tokens=_int(item.get("totalTokens")),
        runs=_int(item.get("runs")),
        item=item,
    )


def audit_record(item: Mapping[str, Any]) -> AuditRecord:
    at, duration = item.get("at"), item.get("durationMs")
    return AuditRecord(
        at=float(at) if isinstance(at, int | float) else 0.0,
        kind=str(item.get("kind") or ""),
        name=str(item.get("name") or ""),
        outcome=str(item.get("outcome") or ""),
        task=_text(item.get("task")),
        session=_text(item.get("session")),
        identity=_text(item.get("identity")),
        user=_text(item.get("user")),
        arguments_digest=_text(item.get("argumentsDigest")),
        arguments=_text(item.get("arguments")),
        duration_ms=float(duration) if isinstance(duration, int | float) else None,
        decided_by=_text(item.get("decidedBy")),
        item=item,
    )


def _approval_of(task: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the task says it waits on: its ``kaos.dev/approval`` metadata, else its status
    message's DataPart (empty: neither)."""
    found = (task.get("metadata") or {}).get(APPROVAL_KEY)
    if isinstance(found, dict):
        return found
    message = (task.get("status") or {}).get("message") or {}
    for part in message.get("parts") or []:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and isinstance(data.get("approval"), dict):
            return dict(data["approval"])
    return {}


def pending_calls(task: Mapping[str, Any]) -> tuple[tuple[PendingCall, ...], str | None]:
    """The calls a paused task waits on, and its deadline (``None`` when unsaid)."""
    found = _approval_of(task)
    deadline = found.get("deadline")
    calls = tuple(
        PendingCall(
            tool=str(c.get("tool") or ""),
            arguments=c.get("arguments"),
            call_id=None if c.get("toolCallId") is None else str(c["toolCallId"]),
        )
        for c in found.get("calls") or []
        if isinstance(c, dict)
    )
    return calls, None if deadline is None else str(deadline)


def paused_task(task: Mapping[str, Any]) -> PausedTask:
    calls, deadline = pending_calls(task)
    started = (task.get("metadata") or {}).get(KAOS_KEY) or {}
    principal = started.get("principal") if isinstance(started, dict) else None
    return PausedTask(
        id=str(task.get("id") or ""),
        session=str(task.get("contextId") or ""),
        principal=None if principal is None else str(principal),
        calls=calls,
        deadline=deadline,
    )


def decision_message(task_id: str, decision: Decision, reason: str) -> Message:
    """The A2A message that decides a paused task: a DataPart with the decision."""
    data = Value()
    data.struct_value.update({"decision": decision, "reason": reason})
    return Message(
        message_id=uuid.uuid4().hex, task_id=task_id, role=Role.ROLE_USER, parts=[Part(data=data)]
    )


@dataclass(frozen=True)
class AgentOps:
    """The operations endpoints of the agent at ``url`` as one caller (the headers its
    ``tasks`` and its HTTP requests carry) sees them."""

    http: aiohttp.ClientSession
    tasks: TaskClient
    url: str
    headers: Mapping[str, str]
    request_timeout: float

    async def _items(self, path: str, params: Mapping[str, str]) -> list[Mapping[str, Any]]:
        """The ``items`` of a ``GET`` answer; ``AgentRefused`` for an HTTP error."""
        try:
            async with self.http.get(
                self.url + path,
                params=dict(params),
                headers=dict(self.headers),
                timeout=aiohttp.ClientTimeout(total=self.request_timeout),
            ) as resp:
                if resp.status >= 400:
                    raise await refusal(resp)
                payload: Any = json.loads(await resp.text())
        except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError) as exc:
            raise AgentUnreachable(self.url, exc) from exc
        except ValueError:
            raise AnswerUnreadable(f"agent at {self.url} answered {path} with no JSON") from None
        items = payload.get("items") if isinstance(payload, dict) else None
        if not isinstance(items, list):
            raise AnswerUnreadable(f"agent at {self.url} answered {path} without a list of items")
        return [item for item in items if isinstance(item, dict)]

    async def usage(
        self, *, since: str | None = None, until: str | None = None, user: str | None = None
    ) -> list[UsageRecord]:
        """The agent's token usage per user and UTC day (``since``/``until``: YYYY-MM-DD)."""
        params = {k: v for k, v in (("since", since), ("until", until), ("user", user)) if v}
        return [usage_record(item) for item in await self._items(USAGE_PATH, params)]

    async def audit(
        self,
        *,
        task: str | None = None,
        since: str | float | None = None,
        until: str | float | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """The latest ``limit`` entries of the agent's audit trail, in call order
        (``since``/``until``: epoch seconds, or a time as the agent reads one)."""
        params = {"limit": str(limit)}
        for key, value in (("task", task), ("since", since), ("until", until)):
            if value not in (None, ""):
                params[key] = str(value)
        return [audit_record(item) for item in await self._items(AUDIT_PATH, params)]

    async def paused(self, *, limit: int) -> list[PausedTask]:
        """The newest tasks in ``input-required`` visible to the caller."""
        page = await self.tasks.list(limit=limit, state=TaskState.TASK_STATE_INPUT_REQUIRED)
        tasks = page.get("tasks") or []
        return [paused_task(t) for t in tasks if (t.get("status") or {}).get("state") == PAUSED]

    async def decide(self, task_id: str, decision: Decision, reason: str) -> dict[str, Any]:
        """Send the decision; the task as the agent answers it (the run resumes on)."""
        return await self.tasks.send_message(
            decision_message(task_id, decision, reason), wait=False
        )


@asynccontextmanager
async def agent_ops(
    url: str,
    headers: Mapping[str, str],
    *,
    request_timeout: float,
    http: aiohttp.ClientSession | None = None,
) -> AsyncIterator[AgentOps]:
    """An ``AgentOps`` for the agent at ``url`` whose requests carry ``headers``; over
    ``http`` when given (the console's session), else a session of its own."""
    async with AsyncExitStack() as stack:
        if http is None:
            http = await stack.enter_async_context(aiohttp.ClientSession())
        tasks = await stack.enter_async_context(
            task_client(url, headers, request_timeout=request_timeout)
        )
        yield AgentOps(http, tasks, url, headers, request_timeout)
