"""OpenAPI 3.1 documents generated from the wire models, so the published API cannot drift.

A service describes its operations as data (``Operation``: path, headers, request model,
one ``Reply`` per status) and ``build_document`` turns that into an OpenAPI 3.1 document
whose schemas are the pydantic models' own JSON schemas. Request models are rendered in
validation mode (what the service accepts), response models in serialization mode with
every field required (the services dump whole models, so every field is always present).
Header parameters carry the patterns and length limits the services enforce.

The memory service's document is built in ``kaos_core.openapi.memory`` from
``kaos_core.memory.contract``; the agent's lives beside its models in ``kaos_agent.openapi``.
``hack/gen-docs`` writes both under ``docs/openapi/``; a test fails when a committed
document differs from a generated one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from kaos_core.http.middleware import _REQUEST_ID_RE
from kaos_core.memory import contract
from kaos_core.wire import (
    MAX_IDENTITY_LENGTH,
    PRINCIPAL_HEADER,
    REQUEST_ID_HEADER,
    SESSION_HEADER,
)

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
REF_TEMPLATE = "#/components/schemas/{model}"
# prometheus_client's exposition format; kept literal so the document does not change
# with the client library's default.
METRICS_CONTENT_TYPE = "text/plain"

Schema = dict[str, Any]


class _Generator(GenerateJsonSchema):
    """Pydantic's generator, with every field required in serialization mode."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization" and field["type"] != "typed-dict-field":
            return not field.get("serialization_exclude")
        return super().field_is_required(field, total)


def ecma_pattern(pattern: re.Pattern[str]) -> str:
    """A Python regex as JSON Schema (ECMA-262) syntax: named groups lose their names."""
    return re.sub(r"\(\?P<\w+>", "(", pattern.pattern)


@dataclass(frozen=True)
class Header:
    """A request or response header; ``schema`` is its value's JSON schema."""

    name: str
    description: str
    schema: Schema
    required: bool = False

    def parameter(self) -> Schema:
        return {
            "name": self.name,
            "in": "header",
            "required": self.required,
            "description": self.description,
            "schema": self.schema,
        }

    def response_header(self) -> Schema:
        return {"description": self.description, "required": True, "schema": self.schema}


@dataclass(frozen=True)
class Query:
    """A query parameter; ``schema`` is its value's JSON schema."""

    name: str
    description: str
    schema: Schema
    where: ClassVar[str] = "query"
    required: ClassVar[bool] = False

    def parameter(self) -> Schema:
        return {
            "name": self.name,
            "in": self.where,
            "required": self.required,
            "description": self.description,
            "schema": self.schema,
        }


@dataclass(frozen=True)
class PathParam(Query):
    """A ``{name}`` segment of an operation's path (always given)."""

    where: ClassVar[str] = "path"
    required: ClassVar[bool] = True


@dataclass(frozen=True)
class Reply:
    """One documented status of an operation.

    ``content`` maps a media type to a model (serialization mode) or a raw schema.
    """

    description: str
    content: Mapping[str, type[BaseModel] | Schema] = field(default_factory=dict)
    headers: Sequence[Header] = ()


@dataclass(frozen=True)
class Operation:
    path: str
    method: Literal["get", "post"]
    operation_id: str
    summary: str
    description: str
    tags: Sequence[str]
    replies: Mapping[int, Reply]
    headers: Sequence[Header] = ()
    body: type[BaseModel] | None = None
    # A body that is not one JSON model (a file): media type -> raw schema. Not with ``body``.
    raw_body: Mapping[str, Schema] = field(default_factory=dict)
    query: Sequence[Query] = ()
    path_params: Sequence[PathParam] = ()
    # Named request bodies: documentation, and the cases of schemathesis's examples phase.
    body_examples: Mapping[str, object] = field(default_factory=dict)
    # Models the document names (e.g. in a ``contentSchema``) that no reply uses directly.
    extra_models: Sequence[type[BaseModel]] = ()


def _models(operations: Sequence[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    seen: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for op in operations:
        if op.body is not None:
            seen[(op.body, "validation")] = None
        for model in op.extra_models:
            seen[(model, "serialization")] = None
        for reply in op.replies.values():
            for content in reply.content.values():
                if isinstance(content, type):
                    seen[(content, "serialization")] = None
    return list(seen)


def build_document(
    *,
    title: str,
    version: str,
    description: str,
    operations: Sequence[Operation],
    tags: Mapping[str, str],
) -> Schema:
    """The OpenAPI 3.1 document of ``operations``, schemas under ``components``."""
    refs, defs = models_json_schema(
        _models(operations), ref_template=REF_TEMPLATE, schema_generator=_Generator
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        entry: Schema = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "description": op.description,
            "tags": list(op.tags),
        }
        if op.path_params or op.headers or op.query:
            params: list[PathParam | Header | Query] = [*op.path_params, *op.headers, *op.query]
            entry["parameters"] = [p.parameter() for p in params]
        if op.body is not None:
            media: Schema = {"schema": refs[(op.body, "validation")]}
            if op.body_examples:
                media["examples"] = {k: {"value": v} for k, v in op.body_examples.items()}
            entry["requestBody"] = {"required": True, "content": {JSON: media}}
        elif op.raw_body:
            raw = {media_type: {"schema": schema} for media_type, schema in op.raw_body.items()}
            entry["requestBody"] = {"required": True, "content": raw}
        responses: dict[str, Any] = {}
        for status, reply in sorted(op.replies.items()):
            out: Schema = {"description": reply.description}
            if reply.headers:
                out["headers"] = {h.name: h.response_header() for h in reply.headers}
            if reply.content:
                out["content"] = {
                    media_type: {
                        "schema": refs[(c, "serialization")] if isinstance(c, type) else c,
                    }
                    for media_type, c in reply.content.items()
                }
            responses[str(status)] = out
        entry["responses"] = responses
        paths.setdefault(op.path, {})[op.method] = entry
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version, "description": description},
        "tags": [{"name": name, "description": text} for name, text in tags.items()],
        "paths": paths,
        "components": {"schemas": dict(sorted(defs.get("$defs", {}).items()))},
    }


def dumps(document: Schema) -> str:
    """The committed text of a document: stable key order as built, two-space indent."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


REGENERATE = "hack/gen-docs"


def write_or_check(argv: Sequence[str], filename: str, document: Schema) -> int:
    """``--out DIR`` writes ``DIR/filename``; ``--check DIR`` exits 1 when it differs."""
    parser = argparse.ArgumentParser(description=f"generate {filename}")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path)
    mode.add_argument("--check", type=Path)
    args = parser.parse_args(argv)
    text = dumps(document)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / filename).write_text(text, encoding="utf-8")
        return 0
    path: Path = args.check / filename
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        print(f"{path} is out of date: run {REGENERATE}", file=sys.stderr)
        return 1
    return 0


# --- headers and answers both services share ------------------------------------------------

# Principal and session ids: 1-256 characters, none a control character, not only
# whitespace, not the wildcard "*" (``kaos_core.wire.validate_subject``).
SUBJECT_SCHEMA: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_IDENTITY_LENGTH,
    "pattern": r"^(?!\s*\*\s*$)[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$",
}
REQUEST_ID_SCHEMA: Schema = {"type": "string", "pattern": ecma_pattern(_REQUEST_ID_RE)}

REQUEST_ID = Header(
    REQUEST_ID_HEADER,
    "Correlation id. Echoed when it matches "
    f"`{_REQUEST_ID_RE.pattern}`; any other value (or none) is replaced by a generated "
    "id, never rejected.",
    {"type": "string"},
)
REQUEST_ID_ECHO = Header(
    REQUEST_ID_HEADER,
    "The request's correlation id (the caller's when valid, else generated).",
    REQUEST_ID_SCHEMA,
)


RETRY_AFTER = Header(
    "Retry-After",
    "Seconds to wait before sending again.",
    {"type": "string", "pattern": "^[0-9]+$"},
)


def principal_header(description: str) -> Header:
    return Header(PRINCIPAL_HEADER, description, SUBJECT_SCHEMA)


def session_header(description: str, *, required: bool = False) -> Header:
    return Header(SESSION_HEADER, description, SUBJECT_SCHEMA, required=required)


class HealthResponse(BaseModel):
    """``GET /healthz``: the process is alive."""

    status: Literal["ok"]


class ReadinessResponse(BaseModel):
    """``GET /readyz``: every named check and its result (``ok`` or a short reason)."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str]


def error_reply(description: str, *headers: Header) -> Reply:
    return Reply(description, {JSON: contract.ErrorResponse}, (REQUEST_ID_ECHO, *headers))


def probe_operations(service: str) -> list[Operation]:
    """``/healthz``, ``/readyz`` and ``/metrics``, the same on every service."""
    tags = ["operations"]
    return [
        Operation(
            "/healthz",
            "get",
            "healthz",
            "Liveness",
            f"200 while the {service} process serves HTTP.",
            tags,
            {200: Reply("Alive.", {JSON: HealthResponse}, (REQUEST_ID_ECHO,))},
        ),
        Operation(
            "/readyz",
            "get",
            "readyz",
            "Readiness",
            "200 when every readiness check passes within its timeout, else 503.",
            tags,
            {
                200: Reply("Ready.", {JSON: ReadinessResponse}, (REQUEST_ID_ECHO,)),
                503: Reply("Not ready.", {JSON: ReadinessResponse}, (REQUEST_ID_ECHO,)),
            },
        ),
        Operation(
            "/metrics",
            "get",
            "metrics",
            "Prometheus metrics",
            "The service's metrics in the Prometheus text exposition format.",
            tags,
            {
                200: Reply(
                    "Metrics.", {METRICS_CONTENT_TYPE: {"type": "string"}}, (REQUEST_ID_ECHO,)
                )
            },
        ),
    ]
