"""``kaos agent audit``: what an agent did on whose behalf, from its audit trail.

The agent answers ``GET /v1/audit`` (``kaos_agent.audit_trail``): every tool call,
delegation and approval decision with its time, outcome, duration, the user it acted for,
its A2A task and a digest of its arguments (the arguments themselves only when the Agent
records them). Reached through a port-forward to the Agent's Service, or at ``--url``.
Under verified user identity pass ``--token``: a user reads their own entries, or every
entry when RBAC grants them ``get`` on ``agents/audit``.
"""

from __future__ import annotations

import datetime as dt

import click

from kaos_cli.clients.agent import headers_for
from kaos_cli.clients.agent_ops import AuditRecord
from kaos_cli.clients.audit import when
from kaos_cli.commands.agent_reach import call, complete_agent, talk_options, with_ops
from kaos_cli.commands.common import Cx, common_options
from kaos_cli.output import emit

COLUMNS = ["time", "kind", "name", "outcome", "user", "task", "ms", "arguments"]
DIGEST_CHARS = 12


def _time(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def row(entry: AuditRecord) -> list[str]:
    """One entry as a table row: the arguments when recorded, else the digest's start."""
    arguments = entry.arguments
    if arguments is None:
        digest = entry.arguments_digest or ""
        arguments = f"sha256:{digest[:DIGEST_CHARS]}" if digest else ""
    return [
        _time(entry.at),
        entry.kind,
        entry.name,
        entry.outcome,
        entry.user or "",
        entry.task or "",
        "" if entry.duration_ms is None else f"{entry.duration_ms:.0f}",
        arguments,
    ]


@click.command(
    "audit",
    help="The agent's audit trail: its tool calls, delegations and approval decisions, "
    "oldest first. --since/--until take a relative time (30m, 12h, 7d), a date "
    "(YYYY-MM-DD, UTC), an RFC 3339 time or epoch seconds.",
)
@click.argument("agent", shell_complete=complete_agent)
@click.option("--task", default=None, help="only this A2A task's entries")
@click.option("--since", default=None, help="entries started at or after this time")
@click.option("--until", default=None, help="entries started before this time")
@click.option(
    "--limit",
    type=click.IntRange(1, 10000),
    default=1000,
    show_default=True,
    help="the latest this many entries",
)
@talk_options
@common_options()
def audit_cmd(
    cx: Cx,
    agent: str,
    task: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    entries = call(
        cx.kube,
        agent,
        url,
        with_ops(
            headers_for(None, principal, token),
            lambda ops: ops.audit(
                task=task or None,
                since=when(since) if since else None,
                until=when(until) if until else None,
                limit=limit,
            ),
        ),
    )
    emit(
        cx.fmt,
        {"items": [dict(e.item) for e in entries]},
        COLUMNS,
        [row(e) for e in entries],
        empty=f"agent {agent} has no audit entries for this query",
    )
    return 0
