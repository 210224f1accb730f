"""ModelAPI (Proxy, Hosted) and MCPServer desired objects."""

from __future__ import annotations

import yaml
from kaos_agent.settings import AgentSettings
from kaos_operator.desired import (
    AgentContext,
    McpContext,
    ModelAPIContext,
    agent_env,
    desired_mcpserver_objects,
    desired_modelapi_objects,
    mcp_env,
)
from kaos_operator.desired.modelapi import CONFIG_HASH_ANNOTATION, model_api_endpoint

from tests.support.operator_objects import (
    IMAGES,
    SECURED,
    agent,
    by_kind,
    env_of,
    mcp_server,
    model_api,
)


def test_proxy_model_api() -> None:
    api = model_api(
        "llm",
        mode="Proxy",
        proxyConfig={
            "apiBase": "http://backend.example.test",
            "models": ["openai/a", "openai/b"],
            "apiKeySecretRef": {"name": "llm-key", "key": "token"},
        },
    )
    objs = by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES)))
    assert set(objs) == {"ConfigMap", "Deployment", "Service"}
    config = yaml.safe_load(objs["ConfigMap"]["data"]["config.yaml"])
    assert config == {
        "model_list": [
            {
                "model_name": m,
                "litellm_params": {
                    "model": m,
                    "api_base": "http://backend.example.test",
                    "allowed_openai_params": ["dimensions"],
                    "api_key": "os.environ/MODEL_API_KEY",
                },
            }
            for m in ("openai/a", "openai/b")
        ]
    }
    dep = objs["Deployment"]
    assert env_of(dep)["MODEL_API_KEY"] == {"secretKeyRef": {"name": "llm-key", "key": "token"}}
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGES.litellm
    assert container["args"] == ["--config", "/etc/litellm/config.yaml", "--port", "4000"]
    assert CONFIG_HASH_ANNOTATION in dep["spec"]["template"]["metadata"]["annotations"]
    assert objs["Service"]["spec"]["ports"][0]["port"] == 4000
    assert model_api_endpoint(api) == "http://llm.ns.svc:4000"


def test_proxy_config_change_changes_the_pod_template() -> None:
    ctx = ModelAPIContext(images=IMAGES)
    one = by_kind(desired_modelapi_objects(model_api(), ctx))["Deployment"]
    other = model_api(mode="Proxy", proxyConfig={"models": ["openai/other"]})
    two = by_kind(desired_modelapi_objects(other, ctx))["Deployment"]
    assert one["spec"]["template"] != two["spec"]["template"]


def test_hosted_model_api() -> None:
    """The outline; tests/unit/operator/test_desired_modelapi_hosted.py has the details."""
    api = model_api("ol", mode="Hosted", serverConfig={"model": "smollm2:135m"})
    objs = by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES)))
    assert set(objs) == {"Deployment", "Service", "PersistentVolumeClaim"}
    dep = objs["Deployment"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGES.ollama
    assert env_of(dep)["OLLAMA_MODEL"] == "smollm2:135m"
    assert 'ollama pull "$OLLAMA_SOURCE"' in container["command"][-1]
    assert objs["Service"]["spec"]["ports"][0]["port"] == 11434
    assert model_api_endpoint(api) == "http://ol.ns.svc:11434"


def test_mcp_server() -> None:
    server = mcp_server("tools")
    objs = by_kind(desired_mcpserver_objects(server, McpContext(images=IMAGES)))
    assert set(objs) == {"Deployment", "Service"}
    env = env_of(objs["Deployment"])
    assert env == mcp_env(server)
    assert env["MCP_TOOLS_STRING"].startswith("def up(x: str)")
    assert env["MCP_RUNTIME"] == "python-string"
    assert env["MCP_PORT"] == "8000"
    assert "tools.ns.svc:*" in env["MCP_ALLOWED_HOSTS"].split(",")
    container = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kaos-mcp"]
    assert objs["Service"]["spec"]["ports"][0]["port"] == 8000


def test_agent_env_is_accepted_by_the_runtime_settings() -> None:
    """What the operator writes, the agent runtime loads (remote memory, secured posture)."""
    a = agent(
        "a1",
        config={
            "memory": {"type": "remote", "memoryStore": "mem", "tools": "all"},
            "autonomous": {"goal": "g"},
        },
    )
    env = agent_env(
        a,
        AgentContext(
            images=IMAGES,
            posture=SECURED,
            model_api_url="http://llm.ns.svc:4000",
            model_name="m",
            memory_endpoint="http://mem.ns.svc:8080",
        ),
    )
    settings = AgentSettings.from_env(env)
    assert settings.agent.identity == "kaos://agent/ns/a1"
    assert settings.memory.type == "remote"
    assert settings.memory.tools == "all"
    assert settings.memory.require_agent_identity is True
