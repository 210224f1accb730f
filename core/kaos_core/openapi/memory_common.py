"""The headers and error answers every operation of the memory service's OpenAPI document
shares (``kaos_core.openapi.memory`` and ``kaos_core.openapi.portable`` build on them)."""

from __future__ import annotations

from kaos_core.openapi import Header, Reply, ecma_pattern, error_reply
from kaos_core.wire import (
    AGENT_IDENTITY_HEADER,
    AGENT_IDENTITY_RE,
    AGENT_TOKEN_HEADER,
    MAX_IDENTITY_LENGTH,
)

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
    "audit, export), `delete` (forget) or `create` (import) on `memorystores/data` of this "
    "store (SubjectAccessReview).",
    {"type": "string"},
)

COMMON_400 = (
    "`malformed_json` (not JSON, or not an object), `invalid_body` (unknown field, wrong "
    "type, out of range), `identity_in_body` (an identity field anywhere in the body), "
    "`bad_identity_header` (a malformed or repeated identity header)"
)
TOO_LARGE = "`payload_too_large`: the body exceeds `KAOS_MEMORY_MAX_BODY_BYTES` (default 1 MiB)."
MEDIA_TYPE = (
    "`unsupported_media_type`: the content type is not `application/json`; "
    "`unsupported_encoding`: a `Content-Encoding` was sent (bodies are never decompressed)."
)
UNAUTHORIZED = (
    "Only with agent-token verification on (`KAOS_MEMORY_AUTH_MODE`): `missing_token` (no "
    "`X-Agent-Token`, given twice, or an identity header alone), `invalid_token` (expired, "
    "not yet valid, another audience or issuer, a forged or oversized token; or an admin "
    "credential the API server does not accept), `invalid_request` (an `Authorization` "
    "that is not `Bearer <token>`). Carries `WWW-Authenticate` (`Bearer` for admin calls)."
)
FORBIDDEN_AUTH = (
    "; with agent-token verification on also `caller_not_allowed` (the token's "
    "ServiceAccount is not an Agent bound to this store) and `identity_mismatch` "
    "(`X-Agent-Identity` differs from the token's agent); for admin calls `admin_forbidden` "
    "(RBAC does not allow the user the verb on `memorystores/data`; the message names "
    "both), `admin_not_configured`, `admin_write_forbidden`, `admin_agent_forbidden`"
)
TIMEOUT = "`request_timeout`: the body did not arrive within `KAOS_HTTP_BODY_TIMEOUT`."
UNAVAILABLE = (
    "`auth_unavailable`: agent-token verification is on and the issuer or API server "
    "cannot be reached."
)
INTERNAL = "`internal_error`: an unexpected failure (details in the log under the request id)."
TOO_MANY = (
    "`too_many_requests`: `KAOS_MEMORY_MAX_CONCURRENT_REQUESTS` requests are in flight on "
    "this replica; carries `Retry-After` (seconds). Answered before the body is read: "
    "nothing changed."
)


def memory_replies(
    ok: dict[int, Reply],
    bad_request: str,
    forbidden: str,
    server: str = INTERNAL,
    too_many: str = TOO_MANY,
) -> dict[int, Reply]:
    return {
        **ok,
        400: error_reply(bad_request),
        401: error_reply(UNAUTHORIZED),
        403: error_reply(forbidden.rstrip(".") + FORBIDDEN_AUTH + "."),
        408: error_reply(TIMEOUT),
        413: error_reply(TOO_LARGE),
        415: error_reply(MEDIA_TYPE),
        429: error_reply(too_many),
        500: error_reply(server),
        503: error_reply(UNAVAILABLE),
    }
