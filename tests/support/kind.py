"""What the kind end-to-end suite needs from the machine, and running its ``hack/kind`` steps.

The suite (``tests/e2e/kind``) can only run where a Docker engine answers and ``kind`` is
installed; ``why_kind_cannot_run`` names every reason it cannot, so the skip says exactly
what is missing. Tools are looked up as the ``kaos`` CLI and ``hack/kind/lib.sh`` do:
``$KAOS_<NAME>``, then PATH, then ``hack/k8s-build``'s cache.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kaos_cli.tools import CliError, find_tool, first_line

from tests.support.procs import REPO_ROOT

KIND_SCRIPTS = REPO_ROOT / "hack" / "kind"
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


def run_step(
    step: str,
    env: Mapping[str, str],
    log_path: Path,
    *,
    timeout: float,
    echo: Callable[[str], None],
    argv: Sequence[str] | None = None,
) -> None:
    """Run ``hack/kind/<step>`` (or ``argv``, a command of the repository named ``step``):
    each output line goes to ``log_path`` and to ``echo``.

    Raises ``AssertionError`` with the log's tail when the step fails or overruns.
    """
    command = list(argv) if argv is not None else [str(KIND_SCRIPTS / step)]
    label = step if argv is not None else f"hack/kind/{step}"
    echo(f"kind suite: {label} (log: {log_path})")
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            command,
            env=dict(env),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            # Its own process group, so an overrun ends the docker, kind and helm it runs too.
            start_new_session=True,
        )

        def relay() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                echo(f"  {line.rstrip()}")

        # A reader thread, so the deadline holds even when the step stops printing.
        reader = threading.Thread(target=relay, name=f"kind-{step}", daemon=True)
        reader.start()
        try:
            status: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = None
        reader.join(timeout=10)
    if status != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-60:])
        outcome = f"exited {status}" if status is not None else f"overran {timeout:g}s"
        raise AssertionError(f"{label} {outcome}; last lines of {log_path}:\n{tail}")
