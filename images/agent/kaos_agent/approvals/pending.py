"""A paused task's shape: what waits for a decision, and the decision once taken.

A run that called gated tools ends ``input-required`` (``paused``): its status message
says, in a text part, which calls wait, and carries them in a DataPart; the task's
metadata keeps them under ``kaos.dev/approval`` (``{"state": "pending", "calls": [{"tool",
"arguments", "toolCallId"}], "deadline"}``), where a client (``kaos agent approvals``, the
console) reads them. A decision (``decided``) turns the task ``working`` again and records
itself there (``state`` approved / denied, ``decidedBy``, ``reason``), the decision's own
message appended to the history; ``results`` is what the resumed run is given.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

from kaos_agent.a2a.tasks import Transition, agent_message, now_timestamp

APPROVAL_KEY = "kaos.dev/approval"
MAX_REASON_CHARS = 1000
TIMEOUT = "timeout"

Verdict = Literal["approve", "deny"]


@dataclass(frozen=True)
class Decision:
    """One decision on a paused task: its verdict, why, and who took it ("timeout")."""

    verdict: Verdict
    by: str
    reason: str = ""

    @property
    def outcome(self) -> str:
        """The audit trail's word: approved, denied, or timeout."""
        if self.by == TIMEOUT:
            return TIMEOUT
        return "approved" if self.verdict == "approve" else "denied"


def calls_of(requests: DeferredToolRequests) -> list[dict[str, Any]]:
    return [
        {"tool": c.tool_name, "arguments": c.args_as_dict(), "toolCallId": c.tool_call_id}
        for c in requests.approvals
    ]


def deadline_text(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat().replace("+00:00", "Z")


def waiting_text(calls: list[dict[str, Any]], task_id: str, *, lead: str = "This run") -> str:
    """What a paused run says: the tools that wait, and how to decide."""
    tools = ", ".join(sorted({str(c["tool"]) for c in calls}))
    return (
        f"{lead} waits for a human's approval before it calls {tools}. Approve or deny it"
        f" with an A2A SendMessage to task {task_id} carrying a data part"
        ' {"decision": "approve"} or {"decision": "deny", "reason": "..."}'
        f" (kaos agent approve|deny AGENT {task_id})."
    )


def _data_part(doc: dict[str, Any]) -> pb.Part:
    value = Value()
    ParseDict(doc, value)
    return pb.Part(data=value)


def approval_of(task: pb.Task) -> dict[str, Any]:
    """The task's ``kaos.dev/approval`` metadata (empty: it never waited)."""
    found = MessageToDict(task.metadata).get(APPROVAL_KEY) if task.HasField("metadata") else None
    return found if isinstance(found, dict) else {}


def paused(requests: DeferredToolRequests, decide_by: float) -> Transition:
    """The task waits for a decision on ``requests`` until ``decide_by`` (epoch seconds)."""
    calls = calls_of(requests)
    pending = {"state": "pending", "calls": calls, "deadline": deadline_text(decide_by)}

    def change(task: pb.Task) -> bool:
        if task.status.state != pb.TASK_STATE_WORKING:
            return False
        message = agent_message(
            waiting_text(calls, task.id), context_id=task.context_id, task_id=task.id
        )
        message.parts.append(_data_part({"approval": pending}))
        task.status.CopyFrom(
            pb.TaskStatus(
                state=pb.TASK_STATE_INPUT_REQUIRED, message=message, timestamp=now_timestamp()
            )
        )
        task.metadata.update({APPROVAL_KEY: pending})
        return True

    return change


def decided(decision: Decision, message: pb.Message | None = None) -> Transition:
    """The paused task resumes (``working``) with ``decision``; ``message`` (the decider's)
    joins its history."""

    def change(task: pb.Task) -> bool:
        if task.status.state != pb.TASK_STATE_INPUT_REQUIRED:
            return False
        record = approval_of(task)
        record.update(state=decision.outcome, decidedBy=decision.by)
        if decision.reason:
            record["reason"] = decision.reason
        task.metadata.update({APPROVAL_KEY: record})
        if message is not None:
            kept = pb.Message()
            kept.CopyFrom(message)
            kept.task_id, kept.context_id = task.id, task.context_id
            kept.message_id = kept.message_id or uuid.uuid4().hex
            task.history.append(kept)
        task.status.CopyFrom(pb.TaskStatus(state=pb.TASK_STATE_WORKING, timestamp=now_timestamp()))
        return True

    return change


def denial_text(decision: Decision) -> str:
    if decision.by == TIMEOUT:
        return "The tool call was denied: nobody approved it in time. Do not retry it."
    why = f" Reason: {decision.reason}" if decision.reason else ""
    return f"The tool call was denied by a human reviewer; it did not run.{why}"


def results(task: pb.Task, decision: Decision) -> DeferredToolResults:
    """What the resumed run is told of each pending call of ``task``."""
    ids = [str(c.get("toolCallId")) for c in approval_of(task).get("calls", [])]
    verdict: bool | ToolDenied = (
        True if decision.verdict == "approve" else ToolDenied(denial_text(decision))
    )
    return DeferredToolResults(approvals=dict.fromkeys(ids, verdict))
