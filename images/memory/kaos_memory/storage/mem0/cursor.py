"""The listing cursor: the last ``(created_at, id)`` a page served, opaque to clients.

Mem0's own listing has neither order nor offset, so the backends page in ``(created_at,
id)`` order from an index and continue strictly after the cursor's position.
"""

from __future__ import annotations

import base64
import json

from kaos_memory.storage.mem0.terms import Position


def encode_cursor(created_at: str, fact_id: str) -> str:
    raw = json.dumps([created_at, fact_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names; ``ValueError`` for anything not made by this service."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, fact_id = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError("malformed cursor") from exc
    if not isinstance(created_at, str) or not isinstance(fact_id, str):
        raise ValueError("malformed cursor")
    return created_at, fact_id
