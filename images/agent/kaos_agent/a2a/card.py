"""The agent card: who this agent is, where to reach it, and what it can do.

Served at ``/.well-known/agent-card.json`` (A2A 0.3 and 1.0) and ``/.well-known/agent.json``
(the older path). The document has the 1.0 fields (``supportedInterfaces``) and the
older top-level ``url``/``protocolVersion``/``preferredTransport`` so clients of either
generation find the endpoint. Skills come from the MCP servers' tools (listed at most once
a minute; an unreachable server contributes none), the peers and the memory tools.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kaos_agent.context import RunDeps
from kaos_agent.settings import AgentSettings

if TYPE_CHECKING:
    from pydantic_ai.mcp import MCPToolset

log = logging.getLogger(__name__)

CARD_TTL_SECONDS = 60.0
LIST_TIMEOUT_SECONDS = 5.0


class CardBuilder:
    def __init__(self, settings: AgentSettings, mcp: list[tuple[str, MCPToolset[RunDeps]]]) -> None:
        self.settings = settings
        self.mcp = mcp
        self._cached: dict[str, Any] | None = None
        self._cached_at = 0.0
        self._lock = asyncio.Lock()

    async def card(self) -> dict[str, Any]:
        async with self._lock:
            if self._cached is None or time.monotonic() - self._cached_at > CARD_TTL_SECONDS:
                self._cached = self._build(await self._tool_skills())
                self._cached_at = time.monotonic()
            return self._cached

    async def _tool_skills(self) -> list[dict[str, Any]]:
        skills: list[dict[str, Any]] = []
        for server, toolset in self.mcp:
            try:
                async with asyncio.timeout(LIST_TIMEOUT_SECONDS), toolset:
                    tools = await toolset.list_tools()
            except Exception:  # noqa: BLE001  (the card is best effort; runs degrade the same way)
                log.info("could not list tools for the agent card", extra={"server": server})
                continue
            for tool in tools:
                skills.append(
                    {
                        "id": f"tool:{tool.name}",
                        "name": tool.name,
                        "description": tool.description or f"Tool {tool.name} from {server}.",
                        "tags": ["tool", f"mcp:{server}"],
                    }
                )
        return skills

    def _build(self, tool_skills: list[dict[str, Any]]) -> dict[str, Any]:
        s = self.settings
        url = s.server.card_url() + "/"
        skills = [
            {
                "id": "chat",
                "name": s.agent.name,
                "description": s.agent.description or s.agent.instructions[:500],
                "tags": ["chat"],
            },
            *tool_skills,
        ]
        for peer in s.delegation.peers:
            skills.append(
                {
                    "id": f"delegate:{peer.name}",
                    "name": f"delegate_to_{peer.tool_name}",
                    "description": f"Delegates tasks to the agent {peer.name}.",
                    "tags": ["delegation", f"peer:{peer.name}"],
                }
            )
        if s.memory.tools != "none":
            what = {"all": "Searches and saves", "read": "Searches", "write": "Saves"}
            skills.append(
                {
                    "id": "memory",
                    "name": "memory",
                    "description": f"{what[s.memory.tools]} long-term memory.",
                    "tags": ["memory"],
                }
            )
        return {
            "name": s.agent.name,
            "description": s.agent.description or f"KAOS agent {s.agent.name}",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            ],
            "url": url,
            "protocolVersion": "0.3.0",
            "preferredTransport": "JSONRPC",
            "capabilities": {
                "streaming": False,
                "pushNotifications": False,
                "extendedAgentCard": False,
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": skills,
        }
