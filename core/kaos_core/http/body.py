"""Reading a JSON request body into a wire model, with the contract's errors.

415 for a non-JSON content type, 413 over the size limit, 400 for malformed JSON, a
non-object body, unknown fields or wrong types. Validation messages name the field so
a caller can fix the request without reading server logs.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from kaos_core.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from kaos_core.http.keys import MAX_BODY_KEY

M = TypeVar("M", bound=BaseModel)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    if request.content_type != "application/json":
        raise UnsupportedMediaType(
            f"content type must be application/json, got {request.content_type or 'none'!r}"
        )
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(
            f"request body exceeds the limit of {request.app[MAX_BODY_KEY]} bytes"
        ) from None
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}", code="malformed_json") from None
    if not isinstance(doc, dict):
        raise BadRequest("the request body must be a JSON object", code="malformed_json")
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
