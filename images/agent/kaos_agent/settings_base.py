"""What every concern of the agent's settings shares: the groups and the field helper.

A field is read from one environment variable (names in ``kaos_core.agent_env``),
documented by its description, and listed in the README under its group
(``kaos_agent.settings_doc``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

# The concerns, in the order the README lists them.
GROUPS: dict[str, str] = {
    "agent": "Identity and instructions",
    "server": "Listening and A2A",
    "model": "Model",
    "budget": "Run budgets",
    "tools": "MCP tools",
    "delegation": "Delegation to peer agents",
    "memory": "Memory",
    "autonomous": "Autonomous mode",
    "auth": "Verified agent identity (delegation)",
    "user": "Verified user identity",
}


def setting(
    name: str, group: str, description: str, *, default_doc: str | None = None, **kwargs: Any
) -> Any:
    """A field read from variable ``name``, documented, in one of ``GROUPS``.

    ``default_doc`` is the README's words for a default derived from another setting.
    """
    assert group in GROUPS, group
    extra: dict[str, Any] = {"env": name, "group": group}
    if default_doc is not None:
        extra["default_doc"] = default_doc
    return Field(description=description, json_schema_extra=extra, **kwargs)


def http_url(value: str | None) -> str | None:
    """An http(s) URL without its trailing slash; ``ValueError`` for anything else."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL")
    return value.rstrip("/")
