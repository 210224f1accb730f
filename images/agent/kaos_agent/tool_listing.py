"""``GET /tools``: every tool the model is offered, with the JSON schema of its arguments.

The listing is built from the same toolsets the loop runs with (``loop.agent_toolsets``),
so it cannot drift from what the model sees: the MCP servers' tools (listed over MCP, as
a run does; a server that does not answer within ``LIST_TIMEOUT_SECONDS`` is named in
``unavailable`` and contributes none, as in a run), the ``delegate_to_<peer>`` tools and
the memory tools the agent's ``memory.tools`` mode offers. Each tool carries its source
(``mcp:<server>``, ``delegation``, ``memory``, ``tools`` for toolsets handed in by a test).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from kaos_agent.context import RunDeps
from kaos_agent.toolsets import GuardedToolset, mcp_toolset

log = logging.getLogger(__name__)

LIST_TIMEOUT_SECONDS = 5.0


class ListedTool(BaseModel):
    name: str = Field(description="The name the model calls the tool by.")
    description: str = Field(description="What the model is told the tool does.")
    source: str = Field(description="`mcp:<server>`, `delegation`, `memory` or `tools`.")
    parameters: dict[str, Any] = Field(description="JSON schema of the tool's arguments.")


class ToolList(BaseModel):
    """``GET /tools``: the tools offered to the model now."""

    tools: list[ListedTool]
    unavailable: list[str] = Field(
        description="Sources that could not be listed (an MCP server down): their tools are"
        " not offered to the model either until they answer."
    )


async def list_tools(toolsets: Sequence[AbstractToolset[RunDeps]]) -> ToolList:
    tools: list[ListedTool] = []
    unavailable: list[str] = []
    for toolset in toolsets:
        source = toolset.label_text if isinstance(toolset, GuardedToolset) else "tools"
        inner = toolset.wrapped if isinstance(toolset, GuardedToolset) else toolset
        try:
            tools += await _listed(source, inner)
        except Exception:  # noqa: BLE001  (a server that is down is reported, not raised)
            log.info("could not list tools", extra={"source": source})
            unavailable.append(source)
    return ToolList(tools=tools, unavailable=unavailable)


async def _listed(source: str, toolset: AbstractToolset[RunDeps]) -> list[ListedTool]:
    if (mcp := mcp_toolset(toolset)) is not None:
        async with asyncio.timeout(LIST_TIMEOUT_SECONDS), mcp:
            found = await mcp.list_tools()
        return [
            ListedTool(
                name=t.name,
                description=t.description or "",
                source=source,
                parameters=dict(t.input_schema),
            )
            for t in found
        ]
    if isinstance(toolset, FunctionToolset):
        return [
            ListedTool(
                name=name,
                description=tool.tool_def.description or "",
                source=source,
                parameters=dict(tool.tool_def.parameters_json_schema),
            )
            for name, tool in toolset.tools.items()
        ]
    raise TypeError(f"cannot list a {type(toolset).__name__}")
