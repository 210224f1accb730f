"""KEDA itself on the test cluster: its operator (built by ``hack/keda-build``) running
against the test API server turns the ScaledObject the KAOS operator made for an
autoscaled Agent into a HorizontalPodAutoscaler of its own, which the KAOS operator leaves
alone (it is the ScaledObject's, not the Agent's).

Only KEDA's operator runs: its metrics adapter would serve the external metrics the HPA
reads, but its scaler fetches the agent's load endpoint by the Service's cluster DNS
name, which a process on this machine cannot resolve."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kaos_core.crds.reasons import KEDA_SCALED_OBJECT
from kaos_operator.kube import CRDS, HPAS, SCALEDOBJECTS, KubeClient, Obj, TemporaryError

from tests.e2e.operator.helpers import AGENTS, condition, create, eventually, proxy_api
from tests.fixtures.operator import OperatorFactory, apply_crds
from tests.support.keda import grpc_certs, keda_binaries, keda_crds, operator_args, operator_env
from tests.support.procs import ServiceProcess, free_port, start_service

pytestmark = pytest.mark.cluster

SCALING = {"minReplicas": 1, "maxReplicas": 4, "targetRunsPerReplica": 2}
KEDA_NAMESPACE = "default"


@pytest.fixture
async def keda_installed(kube: KubeClient, kaos_crds: Path) -> AsyncIterator[None]:
    """Every KEDA CRD (its controllers watch them all), removed afterwards."""
    crds = keda_crds()
    await apply_crds(kaos_crds, crds)
    try:
        yield
    finally:
        # KEDA's finalizer on what is left would hold the CRD's deletion with KEDA gone.
        async def listed() -> tuple[list[Obj]] | None:
            try:
                return ((await kube.list(SCALEDOBJECTS)).get("items") or [],)
            except TemporaryError:
                return None  # 429 while the new CRD's storage starts (a test skipped at once)

        (left,) = await eventually(listed, within=60, what="ScaledObjects listed")
        for so in left:
            meta = so["metadata"]
            await kube.request(
                "PATCH",
                SCALEDOBJECTS.path(meta["namespace"], meta["name"]),
                body={"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )
        for crd in crds:
            await kube.delete(CRDS, None, crd["metadata"]["name"])

        async def gone() -> bool:
            return not await kube.serves(SCALEDOBJECTS)

        await eventually(gone, within=60, what="ScaledObjects no longer served")


@pytest.fixture
def keda_operator(
    keda_installed: None, kaos_crds: Path, k8s_namespace: str, tmp_path: Path
) -> Iterator[ServiceProcess]:
    """KEDA's operator for the test namespace, on loopback ports."""
    binaries = keda_binaries()
    probe = free_port()
    proc = start_service(
        "keda-operator",
        operator_args(
            binaries.operator,
            bind="127.0.0.1",
            probe=probe,
            grpc=free_port(),
            certs=grpc_certs(tmp_path / "keda-certs"),
            ca_dir=tmp_path / "keda-ca",
        ),
        port=probe,
        env=operator_env(kaos_crds, k8s_namespace, KEDA_NAMESPACE),
        log_dir=tmp_path / "keda-logs",
        ready_path="/readyz",
        timeout=120,
    )
    try:
        yield proc
    finally:
        proc.stop(timeout=15)


async def test_keda_turns_the_scaled_object_into_its_hpa(
    kube: KubeClient,
    k8s_namespace: str,
    keda_operator: ServiceProcess,
    operator_factory: OperatorFactory,
) -> None:
    ns = k8s_namespace
    operator_factory()  # started after KEDA's CRDs: it finds ScaledObjects served
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        {
            "modelAPI": "llm",
            "waitForDependencies": False,
            "taskStore": {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}},
            "autoscaling": SCALING,
        },
    )

    async def keda_hpa() -> Obj | None:
        return await kube.get(HPAS, ns, "keda-hpa-a1")

    hpa = await eventually(keda_hpa, within=120, what="KEDA's HPA for the ScaledObject a1")
    (owner,) = hpa["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ScaledObject", "a1", True)
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert hpa["spec"]["scaleTargetRef"]["name"] == "a1"
    (metric,) = hpa["spec"]["metrics"]
    # The agent's load, as an external metric KEDA's adapter serves, averaged per pod.
    assert metric["type"] == "External"
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "2"}

    async def keda_ready() -> Obj | None:
        so = await kube.get(SCALEDOBJECTS, ns, "a1")
        ready = condition(so, "Ready")
        return so if ready is not None and ready["status"] == "True" else None

    await eventually(keda_ready, within=60, what="the ScaledObject Ready")
    agent = await kube.get(AGENTS, ns, "a1")
    assert agent is not None and agent["status"]["scaler"] == "keda"
    cond = condition(agent, "Autoscaled")
    assert cond is not None and cond["reason"] == KEDA_SCALED_OBJECT
    # KEDA's HPA is the ScaledObject's: the KAOS operator made no HPA and pruned none.
    assert await kube.get(HPAS, ns, "a1") is None
    assert await kube.get(HPAS, ns, "keda-hpa-a1") is not None
