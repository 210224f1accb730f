"""``kaos agent approve|deny|approvals``: the runs that wait for a person's decision.

An Agent with approval gates (``spec.approvals``) pauses a run whose model calls a gated
tool: its A2A task waits in ``input-required`` with the pending calls. ``approvals`` lists
the paused tasks the caller can see (A2A ``ListTasks`` in that state), with each pending
call and the deadline; ``approve`` and ``deny`` send the decision (A2A ``SendMessage`` to
the task with a data part ``{"decision": ..., "reason": ...}``), and the run resumes on the
agent. Who may decide is the agent's to say: the run's own user, or a user RBAC allows to
``create`` ``agents/approve`` on the Agent; anyone else is refused (403).
"""

from __future__ import annotations

import json
from typing import Any

import click

from kaos_cli.clients.a2a import state_of
from kaos_cli.clients.agent import headers_for
from kaos_cli.clients.agent_ops import REASON_MAX, Decision, PausedTask
from kaos_cli.commands.agent_reach import call, complete_agent, talk_options, with_ops
from kaos_cli.commands.common import Cx, common_options
from kaos_cli.output import emit

DEFAULT_LIMIT = 100


def _arguments(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _document(task: PausedTask) -> dict[str, Any]:
    return {
        "task": task.id,
        "session": task.session,
        "principal": task.principal,
        "deadline": task.deadline,
        "calls": [
            {"tool": c.tool, "arguments": c.arguments, "toolCallId": c.call_id} for c in task.calls
        ],
    }


def _decide(
    cx: Cx,
    agent: str,
    task_id: str,
    decision: Decision,
    reason: str,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    if len(reason) > REASON_MAX:
        raise click.BadParameter(f"at most {REASON_MAX} characters", param_hint="--reason")

    headers = headers_for(None, principal, token)
    task = call(
        cx.kube, agent, url, with_ops(headers, lambda ops: ops.decide(task_id, decision, reason))
    )
    state = state_of(task)
    verb = "approved" if decision == "approve" else "denied"
    emit(
        cx.fmt,
        task,
        ["task", "decision", "state"],
        [[task_id, verb, state.lower() or "unknown"]],
    )
    return 0


@click.command("approvals", help="The agent's runs waiting for an approval decision.")
@click.argument("agent", shell_complete=complete_agent)
@click.option("--limit", type=click.IntRange(1, 1000), default=DEFAULT_LIMIT, show_default=True)
@talk_options
@common_options()
def approvals_cmd(
    cx: Cx,
    agent: str,
    limit: int,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    headers = headers_for(None, principal, token)
    paused = call(cx.kube, agent, url, with_ops(headers, lambda ops: ops.paused(limit=limit)))
    rows = [
        [t.id, t.principal or "", c.tool, _arguments(c.arguments), t.deadline or ""]
        for t in paused
        for c in t.calls
    ]
    emit(
        cx.fmt,
        {"items": [_document(t) for t in paused]},
        ["task", "user", "tool", "arguments", "deadline"],
        rows,
        empty="no runs wait for approval",
        wrap=["arguments"],
    )
    return 0


def _decision_command(verdict: Decision, text: str) -> click.Command:
    @click.command(verdict, help=text)
    @click.argument("agent", shell_complete=complete_agent)
    @click.argument("task_id")
    @click.option("--reason", default="", help="why (the model and the audit trail see it)")
    @talk_options
    @common_options()
    def decide_cmd(
        cx: Cx,
        agent: str,
        task_id: str,
        reason: str,
        url: str | None,
        principal: str | None,
        token: str | None,
    ) -> int:
        return _decide(cx, agent, task_id, verdict, reason, url, principal, token)

    return decide_cmd


approve_cmd = _decision_command(
    "approve", "Approve a paused run's pending calls: they run, and the run goes on."
)
deny_cmd = _decision_command(
    "deny", "Deny a paused run's pending calls: they do not run; the model is told."
)
