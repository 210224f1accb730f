"""What an agent's page reads from the agent beside its card: its token usage, its audit
trail and the tasks paused for an approval; and the decision the console relays for one.

Each is read on its own, at once, and fails on its own: an agent that does not serve it
(an image from before it: 404, or an A2A method it lacks), a caller it does not allow
(401, 403), an agent that does not answer. Each failure is a note in its section, never
a failed page, and never exception text. The console asks as the page's principal
(``X-Principal``), as its chat does; an agent that checks verified users refuses it, and
the note says so.

A decision is a form post (the guard checks its CSRF token, as the forget form's) that
the console relays as the A2A message resuming the task; the page that answers says
what the agent answered, and a refusal is an error page that says nothing was decided.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.wire import PRINCIPAL_HEADER

from kaos_cli.clients.a2a import (
    TaskCallFailed,
    TaskCallRefused,
    TaskHttpRefused,
    TaskUnreachable,
    state_of,
)
from kaos_cli.clients.agent import AgentError, AgentRefused, AgentUnreachable
from kaos_cli.clients.agent_ops import (
    AUDIT_PATH,
    DECISIONS,
    REASON_MAX,
    USAGE_PATH,
    AgentOps,
    AuditRecord,
    Decision,
    PausedTask,
    UsageRecord,
    agent_ops,
)
from kaos_cli.kinds import AGENT, AGENT_PORT
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui.model import Note, NotFound, PageError
from kaos_cli.ui.pages.common import forget_forward, html, service_url, subject
from kaos_cli.ui.pages.errors import missing
from kaos_cli.ui.render.agent_ops import Ops, Read, decided_page
from kaos_cli.ui.state import CLUSTER, CONFIG, HTTP

OPS_TIMEOUT = 10.0
DECIDE_TIMEOUT = 30.0
USAGE_DAYS = 7
AUDIT_SHOWN = 25
PAUSED_SHOWN = 20
NOTHING_DECIDED = "Nothing was decided"
# A2A task ids as agents mint them (uuid hex); anything else is refused before a request.
TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# JSON-RPC codes a2a-sdk answers for a method the agent does not serve.
NOT_SERVED = (-32601, -32004)


def since_day(today: datetime | None = None) -> str:
    """The first UTC day of the usage shown: ``USAGE_DAYS`` days up to today."""
    now = today or datetime.now(UTC)
    return (now - timedelta(days=USAGE_DAYS - 1)).date().isoformat()


def http_note(name: str, what: str, path: str, subresource: str, exc: AgentError) -> Note:
    """Why ``what`` (usage, the audit trail) could not be read, in the console's words."""
    if isinstance(exc, AgentRefused):
        said = f" ({exc.error_message})" if exc.error_message else ""
        if exc.status == 404:
            return Note("hint", f"Agent {name} does not offer {what}: GET {path} answered "
                        "404 (its image is older than the feature).", "probe")  # fmt: skip
        if exc.status == 401:
            return Note("warn", f"Not allowed: agent {name} answered 401 to GET {path}: it "
                        f"needs a verified user, and the console sends only X-Principal{said}.",
                        "probe")  # fmt: skip
        if exc.status == 403:
            return Note("warn", f"Not allowed: agent {name} answered 403 to GET {path}: "
                        f"reading {what} needs get on agents/{subresource} of this Agent{said}.",
                        "probe")  # fmt: skip
        return Note("error", f"Agent {name} answered {exc.status} to GET {path}{said}.", "probe")
    if isinstance(exc, AgentUnreachable):
        return Note("warn", f"Agent {name} did not answer GET {path}: {exc.cause}.", "probe")
    return Note("error", f"Agent {name} answered GET {path} with something unreadable.", "probe")


def task_note(name: str, exc: TaskCallFailed) -> Note:
    """Why the paused tasks could not be listed."""
    if isinstance(exc, TaskCallRefused) and exc.code in NOT_SERVED:
        return Note("hint", f"Agent {name} does not list tasks over A2A (ListTasks): it has no "
                    "approvals to show.", "probe")  # fmt: skip
    if isinstance(exc, TaskHttpRefused) and exc.status in (401, 403):
        return Note("warn", f"Not allowed: agent {name} answered {exc.status} to ListTasks "
                    "for this principal.", "probe")  # fmt: skip
    if isinstance(exc, TaskUnreachable):
        return Note("warn", f"Agent {name} did not answer ListTasks.", "probe")
    if isinstance(exc, TaskHttpRefused):
        return Note("error", f"Agent {name} answered {exc.status} to ListTasks.", "probe")
    return Note("error", f"Agent {name} refused ListTasks: {exc.message}.", "probe")


def _headers(principal: str) -> dict[str, str]:
    return {PRINCIPAL_HEADER: principal} if principal else {}


async def _usage(ops: AgentOps, name: str, since: str) -> Read[UsageRecord]:
    try:
        return Read(await ops.usage(since=since))
    except AgentError as exc:
        return Read(note=http_note(name, "its token usage", USAGE_PATH, "usage", exc))


async def _audit(ops: AgentOps, name: str) -> Read[AuditRecord]:
    try:
        return Read(await ops.audit(limit=AUDIT_SHOWN))
    except AgentError as exc:
        return Read(note=http_note(name, "its audit trail", AUDIT_PATH, "audit", exc))


async def _paused(ops: AgentOps, name: str) -> Read[PausedTask]:
    try:
        return Read(await ops.paused(limit=PAUSED_SHOWN))
    except TaskCallFailed as exc:
        return Read(note=task_note(name, exc))


def _all(note: Note | None = None, skipped: str = "") -> Ops:
    read: Read[Any] = Read(note=note, skipped=skipped)
    return Ops(read, read, read, since_day())


async def read_ops(
    app: web.Application, obj: dict[str, Any], principal: str, probe_failed: str | None
) -> Ops:
    """The three sections the agent answers for, asked at once. When the console's probe
    of the agent failed, nothing is asked: each section says the agent did not answer."""
    name = str((obj.get("metadata") or {}).get("name"))
    if probe_failed is not None:
        return _all(skipped=f"Not read: agent {name} did not answer the console's probe.")
    try:
        url, _ = await service_url(app, obj, AGENT_PORT)
    except ClusterError as exc:
        return _all(Note("warn", f"port-forward to agent {name}: {exc.message}", "cluster",
                         exc.problem))  # fmt: skip
    since = since_day()
    async with agent_ops(
        url, _headers(principal), request_timeout=OPS_TIMEOUT, http=app[HTTP]
    ) as ops:
        usage, audit, paused = await asyncio.gather(
            _usage(ops, name, since), _audit(ops, name), _paused(ops, name)
        )
    # (An agent gone since the probe: the next page's probe drops the forward.)
    return Ops(usage, audit, paused, since)


def decision_of(form: Any) -> tuple[str, Decision, str, str]:
    """(task, decision, reason, principal) of a decision form; ``BadRequest`` when bad."""
    task = str(form.get("task") or "").strip()
    decision = str(form.get("decision") or "")
    reason = str(form.get("reason") or "").strip()
    principal = subject(PRINCIPAL_HEADER, str(form.get("principal") or ""))
    if decision not in DECISIONS:
        raise BadRequest("the decision must be approve or deny")
    if not TASK_ID.fullmatch(task):
        raise BadRequest("a task id (letters, digits, . _ : -, up to 128) is required")
    if len(reason) > REASON_MAX:
        raise BadRequest(f"the reason is longer than {REASON_MAX} characters")
    return task, cast(Decision, decision), reason, principal


def refused(name: str, exc: TaskCallFailed) -> PageError:
    """The error page of a decision the agent did not take."""
    if isinstance(exc, TaskHttpRefused):
        status = exc.status if 400 <= exc.status < 500 else 502
        why = (
            "this principal may not decide it (the run's own user, or create on "
            "agents/approve, may)"
            if exc.status in (401, 403)
            else f"it answered {exc.status}"
        )
        kind = "forbidden" if exc.status in (401, 403) else "failed"
        return PageError(status, NOTHING_DECIDED, f"nothing was decided: agent {name} refused: "
                         f"{why}", kind)  # fmt: skip
    if isinstance(exc, TaskUnreachable):
        return PageError(502, NOTHING_DECIDED, f"nothing was decided: agent {name} did not "
                         "answer", "unreachable")  # fmt: skip
    if isinstance(exc, TaskCallRefused):
        return PageError(409, NOTHING_DECIDED, f"nothing was decided: agent {name} refused: "
                         f"{exc.message}")  # fmt: skip
    return PageError(502, NOTHING_DECIDED, f"nothing was decided: agent {name} failed")


async def decide(request: web.Request) -> web.Response:
    """Relay an Approve or Deny as the A2A message that resumes the paused task."""
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        task, decision, reason, principal = decision_of(await request.post())
    except BadRequest as exc:
        raise PageError(400, NOTHING_DECIDED, f"nothing was decided: {exc.message}") from None
    try:
        obj = await app[CLUSTER].get(AGENT.resource, ns, name)
    except ClusterError as exc:
        if exc.problem == "not-found":
            raise NotFound(await missing(app, AGENT, ns, name)) from None
        raise
    try:
        url, key = await service_url(app, obj, AGENT_PORT)
    except ClusterError as exc:
        raise PageError(502, NOTHING_DECIDED, f"nothing was decided: {exc.message}",
                        exc.problem) from None  # fmt: skip
    try:
        async with agent_ops(
            url, _headers(principal), request_timeout=DECIDE_TIMEOUT, http=app[HTTP]
        ) as ops:
            answered = await ops.decide(task, decision, reason)
    except TaskCallFailed as exc:
        if isinstance(exc, TaskUnreachable):
            await forget_forward(app, key)
        raise refused(name, exc) from None
    return html(decided_page(namespace=ns, agent=name, task=task, decision=decision,
                             state=state_of(answered), principal=principal, notes_=[],
                             csrf=config.csrf, context=config.context))  # fmt: skip
