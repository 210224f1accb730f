"""``hack/cluster`` (``make cluster``) refuses what it cannot do before it starts
anything, and says what to do; its bring-up and teardown run in the kind suite
(``tests/e2e/kind``, real-node provider), on the same code."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import REPO_ROOT, processes_mentioning

pytestmark = pytest.mark.realnode


def _run(script: str, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAOS_CLUSTER_DIR": str(state), "KAOS_TEST_CLUSTER_DIR": str(state)}
    return subprocess.run([str(REPO_ROOT / "hack" / script), *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_an_unknown_command_prints_the_usage(tmp_path: Path) -> None:
    done = _run("cluster", "start", state=tmp_path / "cluster")

    assert done.returncode == 2
    assert "hack/cluster up" in done.stderr and "hack/cluster down" in done.stderr
    assert not (tmp_path / "cluster").exists()


def test_env_and_down_without_a_cluster(tmp_path: Path) -> None:
    env = _run("cluster", "env", state=tmp_path / "cluster")
    down = _run("cluster", "down", state=tmp_path / "cluster")

    assert (env.returncode, env.stdout) == (1, "")
    assert env.stderr == "cluster: no cluster is running (hack/cluster up)\n"
    assert (down.returncode, down.stderr) == (0, "cluster: no cluster was running\n")


def test_the_samples_need_a_real_node(tmp_path: Path) -> None:
    done = _run("test-cluster", "up", "--deploy", state=tmp_path / "cluster")

    assert done.returncode == 1
    assert done.stderr == (
        "test-cluster: error: the samples run only on a real node (--real-node): "
        "kwok runs nothing\n"
    )
    assert not processes_mentioning(str(tmp_path))
