"""Per-role model bindings, store tuning and run budgets through the real API server and
the operator: a MemoryStore whose roles name two ModelAPIs gets each one's endpoint and
the role's key from its Secret; the tuning fields and an Agent's taskConfig and memory
tool mode reach the pods' environment."""

from __future__ import annotations

import pytest
from kaos_operator.kube import DEPLOYMENTS, KubeClient, Obj

from tests.e2e.operator.helpers import (
    container_env,
    create,
    eventually,
    proxy_api,
    volume_for,
)
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster


async def test_two_model_apis_on_one_store_and_the_agents_budgets(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "hosted", proxy_api(["openai/big"]))
    await create(kube, ns, "ModelAPI", "local-emb", proxy_api(["openai/bge"]))
    await volume_for(kube, ns, "mem-data")
    await create(
        kube,
        ns,
        "MemoryStore",
        "mem",
        {
            "models": {
                "summarization": {
                    "modelAPI": "hosted",
                    "apiKeySecret": {"name": "llm-key", "key": "token"},
                },
                "embedding": {"modelAPI": "local-emb", "dimensions": 384},
            },
            "tiers": {
                "mediumTerm": {"digestPrompt": "Summarise tersely."},
                "longTerm": {"enabled": False, "scoreThreshold": 0.4, "extractionConcurrency": 3},
            },
            "maxConcurrentRequests": 16,
        },
    )
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        {
            "modelAPI": "hosted",
            "waitForDependencies": False,
            "config": {
                "taskConfig": {"maxToolCalls": 4, "maxWallTimeSeconds": 60},
                "memory": {"type": "remote", "memoryStore": "mem", "tools": "read"},
            },
        },
    )

    async def store_deployment() -> Obj | None:
        return await kube.get(DEPLOYMENTS, ns, "mem")

    async def agent_deployment() -> Obj | None:
        return await kube.get(DEPLOYMENTS, ns, "a1")

    store = await eventually(store_deployment, within=60, what="the store's Deployment")
    env = container_env(store)
    assert env["KAOS_MEMORY_MODEL_BASE_URL"] == f"http://hosted.{ns}.svc:4000/v1"
    assert env["KAOS_MEMORY_SUMMARIZATION_MODEL"] == "openai/big"
    assert env["KAOS_MEMORY_EMBEDDING_BASE_URL"] == f"http://local-emb.{ns}.svc:4000/v1"
    assert env["KAOS_MEMORY_EMBEDDING_MODEL"] == "openai/bge"
    assert env["KAOS_MEMORY_EMBEDDING_DIMS"] == "384"
    assert env["KAOS_MEMORY_SUMMARIZATION_API_KEY"] == {
        "secretKeyRef": {"name": "llm-key", "key": "token"}
    }
    assert "KAOS_MEMORY_EMBEDDING_API_KEY" not in env
    assert env["KAOS_MEMORY_LONG_TERM_ENABLED"] == "false"
    assert env["KAOS_MEMORY_RECALL_THRESHOLD"] == "0.4"
    assert env["KAOS_MEMORY_EXTRACTION_CONCURRENCY"] == "3"
    assert env["KAOS_MEMORY_DIGEST_PROMPT"] == "Summarise tersely."
    assert env["KAOS_MEMORY_MAX_CONCURRENT_REQUESTS"] == "16"

    agent = await eventually(agent_deployment, within=60, what="the agent's Deployment")
    agent_env = container_env(agent)
    assert agent_env["TASK_MAX_TOOL_CALLS"] == "4"
    assert agent_env["TASK_MAX_WALL_SECONDS"] == "60"
    assert agent_env["MEMORY_TOOLS"] == "read"
