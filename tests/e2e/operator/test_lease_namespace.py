"""An operator started without a Lease namespace leads in its own; one that cannot create
its Lease says so at once (a warning naming the namespace) and is not ready, then leads
as soon as the namespace exists. The situation a new user meets on a cluster without
``kaos-system``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_operator.kube import LEASES, NAMESPACES, KubeClient

from tests.e2e.operator.helpers import create, eventually, proxy_api, wait_phase
from tests.fixtures.operator import OperatorFactory
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

LEASE = "kaos-operator"


def log_records(proc: ServiceProcess) -> list[dict[str, Any]]:
    """The operator's JSON log lines so far (other output skipped)."""
    out = []
    for line in proc.log_path.read_text(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def readyz(proc: ServiceProcess) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{proc.url}/readyz", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def holder(kube: KubeClient, ns: str) -> str | None:
    lease = await kube.get(LEASES, ns, LEASE)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def kubeconfig_in(namespace: str, source: Path, dest: Path) -> Path:
    """``source`` with its current context's namespace set to ``namespace``."""
    config = yaml.safe_load(source.read_text())
    for ctx in config["contexts"]:
        if ctx["name"] == config["current-context"]:
            ctx["context"]["namespace"] = namespace
    dest.write_text(json.dumps(config))
    return dest


async def test_without_a_setting_the_lease_is_in_the_kubeconfig_namespace(
    kube: KubeClient,
    k8s_namespace: str,
    kaos_crds: Path,
    tmp_path: Path,
    operator_factory: OperatorFactory,
) -> None:
    ns = k8s_namespace
    kubeconfig = kubeconfig_in(ns, kaos_crds, tmp_path / "kubeconfig")
    # No KAOS_OPERATOR_NAMESPACE: the operator finds its namespace itself.
    proc = operator_factory(
        "op-own", unset=("KAOS_OPERATOR_NAMESPACE",), KUBECONFIG=str(kubeconfig)
    )

    async def leads() -> bool:
        return await holder(kube, ns) == "op-own"

    await eventually(leads, within=30, what=f"a Lease held by op-own in {ns}")
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await wait_phase(kube, ns, "ModelAPI", "llm", "Ready")
    campaign = next(r for r in log_records(proc) if r["msg"] == "campaigning for the leader Lease")
    assert campaign["namespace"] == ns


async def test_a_missing_lease_namespace_is_a_warning_then_leads_once_it_exists(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    missing = f"kaos-system-{uuid.uuid4().hex[:6]}"
    assert await kube.get(NAMESPACES, None, missing) is None
    proc = operator_factory("op-stalled", KAOS_OPERATOR_NAMESPACE=missing)

    def first_attempt() -> dict[str, Any] | None:
        election = [r for r in log_records(proc) if r.get("logger") == "kaos_operator.leader"]
        return election[0] if election else None

    async def logged() -> dict[str, Any] | None:
        return first_attempt()

    # The very first attempt is logged (so within one retry period of starting), at
    # warning, with the namespace and the API server's status and reason.
    record = await eventually(logged, within=30, what="the first lease attempt's log line")
    assert record["level"] == "warning" and record["msg"] == "cannot acquire the leader Lease"
    assert record["namespace"] == missing
    assert (record["status"], record["reason"]) == (404, "NotFound")
    assert missing in record["detail"]

    async def unready() -> dict[str, Any] | None:
        code, body = readyz(proc)
        return body if code == 503 else None

    body = await eventually(unready, within=30, what="/readyz to fail")
    assert body["checks"]["leader_election"] == "LeaderElectionStalled"

    await kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": missing}}
    )
    try:

        async def leads() -> bool:
            return await holder(kube, missing) == "op-stalled"

        await eventually(leads, within=30, what=f"op-stalled to lead in {missing}")

        async def ready() -> bool:
            return readyz(proc)[0] == 200

        await eventually(ready, within=60, what="/readyz to pass once leading and synced")
    finally:
        await kube.delete(NAMESPACES, None, missing)
