"""HTTP handlers of the memory contract: headers to identity, body to model, then the service.

Everything a request can get wrong is checked before any tier is touched, so a rejected
request changes nothing: content type and size, JSON shape, identity fields in the body
(scope and attribution are server-derived only), the wire model, the identity headers.
Under verified identity (``kaos_memory.auth``) the caller's token is checked first.
Each operation is a span on the GenAI memory conventions (``kaos_memory.telemetry``).
"""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from kaos_core.errors import BadRequest, Forbidden
from kaos_core.http.body import json_response, parse_model, read_json_object
from kaos_core.memory.contract import (
    IDENTITY_FIELDS,
    AuditRequest,
    ForgetRequest,
    ListRequest,
    RecallRequest,
    WriteRequest,
)
from kaos_core.telemetry import conventions as otel
from kaos_core.wire import Identity, find_identity_fields, parse_identity
from pydantic import BaseModel

from kaos_memory import quarantine_http, telemetry
from kaos_memory.audit import actor_of
from kaos_memory.keys import AUTH_KEY, SERVICE_KEY, SETTINGS_KEY
from kaos_memory.portable import http as portable_http

M = TypeVar("M", bound=BaseModel)


async def _identify(request: web.Request) -> Identity | None:
    auth = request.app.get(AUTH_KEY)
    return None if auth is None else await auth.identify(request)


async def _read(request: web.Request, model: type[M]) -> tuple[Identity, M]:
    # Under verified identity the caller is established before the body is even read.
    verified = await _identify(request)
    doc = await read_json_object(request)
    found = find_identity_fields(doc, IDENTITY_FIELDS)
    if found:
        raise BadRequest(
            "identity travels in headers only; remove "
            + ", ".join(sorted(found)[:5])
            + " from the body",
            code="identity_in_body",
        )
    body = parse_model(model, doc)
    return verified or parse_identity(request.headers), body


def _store(request: web.Request) -> str:
    return request.app[SETTINGS_KEY].backend.group


async def write(request: web.Request) -> web.Response:
    identity, body = await _read(request, WriteRequest)
    # A write appends turns to the session's window: the session level.
    with telemetry.memory_span(otel.UPDATE_MEMORY, _store(request), "session", identity) as span:
        response, status = await request.app[SERVICE_KEY].write(identity, body)
        telemetry.recorded_write(span, body, response)
    return json_response(response, status=status)


async def recall(request: web.Request) -> web.Response:
    identity, body = await _read(request, RecallRequest)
    with telemetry.memory_span(otel.SEARCH_MEMORY, _store(request), body.level, identity) as span:
        response = await request.app[SERVICE_KEY].recall(identity, body)
        telemetry.recorded_search(span, body, response)
    return json_response(response)


async def list_(request: web.Request) -> web.Response:
    identity, body = await _read(request, ListRequest)
    with telemetry.memory_span(otel.SEARCH_MEMORY, _store(request), body.level, identity) as span:
        response = await request.app[SERVICE_KEY].list_scope(identity, body)
        telemetry.recorded_search(span, body, response)
    return json_response(response)


async def forget(request: web.Request) -> web.Response:
    identity, body = await _read(request, ForgetRequest)
    with telemetry.memory_span(otel.DELETE_MEMORY, _store(request), body.level, identity) as span:
        actor = actor_of(request, identity, verified=AUTH_KEY in request.app)
        response = await request.app[SERVICE_KEY].forget(identity, body, actor)
        telemetry.recorded_forget(span, response)
    return json_response(response)


async def audit(request: web.Request) -> web.Response:
    """The audit (erasures, exports, imports), for administrators: ``GET`` with
    ``limit``/``cursor``/``action`` query parameters, or ``POST`` with the same as a JSON
    body."""
    if request.method == "GET":
        identity = await _identify(request) or parse_identity(request.headers)
        body = parse_model(AuditRequest, _audit_query(request))
    else:
        identity, body = await _read(request, AuditRequest)
    if identity.agent is not None:
        raise Forbidden(
            "the audit is administrative: not available to agents",
            code="audit_forbidden",
        )
    return json_response(await request.app[SERVICE_KEY].audit(body))


def _audit_query(request: web.Request) -> dict[str, object]:
    doc: dict[str, object] = {}
    for name, value in request.query.items():
        if name in doc or name not in ("limit", "cursor", "action"):
            raise BadRequest(
                f"query parameter {name!r}: only limit, cursor and action, once each",
                code="invalid_query",
            )
        if name == "limit":
            if not value.isdigit() or len(value) > 6:
                raise BadRequest("limit must be a number", code="invalid_query")
            doc[name] = int(value)
        else:
            doc[name] = value
    return doc


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/write", write)
    app.router.add_post("/v1/recall", recall)
    app.router.add_post("/v1/list", list_)
    app.router.add_post("/v1/forget", forget)
    app.router.add_get("/v1/audit", audit, allow_head=False)
    app.router.add_post("/v1/audit", audit)
    # Export and import (``kaos_memory.portable``).
    portable_http.add_routes(app)
    # The quarantine of facts that read as instructions (``kaos_memory.quarantine``).
    quarantine_http.add_routes(app)
