"""What travels between KAOS processes besides bodies: the header names, and the identity
they carry (the only place a scope's owner keys come from).

Every header of KAOS's own contracts (identity, tokens, delegation, request ids) is named
here, once, so the memory service, the agent runtime, their clients and the operator
cannot disagree on one. Headers of other protocols a KAOS process merely speaks (MCP's
session headers) stay with the code that speaks them.

The identity parser runs in the service (authoritative) and in clients (to fail before
sending). A header that is malformed, empty, oversized, carries control characters or
is the ``*`` wildcard is rejected: a wildcard or filter operator reaching Mem0 through
an identity would widen the query beyond the caller's tenant.

Header bytes arrive decoded as UTF-8 with ``surrogateescape`` (aiohttp), so a byte that
is not UTF-8 shows up as a lone surrogate (U+DC80..U+DCFF) that fails only later, when a
store or an outgoing request encodes it. Such a value is refused here, as is any other
character that is not printable (controls, format and separator characters such as
zero-width or non-breaking spaces, which make two principals look alike). Printable
non-ASCII text is accepted: principals are user names (``josé``), and every KAOS client
and server sends and reads headers as UTF-8. Every identity header, and the delegation
depth (``kaos_agent.context``), must appear at most once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kaos_core.errors import BadRequest

# Identity: the calling agent, the end user a call acts for, and the conversation.
AGENT_IDENTITY_HEADER = "X-Agent-Identity"
PRINCIPAL_HEADER = "X-Principal"
SESSION_HEADER = "X-Session-Id"
# The calling agent's projected service-account token (``kaos_core.auth``); the
# ``Authorization`` header stays free for the end user's own token.
AGENT_TOKEN_HEADER = "X-Agent-Token"
# The end user's token as an agent forwards it to the memory service and to its peers, so
# each verifies the principal itself (verified user identity).
USER_TOKEN_HEADER = "X-User-Token"
AUTHORIZATION_HEADER = "Authorization"
# The challenge every 401 carries (RFC 9110 11.6.1).
WWW_AUTHENTICATE_HEADER = "WWW-Authenticate"
# How deep in a delegation chain a call is (the agent runtime's alone).
DELEGATION_DEPTH_HEADER = "X-KAOS-Delegation-Depth"
# The request id every service echoes and every client forwards.
REQUEST_ID_HEADER = "X-Request-Id"
# The A2A protocol version a delegating agent speaks (the A2A specification's header).
A2A_VERSION_HEADER = "A2A-Version"

MAX_IDENTITY_LENGTH = 256

# An Agent's namespace (a DNS-1123 label) and name (a DNS-1123 subdomain), as patterns.
NAMESPACE_PATTERN = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
NAME_PATTERN = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"
# kaos://agent/<namespace>/<name>
AGENT_IDENTITY_RE = re.compile(
    rf"^kaos://agent/(?P<ns>{NAMESPACE_PATTERN})/(?P<name>{NAME_PATTERN})$"
)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Identity:
    """The verified context of one request; ``None`` means the header was absent."""

    agent: str | None = None
    principal: str | None = None
    session: str | None = None

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.agent is not None:
            out[AGENT_IDENTITY_HEADER] = self.agent
        if self.principal is not None:
            out[PRINCIPAL_HEADER] = self.principal
        if self.session is not None:
            out[SESSION_HEADER] = self.session
        return out


def agent_identity(namespace: str, name: str) -> str:
    value = f"kaos://agent/{namespace}/{name}"
    validate_agent_identity(value)
    return value


def _require_utf8(header: str, value: str) -> None:
    # A lone surrogate is what a non-UTF-8 byte decodes to (see the module docstring).
    if _SURROGATE_RE.search(value):
        raise BadRequest(
            f"{header} must be valid UTF-8 text; the header carries bytes that are not UTF-8",
            code="bad_identity_header",
        )


def validate_agent_identity(value: str) -> str:
    _require_utf8(AGENT_IDENTITY_HEADER, value)
    # fullmatch, not match: ``$`` would let a trailing newline through.
    if len(value) > MAX_IDENTITY_LENGTH + 32 or not AGENT_IDENTITY_RE.fullmatch(value):
        raise BadRequest(
            f"{AGENT_IDENTITY_HEADER} must be kaos://agent/<namespace>/<name>",
            code="bad_identity_header",
        )
    return value


def validate_subject(header: str, value: str) -> str:
    """Check a principal or session id: free-form printable text (non-ASCII included), but
    never empty, huge, undecodable or a wildcard."""
    _require_utf8(header, value)
    problem = None
    if value == "" or value.strip() == "":
        problem = "is empty"
    elif len(value) > MAX_IDENTITY_LENGTH:
        problem = f"is longer than {MAX_IDENTITY_LENGTH} characters"
    elif _CONTROL_RE.search(value):
        problem = "contains control characters"
    elif not value.isprintable():
        problem = (
            "contains a character that is not printable (a format or separator "
            "character such as a zero-width or non-breaking space)"
        )
    elif value.strip() == "*":
        problem = "is the wildcard '*'"
    if problem is not None:
        raise BadRequest(f"{header} {problem}", code="bad_identity_header")
    return value


def header_values(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of header ``name``: aiohttp's and Starlette's multi-dicts keep repeats
    (``getall``, case-insensitive); a plain mapping has at most one, looked up as given."""
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return list(getall(name, []))
    value = headers.get(name)
    return [] if value is None else [value]


def single_header(headers: Mapping[str, str], name: str) -> str | None:
    """The header's one value, ``None`` when absent; a repeat is ambiguous and refused."""
    values = header_values(headers, name)
    if len(values) > 1:
        raise BadRequest(f"{name} given more than once", code="bad_identity_header")
    return values[0] if values else None


def parse_identity(headers: Mapping[str, str]) -> Identity:
    """Read the identity headers; absent headers are ``None``, present ones must be valid."""

    agent = single_header(headers, AGENT_IDENTITY_HEADER)
    principal = single_header(headers, PRINCIPAL_HEADER)
    session = single_header(headers, SESSION_HEADER)
    return Identity(
        agent=None if agent is None else validate_agent_identity(agent),
        principal=None if principal is None else validate_subject(PRINCIPAL_HEADER, principal),
        session=None if session is None else validate_subject(SESSION_HEADER, session),
    )


def find_identity_fields(doc: object, identity_fields: frozenset[str]) -> list[str]:
    """Paths of identity keys anywhere in a request body (top level and inside turns)."""
    found: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{path}.{key}" if path else str(key)
                if key in identity_fields:
                    found.append(here)
                walk(value, here)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    walk(doc, "")
    return found
