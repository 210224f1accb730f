"""``POST /v1/quarantine/{list,release,erase}``: an administrator's, never an agent's.

Under verified identity the admin gate (``kaos_memory.admin``) has admitted the caller by a
SubjectAccessReview before a handler runs (on ``memorystores/data``: ``get`` to list,
``update`` to release, ``delete`` to erase); an agent's call is refused 403 here, on
either posture, before the body is read. The work and its audit: ``kaos_memory.quarantine``.
"""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from kaos_core.errors import BadRequest, Forbidden
from kaos_core.http.body import json_response, parse_model, read_json_object
from kaos_core.memory.contract import IDENTITY_FIELDS
from kaos_core.memory.quarantine import QuarantineChangeRequest, QuarantineListRequest
from kaos_core.wire import Identity, find_identity_fields, parse_identity
from pydantic import BaseModel

from kaos_memory.audit import actor_of
from kaos_memory.keys import AUTH_KEY, CONVERSATION_KEY, LONGTERM_KEY, SERVICE_KEY
from kaos_memory.quarantine import Change, Quarantine

LIST_PATH = "/v1/quarantine/list"
RELEASE_PATH = "/v1/quarantine/release"
ERASE_PATH = "/v1/quarantine/erase"

M = TypeVar("M", bound=BaseModel)


async def _admin(request: web.Request) -> Identity:
    auth = request.app.get(AUTH_KEY)
    identity = parse_identity(request.headers) if auth is None else await auth.identify(request)
    if identity.agent is not None:
        raise Forbidden(
            "the quarantine is administrative: not available to agents",
            code="quarantine_forbidden",
        )
    return identity


async def _body(request: web.Request, model: type[M]) -> M:
    doc = await read_json_object(request)
    found = find_identity_fields(doc, IDENTITY_FIELDS)
    if found:
        raise BadRequest(
            "identity travels in headers only; remove " + ", ".join(sorted(found)[:5]),
            code="identity_in_body",
        )
    return parse_model(model, doc)


def _quarantine(request: web.Request) -> Quarantine:
    app = request.app
    service = app[SERVICE_KEY]
    return Quarantine(
        service.group,
        service.posture,
        service.posture_settings.max_read_scope,
        app[LONGTERM_KEY],
        app[CONVERSATION_KEY],
    )


async def list_(request: web.Request) -> web.Response:
    identity = await _admin(request)
    body = await _body(request, QuarantineListRequest)
    return json_response(await _quarantine(request).listing(identity, body))


async def _change(request: web.Request, action: Change) -> web.Response:
    identity = await _admin(request)
    body = await _body(request, QuarantineChangeRequest)
    actor = actor_of(request, identity, verified=AUTH_KEY in request.app)
    response = await _quarantine(request).change(action, identity, body.level, body.ids, actor)
    return json_response(response)


async def release(request: web.Request) -> web.Response:
    return await _change(request, "quarantine_release")


async def erase(request: web.Request) -> web.Response:
    return await _change(request, "quarantine_erase")


def add_routes(app: web.Application) -> None:
    app.router.add_post(LIST_PATH, list_)
    app.router.add_post(RELEASE_PATH, release)
    app.router.add_post(ERASE_PATH, erase)
