"""The test-cluster harness leaves nothing running: not after a failed start, not after
``hack/test-cluster down``; ``up`` is idempotent and ends with the export line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import (
    REPO_ROOT,
    Binaries,
    LocalCluster,
    StartupFailed,
    processes_mentioning,
    wait_until,
)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def binaries() -> Binaries:
    found = Binaries.locate()
    if missing := found.missing():
        pytest.fail(f"missing {', '.join(missing)}: run hack/k8s-build", pytrace=False)
    return found


def test_a_failed_start_stops_what_had_started_and_shows_the_log(
    binaries: Binaries, tmp_path: Path
) -> None:
    broken = dataclasses.replace(binaries, kube_apiserver=Path("/bin/false"))
    local = LocalCluster(broken, tmp_path / "cluster", timeout=30)

    with pytest.raises(StartupFailed) as failure:
        local.start()

    assert "kube-apiserver exited" in str(failure.value)
    assert str(tmp_path / "cluster" / "kube-apiserver.log") in str(failure.value)
    assert processes_mentioning(str(tmp_path)) == []  # etcd had started: it is gone too


def test_test_cluster_up_is_idempotent_and_down_stops_everything(tmp_path: Path) -> None:
    state_dir = tmp_path / "test-cluster"
    env = {**os.environ, "KAOS_TEST_CLUSTER_DIR": str(state_dir)}
    script = str(REPO_ROOT / "hack" / "test-cluster")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], env=env, capture_output=True, text=True, timeout=180, check=False
        )

    try:
        up = run("up")
        assert up.returncode == 0, up.stderr
        export = up.stdout.strip().splitlines()[-1]
        assert export.startswith("export KUBECONFIG=")
        kubeconfig = export.removeprefix("export KUBECONFIG=")
        nodes = subprocess.run(
            ["kubectl", "get", "nodes", "-o", "json"],
            env={**env, "KUBECONFIG": kubeconfig},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(nodes.stdout)["items"]
        assert processes_mentioning(str(state_dir))

        again = run("up")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip().splitlines()[-1] == export
        assert "already running" in again.stderr
    finally:
        down = run("down")

    assert down.returncode == 0, down.stderr
    assert wait_until(lambda: processes_mentioning(str(state_dir)) == [], timeout=15)
    assert not state_dir.exists()
