"""The real node's suite: one cluster with a real node (``LocalCluster(real_node=True)``)
for the package, and the host as it was before it came up, to compare after it is gone.

Skipped, with the reason, where the node cannot run (not root, or its binaries and Debian
packages are missing: ``hack/k8s-build node``, ``make tools``).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Binaries, Cluster, LocalCluster
from tests.support.cluster.host import host_snapshot
from tests.support.realnode import (
    NodeBinaries,
    sweep_abandoned_nodes,
    why_real_node_cannot_run,
)

log = logging.getLogger("kaos.tests.realnode")


@dataclass
class NodeCluster:
    """The running cluster, and ``shutdown()`` for the test that checks the teardown."""

    local: LocalCluster
    cluster: Cluster
    before: dict[str, Any]
    after: dict[str, Any] = field(default_factory=dict)
    down: bool = False

    def shutdown(self) -> None:
        if not self.down:
            self.down = True
            self.local.stop()
            self.after = host_snapshot()


@pytest.fixture(scope="package")
def real_node() -> Iterator[NodeCluster]:
    reason = why_real_node_cannot_run()
    if reason is not None:
        pytest.skip(f"real node suite skipped: {reason}")
    binaries = Binaries.locate().require()
    # A node a killed run left behind would otherwise be part of "before".
    sweep_abandoned_nodes(NodeBinaries.locate(), log=log.info)
    before = host_snapshot()
    workdir = Path(tempfile.mkdtemp(prefix="kaos-realnode-"))
    local = LocalCluster(binaries, workdir, log=log.info, real_node=True)
    cluster = local.start()
    handle = NodeCluster(local, cluster, before)
    try:
        yield handle
    finally:
        handle.shutdown()
