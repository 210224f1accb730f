"""What the console's application holds: its configuration, the console's own memory of
what it saw, and the typed keys every part reads them through."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from kaos_cli.kubectl.aio import Cluster
from kaos_cli.kubectl.forward import Forwards
from kaos_cli.ui.render.memory import DigestVersion


@dataclass(frozen=True)
class UiConfig:
    context: str
    namespace: str | None  # None: every namespace
    # Accepted Host headers ("127.0.0.1:8765", "localhost:8765"); None with --allow-remote,
    # where the names the console is reached by are the user's to choose.
    hosts: frozenset[str] | None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    chat_timeout: float = 120.0


@dataclass
class Memory:
    """What the console remembers itself: digest versions it saw, sessions it chatted in."""

    digests: dict[tuple[str, str, str, str], list[DigestVersion]] = field(default_factory=dict)
    sessions: dict[str, set[str]] = field(default_factory=dict)  # namespace -> session ids
    principals: dict[str, set[str]] = field(default_factory=dict)

    def saw_digest(self, key: tuple[str, str, str, str], version: DigestVersion) -> None:
        seen = self.digests.setdefault(key, [])
        if not seen or seen[-1].version != version.version:
            seen.append(version)

    def chatted(self, namespace: str, session: str, principal: str) -> None:
        self.sessions.setdefault(namespace, set()).add(session)
        if principal:
            self.principals.setdefault(namespace, set()).add(principal)


CONFIG = web.AppKey("config", UiConfig)
CLUSTER = web.AppKey("cluster", Cluster)
FORWARDS = web.AppKey("forwards", Forwards)
MEMORY = web.AppKey("memory", Memory)
HTTP = web.AppKey("http", aiohttp.ClientSession)
