"""An agent's operations on its page: the tasks waiting for an approval (with the
buttons that decide them), its schedules and webhook triggers, its token usage and its
audit trail; and the page that answers a decision.

Schedules and triggers are the Agent's own (spec and status); usage, audit and the paused
tasks are what the agent answered, each a ``Read``: its rows, or the note that says why
there are none to show (the section is drawn either way).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

from kaos_cli.clients.agent_ops import REASON_MAX, AuditRecord, PausedTask, UsageRecord
from kaos_cli.ui.model import Note
from kaos_cli.ui.render.base import h, note, page, table, when

T = TypeVar("T")
ARGUMENTS_SHOWN = 2000  # characters of a pending call's arguments drawn on the page
# The tone of each outcome's chip: the health tones of the stylesheet.
OUTCOME_TONES = {
    "ok": "ok",
    "approved": "ok",
    "succeeded": "ok",
    "deferred": "progress",
    "retry": "warn",
    "cancelled": "warn",
    "timeout": "warn",
    "none": "unknown",
    "failed": "error",
    "error": "error",
    "denied": "error",
}


@dataclass(frozen=True)
class Read(Generic[T]):
    """What the agent answered for one section: its rows, or why there are none
    (``rows`` is ``None`` when ``note`` says it could not be read, or ``skipped`` why it
    was not asked)."""

    rows: list[T] | None = None
    note: Note | None = None
    skipped: str = ""  # why nothing was asked (said plainly: the page's banner has the cause)


@dataclass(frozen=True)
class Ops:
    usage: Read[UsageRecord]
    audit: Read[AuditRecord]
    paused: Read[PausedTask]
    since: str  # the first day of the usage shown (YYYY-MM-DD)


def outcome(word: str) -> str:
    tone = OUTCOME_TONES.get(word, "unknown")
    return f'<span class="chip tone-{tone}" data-outcome="{h(word)}">{h(word or "-")}</span>'


def stamp(at: float | str | None) -> str:
    """A time given as epoch seconds or as a timestamp, as a ``<time>``; "-" if none."""
    if at is None or at == "":
        return "-"
    if isinstance(at, int | float):
        at = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return when(str(at))


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def arguments_text(arguments: Any) -> str:
    """A call's arguments as the task carries them, indented JSON (a string as given),
    cut at ``ARGUMENTS_SHOWN`` characters with what was left out said."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    text = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    )
    if len(text) > ARGUMENTS_SHOWN:
        text = text[:ARGUMENTS_SHOWN] + f"\n… ({len(text) - ARGUMENTS_SHOWN} more characters)"
    return text


def section(key: str, title: str, inner: str, hint: str = "") -> str:
    """A section of the page (``inner`` and ``hint`` are HTML, escaped by the caller)."""
    said = f'<p class="hint">{hint}</p>' if hint else ""
    return f'<section class="ops" id="ops-{key}"><h2>{h(title)}</h2>{said}{inner}</section>'


def unread(read: Read[Any], empty: str, key: str) -> str | None:
    """The section's body when there is nothing to draw: its note, or its empty line."""
    if read.skipped:
        return f'<p class="empty" id="{key}-skipped">{h(read.skipped)}</p>'
    if read.note is not None and not read.rows:
        return note(read.note)
    if not read.rows:
        return f'<p class="empty" id="{key}-empty">{h(empty)}</p>'
    return None


def _decision_form(base: str, task: PausedTask, principal: str, csrf: str) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{k}" value="{h(v)}">'
        for k, v in (("task", task.id), ("principal", principal), ("csrf", csrf))
    )
    return (
        f'<form method="post" action="{base}/decide" class="decision">{hidden}'
        f'<label class="field">reason <input name="reason" maxlength="{REASON_MAX}" '
        'placeholder="optional"></label>'
        '<button type="submit" name="decision" value="approve" class="approve">Approve</button>'
        '<button type="submit" name="decision" value="deny" class="danger">Deny</button>'
        "</form>"
    )


def _paused_task(base: str, task: PausedTask, principal: str, csrf: str) -> str:
    calls = (
        "".join(
            f'<div class="pending" data-tool="{h(c.tool)}"><div><code class="tool">{h(c.tool)}'
            f"</code>{' <code class=id>' + h(c.call_id) + '</code>' if c.call_id else ''}</div>"
            f'<pre class="arguments">{h(arguments_text(c.arguments))}</pre></div>'
            for c in task.calls
        )
        or '<p class="empty">the task does not say which call it waits on</p>'
    )
    deadline = f"<dt>deadline</dt><dd>{stamp(task.deadline)}</dd>" if task.deadline else ""
    facts = (
        f'<dl class="paused-facts"><dt>task</dt><dd><code>{h(task.id)}</code></dd>'
        f"<dt>session</dt><dd>{h(task.session) or '-'}</dd>"
        f"<dt>user</dt><dd>{h(task.principal) or '-'}</dd>{deadline}</dl>"
    )
    return (
        f'<article class="paused" data-task="{h(task.id)}">{facts}{calls}'
        f"{_decision_form(base, task, principal, csrf)}</article>"
    )


def _rules(spec: Mapping[str, Any]) -> str:
    approvals = spec.get("approvals") or {}
    rules = []
    for rule in approvals.get("rules") or []:
        if rule.get("peer"):
            rules.append(f"delegation to {rule['peer']}")
        elif rule.get("mcpServer"):
            tools = rule.get("tools")
            rules.append(f"{rule['mcpServer']}: {', '.join(tools) if tools else 'every tool'}")
    if not rules:
        return "No tool of this agent needs an approval (spec.approvals)."
    timeout = approvals.get("timeoutSeconds") or 3600
    on_timeout = approvals.get("onTimeout") or "deny"
    return (
        f"Calls that wait for a decision: {h('; '.join(rules))}. Undecided after "
        f"{h(timeout)} s: {h(on_timeout)}."
    )


def approvals_html(
    ns: str, name: str, spec: Mapping[str, Any], paused: Read[PausedTask], principal: str,
    csrf: str,
) -> str:  # fmt: skip
    base = f"/agents/{ns}/{name}"
    hint = (
        f"{_rules(spec)} The tasks paused in input-required that {h(principal or 'anyone')} "
        "can see (the console asks as the page's principal, as its chat does)."
    )
    inner = unread(paused, "no task waits for a decision", "paused")
    if inner is None:
        inner = "".join(_paused_task(base, t, principal, csrf) for t in paused.rows or [])
    return section("approvals", "Approvals", inner, hint)


def schedules_html(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    seen = {str(s.get("name")): s for s in status.get("schedules") or []}
    rows = []
    for s in spec.get("schedules") or []:
        last = seen.get(str(s.get("name"))) or {}
        zone = f" ({s['timeZone']})" if s.get("timeZone") else ""
        state = "suspended" if s.get("suspend") else s.get("concurrencyPolicy") or "Forbid"
        rows.append((
            f'<span data-schedule="{h(s.get("name"))}">{h(s.get("name"))}</span>',
            f"<code>{h(s.get('cron'))}</code>{h(zone)}", h(state), h(s.get("message")),
            stamp(last.get("lastScheduleTime")), stamp(last.get("lastSuccessfulTime")),
            outcome(str(last.get("lastResult") or "none")),
        ))  # fmt: skip
    inner = (
        table(
            ["schedule", "cron", "policy", "message", "last run", "last success", "last result"],
            rows,
            css="schedules-table",
        )
        if rows
        else '<p class="empty" id="schedules-empty">no schedules (spec.schedules)</p>'
    )
    return section("schedules", "Schedules", inner, "Each runs as a CronJob the operator owns.")


def triggers_html(spec: Mapping[str, Any], endpoint: str) -> str:
    rows = []
    for t in spec.get("triggers") or []:
        path = f"/v1/triggers/{t.get('name')}"
        secret = t.get("secret") or {}
        rows.append((
            f'<span data-trigger="{h(t.get("name"))}">{h(t.get("name"))}</span>',
            f'<code class="path" title="{h(endpoint.rstrip("/") + path if endpoint else path)}">'
            f"POST {h(path)}</code>",
            f"Secret {h(secret.get('name'))}, key {h(secret.get('key'))}",
            h(t.get("maxPerMinute") or 60), h(t.get("message")),
        ))  # fmt: skip
    inner = (
        table(
            ["trigger", "path", "signed with", "per minute", "message"], rows, css="triggers-table"
        )
        if rows
        else '<p class="empty" id="triggers-empty">no webhook triggers (spec.triggers)</p>'
    )
    hint = "Deliveries signed with HMAC-SHA256 (X-Hub-Signature-256) start an A2A task."
    return section("triggers", "Webhook triggers", inner, hint)


def usage_html(spec: Mapping[str, Any], usage: Read[UsageRecord], since: str) -> str:
    budgets = spec.get("budgets") or {}
    said = [
        f"{h(budgets[k])} tokens {what}"
        for k, what in (("tokensPerDay", "a day"), ("tokensPerUserPerDay", "a user a day"))
        if budgets.get(k)
    ]
    hint = f"Since {h(since)} (UTC days), by user and day. Budget: " + (
        ", ".join(said) if said else "none (spec.budgets)"
    )
    inner = unread(usage, "no tokens used in these days", "usage")
    if inner is None:
        records = sorted(usage.rows or [], key=lambda r: (r.day, r.user), reverse=True)
        rows: list[Sequence[str]] = [
            (h(r.day), h(r.user), h(r.input_tokens), h(r.output_tokens), h(r.total_tokens),
             h(r.runs))
            for r in records
        ]  # fmt: skip
        totals = [sum(getattr(r, f) for r in records) for f in
                  ("input_tokens", "output_tokens", "total_tokens", "runs")]  # fmt: skip
        rows.append(["<b>total</b>", "", *(f'<b class="total">{h(n)}</b>' for n in totals)])
        inner = table(["day", "user", "input", "output", "total", "runs"], rows,
                      css="usage-table")  # fmt: skip
    return section("usage", "Token usage", inner, hint)


def audit_html(audit: Read[AuditRecord], shown: int) -> str:
    hint = f"The latest {shown} calls, in call order; arguments only as a digest unless the " + (
        "Agent records them (spec.audit.recordArguments)."
    )
    inner = unread(audit, "no tool calls recorded", "audit")
    if inner is None:
        rows = [
            (
                stamp(e.at), h(e.kind),
                f"<code>{h(e.name)}</code>"
                + (f'<div class="digest" title="{h(e.arguments_digest)}">sha256 '
                   f"{h(e.arguments_digest[:12])}…</div>" if e.arguments_digest else "")
                + (f'<pre class="arguments">{h(arguments_text(e.arguments))}</pre>'
                   if e.arguments else ""),
                h(e.user or e.identity or "-"), f"<code class=id>{h(e.task or '-')}</code>",
                duration(e.duration_ms),
                outcome(e.outcome) + (f" <span class=muted>by {h(e.decided_by)}</span>"
                                      if e.decided_by else ""),
            )
            for e in audit.rows or []
        ]  # fmt: skip
        inner = table(["time", "kind", "tool", "user", "task", "duration", "outcome"], rows,
                      css="audit-table")  # fmt: skip
    return section("audit", "Audit trail", inner, hint)


def ops_html(
    ns: str, name: str, spec: Mapping[str, Any], status: Mapping[str, Any], endpoint: str,
    ops: Ops, *, principal: str, csrf: str, audit_shown: int,
) -> str:  # fmt: skip
    """Every section, approvals first (the ones that wait on someone)."""
    return (
        approvals_html(ns, name, spec, ops.paused, principal, csrf)
        + '<div class="ops-grid"><div>'
        + schedules_html(spec, status)
        + triggers_html(spec, endpoint)
        + "</div><div>"
        + usage_html(spec, ops.usage, ops.since)
        + "</div></div>"
        + audit_html(ops.audit, audit_shown)
    )


def decided_page(
    *, namespace: str, agent: str, task: str, decision: str, state: str, principal: str,
    notes_: Sequence[Note], csrf: str, context: str,
) -> str:  # fmt: skip
    base = f"/agents/{quote(namespace)}/{quote(agent)}"
    back = f"{base}?{urlencode({'principal': principal})}" if principal else base
    done = "Approved" if decision == "approve" else "Denied"
    then = (
        "The run goes on: the call runs now."
        if decision == "approve"
        else "The run goes on without the call: the model is told it was denied."
    )
    body = (
        "".join(note(n) for n in notes_)
        + f'<h1 id="decided" data-decision="{h(decision)}">{done}: task <code>{h(task)}</code>'
        + "</h1>"
        + f'<p>Agent {h(agent)} took the decision; the task is now <b id="task-state">'
        + f"{h(state or 'unknown')}</b>. {then}</p>"
        + f'<p><a id="back" href="{back}">back to agent {h(agent)}</a></p>'
    )
    crumbs = f'<a href="/">overview</a> / <a href="{base}">agent {h(agent)}</a> / decided'
    return page(done, body, csrf=csrf, context=context, crumbs=crumbs)
