"""Finding and running the external tools the CLI drives: ``helm`` and ``kubectl``.

The CLI has no Kubernetes client library: it shells out, so it behaves exactly as the
administrator's own ``kubectl``/``helm`` would (same kubeconfig, context, credentials).
Missing tools and unreachable clusters become ``CliError`` with exit status 2 and one
readable line, never a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

# Exit statuses (docs/cli.md): 1 the operation failed (refused, missing, not Ready, not
# answering); 2 the CLI cannot run it here (usage, missing tool, no cluster or context, no
# CRDs), as click and argparse do for usage errors; 130 interrupted.
EXIT_FAILED = 1
EXIT_ENVIRONMENT = 2
EXIT_INTERRUPTED = 130

# A tool's own prefix on its error lines (kubectl, helm): the CLI prints one ``error:`` of
# its own, so a line it quotes drops this one.
_TOOL_PREFIX = re.compile(
    r"^(?:(?:error from server(?: \([A-Za-z]+\))?|error in configuration|error)\s*:\s*)+",
    re.IGNORECASE,
)


class CliError(Exception):
    """An error to print as one ``error: ...`` line, then exit with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``hack/k8s-build`` keeps the pinned binaries (``$KAOS_CACHE_DIR/bin``)."""
    env = os.environ if environ is None else environ
    configured = env.get("KAOS_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kaos"


def find_tool(name: str, environ: Mapping[str, str] | None = None) -> str:
    """Path of ``name``: ``$KAOS_<NAME>`` if set, else PATH, else the KAOS cache's bin.

    Raises ``CliError`` (exit 2) naming where it looked.
    """
    env = os.environ if environ is None else environ
    override = env.get(f"KAOS_{name.upper()}")
    if override:
        if os.access(override, os.X_OK):
            return override
        raise CliError(f"KAOS_{name.upper()}={override} is not an executable", EXIT_ENVIRONMENT)
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    cached = cache_dir(env) / "bin" / name
    if os.access(cached, os.X_OK):
        return str(cached)
    hint = {
        "helm": "install helm (https://helm.sh/docs/intro/install/) or run hack/k8s-build",
        "kubectl": (
            "install kubectl (https://kubernetes.io/docs/tasks/tools/) or run hack/k8s-build"
        ),
    }.get(name, f"install {name}")
    raise CliError(f"{name} not found on PATH nor in {cached.parent}: {hint}", EXIT_ENVIRONMENT)


def run(
    argv: Sequence[str], *, timeout: float = 600, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool to completion, capturing its output; never raises on a non-zero exit."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise CliError(f"{Path(argv[0]).name} did not finish within {timeout:g}s") from exc
    except OSError as exc:
        raise CliError(f"cannot run {argv[0]}: {exc}", EXIT_ENVIRONMENT) from exc


def without_prefix(line: str) -> str:
    """A tool's line without its ``error:``, ``Error:`` or ``Error from server (Reason):``
    prefix, so that quoting it never doubles the CLI's own ``error:``."""
    return _TOOL_PREFIX.sub("", line.strip(), count=1)


def first_line(text: str) -> str:
    """The most telling line of a tool's stderr (the last one starting with Error, else
    the first non-empty one), without the tool's own error prefix."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    if errors:
        return without_prefix(errors[-1]) or errors[-1]
    return lines[0] if lines else "(no output)"
