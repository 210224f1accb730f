"""A real Kubernetes control plane on loopback for tests, without Docker.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which plays
the kubelet of simulated nodes: pods get scheduled, become Running and Ready, but no
container runs) are started from the binaries that ``hack/k8s-build`` caches. The API
server authenticates with client certificates and service-account tokens, authorises
with Node and RBAC, and runs the default admission plugins, as on a normal cluster.

Every process runs in its own process group with its log in the cluster's directory;
``stop()`` kills the groups, also after a failed start. Only the standard library and
the ``openssl`` command are used, so this package also drives ``hack/test-cluster``::

    python -m tests.support.cluster up|down|env
"""

from tests.support.cluster.binaries import (
    BUILD_SCRIPT,
    REPO_ROOT,
    Binaries,
    build_binaries,
    build_env,
)
from tests.support.cluster.errors import BinariesMissing, ClusterError, StartupFailed
from tests.support.cluster.handle import Cluster
from tests.support.cluster.kwok import KWOK_NODE_ANNOTATION, POD_LOG_NAME
from tests.support.cluster.local import REAL_NODE_NAME, SERVICE_ACCOUNT_ISSUER, LocalCluster
from tests.support.cluster.private import private_cluster
from tests.support.cluster.processes import TrackedProcess, processes_mentioning, wait_until

__all__ = [
    "BUILD_SCRIPT",
    "KWOK_NODE_ANNOTATION",
    "POD_LOG_NAME",
    "REAL_NODE_NAME",
    "REPO_ROOT",
    "SERVICE_ACCOUNT_ISSUER",
    "Binaries",
    "BinariesMissing",
    "Cluster",
    "ClusterError",
    "LocalCluster",
    "StartupFailed",
    "TrackedProcess",
    "build_binaries",
    "build_env",
    "private_cluster",
    "processes_mentioning",
    "wait_until",
]
