"""The console's HTML, rendered on the server from plain data (pure functions).

Everything interpolated goes through ``h`` (HTML escaping). The pages carry no inline
script or style (the Content-Security-Policy forbids both): behaviour comes from
``/static/console.js``, wired by ``data-*`` attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from urllib.parse import quote, urlencode

from kaos_core.memory.contract import Fact, ListResponse, WindowTurn
from kaos_core.tokens import turn_tokens as count_tokens

from kaos_cli.ui.diff import diff_html
from kaos_cli.ui.model import Condition, Row, topology
from kaos_cli.ui.topology import render_svg


def h(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def short_time(stamp: str) -> str:
    """An API timestamp as month-day and time, to the second (UTC); as given otherwise."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return when.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def when(stamp: str) -> str:
    return f'<time datetime="{h(stamp)}" title="{h(stamp)}">{h(short_time(stamp))}</time>'


def page(
    title: str, body: str, *, csrf: str, context: str, crumbs: str = "", live: bool = False
) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{h(title)} · KAOS console</title>"
        f'<meta name="kaos-csrf" content="{h(csrf)}">'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        '<header class="bar"><a class="brand" href="/">KAOS console</a>'
        f'<nav class="crumbs">{crumbs}</nav>'
        f'<span class="ctx">context: {h(context)}</span>'
        + ('<span id="live" class="live" title="live updates">●</span>' if live else "")
        + "</header>"
        f"<main>{body}</main></body></html>"
    )


def problem(message: str, kind: str = "failed") -> str:
    return f'<div class="problem problem-{h(kind)}" role="alert">{h(message)}</div>'


def badge(phase: str) -> str:
    return f'<span class="phase phase-{h(phase.lower() or "unknown")}">{h(phase or "-")}</span>'


def chips(conditions: Sequence[Condition]) -> str:
    out = []
    for c in conditions:
        css = "chip bad" if c.bad else "chip"
        if c.type == "MemoryDegraded" and c.bad:
            css += " degraded"
        tip = f"{c.type}={c.status} {c.reason}: {c.message}".strip(": ")
        out.append(
            f'<span class="{css}" title="{h(tip)}" data-condition="{h(c.type)}" '
            f'data-status="{h(c.status)}">{h(c.type)}'
            f"{'' if c.status == 'True' else '=' + h(c.status)}"
            f"{' (' + h(c.reason) + ')' if c.bad and c.reason else ''}</span>"
        )
    return "".join(out) or '<span class="muted">none yet</span>'


def link_for(row: Row) -> str:
    ns, name = quote(row.namespace), quote(row.name)
    if row.kind == "Agent":
        return f'<a href="/agents/{ns}/{name}">{h(row.name)}</a>'
    if row.kind == "MemoryStore":
        return f'<a href="/memory/{ns}/{name}">{h(row.name)}</a>'
    return h(row.name)


def overview_fragment(rows: list[Row], errors: Iterable[tuple[str, str]]) -> str:
    """Every namespace's resources and topology; errors first (kind, message)."""
    parts = [problem(message, kind) for kind, message in errors]
    namespaces = sorted({r.namespace for r in rows})
    if not namespaces and not parts:
        parts.append('<p class="empty">No KAOS resources found. Try: kaos samples deploy</p>')
    for ns in namespaces:
        mine = [r for r in rows if r.namespace == ns]
        body = "".join(
            f'<tr data-kind="{h(r.kind)}" data-name="{h(r.name)}" data-phase="{h(r.phase)}">'
            f'<td class="nowrap">{h(r.kind)}</td><td class="nowrap">{link_for(r)}</td>'
            f'<td class="nowrap">{badge(r.phase)}</td>'
            f'<td class="conds">{chips(r.conditions)}</td>'
            f'<td class="endpoint">{h(r.endpoint) or "-"}</td><td>{h(r.age)}</td></tr>'
            for r in mine
        )
        parts.append(
            f'<section class="ns" data-namespace="{h(ns)}"><h2>namespace {h(ns)}</h2>'
            '<table class="resources"><thead><tr><th>kind</th><th>name</th>'
            "<th>phase</th><th>conditions</th><th>endpoint</th><th>age</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
            f'<figure class="topo">{render_svg(topology(rows, ns))}'
            "<figcaption>topology: ModelAPIs · agents and their delegations · MCP servers and "
            "MemoryStores</figcaption></figure></section>"
        )
    return "".join(parts)


def overview_page(fragment: str, *, csrf: str, context: str) -> str:
    body = (
        '<div id="overview" class="live-region" data-src="/fragments/overview" '
        f'data-events="/events">{fragment}</div>'
    )
    return page("Overview", body, csrf=csrf, context=context, live=True)


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


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, css: str = "") -> str:
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in r) + "</tr>" for r in rows)
    return f'<table class="{h(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


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
    notes: Sequence[tuple[str, str]],
    csrf: str,
    context: str,
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
        f'<dl class="facts"><dt>phase</dt><dd>{badge(row.phase)}</dd>'
        f'<dt>conditions</dt><dd class="conds">{chips(row.conditions)}</dd>'
        f"<dt>endpoint</dt><dd>{h(row.endpoint) or '-'}</dd>"
        f"<dt>model</dt><dd>{h(row.spec.get('modelAPI'))} / {h(row.spec.get('model'))}</dd>"
        f"<dt>memory</dt><dd>{store_link}</dd></dl>"
    )
    options = "".join(f'<option value="{h(s)}"></option>' for s in sessions)
    chat = (
        f'<section class="chat" id="chat" data-post="/agents/{ns}/{name}/chat">'
        "<h2>Chat</h2>"
        '<form id="chat-form" class="who" autocomplete="off">'
        f'<label>session <input id="session" name="session" value="{h(session)}" '
        'list="known-sessions" size="36" required></label>'
        f'<datalist id="known-sessions">{options}</datalist>'
        '<button type="button" id="new-session">new session</button>'
        f'<label>principal <input id="principal" name="principal" value="{h(principal)}" '
        'size="18"></label>'
        '<div id="transcript" class="transcript" aria-live="polite"></div>'
        '<div class="compose"><textarea id="message" rows="2" required '
        'placeholder="Ask the agent…"></textarea><button id="send" type="submit">Send</button>'
        '</div><p class="hint" id="activity">The agent streams its answer as plain text; '
        "its chat stream carries no tool-call events, so tool use shows in the tools, "
        "events and logs below.</p></form></section>"
    )
    tool_rows = [(h(t.name), h(t.source), h(t.description)) for t in tools]
    tool_note = (
        "as the running agent advertises them (its card)"
        if tools_from == "agent"
        else "from the Agent's spec: the agent could not be reached"
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
    body = (
        "".join(problem(m, k) for k, m in notes)
        + f"<h1>Agent {h(row.name)} <small>{h(row.namespace)}</small></h1>"
        + f'<div class="agent-grid"><div>{facts}{chat}</div><div>{tools_html}{events_html}'
        + f"</div></div>{logs_html}"
    )
    crumbs = f'<a href="/">overview</a> / agent {h(row.name)}'
    return page(f"Agent {row.name}", body, csrf=csrf, context=context, crumbs=crumbs)


@dataclass(frozen=True)
class Scope:
    level: str
    principal: str
    session: str

    def query(self, **extra: str) -> str:
        values = {"level": self.level, "principal": self.principal, "session": self.session}
        values.update(extra)
        return urlencode({k: v for k, v in values.items() if v})

    def erases(self, store: str) -> str:
        """What forgetting this scope erases, in words (the confirmation's text)."""
        who = f" of principal {self.principal}" if self.principal else ""
        if self.level == "session":
            return (
                f"the window and digest of session {self.session}{who}, and every long-term "
                f"fact of that session, in MemoryStore {store}"
            )
        if self.level == "user":
            return (
                f"every session's window and digest{who}, and every long-term fact{who}, "
                f"in MemoryStore {store}"
            )
        return (
            f"everything in MemoryStore {store}: every session's window and digest and every "
            "long-term fact"
        )


@dataclass(frozen=True)
class DigestVersion:
    version: int
    summary: str


def window_html(turns: Sequence[WindowTurn], budget: int | None, trigger: int | None) -> str:
    used = sum(count_tokens(t.content) for t in turns)
    limit = budget or 0
    meter = (
        f'<meter id="window-meter" min="0" max="{limit}" value="{min(used, limit)}" '
        f'high="{trigger or limit}"></meter>'
        if limit
        else ""
    )
    head = (
        f'<p class="tokens" id="window-tokens" data-turns="{len(turns)}" data-tokens="{used}">'
        f"<strong>{len(turns)}</strong> turns · <strong>{used}</strong> tokens of a "
        f"{h(budget or '?')}-token budget{f' (fold at {trigger})' if trigger else ''} {meter}</p>"
    )
    rows = [(h(t.role), h(t.content), h(count_tokens(t.content)), when(t.at)) for t in turns]
    return head + (
        table(["role", "content", "tokens", "at"], rows, css="window-table")
        if turns
        else '<p class="empty">the window is empty</p>'
    )


def digest_html(current: DigestVersion | None, versions: Sequence[DigestVersion]) -> str:
    if current is None:
        return '<p class="empty" id="digest-none">no digest yet (written by the first fold)</p>'
    items = "".join(f'<li data-version="{v.version}">version {v.version}</li>' for v in versions)
    out = (
        f'<p id="digest-current" data-version="{current.version}"><strong>version '
        f'{current.version}</strong></p><blockquote class="digest">{h(current.summary)}'
        f"</blockquote>"
        f'<div class="hint">versions seen by this console: <ol class="versions">{items}</ol></div>'
    )
    if len(versions) >= 2:
        old, new = versions[-2], versions[-1]
        out += (
            f"<h3>diff: version {old.version} → {new.version}</h3>"
            f'<div class="diff" id="digest-diff">{diff_html(old.summary, new.summary)}</div>'
        )
    return out


def facts_html(facts: Sequence[Fact], *, scored: bool, next_page: str | None) -> str:
    headers = ["text", "agent", "user", "session", "score", "created", "id"]
    rows = [
        (
            h(f.text),
            h(f.agent_id or "-"),
            h(f.user_id or "-"),
            h(f.session_id or "-"),
            h("-" if f.score is None else f"{f.score:.3f}"),
            when(f.created_at),
            f'<code class="id">{h(f.id[:8])}</code>',
        )
        for f in facts
    ]
    out = (
        f'<p class="tokens" id="facts-count" data-count="{len(facts)}"><strong>{len(facts)}'
        f"</strong> facts on this page{' (by relevance)' if scored else ''}</p>"
    )
    out += (
        table(headers, rows, css="facts-table")
        if facts
        else '<p class="empty" id="facts-empty">no long-term facts in this scope</p>'
    )
    if next_page:
        out += f'<p><a id="next-page" href="{h(next_page)}">next page →</a></p>'
    return out


def memory_page(
    *,
    namespace: str,
    store: str,
    scope: Scope,
    query: str,
    principals: Sequence[str],
    sessions: Sequence[str],
    listing: ListResponse | None,
    scored: bool,
    budget: int | None,
    trigger: int | None,
    digest_versions: Sequence[DigestVersion],
    next_page: str | None,
    notes: Sequence[tuple[str, str]],
    csrf: str,
    context: str,
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    levels = "".join(
        f'<option value="{lv}"{" selected" if lv == scope.level else ""}>{lv}</option>'
        for lv in ("session", "user", "store")
    )
    plist = "".join(f'<option value="{h(p)}"></option>' for p in principals)
    slist = "".join(f'<option value="{h(s)}"></option>' for s in sessions)
    picker = (
        f'<form class="picker" id="scope-form" method="get" action="{base}">'
        f'<label>level <select name="level" id="level">{levels}</select></label>'
        f'<label>principal <input name="principal" id="pick-principal" list="principals" '
        f'value="{h(scope.principal)}" size="16"></label><datalist id="principals">{plist}'
        f'</datalist><label>session <input name="session" id="pick-session" list="sessions" '
        f'value="{h(scope.session)}" size="36"></label><datalist id="sessions">{slist}</datalist>'
        f'<label>search facts <input type="search" name="q" id="search" value="{h(query)}" '
        'size="18"></label><button type="submit">Show</button></form>'
    )
    sections = ""
    if listing is not None:
        current = (
            DigestVersion(listing.medium_term.version, listing.medium_term.summary or "")
            if listing.medium_term.version is not None
            else None
        )
        conversational = scope.level != "store" and scope.session
        window = (
            window_html(listing.short_term.window, budget, trigger)
            if conversational
            else '<p class="empty">pick a session to see its window</p>'
        )
        digest = (
            digest_html(current, digest_versions)
            if conversational
            else '<p class="empty">pick a session to see its digest</p>'
        )
        sections = (
            '<div class="tiers">'
            f'<section class="tier" id="tier-window"><h2>Short term: the window</h2>{window}'
            "</section>"
            f'<section class="tier" id="tier-digest"><h2>Medium term: the digest</h2>{digest}'
            "</section></div>"
            '<section class="tier" id="tier-facts"><h2>Long term: facts</h2>'
            f"{facts_html(listing.long_term.facts, scored=scored, next_page=next_page)}</section>"
            f'<p class="danger-zone"><a class="button danger" id="forget-link" '
            f'href="{base}/forget?{scope.query()}">Forget this scope…</a></p>'
        )
    body = (
        f"<h1>Memory of {h(store)} <small>{h(namespace)}</small></h1>{picker}"
        + "".join(problem(m, k) for k, m in notes)
        + sections
    )
    crumbs = f'<a href="/">overview</a> / memory {h(store)}'
    return page(f"Memory {store}", body, csrf=csrf, context=context, crumbs=crumbs)


def forget_confirm_page(
    *, namespace: str, store: str, scope: Scope, csrf: str, context: str
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    hidden = "".join(
        f'<input type="hidden" name="{k}" value="{h(v)}">'
        for k, v in (("level", scope.level), ("principal", scope.principal),
                     ("session", scope.session), ("csrf", csrf))
    )  # fmt: skip
    body = (
        f'<h1>Forget memory in {h(store)}</h1><div class="confirm" role="alertdialog">'
        f'<p id="erases">This erases {h(scope.erases(store))}.</p>'
        "<p>It cannot be undone.</p>"
        f'<form method="post" action="{base}/forget">{hidden}'
        '<button type="submit" class="danger" id="confirm-forget">Erase</button> '
        f'<a href="{base}?{scope.query()}">cancel</a></form></div>'
    )
    crumbs = f'<a href="/">overview</a> / <a href="{base}">memory {h(store)}</a> / forget'
    return page("Forget", body, csrf=csrf, context=context, crumbs=crumbs)


def forgotten_page(
    *,
    namespace: str,
    store: str,
    scope: Scope,
    counts: tuple[int, int, int],
    degraded: bool,
    csrf: str,
    context: str,
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    rows = [
        ("short term (window turns)", h(counts[0])),
        ("medium term (digest versions)", h(counts[1])),
        ("long term (facts)", h(counts[2])),
    ]
    body = (
        f"<h1>Forgotten in {h(store)}</h1><p>Erased {h(scope.erases(store))}.</p>"
        + (problem("the erasure was degraded: a tier could not be reached") if degraded else "")
        + table(["tier", "erased"], rows, css="forgotten-table")
        + f'<p><a id="back" href="{base}?{scope.query()}">back to the inspector</a></p>'
    )
    crumbs = f'<a href="/">overview</a> / <a href="{base}">memory {h(store)}</a> / forgotten'
    return page("Forgotten", body, csrf=csrf, context=context, crumbs=crumbs)
