"""When the kind suite runs, and how loudly it says it did not: the probe of Docker and
kind (tests/support/kind.py), and the suite itself run where neither is usable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.kind.recorder import install
from tests.support.kind import why_kind_cannot_run
from tests.support.procs import REPO_ROOT


def machine(tmp: Path, *, docker_fails: bool, with_kind: bool) -> dict[str, str]:
    """An environment with the stand-in docker (whose `info` may fail) and maybe kind."""
    bin_dir = tmp / "bin"
    install(bin_dir)
    if not with_kind:
        (bin_dir / "kind").unlink()
    log = tmp / "calls.jsonl"
    log.touch()
    return {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(tmp / "home"),
        "KAOS_CACHE_DIR": str(tmp / "cache"),
        "FAKE_LOG": str(log),
        "FAKE_FAIL": "docker info" if docker_fails else "",
    }


def test_nothing_missing_means_it_runs(tmp_path: Path) -> None:
    assert why_kind_cannot_run(machine(tmp_path, docker_fails=False, with_kind=True)) is None


def test_a_docker_cli_without_engine_is_named_with_its_error(tmp_path: Path) -> None:
    reason = why_kind_cannot_run(machine(tmp_path, docker_fails=True, with_kind=True))

    assert reason == (
        "no Docker engine is reachable (docker info: docker: injected failure of 'docker info')"
    )


def test_every_missing_piece_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path), "KAOS_CACHE_DIR": str(tmp_path / "c")}

    reason = why_kind_cannot_run(env)

    assert reason is not None
    assert reason.startswith("the docker CLI is not installed; kind is not installed (")
    assert "hack/k8s-build kind" in reason


def test_kind_from_the_build_cache_counts(tmp_path: Path) -> None:
    env = machine(tmp_path, docker_fails=False, with_kind=False)
    assert why_kind_cannot_run(env) is not None
    cached = tmp_path / "cache" / "bin"
    cached.mkdir(parents=True)
    (cached / "kind").symlink_to(tmp_path / "bin" / "recorder.py")

    assert why_kind_cannot_run(env) is None


def test_the_suite_skips_loudly_without_docker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAOS_", "FAKE_"))}
    env.update(machine(tmp_path, docker_fails=True, with_kind=False))
    env.pop("CI", None)

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "tests/e2e/kind"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    summary = out.strip().splitlines()[-1]
    assert " skipped" in summary and "passed" not in summary and "error" not in summary, summary
    assert "the kind end-to-end suite did NOT run" in out
    # The kind provider's reasons, then the real node's (its binaries are not in this
    # machine's empty cache; without root, root is what it names).
    reason = (
        "kind: no Docker engine is reachable (docker info: docker: injected failure of "
        "'docker info'); kind is not installed"
    )
    assert f"tests/e2e/kind was skipped: {reason}" in out
    node = "needs root" if os.geteuid() != 0 else "missing "
    assert "; real-node: " in out and node in out.split("; real-node: ", 1)[1], out
    # -rs lists every test with the reason.
    assert out.count("SKIPPED [") >= 4
    assert f"kind end-to-end suite skipped: {reason}" in out
