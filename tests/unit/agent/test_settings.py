"""Agent settings: names from the environment, lists parsed, contradictions refused."""

from __future__ import annotations

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.endpoints import Endpoint, format_endpoints, parse_endpoints
from kaos_core.settings import SettingsError

BASE = {"MODEL_API_URL": "http://model:8000", "MODEL_NAME": "m"}


def load(**env: str) -> AgentSettings:
    return AgentSettings.from_env({**BASE, **env})


def test_defaults() -> None:
    s = load()
    assert (s.server.host, s.server.port) == ("0.0.0.0", 8000)
    assert (s.model.max_steps, s.delegation.max_depth) == (5, 3)
    assert s.model.base_url == "http://model:8000/v1"
    assert s.memory.type == "local"
    assert s.memory.entitled_levels == ("session",)
    assert s.delegation.peers == () and s.tools.servers == ()
    assert s.autonomous is None


def test_lists_are_parsed() -> None:
    s = load(
        AGENT_SUB_AGENTS="worker-1:http://worker-1.ns.svc:8000, b:http://b:1/",
        MCP_SERVERS="tools:http://tools:8000,http://calc.ns:9000/mcp",
    )
    assert [(p.name, p.url, p.tool_name) for p in s.delegation.peers] == [
        ("worker-1", "http://worker-1.ns.svc:8000", "worker_1"),
        ("b", "http://b:1", "b"),
    ]
    assert [(m.name, m.url) for m in s.tools.servers] == [
        ("tools", "http://tools:8000"),
        ("calc.ns", "http://calc.ns:9000/mcp"),
    ]


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"AGENT_SUB_AGENTS": "http://b:1"},
            "AGENT_SUB_AGENTS='http://b:1': entry 'http://b:1' must be name:url",
        ),
        ({"AGENT_SUB_AGENTS": "a:http://x,a:http://y"}, "duplicate names a"),
        ({"AGENT_SUB_AGENTS": "a:ftp://x"}, "is not an http(s) URL"),
        ({"MEMORY_TYPE": "remote"}, "MEMORY_TYPE=remote needs MEMORY_ENDPOINT"),
        ({"MEMORY_TOOLS": "read"}, "MEMORY_TOOLS=read needs MEMORY_TYPE=remote"),
        ({"MEMORY_TOOLS": "true"}, "MEMORY_TOOLS=all needs MEMORY_TYPE=remote"),
        ({"MEMORY_TOOLS": "some"}, "MEMORY_TOOLS"),
        ({"TASK_MAX_TOOL_CALLS": "-1"}, "TASK_MAX_TOOL_CALLS='-1'"),
        ({"TASK_MAX_WALL_SECONDS": "0"}, "TASK_MAX_WALL_SECONDS='0'"),
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
    assert s.memory.endpoint == "http://memory:8080"
    assert s.memory.entitled_levels == ("session", "agent", "user")
    assert s.agent.identity == "kaos://agent/ns/a"


def test_bare_urls_take_their_host_name() -> None:
    assert parse_endpoints("http://x.y:1", variable="V", require_name=False)[0].name == "x.y"


def test_the_endpoint_codec_round_trips() -> None:
    """What the operator writes (``format_endpoints``) the runtime reads back unchanged."""
    items = (Endpoint("worker-1", "http://worker-1.ns.svc:8000"), Endpoint("b", "https://b:1/x"))
    raw = format_endpoints(items)
    assert parse_endpoints(raw, variable="V", require_name=True) == items


def test_autonomous_settings_are_owned_by_the_agent() -> None:
    s = load(AUTONOMOUS_GOAL="g", AGENT_NAME="auto", REASONING_LOOP_MAX_STEPS="4")
    assert s.autonomous is not None
    assert (s.autonomous.owner, s.autonomous.session_id) == ("agent:auto", "autonomous-auto")
    assert s.autonomous.max_steps == 4


def test_a_pod_reads_the_variables_the_operator_writes() -> None:
    names = set(AgentSettings.env_names())
    assert len(names) == len(AgentSettings.env_names())
    assert {
        "AGENT_NAME",
        "MODEL_API_URL",
        "REASONING_LOOP_MAX_STEPS",
        "MCP_SERVERS",
        "AGENT_SUB_AGENTS",
        "AGENT_PEER_TOKEN_FILE",
        "AGENT_MEMORY_TOKEN_FILE",
        "AGENT_AUTH_MODE",
        "AGENT_CALLERS_FILE",
        "AGENT_USER_ISSUER",
        "KAOS_HTTP_IDLE_TIMEOUT",
        "OTEL_SERVICE_NAME",
    } <= names
