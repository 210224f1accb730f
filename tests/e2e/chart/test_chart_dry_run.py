"""Every documented values combination of the chart renders objects the test cluster's
API server accepts (server-side dry run with strict field validation), and the samples
validate against the installed CRDs, CEL rules included."""

from __future__ import annotations

import pytest

from tests.fixtures.helm import CHART_DIR, SAMPLES_DIR, SERVER_DRY_RUN_COMBINATIONS, Helm
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("name", sorted(SERVER_DRY_RUN_COMBINATIONS))
def test_rendered_chart_passes_a_server_side_dry_run(
    helm: Helm, k8s_cluster: Cluster, k8s_namespace: str, name: str
) -> None:
    rendered = helm.template_text(
        *SERVER_DRY_RUN_COMBINATIONS[name], namespace=k8s_namespace, release="kaos"
    ).stdout

    proc = k8s_cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "deployment.apps/kaos-operator created (server dry run)" in proc.stdout


def test_crds_and_samples_pass_a_server_side_dry_run(
    k8s_cluster: Cluster, k8s_namespace: str
) -> None:
    """The CRDs as they are in the chart are accepted; with them applied (they are
    cluster-wide and the same for every test), every sample validates in a namespace."""
    k8s_cluster.kubectl("apply", "--server-side", "-f", str(CHART_DIR / "crds"))
    for crd in ("agents", "modelapis", "mcpservers", "memorystores"):
        k8s_cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.kaos.tools", "--timeout=60s"
        )

    proc = k8s_cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-n", k8s_namespace,
        "-f", str(SAMPLES_DIR), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for obj in (
        "modelapi.kaos.tools/devmodel-api",
        "mcpserver.kaos.tools/text-tools",
        "memorystore.kaos.tools/memory-local",
        "memorystore.kaos.tools/memory-pgvector",
        "agent.kaos.tools/coordinator",
        "agent.kaos.tools/researcher",
    ):
        assert f"{obj} created (server dry run)" in proc.stdout


def test_an_invalid_sample_is_refused_by_the_crd_rules(
    k8s_cluster: Cluster, k8s_namespace: str
) -> None:
    """The dry run is meaningful: a store in external mode without its Secret is refused
    with the CRD's CEL message."""
    k8s_cluster.kubectl("apply", "--server-side", "-f", str(CHART_DIR / "crds"))
    broken = (SAMPLES_DIR / "memorystore-external.yaml").read_text()
    broken = broken.replace(
        "    connectionSecret:\n      name: kaos-pgvector-connection\n      key: dsn\n", ""
    )

    proc = k8s_cluster.kubectl(
        "apply", "--dry-run=server", "-n", k8s_namespace, "-f", "-", input=broken, check=False
    )
    assert proc.returncode != 0
    assert "external storage requires connectionSecret" in proc.stderr
