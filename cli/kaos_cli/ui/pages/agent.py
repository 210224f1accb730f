"""An agent's page (its tools, events and logs) and the chat relay behind it.

The page asks the running agent for its card, through the agent's Service: the console's
own probe. What it shows is reconciled with the operator's conditions (``status_notes``),
so a probe that fails on a Ready agent reads as a warning naming the probe, not as an
error beside a green badge. A chat turn is relayed as server-sent events: ``delta``
pieces of the answer as the agent streams them, then ``done``, or ``error`` with what
went wrong. What the agent did and what waits on a decision is read beside the card
(``pages.agent_ops``).
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_cli.clients.agent import (
    CARD_PATH,
    AgentError,
    AgentRefused,
    AnswerBrokeOff,
    fetch_card,
    stream_chat,
    tools_from_card,
    tools_from_spec,
)
from kaos_cli.kinds import AGENT, AGENT_PORT
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.ui.model import Note, NotFound, status_notes, summarize
from kaos_cli.ui.pages.agent_ops import AUDIT_SHOWN, read_ops
from kaos_cli.ui.pages.common import (
    Forward,
    forget_forward,
    html,
    service_url,
    sse,
    subject,
    target,
)
from kaos_cli.ui.pages.errors import missing
from kaos_cli.ui.render.agent import EventRow, Tool
from kaos_cli.ui.render.agent import agent_page as render_agent
from kaos_cli.ui.render.agent_ops import ops_html
from kaos_cli.ui.security import event_stream
from kaos_cli.ui.state import CLUSTER, CONFIG, HTTP, MEMORY

CARD_TIMEOUT = 10.0
EVENTS_SHOWN = 20
LOG_LINES = 40


async def events_of(cluster: Cluster, ns: str, kind: str, name: str) -> list[EventRow]:
    doc = await cluster.json(
        "get", "events", "-n", ns,
        "--field-selector", f"involvedObject.kind={kind},involvedObject.name={name}",
    )  # fmt: skip
    rows = []
    for e in doc.get("items") or []:
        rows.append(
            EventRow(
                last=str(e.get("lastTimestamp") or e.get("eventTime") or ""),
                type=str(e.get("type") or ""),
                reason=str(e.get("reason") or ""),
                count=int(e.get("count") or 1),
                message=str(e.get("message") or ""),
            )
        )
    return sorted(rows, key=lambda r: r.last, reverse=True)[:EVENTS_SHOWN]


def new_session() -> str:
    return f"console-{secrets.token_hex(8)}"


async def get_agent(app: web.Application, ns: str, name: str) -> dict[str, Any]:
    """The Agent; ``NotFound`` (with close names) when there is none."""
    try:
        return await app[CLUSTER].get(AGENT.resource, ns, name)
    except ClusterError as exc:
        if exc.problem == "not-found":
            raise NotFound(await missing(app, AGENT, ns, name)) from None
        raise


async def probe_card(
    app: web.Application, obj: dict[str, Any]
) -> tuple[list[Tool] | None, str | None]:
    """The tools the running agent advertises (``None``: it has no card or did not
    answer), and why the console's probe failed (``None``: the agent answered; "": it did
    not, for no reason kubectl gave)."""
    key: Forward | None = None
    try:
        url, key = await service_url(app, obj, AGENT_PORT)
        card = await fetch_card(app[HTTP], url, {}, request_timeout=CARD_TIMEOUT)
        return [Tool(**t) for t in tools_from_card(card)], None
    except ClusterError as exc:
        return None, exc.message
    except AgentRefused:
        return None, None  # it answered, without a card: its tools from the spec
    except AgentError:  # no answer, or an unreadable one
        return None, (await forget_forward(app, key)) if key is not None else ""


async def agent_page(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["name"]
    cluster = app[CLUSTER]
    obj = await get_agent(app, ns, name)
    row = summarize(AGENT.kind, obj)
    notes: list[Note] = []
    try:
        session = subject(SESSION_HEADER, request.query.get("session")) or new_session()
        principal = subject(PRINCIPAL_HEADER, request.query.get("principal")) or "console-user"
    except BadRequest as exc:
        notes.append(Note("error", exc.message, "input"))
        session, principal = new_session(), "console-user"
    advertised, probe_failed = await probe_card(app, obj)
    tools_from = "spec" if advertised is None else "agent"
    tools = [Tool(**t) for t in tools_from_spec(obj)] if advertised is None else advertised
    what = f"its agent card ({CARD_PATH} on {target(obj, AGENT_PORT)})"
    notes += status_notes(row, what, probe_failed, then="Chat fails until it answers.")
    try:
        agent_events = await events_of(cluster, ns, AGENT.kind, name)
    except ClusterError as exc:
        agent_events = []
        notes.append(Note("warn", f"events: {exc.message}", "cluster", exc.problem))
    try:
        logs = await cluster.run("logs", f"deployment/{name}", "-n", ns, "-c", "agent",
                                 f"--tail={LOG_LINES}")  # fmt: skip
    except ClusterError as exc:
        logs = f"(no logs: {exc.message})"
    sessions = sorted(app[MEMORY].sessions.get(ns, set()))
    ops = await read_ops(app, obj, principal, probe_failed)
    status = obj.get("status") or {}
    ops_part = ops_html(quote(ns), quote(name), row.spec, status, row.endpoint, ops,
                        principal=principal, csrf=config.csrf, audit_shown=AUDIT_SHOWN)  # fmt: skip
    return html(
        render_agent(
            row, tools=tools, tools_from=tools_from, events=agent_events, logs=logs,
            session=session, principal=principal, sessions=sessions, notes_=notes,
            csrf=config.csrf, context=config.context, ops=ops_part,
        )
    )  # fmt: skip


async def chat(request: web.Request) -> web.StreamResponse:
    """One chat turn, relayed as server-sent events."""
    app = request.app
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        body = await request.json()
        message = str(body.get("message") or "").strip()
        session = subject(SESSION_HEADER, str(body.get("session") or ""))
        principal = subject(PRINCIPAL_HEADER, str(body.get("principal") or ""))
        if not message or not session:
            raise BadRequest("a message and a session id are required")
    except BadRequest as exc:
        return web.json_response({"error": exc.message}, status=400)
    except (ValueError, AttributeError):
        return web.json_response({"error": "the body must be a JSON object"}, status=400)
    response = await event_stream(request)
    key: Forward | None = None
    try:
        obj = await app[CLUSTER].get(AGENT.resource, ns, name)
        url, key = await service_url(app, obj, AGENT_PORT)
        app[MEMORY].chatted(ns, session, principal)
        headers = {SESSION_HEADER: session, **({PRINCIPAL_HEADER: principal} if principal else {})}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=app[CONFIG].chat_timeout)
        async for piece in stream_chat(
            app[HTTP], url, name, message, headers, request_timeout=timeout
        ):
            await response.write(sse("delta", {"text": piece}))
        await response.write(sse("done", {"session": session, "principal": principal}))
    except ClusterError as exc:
        await response.write(sse("error", {"message": exc.message, "problem": exc.problem}))
    except AgentRefused as exc:
        await response.write(sse("error", {"message": exc.message}))
    except AnswerBrokeOff as exc:
        await response.write(sse("error", {"message": f"agent failed: {exc.message}"}))
    except AgentError:
        why = await forget_forward(app, key) if key is not None else ""
        said = f"agent {name} could not be reached or broke off its answer"
        await response.write(
            sse("error", {"message": f"{said} ({why})" if why else said, "problem": "unreachable"})
        )
    return response
