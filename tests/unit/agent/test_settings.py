"""Agent settings: names from the environment, lists parsed, contradictions refused."""

from __future__ import annotations

import pytest
from kaos_agent.settings import AgentSettings, parse_endpoints
from kaos_core.settings import SettingsError

BASE = {"MODEL_API_URL": "http://model:8000", "MODEL_NAME": "m"}


def load(**env: str) -> AgentSettings:
    return AgentSettings.from_env({**BASE, **env})


def test_defaults() -> None:
    s = load()
    assert (s.host, s.port, s.max_steps, s.max_delegation_depth) == ("0.0.0.0", 8000, 5, 3)
    assert s.model_base_url == "http://model:8000/v1"
    assert s.memory_type == "local"
    assert s.entitled_levels == ("session",)
    assert s.sub_agents == () and s.mcp_servers == ()


def test_lists_are_parsed() -> None:
    s = load(
        AGENT_SUB_AGENTS="worker-1:http://worker-1.ns.svc:8000, b:http://b:1/",
        MCP_SERVERS="tools:http://tools:8000,http://calc.ns:9000/mcp",
    )
    assert [(p.name, p.url, p.tool_name) for p in s.sub_agents] == [
        ("worker-1", "http://worker-1.ns.svc:8000", "worker_1"),
        ("b", "http://b:1", "b"),
    ]
    assert [(m.name, m.url) for m in s.mcp_servers] == [
        ("tools", "http://tools:8000"),
        ("calc.ns", "http://calc.ns:9000/mcp"),
    ]


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"AGENT_SUB_AGENTS": "http://b:1"},
            "AGENT_SUB_AGENTS: entry 'http://b:1' must be name:url",
        ),
        ({"AGENT_SUB_AGENTS": "a:http://x,a:http://y"}, "duplicate names a"),
        ({"AGENT_SUB_AGENTS": "a:ftp://x"}, "is not an http(s) URL"),
        ({"MEMORY_TYPE": "remote"}, "MEMORY_TYPE=remote needs MEMORY_ENDPOINT"),
        ({"MEMORY_TOOLS": "true"}, "MEMORY_TOOLS=true needs MEMORY_TYPE=remote"),
        ({"MEMORY_MAX_READ_SCOPE": "user"}, "needs MEMORY_TYPE=remote"),
        (
            {
                "MEMORY_TYPE": "remote",
                "MEMORY_ENDPOINT": "http://m",
                "MEMORY_MAX_READ_SCOPE": "store",
            },
            "administrative",
        ),
        (
            {
                "MEMORY_TYPE": "remote",
                "MEMORY_ENDPOINT": "http://m",
                "MEMORY_MAX_READ_SCOPE": "agent",
            },
            "needs AGENT_IDENTITY",
        ),
        ({"AGENT_IDENTITY": "agent-a"}, "AGENT_IDENTITY='agent-a'"),
        ({"REASONING_LOOP_MAX_STEPS": "0"}, "REASONING_LOOP_MAX_STEPS='0'"),
        ({"MEMORY_ENDPOINT": "http://m"}, "MEMORY_ENDPOINT is set but MEMORY_TYPE=local"),
    ],
)
def test_contradictions_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        load(**env)
    assert fragment in str(info.value)


def test_missing_model_is_named() -> None:
    with pytest.raises(SettingsError, match="MODEL_API_URL"):
        AgentSettings.from_env({"MODEL_NAME": "m"})


def test_remote_memory_with_identity() -> None:
    s = load(
        MEMORY_TYPE="remote",
        MEMORY_ENDPOINT="http://memory:8080/",
        MEMORY_MAX_READ_SCOPE="user",
        MEMORY_TOOLS="true",
        AGENT_IDENTITY="kaos://agent/ns/a",
        MEMORY_FAILURE_MODE="strict",
    )
    assert s.memory_endpoint == "http://memory:8080"
    assert s.entitled_levels == ("session", "agent", "user")


def test_bare_urls_take_their_host_name() -> None:
    assert parse_endpoints("http://x.y:1", variable="V", require_name=False)[0].name == "x.y"
