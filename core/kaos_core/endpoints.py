"""Named endpoints as the operator writes them and the agent runtime reads them.

``MCP_SERVERS`` and ``AGENT_SUB_AGENTS`` carry comma-separated ``name:url`` entries (MCP
servers may also be bare URLs, named after their host). ``Endpoint`` is the one type both
sides hold, and ``format_endpoints`` and ``parse_endpoints`` are the two directions of
that one codec, so the operator's env builder and the runtime's settings cannot disagree
on the syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")


@dataclass(frozen=True)
class Endpoint:
    """A named peer agent or MCP server."""

    name: str
    url: str

    @property
    def tool_name(self) -> str:
        """The name as a tool identifier (letters, digits, underscores)."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name)


def format_endpoints(items: Iterable[Endpoint]) -> str:
    """``name:url,name:url``: the value ``parse_endpoints`` reads back."""
    return ",".join(f"{e.name}:{e.url}" for e in items)


def parse_endpoints(raw: str, *, variable: str, require_name: bool) -> tuple[Endpoint, ...]:
    """Parse ``name:url,name:url`` (or bare ``url`` entries when names are optional).

    A bare URL takes its host name as its name. Names must be unique: two peers with one
    name would become one tool. Errors are ``ValueError`` naming ``variable``.
    """
    out: list[Endpoint] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        if item.startswith(("http://", "https://")):
            if require_name:
                raise ValueError(f"{variable}: entry {item!r} must be name:url")
            name, url = urlsplit(item).hostname or "server", item
        else:
            name, sep, url = item.partition(":")
            name = name.strip()
            url = url.strip()
            if not sep or not _NAME_RE.match(name):
                raise ValueError(f"{variable}: entry {item!r} must be name:url")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{variable}: {url!r} is not an http(s) URL")
        out.append(Endpoint(name=name, url=url.rstrip("/")))
    names = [e.tool_name for e in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{variable}: duplicate names {', '.join(dupes)}")
    return tuple(out)
