"""An agent's page (its tools, events and logs) and the chat relay behind it.

A chat turn is relayed as server-sent events: ``delta`` pieces of the answer as the agent
streams them, then ``done``, or ``error`` with what went wrong.
"""

from __future__ import annotations

import secrets

import aiohttp
from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_cli.clients.agent import (
    AgentRefused,
    AgentUnreachable,
    AnswerBrokeOff,
    fetch_card,
    stream_chat,
    tools_from_card,
    tools_from_spec,
)
from kaos_cli.kinds import AGENT, AGENT_PORT
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.ui import render
from kaos_cli.ui.model import summarize
from kaos_cli.ui.pages.common import Forward, forget_forward, html, service_url, sse, subject
from kaos_cli.ui.render import EventRow, Tool
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


async def agent_page(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["name"]
    cluster = app[CLUSTER]
    try:
        obj = await cluster.get(AGENT.resource, ns, name)
    except ClusterError as exc:
        body = render.problem(exc.message, exc.problem)
        return html(render.page(name, body, csrf=config.csrf, context=config.context), 404
                    if exc.problem == "not-found" else 502)  # fmt: skip
    row = summarize(AGENT.kind, obj)
    notes: list[tuple[str, str]] = []
    try:
        session = subject(SESSION_HEADER, request.query.get("session")) or new_session()
        principal = subject(PRINCIPAL_HEADER, request.query.get("principal")) or "console-user"
    except BadRequest as exc:
        notes.append(("failed", exc.message))
        session, principal = new_session(), "console-user"
    tools: list[Tool] = []
    tools_from = "spec"
    try:
        url, _ = await service_url(app, obj, AGENT_PORT)
        card = await fetch_card(app[HTTP], url, {}, request_timeout=CARD_TIMEOUT)
        tools = [Tool(**t) for t in tools_from_card(card)]
        tools_from = "agent"
    except ClusterError as exc:
        notes.append((exc.problem, f"agent {name} cannot be reached: {exc.message}"))
    except AgentRefused:
        pass  # an agent without a card: its tools from the spec, as when it is not there
    except AgentUnreachable:
        notes.append(("unreachable", f"agent {name} does not answer on its Service"))
    if tools_from == "spec":
        tools = [Tool(**t) for t in tools_from_spec(obj)]
    try:
        agent_events = await events_of(cluster, ns, AGENT.kind, name)
    except ClusterError as exc:
        agent_events = []
        notes.append((exc.problem, exc.message))
    try:
        logs = await cluster.run("logs", f"deployment/{name}", "-n", ns, "-c", "agent",
                                 f"--tail={LOG_LINES}")  # fmt: skip
    except ClusterError as exc:
        logs = f"(no logs: {exc.message})"
    sessions = sorted(app[MEMORY].sessions.get(ns, set()))
    return html(
        render.agent_page(
            row, tools=tools, tools_from=tools_from, events=agent_events, logs=logs,
            session=session, principal=principal, sessions=sessions, notes=notes,
            csrf=config.csrf, context=config.context,
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
    except AgentUnreachable:
        why = await forget_forward(app, key) if key is not None else ""
        said = f"agent {name} could not be reached or broke off its answer{why}"
        await response.write(sse("error", {"message": said, "problem": "unreachable"}))
    return response
