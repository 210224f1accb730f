"""``make cluster-down``'s path leaves the machine as the real node found it: the suite's
cluster, samples and all, is taken down by the code ``hack/cluster down`` runs, and the
host (sysctls, iptables, links, addresses, routes, mounts, cgroups, hard-coded paths)
compares equal with what it was before the cluster came up.

The conftest orders this module after every other of the package: it ends the cluster.
"""

from __future__ import annotations

import pytest

from tests.e2e.kind.helpers import SUITE_TIMEOUT, KindDeployment
from tests.support.cluster import processes_mentioning
from tests.support.cluster.host import host_changes

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]


def test_cluster_down_leaves_the_machine_as_it_found_it(kind: KindDeployment) -> None:
    if kind.take_down is None or kind.host_before is None:
        pytest.skip("kind's cluster lives in Docker; only the real node changes the host")
    assert kind.runtime_containers()  # the samples' containers ran until now
    after = kind.take_down()

    assert host_changes(kind.host_before, after) == {}
    # Nothing of the cluster runs on: the control plane, the node, the containers' shims.
    assert not processes_mentioning(str(kind.kubeconfig.parent))
