"""Which facts are past their age: retention's selection on the long-term tier.

Facts are read in the backend's listing order (``(created_at, id)``, from the store
level's index on either backend), so the oldest come first and the scan stops soon after
the cutoff instead of reading the store. Mem0 writes ``created_at`` as UTC ISO text, whose
text order is its time order; a fact imported with another offset may sit up to a day
away from its place in that order, so the scan reads a day past the cutoff and compares
times, not text. A fact without a readable time is never expired by age.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaos_memory.storage.mem0.backend import VectorBackend
from kaos_memory.storage.mem0.terms import GROUP_KEY, Filters, Position

PAGE = 500
# Every UTC offset is within a day of UTC.
_OFFSET_SLACK = timedelta(days=1)


def _time(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def created_before(backend: VectorBackend, filters: Filters, before: str, limit: int) -> list[str]:
    """Ids of up to ``limit`` facts inside ``filters`` created before ``before``; blocking."""
    cutoff = _time(before)
    if cutoff is None:
        raise ValueError(f"not an ISO time: {before!r}")
    stop = (cutoff + _OFFSET_SLACK).astimezone(UTC).isoformat(timespec="microseconds")
    expired: list[str] = []
    after: Position | None = None
    while len(expired) < limit:
        rows = backend.page(filters, PAGE, after)
        for fact_id, payload in rows:
            text = str((payload or {}).get("created_at") or "")
            if text >= stop:
                return expired
            created = _time(text) if text else None
            # The group checked again, as every read of the store does (``terms.in_scope``).
            mine = payload is not None and payload.get(GROUP_KEY) == filters[GROUP_KEY]
            if mine and created is not None and created < cutoff:
                expired.append(fact_id)
                if len(expired) >= limit:
                    return expired
            after = (text, fact_id)
        if len(rows) < PAGE:
            break
    return expired
