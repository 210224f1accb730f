"""The memory service's OpenAPI document (``docs/openapi/memory.json``), from the wire
models of ``kaos_core.memory.contract``; the prose is ``docs/memory-http-v1.md``."""

from __future__ import annotations

from kaos_core.memory import contract
from kaos_core.openapi import (
    JSON,
    REQUEST_ID,
    REQUEST_ID_ECHO,
    Operation,
    Query,
    Reply,
    Schema,
    build_document,
    principal_header,
    probe_operations,
    session_header,
)
from kaos_core.openapi.memory_common import (
    ADMIN_CREDENTIAL,
    AGENT_IDENTITY,
    AGENT_TOKEN,
    COMMON_400,
    TOO_MANY,
    memory_replies,
)
from kaos_core.openapi.portable import portable_operations
from kaos_core.openapi.quarantine import quarantine_operations

MEMORY_API_VERSION = "1.0.0"

# ``GET /v1/audit``'s query parameters: ``AuditRequest``'s fields (the ``POST`` body).
AUDIT_QUERY = (
    Query(
        "limit",
        "Records per page.",
        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    ),
    Query(
        "cursor",
        "The previous page's `next_cursor`.",
        {"type": "string", "pattern": "^[0-9]{1,20}$", "maxLength": 32},
    ),
    Query(
        "action",
        "Only records of this action.",
        {
            "type": "string",
            "enum": ["forget", "export", "import", "quarantine_release", "quarantine_erase"],
        },
    ),
)

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

PRINCIPAL = principal_header(
    "Verified end-user subject (set by the agent runtime from the gateway-verified user). "
    "Malformed: 400 `bad_identity_header`."
)
SESSION_DOC = (
    "Conversation id; owner key of the short- and medium-term tiers. Malformed: 400 "
    "`bad_identity_header`."
)

_READ_400 = (
    COMMON_400 + ", `unresolved_scope` (the level's owner header is missing), "
    "`missing_session` (`short_term`/`medium_term` asked for without `X-Session-Id`)"
)
_SCOPE_403 = (
    "`store_level_forbidden` (level `store` with `X-Agent-Identity`), `above_ceiling` "
    "(level above `KAOS_MEMORY_MAX_READ_SCOPE`), `principal_required` (an agent's call "
    "without `X-Principal` under `KAOS_MEMORY_REQUIRE_PRINCIPAL`)"
)


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
            memory_replies(
                {
                    200: Reply("Written.", {JSON: contract.WriteResponse}, (REQUEST_ID_ECHO,)),
                    202: Reply(
                        "Written; a fold was scheduled.",
                        {JSON: contract.WriteResponse},
                        (REQUEST_ID_ECHO,),
                    ),
                },
                COMMON_400 + ", `missing_session` (no `X-Session-Id`)",
                "`principal_required`, `agent_identity_required` (posture), `session_bound` "
                "(a session stored before sessions were each principal's own that several "
                "principals wrote to), `quota_exceeded` (over the principal's facts, turns "
                "or bytes quota; nothing written).",
                strict,
                TOO_MANY + " `rate_limited`: over the agent's writes per minute; carries "
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
            memory_replies(
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
            memory_replies(
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
            memory_replies(
                {200: Reply("Forgotten.", {JSON: contract.ForgetResponse}, (REQUEST_ID_ECHO,))},
                COMMON_400 + ", `unresolved_scope`",
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
                "The audit of erasures, exports and imports, newest first (administrators)",
                "One record per erasure, export and import (`action`): who (the verified "
                "agent or Kubernetes user), when, the scope, and counts; never content. A "
                "forget's record has the rows erased per tier (`forgotten`) and is `final` "
                "once the erasure finished. An export or import is recorded `started` before "
                "its first record moves (one that cannot be recorded is refused with "
                "`strict_failure`) and then says how it ended (`outcome`: `complete`, "
                "`incomplete` for an export whose stream broke off, `failed`) and what it "
                "moved (`moved`: turns, digests, facts, and records the target already "
                "held); it is `final` once `complete`. Pages with `limit` and `next_cursor`; "
                "`action` keeps one kind"
                + (" (query parameters)." if method == "get" else ".")
                + " Not for agents (403 `audit_forbidden`).",
                tags,
                memory_replies(
                    {200: Reply("Listed.", {JSON: contract.AuditResponse}, (REQUEST_ID_ECHO,))},
                    COMMON_400 + ", `invalid_query` (an unknown or malformed query parameter)",
                    "`audit_forbidden` (a call with `X-Agent-Identity`).",
                    "`strict_failure`: the conversation store failed; `internal_error`.",
                ),
                [AGENT_IDENTITY, AGENT_TOKEN, ADMIN_CREDENTIAL, REQUEST_ID],
                contract.AuditRequest if method == "post" else None,
                query=AUDIT_QUERY if method == "get" else (),
            )
            for method in ("get", "post")
        ),
        *portable_operations(),
        *quarantine_operations(),
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
            "memory": "The operations of the memory contract, the erasure audit, export "
            "and import, and the quarantine.",
            "operations": "Probes and metrics.",
        },
    )
