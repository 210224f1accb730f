"""The API server itself enforces the binding rules (CEL) and applies the defaults."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_operator.kube import KubeClient, PermanentError

from tests.e2e.operator.helpers import AGENTS, MEMORYSTORES, RT_OF, body, create, store_spec

pytestmark = pytest.mark.cluster


async def refused(kube: KubeClient, ns: str, kind: str, spec: dict[str, Any]) -> str:
    with pytest.raises(PermanentError) as info:
        await create(kube, ns, kind, "bad", spec)
    assert info.value.status == 422, info.value
    return info.value.message


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({"type": "remote"}, "memory type remote requires memoryStore; type local forbids it"),
        (
            {"type": "local", "memoryStore": "mem"},
            "memory type remote requires memoryStore; type local forbids it",
        ),
        ({"maxReadScope": "agent"}, "a maxReadScope other than session requires a memoryStore"),
        ({"tools": "all"}, "memory tools require a memoryStore"),
        ({"writeAfterAnswer": True}, "writeAfterAnswer needs a memoryStore and failureMode soft"),
        (
            {
                "type": "remote",
                "memoryStore": "mem",
                "failureMode": "strict",
                "writeAfterAnswer": True,
            },
            "writeAfterAnswer needs a memoryStore and failureMode soft",
        ),
        # The boolean of earlier versions is refused, naming the field.
        ({"type": "remote", "memoryStore": "mem", "tools": True}, "spec.config.memory.tools"),
    ],
)
async def test_agent_memory_binding_rules(
    kube: KubeClient, k8s_namespace: str, memory: dict[str, Any], message: str
) -> None:
    spec = {"modelAPI": "llm", "config": {"memory": memory}}
    assert message in await refused(kube, k8s_namespace, "Agent", spec)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"replicas": 2}, "a local MemoryStore has exactly one replica"),
        ({"storage": {"type": "external"}}, "external storage requires connectionSecret"),
        (
            {
                "tiers": {
                    "shortTerm": {
                        "tokenBudget": 1000,
                        "foldTriggerTokens": 800,
                        "foldTargetTokens": 900,
                    }
                }
            },
            "foldTargetTokens must be below the fold trigger",
        ),
        (
            {"tiers": {"shortTerm": {"tokenBudget": 1000, "foldTriggerTokens": 2000}}},
            "foldTriggerTokens must not exceed tokenBudget",
        ),
        (
            {"tiers": {"longTerm": {"scoreThreshold": 1.5}}},
            "spec.tiers.longTerm.scoreThreshold",
        ),
        (
            {"tiers": {"longTerm": {"extractionConcurrency": 0}}},
            "spec.tiers.longTerm.extractionConcurrency",
        ),
        ({"maxConcurrentRequests": 0}, "spec.maxConcurrentRequests"),
    ],
)
async def test_memory_store_rules(
    kube: KubeClient, k8s_namespace: str, extra: dict[str, Any], message: str
) -> None:
    assert message in await refused(kube, k8s_namespace, "MemoryStore", store_spec(**extra))


async def test_modelapi_and_mcp_rules(kube: KubeClient, k8s_namespace: str) -> None:
    assert "mode Proxy requires proxyConfig" in await refused(
        kube, k8s_namespace, "ModelAPI", {"mode": "Proxy"}
    )
    assert "mode Hosted requires serverConfig" in await refused(
        kube, k8s_namespace, "ModelAPI", {"mode": "Hosted", "proxyConfig": {"models": ["m"]}}
    )
    assert "runtime python-string requires params" in await refused(
        kube, k8s_namespace, "MCPServer", {"runtime": "python-string"}
    )


async def test_valid_resources_get_defaults(kube: KubeClient, k8s_namespace: str) -> None:
    agent = await kube.create(AGENTS, k8s_namespace, body("Agent", "a1", {"modelAPI": "llm"}))
    spec = agent["spec"]
    assert spec["waitForDependencies"] is True
    assert spec["config"]["reasoningLoopMaxSteps"] == 5
    assert spec["config"]["memory"] == {
        "enabled": True,
        "type": "local",
        "tools": "none",
        "failureMode": "soft",
        "writeAfterAnswer": False,
    }
    store = await kube.create(MEMORYSTORES, k8s_namespace, body("MemoryStore", "m1", store_spec()))
    assert store["spec"]["storage"] == {"type": "local", "size": "1Gi"}
    assert store["spec"]["maxReadScope"] == "agent"
    assert store["spec"]["tiers"]["shortTerm"]["tokenBudget"] == 4096
    assert store["spec"]["tiers"]["longTerm"] == {
        "enabled": True,
        "recallTopK": 10,
        "injectSources": ["user", "saved"],
    }
    # Each model role may name its own ModelAPI.
    roles = {
        "summarization": {"modelAPI": "hosted", "apiKeySecret": {"name": "k", "key": "token"}},
        "embedding": {"modelAPI": "local-emb", "dimensions": 384},
    }
    split = await kube.create(
        MEMORYSTORES, k8s_namespace, body("MemoryStore", "m3", {"models": roles})
    )
    assert split["spec"]["models"]["embedding"]["modelAPI"] == "local-emb"
    assert split["spec"]["models"]["summarization"]["apiKeySecret"] == {"name": "k", "key": "token"}
    external = store_spec(storage={"type": "external", "connectionSecret": {"name": "pg"}})
    ext = await kube.create(MEMORYSTORES, k8s_namespace, body("MemoryStore", "m2", external))
    assert ext["spec"]["storage"]["connectionSecret"] == {"name": "pg", "key": "dsn"}
    assert "replicas" not in ext["spec"]  # resolved by the operator: 2 for external
    assert set(RT_OF) == {"Agent", "ModelAPI", "MCPServer", "MemoryStore"}
