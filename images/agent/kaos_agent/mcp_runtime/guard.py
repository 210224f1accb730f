"""The MCP runtime's edge: ``/mcp`` bodies go through the shared decoding step first.

The ``mcp`` SDK parses request bodies with its own JSON reader: it ignores
``Content-Encoding``, takes nesting up to 200 levels, hands a NUL or a lone surrogate in a
tool argument to the tool, and answers what it cannot parse with the parser's own text.
``BodyGuard`` is a pure ASGI middleware in front of the SDK's app that reads a request
to the MCP path within the size limit and the body timeout, refuses a
``Content-Encoding`` and runs the bytes through ``kaos_core.http.body.decode_json``, the
step the memory service and the agent use. A refused request is answered with a
JSON-RPC error object (``id`` null, the code from ``edge_error_code``, a message naming
what is wrong) and the HTTP status of the refusal (400; 413 for a body over the limit,
415 for a ``Content-Encoding``, 408 for a body that does not arrive in time); an accepted
body is replayed unchanged to the SDK, which never knows the guard was there.

A stateless server also answers ``GET`` on the MCP path with 405, as the MCP spec has a
server without a server-to-client stream do: the SDK would open that stream and hold the
connection for as long as the client likes, with nothing ever to send on it (SDK clients
only open it with a session id, which a stateless server never issues).
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Callable

import anyio
from kaos_core.errors import (
    BadRequest,
    KaosError,
    MethodNotAllowed,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
)
from kaos_core.http.body import check_content_encoding, decode_json
from kaos_core.http.jsonrpc import edge_error_code, error_object
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

# A check of a decoded message against its request (the caller's admission, ``auth``);
# raises the ``KaosError`` of a refusal.
MessageCheck = Callable[[Scope, object], None]

# ASCII digits only (``str.isdigit`` takes "²", which ``int`` refuses), and a bounded count.
_LENGTH_RE = re.compile("[0-9]{1,18}")


class _ClientGone(Exception):
    """The client disconnected before its body was complete: nothing to answer."""


class BodyGuard:
    """Refuse, before the wrapped app sees them, the ``path`` bodies the edge step refuses."""

    def __init__(
        self,
        app: ASGIApp,
        /,
        *,
        path: str,
        max_body_bytes: int,
        body_timeout: float,
        stateless: bool,
        message_check: MessageCheck | None = None,
    ) -> None:
        self.app = app
        self.path = path.rstrip("/")
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.stateless = stateless
        self.message_check = message_check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        if self.stateless and scope["method"] == "GET":
            refusal = MethodNotAllowed(
                "this server offers no server-to-client stream (GET); send requests with POST",
                headers=[("Allow", "POST")],
            )
            await refuse(send, refusal)
            return
        try:
            replay = await self._check(scope, receive)
        except _ClientGone:
            return
        except KaosError as exc:
            log.info(
                "refused an MCP request at the edge",
                extra={"code": exc.code, "status": exc.status},
            )
            await refuse(send, exc)
            return
        await self.app(scope, _replaying(replay, receive), send)

    async def _check(self, scope: Scope, receive: Receive) -> deque[Message]:
        """The messages to replay to the app; raises the ``KaosError`` of a refusal."""
        headers = Headers(scope=scope)
        encodings = headers.getlist("content-encoding")
        if len(encodings) > 1:
            raise UnsupportedMediaType(
                "Content-Encoding given more than once", code="unsupported_encoding"
            )
        check_content_encoding(encodings[0] if encodings else None)
        if scope["method"] != "POST":
            return deque()  # only POST carries a message; the SDK answers the rest
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            # MCP messages are JSON; the SDK would answer this in plain text.
            raise UnsupportedMediaType(
                f"content type must be application/json, got {media_type[:64] or 'none'!r}"
            )
        self._check_declared_length(headers)
        body = await self._read(receive)
        doc = decode_json(body)
        check_envelope(doc)
        if self.message_check is not None:
            self.message_check(scope, doc)
        return deque([{"type": "http.request", "body": body, "more_body": False}])

    def _check_declared_length(self, headers: Headers) -> None:
        declared = headers.get("content-length")
        if declared is None:
            return
        if not _LENGTH_RE.fullmatch(declared):
            raise BadRequest("Content-Length must be a number of bytes", code="malformed_body")
        if int(declared) > self.max_body_bytes:
            raise self._too_large()

    async def _read(self, receive: Receive) -> bytes:
        body = bytearray()
        try:
            with anyio.fail_after(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _ClientGone
                    body.extend(message.get("body", b""))
                    if len(body) > self.max_body_bytes:
                        raise self._too_large()
                    if not message.get("more_body", False):
                        return bytes(body)
        except TimeoutError:
            raise RequestTimeout(
                f"the request body did not arrive within {self.body_timeout:g} s"
            ) from None

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body exceeds the limit of {self.max_body_bytes} bytes")


def check_envelope(doc: object) -> None:
    """A single JSON-RPC 2.0 message: a request or notification (``method``) or a
    client's response (``result`` or ``error``), with a string or integer ``id``.

    The SDK would answer anything else with its validator's text; this names the problem.
    """
    if isinstance(doc, list):
        raise BadRequest("batched JSON-RPC messages are not accepted", code="invalid_jsonrpc")
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0":
        raise BadRequest(
            'the body must be a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")',
            code="invalid_jsonrpc",
        )
    method = doc.get("method")
    if method is None and "result" not in doc and "error" not in doc:
        raise BadRequest(
            'a JSON-RPC message needs a "method" (or a "result" or "error")',
            code="invalid_jsonrpc",
        )
    if method is not None and (not isinstance(method, str) or not method):
        raise BadRequest('"method" must be a non-empty string', code="invalid_jsonrpc")
    req_id = doc.get("id")
    if isinstance(req_id, bool) or not (req_id is None or isinstance(req_id, str | int)):
        raise BadRequest('"id" must be a string or an integer', code="invalid_jsonrpc")


def _replaying(messages: deque[Message], receive: Receive) -> Receive:
    """``receive`` that first hands out the already read body, then the client's own
    messages (so the app still sees a disconnect)."""

    async def replay() -> Message:
        if messages:
            return messages.popleft()
        return await receive()

    return replay


async def refuse(send: Send, exc: KaosError) -> None:
    """Answer ``exc`` as a JSON-RPC error (``id`` null; ``data.code`` is the refusal's)."""
    doc = error_object(None, edge_error_code(exc), exc.message)
    doc["error"] = {**doc["error"], "data": {"code": exc.code}}  # type: ignore[dict-item]
    body = json.dumps(doc).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # After a 408, 413 or 415 the rest of the body may still be in flight, unread: the
        # connection cannot carry another request.
        (b"connection", b"close"),
    ]
    headers += [(name.lower().encode(), value.encode()) for name, value in exc.headers]
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
