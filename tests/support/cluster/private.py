"""A private cluster for one test session, always torn down, and the sweep of those a
killed run left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.support.cluster.binaries import Binaries
from tests.support.cluster.handle import Cluster
from tests.support.cluster.local import LocalCluster
from tests.support.cluster.processes import processes_mentioning

_PRIVATE_PREFIX = "kaos-k8s-"


def _sweep_abandoned(parent: Path) -> None:
    """Remove private clusters' directories whose owner died without cleaning up (its
    components died with it): a killed test run should not leak disk into the next."""
    for workdir in parent.glob(f"{_PRIVATE_PREFIX}*"):
        try:
            owner = int((workdir / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists() and not processes_mentioning(str(workdir)):
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def private_cluster(
    binaries: Binaries | None = None,
    *,
    nodes: int = 1,
    log: Callable[[str], None] = lambda message: None,
    keep: bool = False,
) -> Iterator[Cluster]:
    """A fresh control plane for the duration of the block, always torn down; with
    ``keep`` its directory (logs, certificates, kubeconfigs) stays for a post-mortem."""
    binaries = (binaries or Binaries.locate()).require()
    _sweep_abandoned(Path(tempfile.gettempdir()))
    workdir = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))
    (workdir / "owner.pid").write_text(f"{os.getpid()}\n")
    local = LocalCluster(binaries, workdir, nodes=nodes, log=log)
    # A failed start has stopped everything and leaves the logs its error points to.
    cluster = local.start()
    try:
        yield cluster
    finally:
        local.stop(remove=not keep)
        if keep:
            log(f"kept {workdir}")
