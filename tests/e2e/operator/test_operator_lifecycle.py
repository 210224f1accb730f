"""Dependencies over time: Waiting until Ready, degraded on store loss, refusals, GC."""

from __future__ import annotations

import pytest
from kaos_operator.kube import DEPLOYMENTS, SERVICES, KubeClient

from tests.e2e.operator.helpers import (
    AGENTS,
    MEMORYSTORES,
    condition,
    container_env,
    create,
    eventually,
    phase,
    proxy_api,
    store_spec,
    volume_for,
    wait_phase,
)
from tests.fixtures.operator import OperatorFactory
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

REMOTE = {"type": "remote", "memoryStore": "mem"}


async def test_store_ready_releases_waiting_agent_and_outage_degrades_it(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await wait_phase(kube, ns, "ModelAPI", "llm", "Ready")
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm", "config": {"memory": REMOTE}})

    waiting = await wait_phase(kube, ns, "Agent", "a1", "Waiting")
    deps = condition(waiting, "DependenciesReady")
    assert deps is not None and deps["reason"] == "MemoryStoreNotFound"
    assert await kube.get(DEPLOYMENTS, ns, "a1") is None

    await volume_for(kube, ns, "mem-data")
    await create(kube, ns, "MemoryStore", "mem", store_spec())
    await wait_phase(kube, ns, "MemoryStore", "mem", "Ready")
    running = await wait_phase(kube, ns, "Agent", "a1", "Ready")
    degraded = condition(running, "MemoryDegraded")
    assert degraded is not None and degraded["status"] == "False"
    dep = await kube.get(DEPLOYMENTS, ns, "a1")
    assert dep is not None
    uid = dep["metadata"]["uid"]

    # The store goes away: the agent keeps serving, flagged MemoryDegraded.
    await kube.delete(MEMORYSTORES, ns, "mem")

    async def degraded_now() -> dict[str, object] | None:
        obj = await kube.get(AGENTS, ns, "a1")
        cond = condition(obj, "MemoryDegraded")
        return obj if cond and cond["status"] == "True" else None

    agent = await eventually(degraded_now, within=60, what="MemoryDegraded=True")
    assert condition(agent, "MemoryDegraded")["reason"] == "MemoryStoreNotFound"  # type: ignore[index]
    assert phase(agent) == "Ready"
    still = await kube.get(DEPLOYMENTS, ns, "a1")
    assert still is not None and still["metadata"]["uid"] == uid
    assert container_env(still)["MEMORY_ENDPOINT"] == f"http://mem.{ns}.svc:8080"

    # It comes back (on a fresh volume: the old one went with the old claim).
    await volume_for(kube, ns, "mem-data")
    await create(kube, ns, "MemoryStore", "mem", store_spec())

    async def recovered() -> bool:
        cond = condition(await kube.get(AGENTS, ns, "a1"), "MemoryDegraded")
        return bool(cond and cond["status"] == "False")

    await eventually(recovered, within=90, what="MemoryDegraded=False")


async def test_no_wait_starts_degraded(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    spec = {"modelAPI": "llm", "waitForDependencies": False, "config": {"memory": REMOTE}}
    await create(kube, ns, "Agent", "a1", spec)
    agent = await wait_phase(kube, ns, "Agent", "a1", "Ready", within=90)
    cond = condition(agent, "MemoryDegraded")
    assert cond is not None and cond["status"] == "True"


async def test_user_scope_needs_user_identity(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    operator_factory()
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "MemoryStore", "mem", store_spec(maxReadScope="user"))
    memory = {**REMOTE, "maxReadScope": "user"}
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm", "config": {"memory": memory}})
    failed = await wait_phase(kube, ns, "Agent", "a1", "Failed")
    ready = condition(failed, "Ready")
    assert ready is not None and ready["reason"] == "UserScopeNeedsUserIdentity"
    assert await kube.get(DEPLOYMENTS, ns, "a1") is None


async def test_secured_posture_is_projected(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    operator_factory(KAOS_SECURITY_ENABLED="true", KAOS_USER_ISSUER="https://idp.example.test")
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await volume_for(kube, ns, "mem-data")
    await create(kube, ns, "MemoryStore", "mem", store_spec(maxReadScope="user"))
    memory = {**REMOTE, "maxReadScope": "user"}
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm", "config": {"memory": memory}})
    await wait_phase(kube, ns, "Agent", "a1", "Ready", within=90)
    agent_dep = await kube.get(DEPLOYMENTS, ns, "a1")
    store_dep = await kube.get(DEPLOYMENTS, ns, "mem")
    assert agent_dep is not None and store_dep is not None
    env = container_env(agent_dep)
    assert env["MEMORY_REQUIRE_PRINCIPAL"] == "true"
    assert env["MEMORY_REQUIRE_AGENT_IDENTITY"] == "true"
    assert env["MEMORY_MAX_READ_SCOPE"] == "user"
    store_env = container_env(store_dep)
    assert store_env["KAOS_MEMORY_REQUIRE_PRINCIPAL"] == "true"
    assert store_env["KAOS_MEMORY_REQUIRE_AGENT_IDENTITY"] == "true"


async def test_deleting_an_agent_cascades(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm"})
    await wait_phase(kube, ns, "Agent", "a1", "Ready", within=90)
    await kube.delete(AGENTS, ns, "a1")

    async def gone() -> bool:
        dep = await kube.get(DEPLOYMENTS, ns, "a1")
        svc = await kube.get(SERVICES, ns, "a1")
        return dep is None and svc is None

    await eventually(gone, within=60, what="the garbage collector to delete a1's objects")


async def test_manual_deletion_of_an_owned_object_is_repaired(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await wait_phase(kube, ns, "ModelAPI", "llm", "Ready")
    await kube.delete(SERVICES, ns, "llm")

    async def back() -> bool:
        return await kube.get(SERVICES, ns, "llm") is not None

    await eventually(back, within=30, what="the Service to be re-created")
