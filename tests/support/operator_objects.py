"""Small builders of custom objects as the API server would return them (after defaulting)."""

from __future__ import annotations

from typing import Any

from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_operator.settings import Images, Posture

IMAGES = Images(
    agent="example.test/agent:1",
    mcp="example.test/mcp:1",
    memory="example.test/memory:1",
    litellm="example.test/litellm:1",
    ollama="example.test/ollama:1",
    pull_policy="IfNotPresent",
)
OPEN = Posture()
SECURED = Posture(security_enabled=True)
USER_IDENTITY = Posture(security_enabled=True, user_issuer="https://issuer.example.test")


def _meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1}


def agent(name: str = "a1", namespace: str = "ns", **spec: Any) -> Agent:
    return Agent.model_validate(
        {"metadata": _meta(name, namespace), "spec": {"modelAPI": "llm", **spec}}
    )


def store(name: str = "mem", namespace: str = "ns", **spec: Any) -> MemoryStore:
    models = {"summarization": {"modelAPI": "llm"}, "embedding": {"modelAPI": "llm"}}
    return MemoryStore.model_validate(
        {"metadata": _meta(name, namespace), "spec": {"models": models, **spec}}
    )


def model_api(name: str = "llm", namespace: str = "ns", **spec: Any) -> ModelAPI:
    spec = spec or {"mode": "Proxy", "proxyConfig": {"models": ["openai/gpt-4o-mini"]}}
    return ModelAPI.model_validate({"metadata": _meta(name, namespace), "spec": spec})


def hosted_api(name: str = "ol", namespace: str = "ns", **server: Any) -> ModelAPI:
    """A Hosted ModelAPI serving smollm2:135m unless ``server`` says otherwise."""
    config = {"model": "smollm2:135m", **server}
    return model_api(name, namespace, mode="Hosted", serverConfig=config)


def mcp_server(name: str = "tools", namespace: str = "ns", **spec: Any) -> MCPServer:
    spec = spec or {"params": "def up(x: str) -> str:\n    return x.upper()\n"}
    return MCPServer.model_validate({"metadata": _meta(name, namespace), "spec": spec})


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    """name -> value (or valueFrom) of the first container's env."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [o["kind"] for o in objects]
    assert len(kinds) == len(set(kinds)), kinds
    return {o["kind"]: o for o in objects}
