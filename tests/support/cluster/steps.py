"""Running a script of the repository as one step of a bring-up: its output to a log and
to the terminal, a deadline, and the log's tail when it fails."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.support.cluster.binaries import REPO_ROOT
from tests.support.cluster.errors import StepFailed

KIND_SCRIPTS = REPO_ROOT / "hack" / "kind"


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

    Raises ``StepFailed`` with the log's tail when the step fails or overruns.
    """
    command = list(argv) if argv is not None else [str(KIND_SCRIPTS / step)]
    label = step if argv is not None else f"hack/kind/{step}"
    echo(f"{label} (log: {log_path})")
    log_path.parent.mkdir(parents=True, exist_ok=True)
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
        reader = threading.Thread(target=relay, name=f"step-{step}", daemon=True)
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
        raise StepFailed(f"{label} {outcome}; last lines of {log_path}:\n{tail}")
