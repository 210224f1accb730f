"""An agent's page: its health and conditions, the chat, its tools, events and logs, and
its operations (approvals, schedules, triggers, usage, audit: ``render.agent_ops``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from kaos_cli.ui.model import Note, Row
from kaos_cli.ui.render.base import badge, chips, h, notes, page, table, when


@dataclass(frozen=True)
class Tool:
    name: str
    source: str
    description: str


@dataclass(frozen=True)
class EventRow:
    last: str
    type: str
    reason: str
    count: int
    message: str


def chat_html(ns: str, name: str, session: str, principal: str, sessions: Sequence[str]) -> str:
    """The chat form. Each label stays on one line with its field; on a narrow column the
    fields wrap as wholes, never a word in two."""
    options = "".join(f'<option value="{h(s)}"></option>' for s in sessions)
    return (
        f'<section class="chat" id="chat" data-post="/agents/{ns}/{name}/chat">'
        "<h2>Chat</h2>"
        '<form id="chat-form" autocomplete="off"><div class="who">'
        f'<label class="field session">session <input id="session" name="session" '
        f'value="{h(session)}" list="known-sessions" required></label>'
        f'<datalist id="known-sessions">{options}</datalist>'
        '<button type="button" id="new-session">new session</button>'
        f'<label class="field principal">principal <input id="principal" name="principal" '
        f'value="{h(principal)}"></label></div>'
        '<div id="transcript" class="transcript" aria-live="polite"></div>'
        '<div class="compose"><textarea id="message" rows="2" required '
        'placeholder="Ask the agent…"></textarea><button id="send" type="submit">Send</button>'
        '</div><p class="hint" id="activity">The agent streams its answer as plain text; '
        "its chat stream carries no tool-call events, so tool use shows in the tools, "
        "events and logs below.</p></form></section>"
    )


def agent_page(
    row: Row,
    *,
    tools: list[Tool],
    tools_from: str,
    events: list[EventRow],
    logs: str,
    session: str,
    principal: str,
    sessions: Sequence[str],
    notes_: Sequence[Note],
    csrf: str,
    context: str,
    ops: str = "",
) -> str:
    ns, name = quote(row.namespace), quote(row.name)
    memory = ((row.spec.get("config") or {}).get("memory") or {}).get("memoryStore")
    store_link = (
        f'<a href="/memory/{ns}/{quote(str(memory))}?'
        f'{urlencode({"session": session, "principal": principal})}" id="memory-link">'
        f"{h(memory)}</a>"
        if memory
        else "none"
    )
    facts = (
        f'<dl class="facts"><dt>health</dt><dd id="health">{badge(row.health)}</dd>'
        f'<dt>conditions</dt><dd class="conds">{chips(row.conditions)}</dd>'
        f"<dt>endpoint</dt><dd>{h(row.endpoint) or '-'}</dd>"
        f"<dt>model</dt><dd>{h(row.spec.get('modelAPI'))} / {h(row.spec.get('model'))}</dd>"
        f"<dt>memory</dt><dd>{store_link}</dd></dl>"
    )
    tool_rows = [(h(t.name), h(t.source), h(t.description)) for t in tools]
    tool_note = (
        "as the running agent advertises them (its card)"
        if tools_from == "agent"
        else "from the Agent's spec: the agent could not be asked"
    )
    tools_html = (
        f'<section class="tools"><h2>Tools offered to the model</h2><p class="hint">{tool_note}'
        f"</p>{table(['tool', 'source', 'description'], tool_rows, css='tools-table')}</section>"
        if tools
        else '<section class="tools"><h2>Tools offered to the model</h2><p class="empty">none'
        "</p></section>"
    )
    event_rows = [(when(e.last), h(e.type), h(e.reason), h(e.count), h(e.message)) for e in events]
    events_html = (
        '<section class="events"><h2>Events</h2>'
        + (
            table(["last", "type", "reason", "count", "message"], event_rows, css="events-table")
            if events
            else '<p class="empty">no events</p>'
        )
        + "</section>"
    )
    logs_html = (
        f'<section class="logs"><h2>Pod logs (last lines)</h2><pre id="logs">{h(logs) or "(empty)"}'
        "</pre></section>"
    )
    chat = chat_html(ns, name, session, principal, sessions)
    body = (
        notes(notes_)
        + f"<h1>Agent {h(row.name)} <small>{h(row.namespace)}</small></h1>"
        + f'<div class="agent-grid"><div>{facts}{chat}</div><div>{tools_html}{events_html}'
        + f"</div></div>{ops}{logs_html}"
    )
    crumbs = f'<a href="/">overview</a> / agent {h(row.name)}'
    return page(f"Agent {row.name}", body, csrf=csrf, context=context, crumbs=crumbs)
