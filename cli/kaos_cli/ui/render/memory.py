"""A MemoryStore's inspector: the scope picker, the three tiers, and the store's health."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from kaos_core.memory.contract import Fact, ListResponse, Provenance, WindowTurn
from kaos_core.memory.quarantine import QuarantinedFact
from kaos_core.tokens import turn_tokens as count_tokens

from kaos_cli.health import Health
from kaos_cli.ui.diff import diff_html
from kaos_cli.ui.model import Note
from kaos_cli.ui.render.base import badge, h, notes, page, table, when

# The levels of ``kaos memory list --level``, narrowest first.
LEVELS = ("session", "agent", "user", "store")


@dataclass(frozen=True)
class Scope:
    level: str
    principal: str
    session: str
    agent: str = ""  # an Agent's name in the store's namespace (the agent level acts as it)

    def query(self, **extra: str) -> str:
        values = {
            "level": self.level,
            "agent": self.agent,
            "principal": self.principal,
            "session": self.session,
        }
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
        if self.level == "agent":
            return (
                f"the window and digest of every session of agent {self.agent}{who}, and "
                f"every long-term fact of agent {self.agent}{who}, in MemoryStore {store}"
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


def provenance_title(found: Provenance) -> str:
    """A fact's provenance beyond its source, in words: the turns it was taken from, when
    they were said, and the model that extracted it."""
    turns = ", ".join(str(t) for t in found.turns) or "not recorded"
    said = found.observed_at or "not recorded"
    how = f"extracted by {found.model}" if found.model else "stored as written"
    return f"turns {turns}; said {said}; {how}"


def source_html(fact: Fact) -> str:
    """The source word, the rest of the provenance as its tooltip (``-``: a fact stored
    before provenance was recorded)."""
    found = fact.provenance
    if found is None:
        return '<span class="source" title="provenance not recorded">-</span>'
    return (
        f'<span class="source" data-source="{h(found.source)}" '
        f'title="{h(provenance_title(found))}">{h(found.source)}</span>'
    )


def facts_html(facts: Sequence[Fact], *, scored: bool, next_page: str | None) -> str:
    headers = ["text", "source", "agent", "user", "session", "score", "created", "id"]
    rows = [
        (
            h(f.text),
            source_html(f),
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


@dataclass(frozen=True)
class Choices:
    """What the picker offers: the names the console found for each field."""

    agents: Sequence[str] = ()
    principals: Sequence[str] = ()
    sessions: Sequence[str] = ()


def picker_html(base: str, scope: Scope, query: str, choices: Choices) -> str:
    levels = "".join(
        f'<option value="{lv}"{" selected" if lv == scope.level else ""}>{lv}</option>'
        for lv in LEVELS
    )

    def datalist(id_: str, values: Sequence[str]) -> str:
        options = "".join(f'<option value="{h(v)}"></option>' for v in values)
        return f'<datalist id="{id_}">{options}</datalist>'

    return (
        f'<form class="picker" id="scope-form" method="get" action="{base}">'
        f'<label class="field">level <select name="level" id="level">{levels}</select></label>'
        f'<label class="field">agent <input name="agent" id="pick-agent" list="agents" '
        f'value="{h(scope.agent)}" size="16"></label>{datalist("agents", choices.agents)}'
        f'<label class="field">principal <input name="principal" id="pick-principal" '
        f'list="principals" value="{h(scope.principal)}" size="16"></label>'
        f"{datalist('principals', choices.principals)}"
        f'<label class="field">session <input name="session" id="pick-session" list="sessions" '
        f'value="{h(scope.session)}" size="30"></label>{datalist("sessions", choices.sessions)}'
        f'<label class="field">search facts <input type="search" name="q" id="search" '
        f'value="{h(query)}" size="16"></label><button type="submit">Show</button></form>'
    )


def tiers_html(
    base: str,
    scope: Scope,
    listing: ListResponse,
    *,
    scored: bool,
    budget: int | None,
    trigger: int | None,
    digest_versions: Sequence[DigestVersion],
    next_page: str | None,
) -> str:
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
    return (
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


def quarantine_html(held: Sequence[QuarantinedFact], namespace: str, store: str) -> str:
    """The scope's quarantined facts (read-only here: ``kaos memory quarantine`` releases
    or erases them), each with the reason screening held it."""
    rows = [
        (
            f'<span class="reason" data-reason="{h(q.reason)}">{h(q.reason)}</span>',
            h(q.fact.text),
            source_html(q.fact),
            h(q.fact.agent_id or "-"),
            h(q.fact.user_id or "-"),
            h(q.fact.session_id or "-"),
            when(q.fact.created_at),
            f'<code class="id">{h(q.fact.id)}</code>',
        )
        for q in held
    ]
    headers = ["reason", "text", "source", "agent", "user", "session", "created", "id"]
    out = (
        '<section class="tier" id="tier-quarantine"><h2>Quarantined facts</h2>'
        '<p class="hint">Stored, never recalled: their text reads as an instruction to the '
        "agent. Release or erase one with <code>kaos memory quarantine release|erase ID "
        f"--store {h(store)} -n {h(namespace)}</code>.</p>"
    )
    out += (
        table(headers, rows, css="quarantine-table")
        if rows
        else '<p class="empty" id="quarantine-empty">no quarantined facts in this scope</p>'
    )
    return out + "</section>"


@dataclass(frozen=True)
class Inspected:
    """What the inspector read: the store's health, and the listing when it answered."""

    health: Health
    listing: ListResponse | None = None
    budget: int | None = None
    trigger: int | None = None
    digest_versions: Sequence[DigestVersion] = ()
    next_page: str | None = None
    # The scope's quarantined facts (None: the service did not list them).
    quarantined: Sequence[QuarantinedFact] | None = None


def memory_page(
    *,
    namespace: str,
    store: str,
    scope: Scope,
    query: str,
    choices: Choices,
    inspected: Inspected,
    notes_: Sequence[Note],
    csrf: str,
    context: str,
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    sections = ""
    if inspected.listing is not None:
        sections = tiers_html(
            base, scope, inspected.listing, scored=bool(query), budget=inspected.budget,
            trigger=inspected.trigger, digest_versions=inspected.digest_versions,
            next_page=inspected.next_page,
        )  # fmt: skip
    if inspected.quarantined is not None:
        sections += quarantine_html(inspected.quarantined, namespace, store)
    body = (
        f"<h1>Memory of {h(store)} <small>{h(namespace)}</small> "
        f'<span id="health">{badge(inspected.health)}</span></h1>'
        + picker_html(base, scope, query, choices)
        + notes(notes_)
        + sections
    )
    crumbs = f'<a href="/">overview</a> / memory {h(store)}'
    return page(f"Memory {store}", body, csrf=csrf, context=context, crumbs=crumbs)
