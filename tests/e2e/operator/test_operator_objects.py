"""Each resource becomes exactly the expected objects, environment and status."""

from __future__ import annotations

import pytest
from kaos_operator.kube import (
    CONFIGMAPS,
    DEPLOYMENTS,
    EVENTS,
    PDBS,
    PVCS,
    KubeClient,
)

from tests.e2e.operator.helpers import (
    MEMORYSTORES,
    condition,
    container_env,
    create,
    eventually,
    managed_objects,
    proxy_api,
    store_spec,
    volume_for,
    wait_phase,
)
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

TOOLS = 'def shout(text: str) -> str:\n    """Upper-case."""\n    return text.upper()\n'


async def test_a_wired_agent_and_its_dependencies(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api(["openai/small", "openai/large"]))
    await create(kube, ns, "MCPServer", "tools", {"params": TOOLS})
    await volume_for(kube, ns, "mem-data")
    await create(kube, ns, "MemoryStore", "mem", store_spec(collection="team_a"))
    await create(kube, ns, "Agent", "worker", {"modelAPI": "llm", "model": "openai/large"})
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        {
            "modelAPI": "llm",
            "mcpServers": ["tools"],
            "agentNetwork": {"access": ["worker"]},
            "config": {
                "instructions": "Be brief.",
                "reasoningLoopMaxSteps": 7,
                "memory": {"type": "remote", "memoryStore": "mem", "tools": "all"},
            },
        },
    )
    a1 = await wait_phase(kube, ns, "Agent", "a1", "Ready", within=120)
    for kind, name in (("ModelAPI", "llm"), ("MCPServer", "tools"), ("MemoryStore", "mem")):
        await wait_phase(kube, ns, kind, name, "Ready", within=60)
    await wait_phase(kube, ns, "Agent", "worker", "Ready", within=60)

    names = ("llm", "tools", "mem", "worker", "a1")
    assert await managed_objects(kube, ns) == {
        *(("Deployment", n) for n in names),
        *(("Service", n) for n in names),
        ("ConfigMap", "llm-litellm"),
        ("PersistentVolumeClaim", "mem-data"),
    }

    dep = await kube.get(DEPLOYMENTS, ns, "a1")
    assert dep is not None
    env = container_env(dep)
    assert env == {
        "AGENT_NAME": "a1",
        "AGENT_IDENTITY": f"kaos://agent/{ns}/a1",
        "AGENT_HOST": "0.0.0.0",
        "AGENT_PORT": "8000",
        "AGENT_PUBLIC_URL": f"http://a1.{ns}.svc:8000",
        "AGENT_A2A_ENABLED": "true",
        "AGENT_INSTRUCTIONS": "Be brief.",
        "MODEL_API_URL": f"http://llm.{ns}.svc:4000",
        "MODEL_NAME": "openai/small",
        "REASONING_LOOP_MAX_STEPS": "7",
        "MCP_SERVERS": f"tools:http://tools.{ns}.svc:8000/mcp",
        "AGENT_SUB_AGENTS": f"worker:http://worker.{ns}.svc:8000",
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": f"http://mem.{ns}.svc:8080",
        "MEMORY_MAX_READ_SCOPE": "agent",
        "MEMORY_TOOLS": "all",
        "MEMORY_FAILURE_MODE": "soft",
        "MEMORY_REQUIRE_PRINCIPAL": "false",
        "MEMORY_REQUIRE_AGENT_IDENTITY": "false",
        "TASK_STORE_TYPE": "memory",
        "TASK_RETENTION_SECONDS": "86400",
        "AGENT_SHUTDOWN_GRACE_SECONDS": "15",
        "POD_NAME": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
    }
    worker = await kube.get(DEPLOYMENTS, ns, "worker")
    assert worker is not None and container_env(worker)["MODEL_NAME"] == "openai/large"

    store_dep = await kube.get(DEPLOYMENTS, ns, "mem")
    assert store_dep is not None
    store_env = container_env(store_dep)
    assert store_env["KAOS_MEMORY_MODEL_BASE_URL"] == f"http://llm.{ns}.svc:4000/v1"
    assert store_env["KAOS_MEMORY_SUMMARIZATION_MODEL"] == "openai/small"
    assert store_env["KAOS_MEMORY_COLLECTION"] == "team_a"
    assert store_env["KAOS_MEMORY_STORAGE"] == "local"
    assert store_env["KAOS_MEMORY_REQUIRE_AGENT_IDENTITY"] == "false"

    tools = await kube.get(DEPLOYMENTS, ns, "tools")
    assert tools is not None and container_env(tools)["MCP_TOOLS_STRING"] == TOOLS
    config = await kube.get(CONFIGMAPS, ns, "llm-litellm")
    assert config is not None and "openai/large" in config["data"]["config.yaml"]

    # Owner references on everything, pointing at the controlling resource.
    for rt, name, owner in (
        (DEPLOYMENTS, "a1", "a1"),
        (PVCS, "mem-data", "mem"),
        (CONFIGMAPS, "llm-litellm", "llm"),
    ):
        obj = await kube.get(rt, ns, name)
        assert obj is not None
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["name"] == owner and ref["controller"] is True

    status = a1["status"]
    assert status["endpoint"] == f"http://a1.{ns}.svc:8000"
    assert status["observedGeneration"] == a1["metadata"]["generation"]
    ready = condition(a1, "Ready")
    assert ready is not None and ready["reason"] == "Available"
    assert ready["observedGeneration"] == a1["metadata"]["generation"]
    degraded = condition(a1, "MemoryDegraded")
    assert degraded is not None and degraded["status"] == "False"

    async def ready_event() -> bool:
        events = (await kube.list(EVENTS, ns)).get("items", [])
        return any(
            e["involvedObject"]["name"] == "a1" and e["reason"] == "Available" for e in events
        )

    await eventually(ready_event, within=30, what="an Available event for a1")


async def test_external_store_replicas_pdb_and_pruning(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    external = {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}}
    await create(kube, ns, "MemoryStore", "mem", store_spec(storage=external))

    async def pdb_exists() -> bool:
        return await kube.get(PDBS, ns, "mem") is not None

    await eventually(pdb_exists, within=60, what="the store's PodDisruptionBudget")
    dep = await kube.get(DEPLOYMENTS, ns, "mem")
    assert dep is not None and dep["spec"]["replicas"] == 2
    env = container_env(dep)
    assert env["KAOS_MEMORY_DSN"] == {"secretKeyRef": {"name": "pg", "key": "url"}}
    assert env["KAOS_MEMORY_STORAGE"] == "external"
    assert await kube.get(PVCS, ns, "mem-data") is None
    pdb = await kube.get(PDBS, ns, "mem")
    assert pdb is not None and pdb["spec"]["minAvailable"] == 1

    await kube.request(
        "PATCH",
        MEMORYSTORES.path(ns, "mem"),
        body={"spec": {"replicas": 1}},
        content_type="application/merge-patch+json",
    )

    async def pdb_gone() -> bool:
        return await kube.get(PDBS, ns, "mem") is None

    await eventually(pdb_gone, within=60, what="the PDB to be pruned at one replica")
    dep = await kube.get(DEPLOYMENTS, ns, "mem")
    assert dep is not None and dep["spec"]["replicas"] == 1


async def test_hosted_model_api(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    # The model store's claim (10Gi by default) on a static volume: no provisioner here.
    await volume_for(kube, ns, "ol-models", size="10Gi")
    await create(kube, ns, "ModelAPI", "ol", {"mode": "Hosted", "serverConfig": {"model": "m:1b"}})
    api = await wait_phase(kube, ns, "ModelAPI", "ol", "Ready", within=60)
    assert api["status"]["endpoint"] == f"http://ol.{ns}.svc:11434"
    assert api["status"]["models"] == ["m:1b"]
    assert await managed_objects(kube, ns) == {
        ("Deployment", "ol"),
        ("Service", "ol"),
        ("PersistentVolumeClaim", "ol-models"),
    }
