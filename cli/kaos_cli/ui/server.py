"""The console's web application: an aiohttp factory with typed keys and cleanup contexts.

Guards on every request: the Host header must name the address the console is bound to
(DNS rebinding), responses carry a Content-Security-Policy that allows only this origin
(no inline script, nothing from elsewhere), and a request that changes something (a chat
turn writes memory, a forget erases it) needs the per-process CSRF token and, when the
browser sends one, an Origin equal to the console's own.

Live updates: one ``kubectl get -w`` per kind feeds a ``Broker``; each open page holds a
server-sent event stream and re-fetches its fragment when told something changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import aiohttp
from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient, MemoryUnavailable
from kaos_core.memory.contract import Level, ListResponse, Tier
from kaos_core.memory.identity import PRINCIPAL_HEADER, SESSION_HEADER, validate_subject

from kaos_cli.agent import (
    AnswerBrokeOff,
    completion_pieces,
    tools_from_card,
    tools_from_spec,
)
from kaos_cli.portforward import service_target
from kaos_cli.ui import render
from kaos_cli.ui.cluster import Cluster, ClusterError, Forwards
from kaos_cli.ui.model import KINDS, Row, summarize
from kaos_cli.ui.render import DigestVersion, EventRow, Scope, Tool

log = logging.getLogger("kaos.ui")

STATIC_DIR = Path(__file__).parent / "static"
AGENT_PORT = 8000
MEMORY_PORT = 8080
FACTS_PAGE = 20
CSRF_HEADER = "X-Kaos-Csrf"
CSP = (
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'; object-src 'none'"
)


@dataclass(frozen=True)
class UiConfig:
    context: str
    namespace: str | None  # None: every namespace
    # Accepted Host headers ("127.0.0.1:8765", "localhost:8765"); None with --allow-remote,
    # where the names the console is reached by are the user's to choose.
    hosts: frozenset[str] | None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    chat_timeout: float = 120.0


class Broker:
    """Fan-out of "something changed" to every open event stream."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str]] = set()
        self.errors: dict[str, tuple[str, str]] = {}  # kind -> (problem, message)

    def publish(self, what: str) -> None:
        for queue in self._queues:
            if queue.empty():  # one pending notice is enough: the page re-reads everything
                queue.put_nowait(what)

    @contextlib.contextmanager
    def subscribe(self) -> Any:
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)


@dataclass
class Memory:
    """What the console remembers itself: digest versions it saw, sessions it chatted in."""

    digests: dict[tuple[str, str, str, str], list[DigestVersion]] = field(default_factory=dict)
    sessions: dict[str, set[str]] = field(default_factory=dict)  # namespace -> session ids
    principals: dict[str, set[str]] = field(default_factory=dict)

    def saw_digest(self, key: tuple[str, str, str, str], version: DigestVersion) -> None:
        seen = self.digests.setdefault(key, [])
        if not seen or seen[-1].version != version.version:
            seen.append(version)

    def chatted(self, namespace: str, session: str, principal: str) -> None:
        self.sessions.setdefault(namespace, set()).add(session)
        if principal:
            self.principals.setdefault(namespace, set()).add(principal)


CONFIG = web.AppKey("config", UiConfig)
CLUSTER = web.AppKey("cluster", Cluster)
FORWARDS = web.AppKey("forwards", Forwards)
BROKER = web.AppKey("broker", Broker)
MEMORY = web.AppKey("memory", Memory)
HTTP = web.AppKey("http", aiohttp.ClientSession)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    config = request.app[CONFIG]
    if config.hosts is not None and request.host not in config.hosts:
        # A page of another site that resolved its own name to 127.0.0.1 (DNS rebinding).
        return web.Response(status=421, text="this console answers only on its own address")
    if request.method not in ("GET", "HEAD"):
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"http://{request.host}":
            return web.Response(status=403, text="cross-origin request refused")
        token = request.headers.get(CSRF_HEADER)
        if token is None and request.content_type == "application/x-www-form-urlencoded":
            token = str((await request.post()).get("csrf") or "")
        if not token or not secrets.compare_digest(token, config.csrf):
            return web.Response(status=403, text="missing or wrong CSRF token: reload the page")
    response = await handler(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    # same-origin, not no-referrer: with no-referrer a form POST carries "Origin: null".
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


def html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


# ---------------------------------------------------------------- overview


async def load_rows(app: web.Application) -> tuple[list[Row], list[tuple[str, str]]]:
    cluster, ns = app[CLUSTER], app[CONFIG].namespace
    results = await asyncio.gather(
        *(cluster.items(resource, ns) for _, resource in KINDS), return_exceptions=True
    )
    rows: list[Row] = []
    errors: list[tuple[str, str]] = []
    now = datetime.now(UTC)
    for (kind, _), result in zip(KINDS, results, strict=True):
        if isinstance(result, ClusterError):
            if (result.problem, result.message) not in errors:
                errors.append((result.problem, result.message))
            continue
        if isinstance(result, BaseException):
            raise result
        rows.extend(summarize(kind, obj, now) for obj in result)
    for problem, message in app[BROKER].errors.values():
        if (problem, message) not in errors:
            errors.append((problem, message))
    rows.sort(key=lambda r: (r.namespace, [k for k, _ in KINDS].index(r.kind), r.name))
    return rows, errors


async def overview(request: web.Request) -> web.Response:
    rows, errors = await load_rows(request.app)
    config = request.app[CONFIG]
    fragment = render.overview_fragment(rows, errors)
    return html(render.overview_page(fragment, csrf=config.csrf, context=config.context))


async def overview_fragment(request: web.Request) -> web.Response:
    rows, errors = await load_rows(request.app)
    return html(render.overview_fragment(rows, errors))


async def events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    response.headers["Content-Security-Policy"] = CSP
    await response.prepare(request)
    await response.write(b": connected\n\n")
    with request.app[BROKER].subscribe() as queue:
        while True:
            try:
                what = await asyncio.wait_for(queue.get(), 15)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            await response.write(f"event: changed\ndata: {json.dumps(what)}\n\n".encode())


async def watch_kind(app: web.Application, kind: str, resource: str) -> None:
    """Follow one kind forever: publish each change, record why the watch broke."""
    broker, cluster = app[BROKER], app[CLUSTER]
    while True:
        try:
            async for line in cluster.watch(resource, app[CONFIG].namespace):
                broker.errors.pop(kind, None)
                broker.publish(line or kind)
        except ClusterError as exc:
            if broker.errors.get(kind) != (exc.problem, exc.message):
                broker.errors[kind] = (exc.problem, exc.message)
                broker.publish(kind)
        await asyncio.sleep(2)  # back-off before re-watching (kubectl's watch ended)


async def watches(app: web.Application) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(watch_kind(app, kind, res)) for kind, res in KINDS]
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------- agent page


def _subject(header: str, value: str | None) -> str:
    """A principal or session id from the page, or "" when absent; BadRequest when bad."""
    if not value:
        return ""
    return validate_subject(header, value)


async def _service_url(
    app: web.Application, obj: dict[str, Any], port: int
) -> tuple[str, tuple[str, str, int]]:
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace")), str(meta.get("name"))
    endpoint = (obj.get("status") or {}).get("endpoint")
    service, remote = service_target(endpoint, name, port)
    return await app[FORWARDS].url(ns, service, remote), (ns, service, remote)


async def _events_of(cluster: Cluster, ns: str, kind: str, name: str) -> list[EventRow]:
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
    return sorted(rows, key=lambda r: r.last, reverse=True)[:20]


async def agent_page(request: web.Request) -> web.Response:
    app, config = request.app, request.app[CONFIG]
    ns, name = request.match_info["ns"], request.match_info["name"]
    cluster = app[CLUSTER]
    try:
        obj = await cluster.get("agents.kaos.tools", ns, name)
    except ClusterError as exc:
        body = render.problem(exc.message, exc.problem)
        return html(render.page(name, body, csrf=config.csrf, context=config.context), 404
                    if exc.problem == "not-found" else 502)  # fmt: skip
    row = summarize("Agent", obj)
    notes: list[tuple[str, str]] = []
    try:
        session = _subject(SESSION_HEADER, request.query.get("session")) or _new_session()
        principal = _subject(PRINCIPAL_HEADER, request.query.get("principal")) or "console-user"
    except BadRequest as exc:
        notes.append(("failed", exc.message))
        session, principal = _new_session(), "console-user"
    tools: list[Tool] = []
    tools_from = "spec"
    try:
        url, _ = await _service_url(app, obj, AGENT_PORT)
        async with app[HTTP].get(
            url + "/.well-known/agent-card.json", timeout=aiohttp.ClientTimeout(total=10)
        ) as resp:
            card = await resp.json() if resp.status == 200 else None
        if card is not None:
            tools = [Tool(**t) for t in tools_from_card(card)]
            tools_from = "agent"
    except ClusterError as exc:
        notes.append((exc.problem, f"agent {name} cannot be reached: {exc.message}"))
    except (aiohttp.ClientError, TimeoutError, ValueError):
        notes.append(("unreachable", f"agent {name} does not answer on its Service"))
    if tools_from == "spec":
        tools = [Tool(**t) for t in tools_from_spec(obj)]
    try:
        agent_events = await _events_of(cluster, ns, "Agent", name)
    except ClusterError as exc:
        agent_events = []
        notes.append((exc.problem, exc.message))
    try:
        logs = await cluster.run("logs", f"deployment/{name}", "-n", ns, "-c", "agent",
                                 "--tail=40")  # fmt: skip
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


def _new_session() -> str:
    return f"console-{secrets.token_hex(8)}"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def chat(request: web.Request) -> web.StreamResponse:
    """One chat turn, relayed as server-sent events: ``delta`` pieces of the answer as the
    agent streams them, then ``done``, or ``error`` with what went wrong."""
    app = request.app
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        body = await request.json()
        message = str(body.get("message") or "").strip()
        session = _subject(SESSION_HEADER, str(body.get("session") or ""))
        principal = _subject(PRINCIPAL_HEADER, str(body.get("principal") or ""))
        if not message or not session:
            raise BadRequest("a message and a session id are required")
    except BadRequest as exc:
        return web.json_response({"error": exc.message}, status=400)
    except (ValueError, AttributeError):
        return web.json_response({"error": "the body must be a JSON object"}, status=400)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    response.headers["Content-Security-Policy"] = CSP
    await response.prepare(request)
    key: tuple[str, str, int] | None = None
    try:
        obj = await app[CLUSTER].get("agents.kaos.tools", ns, name)
        url, key = await _service_url(app, obj, AGENT_PORT)
        app[MEMORY].chatted(ns, session, principal)
        headers = {SESSION_HEADER: session, **({PRINCIPAL_HEADER: principal} if principal else {})}
        payload = {"model": name, "messages": [{"role": "user", "content": message}],
                   "stream": True}  # fmt: skip
        timeout = aiohttp.ClientTimeout(total=None, sock_read=app[CONFIG].chat_timeout)
        async with app[HTTP].post(
            url + "/v1/chat/completions", json=payload, headers=headers, timeout=timeout
        ) as resp:
            if resp.status >= 400:
                await response.write(_sse("error", {"message": await _refusal(resp)}))
                return response
            try:
                async for piece in completion_pieces(resp.content):
                    await response.write(_sse("delta", {"text": piece}))
            except AnswerBrokeOff as exc:
                message = f"agent failed: {exc.message}"
                await response.write(_sse("error", {"message": message}))
                return response
        await response.write(_sse("done", {"session": session, "principal": principal}))
    except ClusterError as exc:
        await response.write(_sse("error", {"message": exc.message, "problem": exc.problem}))
    except (aiohttp.ClientError, TimeoutError, ValueError):
        if key is not None:
            await app[FORWARDS].drop(*key)
        message = f"agent {name} could not be reached or broke off its answer"
        await response.write(_sse("error", {"message": message, "problem": "unreachable"}))
    return response


async def _refusal(resp: aiohttp.ClientResponse) -> str:
    try:
        payload = await resp.json(content_type=None)
        detail = (payload.get("error") or {}).get("message") or ""
    except (ValueError, AttributeError):
        detail = ""
    return f"agent answered {resp.status}{': ' + str(detail) if detail else ''}"


# ---------------------------------------------------------------- memory inspector


def _scope(request: web.Request) -> Scope:
    level = request.query.get("level") or ""
    session = _subject(SESSION_HEADER, request.query.get("session"))
    principal = _subject(PRINCIPAL_HEADER, request.query.get("principal"))
    if level not in ("session", "user", "store"):
        level = "session" if session else ("user" if principal else "store")
    return Scope(level, principal, session)


def _budget(store: dict[str, Any]) -> tuple[int | None, int | None]:
    short = (((store.get("spec") or {}).get("tiers") or {}).get("shortTerm")) or {}
    return int(short.get("tokenBudget") or 4096), short.get("foldTriggerTokens")


def _missing(scope: Scope) -> str | None:
    if scope.level == "session" and not scope.session:
        return "pick a session (the session level needs a session id)"
    if scope.level == "user" and not scope.principal:
        return "pick a principal (the user level needs one)"
    return None


@contextlib.asynccontextmanager
async def memory_client(
    app: web.Application, store: dict[str, Any]
) -> AsyncIterator[MemoryServiceClient]:
    url, key = await _service_url(app, store, MEMORY_PORT)
    try:
        async with MemoryServiceClient(url, timeout=15, failure_mode="strict") as client:
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
        scope = _scope(request)
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
        store = await app[CLUSTER].get("memorystores.kaos.tools", ns, name)
        budget, trigger = _budget(store)
        async with memory_client(app, store) as client:
            seen = await client.list("store", include=("long_term",), limit=200)
            for fact in seen.long_term.facts:
                principals.update([fact.user_id] if fact.user_id else [])
                sessions.update([fact.session_id] if fact.session_id else [])
            missing = _missing(scope)
            if missing:
                notes.append(("hint", missing))
            else:
                listing, next_page = await _read(client, scope, query, cursor, ns, name)
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


async def _read(
    client: MemoryServiceClient, scope: Scope, query: str, cursor: str | None, ns: str, name: str
) -> tuple[ListResponse, str | None]:
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
        scope = _scope(request)
        missing = _missing(scope)
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
            _subject(PRINCIPAL_HEADER, str(form.get("principal") or "")),
            _subject(SESSION_HEADER, str(form.get("session") or "")),
        )
        if level not in ("session", "user", "store"):
            raise BadRequest("level must be session, user or store")
        missing = _missing(scope)
        if missing:
            raise BadRequest(missing)
    except BadRequest as exc:
        body = render.problem(f"nothing was erased: {exc.message}")
        return html(render.page("Forget", body, csrf=config.csrf, context=config.context), 400)
    try:
        store = await app[CLUSTER].get("memorystores.kaos.tools", ns, name)
        async with memory_client(app, store) as client:
            done = await client.forget(
                cast(Level, scope.level),
                session_id=scope.session or None,
                principal=scope.principal or None,
            )
    except ClusterError as exc:
        return _forget_failed(config, f"nothing was erased: {exc.message}")
    except (MemoryUnavailable, aiohttp.ClientError, TimeoutError):
        return _forget_failed(config, f"nothing was erased: memory service {name} is down")
    except MemoryRequestRejected as exc:
        return _forget_failed(config, f"the memory service refused ({exc.status} {exc.code}): "
                              f"{exc.message}")  # fmt: skip
    app[MEMORY].digests.pop((ns, name, scope.principal, scope.session), None)
    counts = (done.forgotten.short_term, done.forgotten.medium_term, done.forgotten.long_term)
    return html(render.forgotten_page(namespace=ns, store=name, scope=scope, counts=counts,
                                      degraded=done.degraded, csrf=config.csrf,
                                      context=config.context))  # fmt: skip


def _forget_failed(config: UiConfig, message: str) -> web.Response:
    body = render.problem(message, "degraded")
    return html(render.page("Forget", body, csrf=config.csrf, context=config.context), 502)


# ---------------------------------------------------------------- the application


async def _resources(app: web.Application) -> AsyncIterator[None]:
    app[HTTP] = aiohttp.ClientSession()
    yield
    await app[FORWARDS].close()
    await app[HTTP].close()


def create_app(config: UiConfig, cluster: Cluster, *, watch: bool = True) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=256 * 1024)
    app[CONFIG] = config
    app[CLUSTER] = cluster
    app[FORWARDS] = Forwards(cluster)
    app[BROKER] = Broker()
    app[MEMORY] = Memory()
    app.cleanup_ctx.append(_resources)
    if watch:
        app.cleanup_ctx.append(watches)
    app.router.add_get("/", overview)
    app.router.add_get("/fragments/overview", overview_fragment)
    app.router.add_get("/events", events)
    app.router.add_get("/agents/{ns}/{name}", agent_page)
    app.router.add_post("/agents/{ns}/{name}/chat", chat)
    app.router.add_get("/memory/{ns}/{store}", memory_page)
    app.router.add_get("/memory/{ns}/{store}/forget", forget_confirm)
    app.router.add_post("/memory/{ns}/{store}/forget", forget)
    app.router.add_static("/static", STATIC_DIR, follow_symlinks=False)
    return app
