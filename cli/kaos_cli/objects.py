"""Reading KAOS objects as kubectl returns them: spec, status, conditions, age (pure).

The CLI works on the objects' JSON as it comes, so an object written by another version
still prints; these helpers never raise on a missing field.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def ready_of(obj: dict[str, Any]) -> str:
    ready = condition(obj, "Ready")
    return str(ready.get("status", "Unknown")) if ready else "Unknown"


def explain(obj: dict[str, Any]) -> str:
    """Why an object is not Ready: the most specific condition that is not True (a
    dependency's, naming what is missing, before Ready's summary) with its reason and
    message, else the status message."""
    st = status(obj)
    failing = [
        c
        for c in st.get("conditions") or []
        if c.get("status") != "True" and c.get("type") != "MemoryDegraded"
    ]
    failing.sort(key=lambda c: c.get("type") == "Ready")
    if failing:
        c = failing[0]
        return f"{c.get('type')}: {c.get('reason')}: {c.get('message') or ''}".rstrip(": ")
    return str(st.get("message") or "")


def since(stamp: str | None, now: datetime | None = None) -> str:
    """kubectl-style age of a timestamp (``45s``, ``12m``, ``3h``, ``2d``)."""
    if not stamp:
        return "-"
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "-"
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def age(obj: dict[str, Any], now: datetime | None = None) -> str:
    """kubectl-style age of an object."""
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    return since(created, now)
