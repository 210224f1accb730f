"""The memory service's OpenAPI document (``docs/openapi/memory.json``), from the wire
models of ``kaos_core.memory.contract``; the prose is ``docs/memory-http-v1.md``."""

from __future__ import annotations

from kaos_core.memory import contract
from kaos_core.openapi import (
    JSON,
    REQUEST_ID,
    REQUEST_ID_ECHO,
    Header,
    Operation,
    Reply,
    Schema,
    build_document,
    ecma_pattern,
    error_reply,
    principal_header,
    probe_operations,
    session_header,
)
from kaos_core.wire import (
    AGENT_IDENTITY_HEADER,
    AGENT_IDENTITY_RE,
    AGENT_TOKEN_HEADER,
    MAX_IDENTITY_LENGTH,
)

MEMORY_API_VERSION = "1.0.0"

RECEIPT_KEY_SET: Schema = {
    "type": "object",
    "required": ["keys"],
    "properties": {
        "keys": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kty", "crv", "x", "kid"],
                "properties": {
                    "kty": {"const": "OKP"},
                    "crv": {"const": "Ed25519"},
                    "x": {"type": "string"},
                    "kid": {"type": "string"},
                    "alg": {"const": "EdDSA"},
                    "use": {"const": "sig"},
                },
            },
        }
    },
}

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
    ok: dict[int, Reply],
    bad_request: str,
    forbidden: str,
    server: str = _500,
    too_many: str = _429,
) -> dict[int, Reply]:
    return {
        **ok,
        400: error_reply(bad_request),
        401: error_reply(_401),
        403: error_reply(forbidden.rstrip(".") + _403_AUTH + "."),
        408: error_reply(_408),
        413: error_reply(_413),
        415: error_reply(_415),
        429: error_reply(too_many),
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
                "(the session belongs to another principal), `quota_exceeded` (over the "
                "principal's facts, turns or bytes quota; nothing written).",
                strict,
                _429 + " `rate_limited`: over the agent's writes per minute; carries "
                "`Retry-After` (seconds to the next minute); nothing written.",
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
            "rows per tier; never content) whose id is the answer's `receipt`, and answers "
            "with `signed_receipt`, the store's Ed25519-signed account of the erasure "
            "(kept on the audit record; `kaos memory verify-receipt` checks it offline with "
            f"the key at `{contract.WELL_KNOWN_PATH}`). A soft failure answers 200 with "
            "`degraded: true`.",
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
        Operation(
            contract.WELL_KNOWN_PATH,
            "get",
            "receipt_key",
            "The public key erasure receipts are signed with",
            "A JWK Set (RFC 7517) of one Ed25519 key (RFC 8037 `OKP`), its `kid` the RFC 7638 "
            "thumbprint a receipt names. Needs no identity or credential: a public key.",
            ["memory"],
            {200: Reply("The key.", {JSON: RECEIPT_KEY_SET}, (REQUEST_ID_ECHO,))},
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
