"""An Agent's desired objects and environment, for every option."""

from __future__ import annotations

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.crds import reasons
from kaos_operator.desired import AgentContext, Endpoint, agent_env, desired_agent_objects
from kaos_operator.desired.agent import agent_refusal, effective_read_scope

from tests.support.operator_objects import (
    IMAGES,
    OPEN,
    SECURED,
    USER_IDENTITY,
    agent,
    by_kind,
    env_of,
)

MODEL_URL = "http://llm.ns.svc:4000"


def ctx(**kw: object) -> AgentContext:
    base: dict[str, object] = {
        "images": IMAGES,
        "posture": OPEN,
        "model_api_url": MODEL_URL,
        "model_name": "openai/gpt-4o-mini",
    }
    return AgentContext(**{**base, **kw})  # type: ignore[arg-type]


def test_minimal_agent_env() -> None:
    env = agent_env(agent("a1"), ctx())
    assert env == {
        "AGENT_NAME": "a1",
        "AGENT_IDENTITY": "kaos://agent/ns/a1",
        "AGENT_HOST": "0.0.0.0",
        "AGENT_PORT": "8000",
        "AGENT_PUBLIC_URL": "http://a1.ns.svc:8000",
        "AGENT_A2A_ENABLED": "true",
        "MODEL_API_URL": MODEL_URL,
        "MODEL_NAME": "openai/gpt-4o-mini",
        "REASONING_LOOP_MAX_STEPS": "5",
        "MEMORY_TYPE": "local",
        "MEMORY_MAX_READ_SCOPE": "session",
        "MEMORY_TOOLS": "none",
        "MEMORY_FAILURE_MODE": "soft",
        "MEMORY_REQUIRE_PRINCIPAL": "false",
        "MEMORY_REQUIRE_AGENT_IDENTITY": "false",
        "TASK_STORE_TYPE": "memory",
        "TASK_RETENTION_SECONDS": "86400",
        "AGENT_SHUTDOWN_GRACE_SECONDS": "15",
    }


def test_full_agent_env() -> None:
    a = agent(
        "a1",
        mcpServers=["tools", "search"],
        agentNetwork={"expose": False, "access": ["w1"]},
        config={
            "description": "helps",
            "instructions": "Be brief.",
            "reasoningLoopMaxSteps": 9,
            "memory": {
                "type": "remote",
                "memoryStore": "mem",
                "maxReadScope": "agent",
                "tools": "read",
                "failureMode": "strict",
            },
            "autonomous": {"goal": "tidy up", "intervalSeconds": 30},
        },
    )
    env = agent_env(
        a,
        ctx(
            mcp_servers=(
                Endpoint("tools", "http://tools.ns.svc:8000/mcp"),
                Endpoint("search", "http://search.ns.svc:8000/mcp"),
            ),
            sub_agents=(Endpoint("w1", "http://w1.ns.svc:8000"),),
            memory_endpoint="http://mem.ns.svc:8080",
            store_ceiling="user",
        ),
    )
    assert env["AGENT_DESCRIPTION"] == "helps"
    assert env["AGENT_INSTRUCTIONS"] == "Be brief."
    assert env["AGENT_A2A_ENABLED"] == "false"
    assert env["REASONING_LOOP_MAX_STEPS"] == "9"
    assert env["MCP_SERVERS"] == (
        "tools:http://tools.ns.svc:8000/mcp,search:http://search.ns.svc:8000/mcp"
    )
    assert env["AGENT_SUB_AGENTS"] == "w1:http://w1.ns.svc:8000"
    assert env["MEMORY_TYPE"] == "remote"
    assert env["MEMORY_ENDPOINT"] == "http://mem.ns.svc:8080"
    assert env["MEMORY_MAX_READ_SCOPE"] == "agent"
    assert env["MEMORY_TOOLS"] == "read"
    assert env["MEMORY_FAILURE_MODE"] == "strict"
    assert env["AUTONOMOUS_GOAL"] == "tidy up"
    assert env["AUTONOMOUS_INTERVAL_SECONDS"] == "30"


@pytest.mark.parametrize(
    ("memory", "sent"),
    [
        ({"type": "remote", "memoryStore": "mem", "writeAfterAnswer": True}, "true"),
        ({"type": "remote", "memoryStore": "mem"}, None),
        # A local window is written in the pod: there is no round trip to move.
        ({"type": "local"}, None),
    ],
)
def test_write_after_answer_is_the_agents_choice(
    memory: dict[str, object], sent: str | None
) -> None:
    env = agent_env(agent(config={"memory": memory}), ctx(memory_endpoint="http://mem.ns.svc:8080"))
    assert env.get("MEMORY_WRITE_AFTER_ANSWER") == sent


def test_disabled_memory_is_none() -> None:
    env = agent_env(agent(config={"memory": {"enabled": False}}), ctx())
    assert env["MEMORY_TYPE"] == "none"
    assert env["MEMORY_MAX_READ_SCOPE"] == "session"
    assert "MEMORY_ENDPOINT" not in env


@pytest.mark.parametrize(
    ("posture", "principal", "agent_identity"),
    [(OPEN, "false", "false"), (SECURED, "false", "true"), (USER_IDENTITY, "true", "true")],
)
def test_posture_comes_from_the_operator(
    posture: object, principal: str, agent_identity: str
) -> None:
    env = agent_env(agent(), ctx(posture=posture))
    assert env["MEMORY_REQUIRE_PRINCIPAL"] == principal
    assert env["MEMORY_REQUIRE_AGENT_IDENTITY"] == agent_identity


def test_remote_memory_needs_an_endpoint() -> None:
    a = agent(config={"memory": {"type": "remote", "memoryStore": "mem"}})
    with pytest.raises(ValueError, match="store endpoint"):
        agent_env(a, ctx())


def test_default_read_scope() -> None:
    remote = agent(config={"memory": {"type": "remote", "memoryStore": "m"}}).spec.config.memory
    local = agent().spec.config.memory
    assert effective_read_scope(local, None) == "session"
    assert effective_read_scope(remote, None) == "agent"
    assert effective_read_scope(remote, "user") == "agent"
    # A store whose ceiling is session lowers the default instead of refusing it.
    assert effective_read_scope(remote, "session") == "session"


def test_user_scope_needs_user_identity_posture() -> None:
    a = agent(config={"memory": {"type": "remote", "memoryStore": "m", "maxReadScope": "user"}})
    refused = agent_refusal(a, SECURED, "user")
    assert refused is not None and refused.reason == reasons.USER_SCOPE_NEEDS_USER_IDENTITY
    assert agent_refusal(a, USER_IDENTITY, "user") is None


def test_read_scope_above_store_ceiling_is_refused() -> None:
    a = agent(config={"memory": {"type": "remote", "memoryStore": "m", "maxReadScope": "agent"}})
    refused = agent_refusal(a, OPEN, "session")
    assert refused is not None and refused.reason == reasons.READ_SCOPE_ABOVE_CEILING
    assert agent_refusal(a, OPEN, "agent") is None


def test_objects_are_owned_and_wired() -> None:
    a = agent("a1", replicas=2, image="example.test/custom:2", resources={"limits": {"cpu": "1"}})
    objs = by_kind(desired_agent_objects(a, ctx()))
    assert set(objs) == {"Deployment", "Service", "PodDisruptionBudget"}
    dep, svc = objs["Deployment"], objs["Service"]
    for obj in (dep, svc, objs["PodDisruptionBudget"]):
        assert obj["metadata"]["name"] == "a1"
        assert obj["metadata"]["namespace"] == "ns"
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "kaos.tools/v1alpha1",
            "kind": "Agent",
            "name": "a1",
            "uid": "uid-a1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kaos-operator"
    assert dep["spec"]["replicas"] == 2
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"][0]["port"] == 8000
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example.test/custom:2"
    assert container["command"] == ["kaos-agent"]
    assert container["resources"] == {"limits": {"cpu": "1"}}
    assert container["ports"][0]["containerPort"] == 8000
    assert env_of(dep)["AGENT_NAME"] == "a1"


def test_default_image_from_settings() -> None:
    dep = desired_agent_objects(agent(), ctx())[0]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGES.agent


# -- run budgets and memory tool modes ----------------------------------------------------


def test_task_config_is_projected_and_loads() -> None:
    a = agent("a1", config={"taskConfig": {"maxToolCalls": 3, "maxWallTimeSeconds": 90}})
    env = agent_env(a, ctx())
    assert env["TASK_MAX_TOOL_CALLS"] == "3"
    assert env["TASK_MAX_WALL_SECONDS"] == "90"
    budget = AgentSettings.from_env(env).budget
    assert (budget.max_tool_calls, budget.max_wall_seconds) == (3, 90.0)


def test_no_task_config_sets_no_budget() -> None:
    env = agent_env(agent("a1"), ctx())
    assert "TASK_MAX_TOOL_CALLS" not in env and "TASK_MAX_WALL_SECONDS" not in env


def test_memory_tool_modes_reach_the_runtime() -> None:
    for mode in ("all", "read", "write", "none"):
        a = agent("a1", config={"memory": {**REMOTE_MEMORY, "tools": mode}})
        env = agent_env(a, ctx(memory_endpoint="http://mem.ns.svc:8080"))
        assert env["MEMORY_TOOLS"] == mode
        assert AgentSettings.from_env(env).memory.tools == mode


def test_a_stored_boolean_reads_as_a_mode() -> None:
    """An Agent stored before tools became a mode still reconciles: true is all."""
    for stored, mode in ((True, "all"), (False, "none")):
        a = agent("a1", config={"memory": {**REMOTE_MEMORY, "tools": stored}})
        assert a.spec.config.memory.tools == mode


REMOTE_MEMORY = {"type": "remote", "memoryStore": "mem"}
