"""JSON-RPC 2.0 error codes, and the code for a request refused at the edge.

The agent's A2A endpoint and the MCP runtime answer JSON-RPC; a body the shared decoding
step (``kaos_core.http.body``) refuses becomes the matching JSON-RPC error object there.
"""

from __future__ import annotations

from kaos_core.errors import KaosError, MalformedBody

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Refusals of what a parsed request holds (its text, its identity headers) rather than of
# its framing.
_PARAMS_CODES = frozenset({"invalid_text", "bad_identity_header"})


def edge_error_code(exc: KaosError) -> int:
    """The JSON-RPC code of an edge refusal: unreadable bytes are a parse error, text or
    identity that cannot be used are invalid params, everything else an invalid request."""
    if isinstance(exc, MalformedBody):
        return PARSE_ERROR
    if exc.code in _PARAMS_CODES:
        return INVALID_PARAMS
    return INVALID_REQUEST


def error_object(req_id: object, code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}
