"""Storage for the real node: Rancher's local-path-provisioner behind a default StorageClass.

A PersistentVolumeClaim of the real node's cluster (with no class, or ``local-path``) gets
a volume made for it: a directory on the node, under the node's own directory, bound as a
hostPath PersistentVolume pinned to the node, deleted with its claim. This is what kind
clusters ship (its ``standard`` class is the same provisioner), so a MemoryStore or the
chart's development pgvector binds here as it does there.

How it runs, and why: the upstream binary (``hack/k8s-build node`` builds the pinned
release from its Go module) as a process of the node, like CoreDNS, with the admin's
kubeconfig. Run in-cluster it would need its image (Docker Hub is out of reach here; a
build by ``hack/images`` would add a cold build and an import to every node) and RBAC for
its ServiceAccount, for nothing it does: it only talks to the API server. What must happen
on the node, making and removing a volume's directory, it does in short-lived helper pods,
and those run the node's own ``kaos.local/toolbox:1`` (a static busybox already imported
into every node, ``imagePullPolicy: Never``), so nothing is pulled. Its configuration, the
helper pod's template and the two scripts are one ConfigMap in ``kube-system``, which the
binary reads at start (the scripts are mounted into the helper pods from it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The upstream names: what kind's `standard` class and upstream's manifests use.
PROVISIONER = "rancher.io/local-path"
STORAGE_CLASS = "local-path"
NAMESPACE = "kube-system"
CONFIG_MAP = "local-path-config"
# The provisioner sets it on every volume it makes (the external-provisioner library's
# annotation): how a test tells a provisioned volume from a hand-made one.
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

# The helper pods get the volume's directory as $VOL_DIR; pods run as their own non-root
# users, so the directory is open to all (as upstream's script makes it).
SETUP = """#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
"""
TEARDOWN = """#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
"""


def helper_pod(image: str) -> dict[str, Any]:
    """The template of the helper pods: the node's own image, never pulled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "containers": [{"name": "helper-pod", "image": image, "imagePullPolicy": "Never"}],
            "terminationGracePeriodSeconds": 1,
        },
    }


def config_map(volumes_dir: Path, image: str) -> dict[str, Any]:
    """Every node's volumes under ``volumes_dir`` (there is one node)."""
    config = {
        "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [str(volumes_dir)]}]
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {
            "config.json": json.dumps(config),
            "helperPod.yaml": json.dumps(helper_pod(image)),
            "setup": SETUP,
            "teardown": TEARDOWN,
        },
    }


def storage_class() -> dict[str, Any]:
    """The cluster's default class: a claim without a class gets it (the DefaultStorageClass
    admission plugin). ``WaitForFirstConsumer``, because the provisioner must know the node
    of the pod to make the directory on (as upstream's manifests set it)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {DEFAULT_CLASS_ANNOTATION: "true"},
        },
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }


def objects(volumes_dir: Path, image: str) -> list[tuple[str, dict[str, Any]]]:
    """The API objects the provisioner needs before it starts, each with its POST path."""
    return [
        (f"/api/v1/namespaces/{NAMESPACE}/configmaps", config_map(volumes_dir, image)),
        ("/apis/storage.k8s.io/v1/storageclasses", storage_class()),
    ]


def args(binary: Path, kubeconfig: Path, image: str) -> list[str]:
    """The provisioner's command line. The helper pods run as the ``default``
    ServiceAccount of ``kube-system`` (they call no API)."""
    return [
        str(binary),
        "start",
        f"--kubeconfig={kubeconfig}",
        f"--provisioner-name={PROVISIONER}",
        f"--namespace={NAMESPACE}",
        f"--configmap-name={CONFIG_MAP}",
        "--service-account-name=default",
        f"--helper-image={image}",
    ]
