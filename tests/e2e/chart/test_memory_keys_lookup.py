"""The chart's MemoryStore key Secrets (``memoryKeys``) outlive what would shred a store's
data: an upgrade renders back the keys in the cluster (a KEK rotated by hand stays
rotated), an uninstall leaves them, and an install after it adopts them unchanged."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from tests.fixtures.helm import CHART_DIR, Helm
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster

KEYS = ("--set", "memoryKeys.kek.create=true", "--set", "memoryKeys.receiptKey.create=true")


def _helm(helm: Helm, cluster: Cluster, *args: str) -> None:
    helm.run(*args, env=cluster.env())


def _data(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    secret = json.loads(
        cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    )
    data: dict[str, str] = secret["data"]
    return data


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_keys_survive_upgrade_rotation_and_uninstall(
    helm: Helm, k8s_cluster: Cluster, k8s_namespace: str
) -> None:
    # Its own release name: the chart's cluster-scoped objects are named after it.
    release = f"keys-{uuid.uuid4().hex[:6]}"
    kek, receipts = f"{release}-kaos-memory-kek", f"{release}-kaos-memory-receipt-key"
    install = ("install", release, str(CHART_DIR), "-n", k8s_namespace, "--skip-crds", *KEYS)
    _helm(helm, k8s_cluster, *install)
    try:
        first = _data(k8s_cluster, k8s_namespace, kek)
        signing = _data(k8s_cluster, k8s_namespace, receipts)
        assert base64.b64decode(first["current"]) == b"v1"

        # Rotation by hand: a second version, made current.
        rotated: dict[str, Any] = {
            "data": {"v2": _b64(base64.b64encode(b"r" * 32).decode()), "current": _b64("v2")}
        }
        k8s_cluster.kubectl("patch", "secret", kek, "-n", k8s_namespace, "-p", json.dumps(rotated))
        upgrade = ("upgrade", release, str(CHART_DIR), "-n", k8s_namespace, *KEYS)
        _helm(helm, k8s_cluster, *upgrade)
        kept = _data(k8s_cluster, k8s_namespace, kek)
        assert kept == {**first, **rotated["data"]}
        assert _data(k8s_cluster, k8s_namespace, receipts) == signing

        _helm(helm, k8s_cluster, "uninstall", release, "-n", k8s_namespace)
        assert _data(k8s_cluster, k8s_namespace, kek) == kept
        assert _data(k8s_cluster, k8s_namespace, receipts) == signing

        # Installed again: the kept Secrets are adopted as they are, nothing drawn anew.
        _helm(helm, k8s_cluster, *install)
        assert _data(k8s_cluster, k8s_namespace, kek) == kept
        assert _data(k8s_cluster, k8s_namespace, receipts) == signing
    finally:
        helm.run("uninstall", release, "-n", k8s_namespace, check=False, env=k8s_cluster.env())
