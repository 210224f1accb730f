"""What every page handler does alike: answer HTML, read an identity from the page, and
reach a resource's Service through the console's port-forwards."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from kaos_core.wire import validate_subject

from kaos_cli.kubectl.forward import described, service_target
from kaos_cli.ui.state import FORWARDS

Forward = tuple[str, str, int]  # namespace, service, port


def html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def subject(header: str, value: str | None) -> str:
    """A principal or session id from the page, or "" when absent; BadRequest when bad."""
    if not value:
        return ""
    return validate_subject(header, value)


async def service_url(app: web.Application, obj: dict[str, Any], port: int) -> tuple[str, Forward]:
    """The local URL of the object's Service (a port-forward), and the forward's key."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace")), str(meta.get("name"))
    endpoint = (obj.get("status") or {}).get("endpoint")
    service, remote = service_target(endpoint, name, port)
    return await app[FORWARDS].url(ns, service, remote), (ns, service, remote)


def target(obj: dict[str, Any], port: int) -> str:
    """The Service a request to ``obj`` goes through (``svc/<name>``, in its namespace)."""
    meta = obj.get("metadata") or {}
    endpoint = (obj.get("status") or {}).get("endpoint")
    service, _ = service_target(endpoint, str(meta.get("name")), port)
    return f"svc/{service}"


async def forget_forward(app: web.Application, key: Forward) -> str:
    """Drop a forward whose request failed; what kubectl said went wrong ("" if nothing)."""
    cause = app[FORWARDS].cause(*key)
    await app[FORWARDS].drop(*key)
    ns, service, _ = key
    return f"port-forward to {described(ns, service)}: {cause}" if cause else ""


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
