"""Deploying KAOS objects: from a kind's flags or a manifest, then waiting until Ready.

Each kind's ``deploy`` command builds its spec from flags (``build``) or reads a manifest
(``-f FILE``); either is applied server-side, and ``--wait`` shows each change of phase
until every KAOS object is Ready, or fails with what is still missing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml
from kaos_core.crds import API_VERSION
from rich.text import Text

from kaos_cli.commands.common import Cx
from kaos_cli.kinds import BY_KIND, Kind
from kaos_cli.kubectl.sync import Kube
from kaos_cli.objects import explain, status
from kaos_cli.output import console, emit, info, print_json
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

POLL_SECONDS = 1.0


def secret_ref(value: str, default_key: str) -> dict[str, str]:
    """``SECRET[:KEY]`` of a flag as a secret key reference."""
    name, _, key = value.partition(":")
    if not name:
        raise CliError(f"{value}: expected SECRET[:KEY]", EXIT_ENVIRONMENT)
    return {"name": name, "key": key or default_key}


def document(kind: Kind, name: str, spec_: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": {"name": name}, "spec": spec_}


def read_documents(path: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        docs = [d for d in yaml.safe_load_all(text) if d]
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", EXIT_ENVIRONMENT) from exc
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not YAML: {str(exc).splitlines()[0]}", EXIT_ENVIRONMENT) from exc
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
            raise CliError(f"{path}: every document needs kind and metadata", EXIT_ENVIRONMENT)
    return docs


def apply_and_wait(cx: Cx, docs: list[dict[str, Any]], wait: bool, timeout: float) -> int:
    applied = cx.kube.apply(docs)
    if cx.fmt == "table":
        for line in applied:
            print(f"{line} applied")
    else:
        emit(cx.fmt, {"applied": applied})
    if not wait:
        return 0
    targets = [
        (BY_KIND[d["kind"]], d["metadata"]["name"])
        for d in docs
        if d.get("kind") in BY_KIND and str(d.get("apiVersion", "")).startswith("kaos.tools/")
    ]
    return wait_ready(cx.kube, targets, timeout)


def wait_ready(kube: Kube, targets: list[tuple[Kind, str]], timeout: float) -> int:
    """Poll until every target is Ready, printing each change of phase or reason; on
    timeout, one error line with what is still missing (the operator's message)."""
    deadline = time.monotonic() + timeout
    last: dict[tuple[str, str], str] = {}
    pending = list(targets)
    spinner = console(stderr=True)
    with spinner.status("waiting", spinner="dots") if spinner.is_terminal else _Null() as live:
        while pending:
            still = []
            for kind, name in pending:
                obj = kube.find(kind.resource, name) or {}
                phase = status(obj).get("phase") or "Pending"
                why = explain(obj) if phase != "Ready" else ""
                line = f"{kind.cli}/{name}: {phase}{' - ' + why if why else ''}"
                if last.get((kind.cli, name)) != line:
                    # On a terminal the spinner owns the last line: print above it.
                    if live is not None:
                        spinner.print(line, markup=False, highlight=False)
                    else:
                        info(line)
                    last[(kind.cli, name)] = line
                if phase != "Ready":
                    still.append((kind, name, phase, why))
                if live is not None:
                    live.update(Text(line))
            if not still:
                return 0
            if time.monotonic() > deadline:
                kind, name, phase, why = still[0]
                raise CliError(
                    f"{kind.cli} {name} not Ready after {timeout:g}s: {phase}"
                    f"{' - ' + why if why else ''} (see: kaos {kind.cli} describe {name})"
                )
            pending = [(k, n) for k, n, _, _ in still]
            time.sleep(POLL_SECONDS)
    return 0


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def deploy_options(fn: Callable[..., int]) -> Callable[..., int]:
    """``-f FILE``, ``--wait``, ``--timeout`` and ``--dry-run`` for a deploy command."""
    for option in (
        click.option(
            "--dry-run", is_flag=True, help="print the manifest (-o yaml|json) instead of applying"
        ),
        click.option(
            "--timeout", type=float, default=120.0, show_default=True, help="seconds --wait waits"
        ),
        click.option(
            "--wait", is_flag=True, help="show progress until Ready, or fail with the reason"
        ),
        click.option(
            "-f",
            "--file",
            "file_",
            metavar="FILE",
            help="apply this manifest (- for stdin) instead of the flags",
        ),
    ):
        fn = option(fn)
    return fn


def deploy(
    kind: Kind,
    cx: Cx,
    name: str | None,
    file_: str | None,
    build: Callable[[], dict[str, Any]],
    *,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    if file_:
        docs = read_documents(file_)
    else:
        if not name:
            raise CliError(f"kaos {kind.cli} deploy needs NAME or -f FILE", EXIT_ENVIRONMENT)
        docs = [document(kind, name, build())]
    if dry_run:
        if cx.fmt == "json":
            print_json(docs if len(docs) > 1 else docs[0])
        else:
            print(yaml.safe_dump_all(docs, sort_keys=False), end="")
        return 0
    return apply_and_wait(cx, docs, wait, timeout)
