"""What the kind end-to-end suite needs from the machine; its ``hack/kind`` steps run through
``tests.support.cluster.steps.run_step``.

The suite (``tests/e2e/kind``) can only run where a Docker engine answers and ``kind`` is
installed; ``why_kind_cannot_run`` names every reason it cannot, so the skip says exactly
what is missing. Tools are looked up as the ``kaos`` CLI and ``hack/kind/lib.sh`` do:
``$KAOS_<NAME>``, then PATH, then ``hack/k8s-build``'s cache.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from kaos_cli.tools import CliError, find_tool, first_line

from tests.support.cluster.steps import KIND_SCRIPTS, run_step
from tests.support.procs import REPO_ROOT

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_NAMESPACE",
    "KIND_SCRIPTS",
    "MANIFESTS",
    "docker_engine_problem",
    "locate",
    "run_step",
    "why_kind_cannot_run",
]

MANIFESTS = REPO_ROOT / "tests" / "e2e" / "kind" / "manifests"
# The scripts' defaults (hack/kind/lib.sh).
DEFAULT_CLUSTER = "kaos-e2e"
DEFAULT_NAMESPACE = "kaos-e2e"
DOCKER_INFO_TIMEOUT = 30.0

KIND_HINT = (
    "run hack/k8s-build kind, or install it: https://kind.sigs.k8s.io/docs/user/quick-start/"
)


def locate(name: str, environ: Mapping[str, str]) -> str | None:
    """The tool's path, or None when it is not installed."""
    try:
        return find_tool(name, environ)
    except CliError:
        return None


def docker_engine_problem(docker: str, environ: Mapping[str, str]) -> str | None:
    """Why ``docker info`` fails (the CLI is there, the engine is not), or None."""
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=DOCKER_INFO_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"docker info did not answer within {DOCKER_INFO_TIMEOUT:g}s"
    except OSError as exc:
        return f"cannot run {docker}: {exc}"
    if proc.returncode != 0:
        return first_line(proc.stderr or proc.stdout)
    return None


def why_kind_cannot_run(environ: Mapping[str, str]) -> str | None:
    """Every reason the kind suite cannot run here, in one sentence; None when it can."""
    problems = []
    docker = locate("docker", environ)
    if docker is None:
        problems.append("the docker CLI is not installed")
    elif (problem := docker_engine_problem(docker, environ)) is not None:
        problems.append(f"no Docker engine is reachable (docker info: {problem})")
    if locate("kind", environ) is None:
        problems.append(f"kind is not installed ({KIND_HINT})")
    return "; ".join(problems) or None
