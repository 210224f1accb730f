"""Deploying KAOS objects: from a kind's flags or a manifest, then waiting until Ready.

Each kind's ``deploy`` command builds its spec from flags (``build``) or reads a manifest
(``-f FILE``); each object is applied server-side on its own, so a refused one is
reported with every reason the API server gave while the others are applied, and
``--wait`` follows them (``commands.wait``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml
from kaos_core.crds import API_VERSION

from kaos_cli.commands.common import Cx
from kaos_cli.commands.wait import wait_ready
from kaos_cli.kinds import BY_KIND, Kind
from kaos_cli.kubectl.sync import Kube, Refused
from kaos_cli.output import emit, print_json
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


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


def apply_each(
    kube: Kube, docs: list[dict[str, Any]]
) -> tuple[list[str], list[Refused], CliError | None]:
    """Apply every document on its own, so that one the API server refuses is reported
    with all of its reasons and the others are applied all the same (as kubectl does).
    Any other failure (no cluster, no permission) stops at that document."""
    applied: list[str] = []
    refused: list[Refused] = []
    for doc in docs:
        try:
            applied += kube.apply(doc)
        except Refused as exc:
            refused.append(exc)
        except CliError as exc:
            return applied, refused, exc
    return applied, refused, None


def refusal(refused: list[Refused], total: int) -> CliError:
    """One error for the refused objects: each one's reasons under its name."""
    if len(refused) == 1 and total == 1:
        return refused[0]
    lines = [
        f"all {total} objects were refused:"
        if len(refused) == total
        else f"{len(refused)} of {total} objects were refused (the others were applied):"
    ]
    for exc in refused:
        lines += [f"  {line}" for line in exc.message.splitlines()]
    return CliError("\n".join(lines))


def apply_and_wait(cx: Cx, docs: list[dict[str, Any]], wait: bool, timeout: float) -> int:
    applied, refused, error = apply_each(cx.kube, docs)
    if cx.fmt == "table":
        for line in applied:
            print(f"{line} applied")
    elif applied or error is None:
        emit(cx.fmt, {"applied": applied})
    if error is not None:
        raise error
    if refused:
        raise refusal(refused, len(docs))
    if not wait:
        return 0
    targets = [
        (BY_KIND[d["kind"]], d["metadata"]["name"])
        for d in docs
        if d.get("kind") in BY_KIND and str(d.get("apiVersion", "")).startswith("kaos.tools/")
    ]
    return wait_ready(cx.kube, targets, timeout)


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
