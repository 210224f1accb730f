"""HTTP handlers of the memory contract: headers to identity, body to model, then the service.

Everything a request can get wrong is checked before any tier is touched, so a rejected
request changes nothing: content type and size, JSON shape, identity fields in the body
(scope and attribution are server-derived only), the wire model, the identity headers.
Under verified identity (``kaos_memory.auth``) the caller's token is checked first.
"""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.http.body import json_response, parse_model, read_json_object
from kaos_core.memory.contract import (
    IDENTITY_FIELDS,
    ForgetRequest,
    ListRequest,
    RecallRequest,
    WriteRequest,
)
from kaos_core.memory.identity import Identity, find_identity_fields, parse_identity
from pydantic import BaseModel

from kaos_memory.keys import AUTH_KEY, SERVICE_KEY

M = TypeVar("M", bound=BaseModel)


async def _read(request: web.Request, model: type[M]) -> tuple[Identity, M]:
    auth = request.app.get(AUTH_KEY)
    # Under verified identity the caller is established before the body is even read.
    verified = None if auth is None else await auth.identify(request)
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


async def write(request: web.Request) -> web.Response:
    identity, body = await _read(request, WriteRequest)
    response, status = await request.app[SERVICE_KEY].write(identity, body)
    return json_response(response, status=status)


async def recall(request: web.Request) -> web.Response:
    identity, body = await _read(request, RecallRequest)
    return json_response(await request.app[SERVICE_KEY].recall(identity, body))


async def list_(request: web.Request) -> web.Response:
    identity, body = await _read(request, ListRequest)
    return json_response(await request.app[SERVICE_KEY].list_scope(identity, body))


async def forget(request: web.Request) -> web.Response:
    identity, body = await _read(request, ForgetRequest)
    return json_response(await request.app[SERVICE_KEY].forget(identity, body))


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/write", write)
    app.router.add_post("/v1/recall", recall)
    app.router.add_post("/v1/list", list_)
    app.router.add_post("/v1/forget", forget)
