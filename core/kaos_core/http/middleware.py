"""The one middleware: request ids, request metrics, and every error as JSON.

Domain errors (``kaos_core.errors.KaosError``) and aiohttp's own HTTP errors (404, 405,
413) become ``{"error": {"code", "message"}, "request_id"}`` with the headers the error
carries (a 401's challenges, a 405's ``Allow``); anything unexpected becomes a 500 with a
generic message (details go to the log, never to the client).
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from aiohttp import web
from aiohttp.typedefs import Handler

from kaos_core.errors import KaosError
from kaos_core.http.keys import HTTP_METRICS_KEY, REQUEST_ID_KEY
from kaos_core.logging import request_id_var
from kaos_core.wire import REQUEST_ID_HEADER

log = logging.getLogger(__name__)

# A caller-supplied request id is echoed only when it is short and printable, so a
# hostile value cannot inject into logs or response headers.
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
    503: "not_ready",
}


def error_body(code: str, message: str, request_id: str) -> dict[str, object]:
    return {"error": {"code": code, "message": message}, "request_id": request_id}


def request_id(request: web.Request) -> str:
    """The id the middleware assigned to this request."""
    return str(request.get(REQUEST_ID_KEY, ""))


def _route_label(request: web.Request) -> str:
    # The route template, not the path, so label cardinality stays bounded.
    resource = request.match_info.route.resource
    return "unmatched" if resource is None else resource.canonical


def _error_response(request: web.Request, rid: str, exc: BaseException) -> web.Response:
    if isinstance(exc, KaosError):
        response = web.json_response(error_body(exc.code, exc.message, rid), status=exc.status)
        for name, value in exc.headers:
            response.headers.add(name, value)
        if exc.closes_connection:
            response.force_close()
        return response
    if isinstance(exc, web.HTTPException):
        code = _HTTP_CODES.get(exc.status, "http_error")
        message = "request body exceeds the size limit" if exc.status == 413 else exc.reason
        response = web.json_response(error_body(code, message, rid), status=exc.status)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        if exc.status == 413:
            response.force_close()
        return response
    log.error("unhandled error", exc_info=exc)
    return web.json_response(error_body("internal_error", "internal error", rid), status=500)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    supplied = request.headers.get(REQUEST_ID_HEADER, "")
    rid = supplied if _REQUEST_ID_RE.match(supplied) else uuid.uuid4().hex
    request[REQUEST_ID_KEY] = rid
    token = request_id_var.set(rid)
    started = time.perf_counter()
    status = 500
    try:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # redirects are answers, not errors
            response = _error_response(request, rid, exc)
        except Exception as exc:  # noqa: BLE001  (mapped to the JSON error shape)
            response = _error_response(request, rid, exc)
        status = response.status
        return response
    finally:
        labels = (request.method, _route_label(request), str(status))
        metrics = request.app[HTTP_METRICS_KEY]
        metrics.requests.labels(*labels).inc()
        metrics.latency.labels(*labels).observe(time.perf_counter() - started)
        request_id_var.reset(token)


async def add_request_id_header(request: web.Request, response: web.StreamResponse) -> None:
    rid = request.get(REQUEST_ID_KEY)
    if rid:
        response.headers[REQUEST_ID_HEADER] = rid
