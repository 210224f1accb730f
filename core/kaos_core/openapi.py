"""OpenAPI 3.1 documents generated from the wire models, so the published API cannot drift.

A service describes its operations as data (``Operation``: path, headers, request model,
one ``Reply`` per status) and ``build_document`` turns that into an OpenAPI 3.1 document
whose schemas are the pydantic models' own JSON schemas. Request models are rendered in
validation mode (what the service accepts), response models in serialization mode with
every field required (the services dump whole models, so every field is always present).
Header parameters carry the patterns and length limits the services enforce.

The memory service's document is built here from ``kaos_core.memory.contract``; the
agent's lives beside its models in ``kaos_agent.openapi``. ``hack/gen-docs`` writes both
under ``docs/openapi/``; a test fails when a committed document differs from a generated one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from kaos_core.auth.names import AGENT_TOKEN_HEADER
from kaos_core.http.middleware import _REQUEST_ID_RE, REQUEST_ID_HEADER
from kaos_core.memory import contract
from kaos_core.memory.identity import (
    AGENT_IDENTITY_HEADER,
    AGENT_IDENTITY_RE,
    MAX_IDENTITY_LENGTH,
    PRINCIPAL_HEADER,
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
        if op.headers:
            entry["parameters"] = [h.parameter() for h in op.headers]
        if op.body is not None:
            media: Schema = {"schema": refs[(op.body, "validation")]}
            if op.body_examples:
                media["examples"] = {k: {"value": v} for k, v in op.body_examples.items()}
            entry["requestBody"] = {"required": True, "content": {JSON: media}}
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
# whitespace, not the wildcard "*" (``kaos_core.memory.identity.validate_subject``).
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


def error_reply(description: str) -> Reply:
    return Reply(description, {JSON: contract.ErrorResponse}, (REQUEST_ID_ECHO,))


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


# --- the memory service ----------------------------------------------------------------------

MEMORY_API_VERSION = "1.0.0"

AGENT_IDENTITY = Header(
    AGENT_IDENTITY_HEADER,
    "Calling agent, `kaos://agent/<namespace>/<name>` (DNS-1123 label and subdomain). "
    "Absent on administrative calls (CLI, port-forward). Malformed: 400 "
    "`bad_identity_header`.",
    {
        "type": "string",
        "maxLength": MAX_IDENTITY_LENGTH + 32,
        "pattern": ecma_pattern(AGENT_IDENTITY_RE),
    },
)
AGENT_TOKEN = Header(
    AGENT_TOKEN_HEADER,
    "The calling agent's projected service-account token (audience `kaos.dev/memory`). "
    "Read only when `KAOS_MEMORY_AUTH_MODE` is `jwks` or `tokenreview`: then it is "
    "required, it decides the agent identity, and `X-Agent-Identity` must match it.",
    {"type": "string"},
)
ADMIN_CREDENTIAL = Header(
    "Authorization",
    "An administrator's Kubernetes credential, `Bearer <token>` (the `kaos memory` CLI; no "
    "`X-Agent-Token`). Read only when `KAOS_MEMORY_AUTH_MODE` is `jwks` or `tokenreview`: "
    "the API server reviews it (TokenReview) and must allow its user `get` (recall, list, "
    "audit) or `delete` (forget) on `memorystores/data` of this store (SubjectAccessReview).",
    {"type": "string"},
)
PRINCIPAL = principal_header(
    "Verified end-user subject (set by the agent runtime from the gateway-verified user). "
    "Malformed: 400 `bad_identity_header`."
)
SESSION_DOC = (
    "Conversation id; owner key of the short- and medium-term tiers. Malformed: 400 "
    "`bad_identity_header`."
)

_COMMON_400 = (
    "`malformed_json` (not JSON, or not an object), `invalid_body` (unknown field, wrong "
    "type, out of range), `identity_in_body` (an identity field anywhere in the body), "
    "`bad_identity_header` (a malformed or repeated identity header)"
)
_READ_400 = (
    _COMMON_400 + ", `unresolved_scope` (the level's owner header is missing), "
    "`missing_session` (`short_term`/`medium_term` asked for without `X-Session-Id`)"
)
_SCOPE_403 = (
    "`store_level_forbidden` (level `store` with `X-Agent-Identity`), `above_ceiling` "
    "(level above `KAOS_MEMORY_MAX_READ_SCOPE`), `principal_required` (an agent's call "
    "without `X-Principal` under `KAOS_MEMORY_REQUIRE_PRINCIPAL`)"
)
_413 = "`payload_too_large`: the body exceeds `KAOS_MEMORY_MAX_BODY_BYTES` (default 1 MiB)."
_415 = (
    "`unsupported_media_type`: the content type is not `application/json`; "
    "`unsupported_encoding`: a `Content-Encoding` was sent (bodies are never decompressed)."
)
_401 = (
    "Only with agent-token verification on (`KAOS_MEMORY_AUTH_MODE`): `missing_token` (no "
    "`X-Agent-Token`, given twice, or an identity header alone), `invalid_token` (expired, "
    "not yet valid, another audience or issuer, a forged or oversized token; or an admin "
    "credential the API server does not accept), `invalid_request` (an `Authorization` "
    "that is not `Bearer <token>`). Carries `WWW-Authenticate` (`Bearer` for admin calls)."
)
_403_AUTH = (
    "; with agent-token verification on also `caller_not_allowed` (the token's "
    "ServiceAccount is not an Agent bound to this store) and `identity_mismatch` "
    "(`X-Agent-Identity` differs from the token's agent); for admin calls `admin_forbidden` "
    "(RBAC does not allow the user the verb on `memorystores/data`; the message names "
    "both), `admin_not_configured`, `admin_write_forbidden`, `admin_agent_forbidden`"
)
_408 = "`request_timeout`: the body did not arrive within `KAOS_HTTP_BODY_TIMEOUT`."
_503 = (
    "`auth_unavailable`: agent-token verification is on and the issuer or API server "
    "cannot be reached."
)
_500 = "`internal_error`: an unexpected failure (details in the log under the request id)."
_429 = (
    "`too_many_requests`: `KAOS_MEMORY_MAX_CONCURRENT_REQUESTS` requests are in flight on "
    "this replica; carries `Retry-After` (seconds). Answered before the body is read: "
    "nothing changed."
)


def _memory_replies(
    ok: dict[int, Reply], bad_request: str, forbidden: str, server: str = _500
) -> dict[int, Reply]:
    return {
        **ok,
        400: error_reply(bad_request),
        401: error_reply(_401),
        403: error_reply(forbidden.rstrip(".") + _403_AUTH + "."),
        408: error_reply(_408),
        413: error_reply(_413),
        415: error_reply(_415),
        429: error_reply(_429),
        500: error_reply(server),
        503: error_reply(_503),
    }


def memory_operations() -> list[Operation]:
    """The operations of the memory contract v1 (``docs/memory-http-v1.md``)."""
    reads = [
        AGENT_IDENTITY,
        AGENT_TOKEN,
        ADMIN_CREDENTIAL,
        PRINCIPAL,
        session_header(SESSION_DOC),
        REQUEST_ID,
    ]
    tags = ["memory"]
    strict = (
        "`strict_failure`: a store failed under `failure_mode: strict`; `internal_error`: "
        "an unexpected failure."
    )
    return [
        Operation(
            "/v1/write",
            "post",
            "write",
            "Persist turns of one session",
            "Appends turns to the session's window; never waits for a model. 202 when "
            "background work (a fold: digest and extraction) was scheduled, else 200. A "
            "soft failure answers 200 with `degraded: true`.",
            tags,
            _memory_replies(
                {
                    200: Reply("Written.", {JSON: contract.WriteResponse}, (REQUEST_ID_ECHO,)),
                    202: Reply(
                        "Written; a fold was scheduled.",
                        {JSON: contract.WriteResponse},
                        (REQUEST_ID_ECHO,),
                    ),
                },
                _COMMON_400 + ", `missing_session` (no `X-Session-Id`)",
                "`principal_required`, `agent_identity_required` (posture), `session_bound` "
                "(the session belongs to another principal).",
                strict,
            ),
            [
                AGENT_IDENTITY,
                AGENT_TOKEN,
                PRINCIPAL,
                session_header(SESSION_DOC, required=True),
                REQUEST_ID,
            ],
            contract.WriteRequest,
        ),
        Operation(
            "/v1/recall",
            "post",
            "recall",
            "Relevance search plus the session's conversational tiers",
            "Always soft: a failing tier is left empty and the answer says `degraded`.",
            tags,
            _memory_replies(
                {200: Reply("Recalled.", {JSON: contract.RecallResponse}, (REQUEST_ID_ECHO,))},
                _READ_400,
                _SCOPE_403,
            ),
            reads,
            contract.RecallRequest,
        ),
        Operation(
            "/v1/list",
            "post",
            "list",
            "Complete, scope-filtered long-term listing plus the session's tiers",
            "Pages with `limit` and `next_cursor`. Always soft, like recall.",
            tags,
            _memory_replies(
                {200: Reply("Listed.", {JSON: contract.ListResponse}, (REQUEST_ID_ECHO,))},
                _READ_400 + ", `bad_cursor` (a cursor this service did not give out)",
                _SCOPE_403,
            ),
            reads,
            contract.ListRequest,
        ),
        Operation(
            "/v1/forget",
            "post",
            "forget",
            "Erase one scope across all tiers, synchronously",
            "Same scope rules as the reads (an admin call is not bound by the read "
            "ceiling: `user` level with `X-Principal` erases that principal across every "
            "agent and session). Every erasure leaves an audit record (who, when, scope, "
            "rows per tier; never content) whose id is the answer's `receipt`. A soft "
            "failure answers 200 with `degraded: true`.",
            tags,
            _memory_replies(
                {200: Reply("Forgotten.", {JSON: contract.ForgetResponse}, (REQUEST_ID_ECHO,))},
                _COMMON_400 + ", `unresolved_scope`",
                _SCOPE_403,
                strict,
            ),
            reads,
            contract.ForgetRequest,
        ),
        *(
            Operation(
                "/v1/audit",
                method,
                f"audit_{method}",
                "The erasure audit, newest first (administrators)",
                "One record per erasure: who (the verified agent or Kubernetes user), when, "
                "the scope, rows erased per tier, whether it is final; never content. Pages "
                "with `limit` and `next_cursor`"
                + (" (query parameters)." if method == "get" else ".")
                + " Not for agents (403 `audit_forbidden`).",
                tags,
                _memory_replies(
                    {200: Reply("Listed.", {JSON: contract.AuditResponse}, (REQUEST_ID_ECHO,))},
                    _COMMON_400 + ", `invalid_query` (an unknown or malformed query parameter)",
                    "`audit_forbidden` (a call with `X-Agent-Identity`).",
                    "`strict_failure`: the conversation store failed; `internal_error`.",
                ),
                [AGENT_IDENTITY, AGENT_TOKEN, ADMIN_CREDENTIAL, REQUEST_ID],
                contract.AuditRequest if method == "post" else None,
            )
            for method in ("get", "post")
        ),
        *probe_operations("memory service"),
    ]


def memory_document() -> Schema:
    """The memory service's OpenAPI document (``docs/openapi/memory.json``)."""
    return build_document(
        title="KAOS memory service",
        version=MEMORY_API_VERSION,
        description=(
            "HTTP contract v1 of `kaos-memory`; the prose is `docs/memory-http-v1.md`. "
            "Identity comes from headers only. Every non-2xx answer is the error model "
            "`{error: {code, message}, request_id}`."
        ),
        operations=memory_operations(),
        tags={
            "memory": "The operations of the memory contract, and the erasure audit.",
            "operations": "Probes and metrics.",
        },
    )


if __name__ == "__main__":
    sys.exit(write_or_check(sys.argv[1:], "memory.json", memory_document()))
