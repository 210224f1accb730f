"""The memory tools' schema: only entitled levels, no identity parameters at all."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.memory.remote import RemoteMemory, resolvable_level
from kaos_agent.memory.tools import memory_toolset
from kaos_agent.metrics import AgentMetrics
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.memory.contract import Level
from prometheus_client import CollectorRegistry


def toolset(entitled: tuple[Level, ...]) -> dict[str, dict[str, Any]]:
    memory = RemoteMemory(
        MemoryServiceClient("http://127.0.0.1:9", agent_identity="kaos://agent/ns/a"),
        max_read_scope=entitled[-1],
        failure_mode="soft",
        top_k=5,
        require_principal=False,
        metrics=AgentMetrics.create(CollectorRegistry()),
    )
    tools = memory_toolset(memory, entitled).tools
    return {name: tool.tool_def.parameters_json_schema for name, tool in tools.items()}


@pytest.mark.parametrize(
    "entitled", [("session",), ("session", "agent"), ("session", "agent", "user")]
)
def test_level_enum_is_exactly_the_entitled_levels(entitled: tuple[Level, ...]) -> None:
    schemas = toolset(entitled)
    search = schemas["search_memory"]
    assert search["properties"]["level"]["enum"] == list(entitled)
    assert set(search["properties"]) == {"query", "level", "as_of"}
    assert search["additionalProperties"] is False
    assert set(schemas["save_memory"]["properties"]) == {"content"}


def test_read_level_narrows_to_what_the_context_can_own() -> None:
    assert resolvable_level("user", principal="p", agent_identity="a") == "user"
    assert resolvable_level("user", principal=None, agent_identity="a") == "agent"
    assert resolvable_level("user", principal=None, agent_identity=None) == "session"
    assert resolvable_level("agent", principal="p", agent_identity=None) == "session"
    assert resolvable_level("session", principal="p", agent_identity="a") == "session"
