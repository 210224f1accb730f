"""A MemoryStore's inspector: its tiers in one scope, the digest's versions as the console
saw them, relevance search, and forget (confirmed, then erased with a receipt).

The store is reached as an administrator would (no agent identity): the console lists
the principals and sessions it finds, and whatever the service cannot answer is shown
degraded, as an agent would see it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import quote

import aiohttp
from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient, MemoryUnavailable
from kaos_core.memory.contract import Level, ListResponse, Tier
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_cli.kinds import MEMORY_PORT, MEMORYSTORE
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui import render
from kaos_cli.ui.pages.common import html, service_url, subject
from kaos_cli.ui.render import DigestVersion, Scope
from kaos_cli.ui.state import CLUSTER, CONFIG, FORWARDS, MEMORY, UiConfig

FACTS_PAGE = 20
SEEN_FACTS = 200
REQUEST_TIMEOUT = 15


def scope_of(request: web.Request) -> Scope:
    level = request.query.get("level") or ""
    session = subject(SESSION_HEADER, request.query.get("session"))
    principal = subject(PRINCIPAL_HEADER, request.query.get("principal"))
    if level not in ("session", "user", "store"):
        level = "session" if session else ("user" if principal else "store")
    return Scope(level, principal, session)


def budget_of(store: dict[str, Any]) -> tuple[int | None, int | None]:
    short = (((store.get("spec") or {}).get("tiers") or {}).get("shortTerm")) or {}
    return int(short.get("tokenBudget") or 4096), short.get("foldTriggerTokens")


def missing_of(scope: Scope) -> str | None:
    if scope.level == "session" and not scope.session:
        return "pick a session (the session level needs a session id)"
    if scope.level == "user" and not scope.principal:
        return "pick a principal (the user level needs one)"
    return None


@contextlib.asynccontextmanager
async def memory_client(
    app: web.Application, store: dict[str, Any]
) -> AsyncIterator[MemoryServiceClient]:
    url, key = await service_url(app, store, MEMORY_PORT)
    try:
        async with MemoryServiceClient(
            url, timeout=REQUEST_TIMEOUT, failure_mode="strict"
        ) as client:
            if not await client.ready():
                raise MemoryUnavailable("not ready")
            yield client
    except MemoryUnavailable:
        await app[FORWARDS].drop(*key)
        raise


async def memory_page(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    notes: list[tuple[str, str]] = []
    try:
        scope = scope_of(request)
    except BadRequest as exc:
        notes.append(("failed", exc.message))
        scope = Scope("store", "", "")
    query = request.query.get("q", "").strip()[:1000]
    cursor = request.query.get("cursor") or None
    listing: ListResponse | None = None
    budget = trigger = None
    principals = set(app[MEMORY].principals.get(ns, set()))
    sessions = set(app[MEMORY].sessions.get(ns, set()))
    next_page = None
    versions: list[DigestVersion] = []
    try:
        store = await app[CLUSTER].get(MEMORYSTORE.resource, ns, name)
        budget, trigger = budget_of(store)
        async with memory_client(app, store) as client:
            seen = await client.list("store", include=("long_term",), limit=SEEN_FACTS)
            for fact in seen.long_term.facts:
                principals.update([fact.user_id] if fact.user_id else [])
                sessions.update([fact.session_id] if fact.session_id else [])
            missing = missing_of(scope)
            if missing:
                notes.append(("hint", missing))
            else:
                listing, next_page = await read(client, scope, query, cursor, ns, name)
                digest = listing.medium_term
                key = (ns, name, scope.principal, scope.session)
                if digest.version is not None and scope.session:
                    app[MEMORY].saw_digest(key, DigestVersion(digest.version, digest.summary or ""))
                versions = app[MEMORY].digests.get(key, [])
    except ClusterError as exc:
        notes.append((exc.problem, f"memory service {name} cannot be reached: {exc.message} "
                      "(shown degraded, as an agent would see it)"))  # fmt: skip
    except (MemoryUnavailable, aiohttp.ClientError, TimeoutError):
        notes.append(("degraded", f"memory service {name} is down or not ready: memory is "
                      "degraded (agents go on without it)"))  # fmt: skip
    except MemoryRequestRejected as exc:
        notes.append(("failed", f"the memory service refused ({exc.status} {exc.code}): "
                      f"{exc.message}"))  # fmt: skip
    except BadRequest as exc:
        notes.append(("failed", exc.message))
    return html(
        render.memory_page(
            namespace=ns, store=name, scope=scope, query=query,
            principals=sorted(principals), sessions=sorted(sessions), listing=listing,
            scored=bool(query), budget=budget, trigger=trigger, digest_versions=versions,
            next_page=next_page, notes=notes, csrf=config.csrf, context=config.context,
        )
    )  # fmt: skip


async def read(
    client: MemoryServiceClient, scope: Scope, query: str, cursor: str | None, ns: str, name: str
) -> tuple[ListResponse, str | None]:
    """The scope's tiers: a relevance search for ``query``, else a page of the listing
    and the link to the next one."""
    include: tuple[Tier, ...] = (
        ("short_term", "medium_term", "long_term")
        if scope.session and scope.level != "store"
        else ("long_term",)
    )
    ident = {"session_id": scope.session or None, "principal": scope.principal or None}
    level = cast(Level, scope.level)
    if query:
        recalled = await client.recall(level, query, top_k=FACTS_PAGE, include=include,
                                       **ident)  # fmt: skip
        return ListResponse(**recalled.model_dump()), None
    listed = await client.list(level, include=include, limit=FACTS_PAGE, cursor=cursor,
                               **ident)  # fmt: skip
    more = None
    if listed.next_cursor:
        more = f"/memory/{quote(ns)}/{quote(name)}?{scope.query(cursor=listed.next_cursor)}"
    return listed, more


async def forget_confirm(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    try:
        scope = scope_of(request)
        missing = missing_of(scope)
        if missing:
            raise BadRequest(missing)
    except BadRequest as exc:
        body = render.problem(f"nothing to forget: {exc.message}")
        return html(render.page("Forget", body, csrf=config.csrf, context=config.context), 400)
    return html(render.forget_confirm_page(namespace=ns, store=name, scope=scope,
                                           csrf=config.csrf, context=config.context))  # fmt: skip


async def forget(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["store"]
    form = await request.post()
    level = str(form.get("level") or "")
    try:
        scope = Scope(
            level,
            subject(PRINCIPAL_HEADER, str(form.get("principal") or "")),
            subject(SESSION_HEADER, str(form.get("session") or "")),
        )
        if level not in ("session", "user", "store"):
            raise BadRequest("level must be session, user or store")
        missing = missing_of(scope)
        if missing:
            raise BadRequest(missing)
    except BadRequest as exc:
        body = render.problem(f"nothing was erased: {exc.message}")
        return html(render.page("Forget", body, csrf=config.csrf, context=config.context), 400)
    try:
        store = await app[CLUSTER].get(MEMORYSTORE.resource, ns, name)
        async with memory_client(app, store) as client:
            done = await client.forget(
                cast(Level, scope.level),
                session_id=scope.session or None,
                principal=scope.principal or None,
            )
    except ClusterError as exc:
        return forget_failed(config, f"nothing was erased: {exc.message}")
    except (MemoryUnavailable, aiohttp.ClientError, TimeoutError):
        return forget_failed(config, f"nothing was erased: memory service {name} is down")
    except MemoryRequestRejected as exc:
        return forget_failed(config, f"the memory service refused ({exc.status} {exc.code}): "
                             f"{exc.message}")  # fmt: skip
    app[MEMORY].digests.pop((ns, name, scope.principal, scope.session), None)
    counts = (done.forgotten.short_term, done.forgotten.medium_term, done.forgotten.long_term)
    return html(render.forgotten_page(namespace=ns, store=name, scope=scope, counts=counts,
                                      degraded=done.degraded, csrf=config.csrf,
                                      context=config.context))  # fmt: skip


def forget_failed(config: UiConfig, message: str) -> web.Response:
    body = render.problem(message, "degraded")
    return html(render.page("Forget", body, csrf=config.csrf, context=config.context), 502)
