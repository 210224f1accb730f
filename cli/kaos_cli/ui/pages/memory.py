"""A MemoryStore's inspector: its tiers in one scope, the digest's versions as the console
saw them, relevance search, and forget (confirmed, then erased with a receipt).

The store is reached as an administrator would (no agent identity), except at the
``agent`` level, which, as ``kaos memory list --level agent --agent NAME`` does, acts as
that agent. The console lists the agents, principals and sessions it finds. Whether the
service answers is the console's own probe (``/readyz`` through a port-forward); the page
reconciles it with the operator's conditions (``status_notes``), so the banner says which
check failed and never contradicts the store's badge.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import quote

import aiohttp
from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.http.failures import describe_failure
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient, MemoryUnavailable
from kaos_core.memory.contract import Level, ListResponse, Tier
from kaos_core.memory.quarantine import QuarantinedFact
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER, agent_identity, validate_agent_identity

from kaos_cli.kinds import AGENT, MEMORY_PORT, MEMORYSTORE
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui.model import Note, NotFound, PageError, status_notes, summarize
from kaos_cli.ui.pages.common import forget_forward, html, service_url, subject, target
from kaos_cli.ui.pages.errors import missing
from kaos_cli.ui.render.forget import forget_confirm_page, forgotten_page
from kaos_cli.ui.render.memory import LEVELS, Choices, DigestVersion, Inspected, Scope
from kaos_cli.ui.render.memory import memory_page as render_memory
from kaos_cli.ui.state import CLUSTER, CONFIG, HTTP, MEMORY

FACTS_PAGE = 20
SEEN_FACTS = 200
REQUEST_TIMEOUT = 15
AGENT_PREFIX = "kaos://agent/"
ERASED_NOTHING = "Nothing was erased"


class ProbeFailed(Exception):
    """The memory service did not answer the console; ``cause`` is why ("" if unknown)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def identity_of(namespace: str, agent: str) -> str:
    """The X-Agent-Identity for the picker's agent: a name in the store's namespace, or a
    full ``kaos://agent/<namespace>/<name>``; ``BadRequest`` when it is neither."""
    try:
        if agent.startswith(AGENT_PREFIX):
            return validate_agent_identity(agent)
        return agent_identity(namespace, agent)
    except BadRequest:
        raise BadRequest(
            f"agent {agent!r} is not an Agent's name or kaos://agent/<namespace>/<name>"
        ) from None


def scope_of(request: web.Request) -> Scope:
    ns = request.match_info["ns"]
    level = request.query.get("level") or ""
    session = subject(SESSION_HEADER, request.query.get("session"))
    principal = subject(PRINCIPAL_HEADER, request.query.get("principal"))
    agent = (request.query.get("agent") or "").strip()
    if agent:
        identity_of(ns, agent)
    if level not in LEVELS:
        level = "session" if session else "agent" if agent else "user" if principal else "store"
    return Scope(level, principal, session, agent)


def budget_of(store: dict[str, Any]) -> tuple[int | None, int | None]:
    short = (((store.get("spec") or {}).get("tiers") or {}).get("shortTerm")) or {}
    return int(short.get("tokenBudget") or 4096), short.get("foldTriggerTokens")


def missing_of(scope: Scope) -> str | None:
    if scope.level == "session" and not scope.session:
        return "pick a session (the session level needs a session id)"
    if scope.level == "agent" and not scope.agent:
        return "pick an agent (the agent level reads as that agent)"
    if scope.level == "user" and not scope.principal:
        return "pick a principal (the user level needs one)"
    return None


async def get_store(app: web.Application, ns: str, name: str) -> dict[str, Any]:
    """The MemoryStore; ``NotFound`` (with close names) when there is none."""
    try:
        return await app[CLUSTER].get(MEMORYSTORE.resource, ns, name)
    except ClusterError as exc:
        if exc.problem == "not-found":
            raise NotFound(await missing(app, MEMORYSTORE, ns, name)) from None
        raise


@contextlib.asynccontextmanager
async def memory_url(app: web.Application, store: dict[str, Any]) -> AsyncIterator[str]:
    """The memory service's URL once its ``/readyz`` answers 200 (the console's probe);
    ``ProbeFailed`` when it does not, or a request in the block finds it gone."""
    try:
        url, key = await service_url(app, store, MEMORY_PORT)
    except ClusterError as exc:
        raise ProbeFailed(exc.message) from None
    try:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        async with app[HTTP].get(url + "/readyz", timeout=timeout) as resp:
            if resp.status != 200:
                raise ProbeFailed(f"/readyz answered {resp.status}")
        yield url
    except (MemoryUnavailable, aiohttp.ClientError, TimeoutError) as exc:
        # kubectl's word on the forward first; else the client's own (never exception text).
        said = await forget_forward(app, key)
        own = str(exc) if isinstance(exc, MemoryUnavailable) else describe_failure(exc)
        raise ProbeFailed(said or own) from None


def client(url: str, identity: str | None = None) -> MemoryServiceClient:
    return MemoryServiceClient(
        url, agent_identity=identity, timeout=REQUEST_TIMEOUT, failure_mode="strict"
    )


async def agents_of(app: web.Application, ns: str, store: str) -> set[str]:
    """The Agents of the namespace that remember through this store (none if unlisted)."""
    try:
        items = await app[CLUSTER].items(AGENT.resource, ns)
    except ClusterError:
        return set()
    return {
        str(a["metadata"]["name"])
        for a in items
        if (((a.get("spec") or {}).get("config") or {}).get("memory") or {}).get("memoryStore")
        == store
    }


async def memory_page(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    store = await get_store(app, ns, name)
    row = summarize(MEMORYSTORE.kind, store)
    notes: list[Note] = []
    try:
        scope = scope_of(request)
    except BadRequest as exc:
        notes.append(Note("error", exc.message, "input"))
        scope = Scope("store", "", "")
    query = request.query.get("q", "").strip()[:1000]
    cursor = request.query.get("cursor") or None
    agents = await agents_of(app, ns, name)
    principals = set(app[MEMORY].principals.get(ns, set()))
    sessions = set(app[MEMORY].sessions.get(ns, set()))
    budget, trigger = budget_of(store)
    listing: ListResponse | None = None
    held: list[QuarantinedFact] | None = None
    next_page = None
    versions: list[DigestVersion] = []
    probe_failed: str | None = None
    try:
        async with memory_url(app, store) as url:
            async with client(url) as admin:
                seen = await admin.list("store", include=("long_term",), limit=SEEN_FACTS)
                held = await quarantined_of(admin, scope)
            for fact in seen.long_term.facts:
                principals.update([fact.user_id] if fact.user_id else [])
                sessions.update([fact.session_id] if fact.session_id else [])
                if fact.agent_id:
                    agents.add(fact.agent_id.removeprefix(f"{AGENT_PREFIX}{ns}/"))
            hint = missing_of(scope)
            if hint:
                notes.append(Note("hint", hint, "input"))
            else:
                listing, next_page = await read(url, scope, query, cursor, ns, name)
                digest = listing.medium_term
                key = (ns, name, scope.principal, scope.session)
                if digest.version is not None and scope.session:
                    app[MEMORY].saw_digest(key, DigestVersion(digest.version, digest.summary or ""))
                versions = app[MEMORY].digests.get(key, [])
    except ProbeFailed as exc:
        probe_failed = exc.cause
    except MemoryRequestRejected as exc:
        notes.append(Note("error", f"the memory service refused ({exc.status} {exc.code}): "
                          f"{exc.message}", "probe"))  # fmt: skip
    except BadRequest as exc:
        notes.append(Note("error", exc.message, "input"))
    what = f"its memory service (/readyz on {target(store, MEMORY_PORT)})"
    then = "Nothing can be read here until it answers; agents go on without memory (degraded)."
    notes = status_notes(row, what, probe_failed, then=then) + notes
    inspected = Inspected(
        row.health, listing, budget, trigger, versions, next_page, held
    )  # fmt: skip
    choices = Choices(sorted(agents), sorted(principals), sorted(sessions))
    return html(
        render_memory(
            namespace=ns, store=name, scope=scope, query=query, choices=choices,
            inspected=inspected, notes_=notes, csrf=config.csrf, context=config.context,
        )
    )  # fmt: skip


async def quarantined_of(admin: MemoryServiceClient, scope: Scope) -> list[QuarantinedFact] | None:
    """The quarantined facts of the picked principal (else of the store), as an
    administrator lists them; None from a service that lists none (older, or refusing)."""
    principal = scope.principal or None
    try:
        found = await admin.quarantined(
            "user" if principal else "store", principal=principal, limit=FACTS_PAGE
        )
    except (MemoryRequestRejected, MemoryUnavailable):
        return None
    return list(found.facts)


async def read(
    url: str, scope: Scope, query: str, cursor: str | None, ns: str, name: str
) -> tuple[ListResponse, str | None]:
    """The scope's tiers: a relevance search for ``query``, else a page of the listing
    and the link to the next one. The agent level reads as that agent."""
    include: tuple[Tier, ...] = (
        ("short_term", "medium_term", "long_term")
        if scope.session and scope.level != "store"
        else ("long_term",)
    )
    ident = {"session_id": scope.session or None, "principal": scope.principal or None}
    level = cast(Level, scope.level)
    acting = identity_of(ns, scope.agent) if scope.level == "agent" else None
    async with client(url, acting) as reader:
        if query:
            recalled = await reader.recall(level, query, top_k=FACTS_PAGE, include=include,
                                           session_id=ident["session_id"],
                                           principal=ident["principal"])  # fmt: skip
            return ListResponse(**recalled.model_dump()), None
        listed = await reader.list(level, include=include, limit=FACTS_PAGE, cursor=cursor,
                                   session_id=ident["session_id"],
                                   principal=ident["principal"])  # fmt: skip
    more = None
    if listed.next_cursor:
        more = f"/memory/{quote(ns)}/{quote(name)}?{scope.query(cursor=listed.next_cursor)}"
    return listed, more


def form_scope(form: Any) -> Scope:
    """The scope a forget form posts; ``BadRequest`` when it is not one."""
    level = str(form.get("level") or "")
    scope = Scope(
        level,
        subject(PRINCIPAL_HEADER, str(form.get("principal") or "")),
        subject(SESSION_HEADER, str(form.get("session") or "")),
        str(form.get("agent") or "").strip(),
    )
    if level not in LEVELS:
        raise BadRequest(f"level must be one of {', '.join(LEVELS)}")
    missing = missing_of(scope)
    if missing:
        raise BadRequest(missing)
    return scope


async def forget_confirm(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    await get_store(request.app, ns, name)
    try:
        scope = scope_of(request)
        missing = missing_of(scope)
        if missing:
            raise BadRequest(missing)
    except BadRequest as exc:
        raise PageError(400, "Nothing to forget", f"nothing to forget: {exc.message}") from None
    return html(forget_confirm_page(namespace=ns, store=name, scope=scope,
                                    csrf=config.csrf, context=config.context))  # fmt: skip


async def forget(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    try:
        scope = form_scope(await request.post())
        acting = identity_of(ns, scope.agent) if scope.level == "agent" else None
    except BadRequest as exc:
        raise PageError(400, ERASED_NOTHING, f"nothing was erased: {exc.message}") from None
    try:
        store = await get_store(app, ns, name)
    except ClusterError as exc:
        status = 403 if exc.problem == "forbidden" else 502
        raise PageError(status, ERASED_NOTHING, f"nothing was erased: {exc.message}",
                        exc.problem) from None  # fmt: skip
    try:
        async with memory_url(app, store) as url, client(url, acting) as erasing:
            done = await erasing.forget(
                cast(Level, scope.level),
                session_id=scope.session or None,
                principal=scope.principal or None,
            )
    except ProbeFailed as exc:
        cause = f" ({exc.cause})" if exc.cause else ""
        raise PageError(502, ERASED_NOTHING, f"nothing was erased: memory service {name} did "
                        f"not answer the console{cause}", "degraded") from None  # fmt: skip
    except MemoryRequestRejected as exc:
        raise PageError(exc.status, ERASED_NOTHING, f"nothing was erased: the memory service "
                        f"refused ({exc.status} {exc.code}): {exc.message}") from None  # fmt: skip
    app[MEMORY].digests.pop((ns, name, scope.principal, scope.session), None)
    counts = (done.forgotten.short_term, done.forgotten.medium_term, done.forgotten.long_term)
    return html(forgotten_page(namespace=ns, store=name, scope=scope, counts=counts,
                               degraded=done.degraded, csrf=config.csrf,
                               context=config.context))  # fmt: skip
