"""What the agent's groups share: URL checks, and lists parsed into typed endpoints."""

from __future__ import annotations

from urllib.parse import urlsplit

from kaos_core.endpoints import Endpoint, parse_endpoints


def http_url(value: str | None) -> str | None:
    """An http(s) URL without its trailing slash; ``ValueError`` for anything else."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL")
    return value.rstrip("/")


def endpoints(value: object, *, variable: str, require_name: bool) -> object:
    """A comma list of ``name:url`` entries (``kaos_core.endpoints``) as typed endpoints;
    anything but a string is left to the field's type."""
    if not isinstance(value, str):
        return value
    try:
        return parse_endpoints(value, variable=variable, require_name=require_name)
    except ValueError as exc:
        # The error is reported under the variable already.
        raise ValueError(str(exc).removeprefix(f"{variable}: ")) from None


__all__ = ["Endpoint", "endpoints", "http_url"]
