"""The one decoding step at the edge: request bytes to a JSON document, or a 4xx.

Every service reads its JSON bodies through here (the memory service, the agent's chat
and A2A endpoints, the MCP runtime's ASGI guard), so all refuse the same things before
any handler, store or model sees them:

- a ``Content-Encoding`` other than ``identity``: 415 (servers do not decompress, so a
  compressed bomb or a body that only claims to be gzip never reaches a parser);
- a body over the size limit: 413; one that does not arrive within the body timeout: 408;
- bytes that are not strict UTF-8, or not JSON: 400 ``malformed_json``;
- containers nested deeper than ``MAX_JSON_DEPTH``, a number literal longer than
  ``MAX_NUMBER_CHARS`` (Python's int-from-string limit would raise deep inside a parser),
  ``NaN``/``Infinity``, a float that overflows, a key given twice in one object: 400;
- a string (key or value) with a control character other than tab, newline and carriage
  return (NUL included: PostgreSQL cannot store it) or an unpaired surrogate (cannot be
  encoded as UTF-8 for storage): 400.

Then ``read_json_object`` checks the content type and the object shape, and
``parse_model`` the wire model. Messages name the field so a caller can fix the request.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import BaseModel, ValidationError

from kaos_core.errors import (
    BadRequest,
    MalformedBody,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
)
from kaos_core.http.keys import BODY_TIMEOUT_KEY, MAX_BODY_KEY

M = TypeVar("M", bound=BaseModel)

MAX_JSON_DEPTH = 32
MAX_NUMBER_CHARS = 40
DEFAULT_BODY_TIMEOUT = 30.0

# C0 controls except \t \n \r, and UTF-16 surrogates (only unpaired ones survive decoding).
_BAD_CHAR_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
# The escapes that can decode to such a character (\n, \r and \t decode to accepted ones).
_ESCAPE_RE = re.compile(r"\\[ubf]")


class _Refused(Exception):
    """Raised from inside ``json.loads`` hooks; becomes a ``BadRequest``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(
            f"a number has {len(text)} characters; at most {MAX_NUMBER_CHARS} are accepted",
            "number_too_large",
        )
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(
            f"a number has {len(text)} characters; at most {MAX_NUMBER_CHARS} are accepted",
            "number_too_large",
        )
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text} is out of range", "number_too_large")
    return value


def _parse_constant(text: str) -> float:
    raise _Refused(f"{text} is not a JSON number", "malformed_json")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {key[:64]!r} appears twice in one object", "duplicate_key")
            seen.add(key)
    return doc


def _char_problem(text: str) -> str | None:
    found = _BAD_CHAR_RE.search(text)
    if found is None:
        return None
    char = found.group()
    if "\ud800" <= char <= "\udfff":
        return "contains an unpaired UTF-16 surrogate"
    return (
        f"contains the control character U+{ord(char):04X}; only tab, newline and "
        "carriage return are accepted"
    )


def check_document(doc: Any, *, max_depth: int = MAX_JSON_DEPTH, text: bool = True) -> None:
    """Refuse a parsed document nested too deep or, unless ``text`` is False (its strings
    are known clean), holding text that cannot be stored."""
    stack: list[tuple[Any, int, str]] = [(doc, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, str):
            if not text:
                continue
            problem = _char_problem(node)
            if problem is not None:
                raise BadRequest(f"{path or 'body'}: text {problem}", code="invalid_text")
        elif isinstance(node, dict | list):
            if depth + 1 > max_depth:
                raise BadRequest(
                    f"{path or 'body'}: JSON nested deeper than {max_depth} levels",
                    code="json_too_deep",
                )
            if isinstance(node, dict):
                for key, value in node.items():
                    here = f"{path}.{key}" if path else key
                    problem = _char_problem(key) if text else None
                    if problem is not None:
                        raise BadRequest(f"{path or 'body'}: a key {problem}", code="invalid_text")
                    stack.append((value, depth + 1, here[:200]))
            else:
                for i, item in enumerate(node):
                    stack.append((item, depth + 1, f"{path}[{i}]"[:200]))


def decode_json(raw: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict UTF-8 JSON within the limits above, or a ``BadRequest``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedBody(
            f"malformed JSON: the body is not valid UTF-8 (at byte {exc.start})"
        ) from None
    try:
        doc = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            object_pairs_hook=_object,
        )
    except _Refused as exc:
        raise BadRequest(exc.message, code=exc.code) from None
    except RecursionError:
        raise BadRequest(
            f"body: JSON nested deeper than {max_depth} levels", code="json_too_deep"
        ) from None
    except json.JSONDecodeError as exc:
        raise MalformedBody(
            f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    # The parser refuses raw control characters in strings and strict UTF-8 has no lone
    # surrogates: only an escape can put either into a string (\u, \b or \f).
    check_document(doc, max_depth=max_depth, text=_ESCAPE_RE.search(text) is not None)
    return doc


def check_content_encoding(value: str | None) -> None:
    encoding = (value or "").strip().lower()
    if encoding not in ("", "identity"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding[:32]!r} is not accepted; send the body uncompressed",
            code="unsupported_encoding",
        )


async def read_body(request: web.Request) -> bytes:
    """The raw body, within the size limit and the body timeout, never decompressed."""
    encodings = request.headers.getall("Content-Encoding", [])
    if len(encodings) > 1:
        raise UnsupportedMediaType(
            "Content-Encoding given more than once", code="unsupported_encoding"
        )
    check_content_encoding(encodings[0] if encodings else None)
    limit = request.app[MAX_BODY_KEY]
    declared = request.content_length
    if declared is not None and declared > limit:
        # Refused before a byte of it is read (and without waiting for it to arrive).
        raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
    timeout = request.app.get(BODY_TIMEOUT_KEY, DEFAULT_BODY_TIMEOUT)
    try:
        if request.content.is_eof():
            # All of it came with the headers (a small body): nothing to wait for.
            return await request.read()
        async with asyncio.timeout(timeout):
            return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes") from None
    except TimeoutError:
        # Answered, and the connection closed after the answer: a stalled sender is not
        # served on (RequestTimeout closes the connection).
        raise RequestTimeout(f"the request body did not arrive within {timeout:g} s") from None
    except HttpProcessingError:
        raise BadRequest("the request body could not be read", code="malformed_body") from None


async def read_json_document(request: web.Request) -> Any:
    """The body decoded at the edge, whatever its content type (JSON-RPC callers)."""
    return decode_json(await read_body(request))


async def read_json_object(request: web.Request) -> dict[str, Any]:
    if request.content_type != "application/json":
        raise UnsupportedMediaType(
            f"content type must be application/json, got {request.content_type or 'none'!r}"
        )
    doc = await read_json_document(request)
    if not isinstance(doc, dict):
        raise MalformedBody("the request body must be a JSON object")
    return doc


def validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def parse_model(model: type[M], doc: dict[str, Any]) -> M:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc), code="invalid_body") from None


async def read_model(request: web.Request, model: type[M]) -> M:
    return parse_model(model, await read_json_object(request))


def json_response(model: BaseModel, *, status: int = 200) -> web.Response:
    return web.json_response(text=model.model_dump_json(), status=status)
