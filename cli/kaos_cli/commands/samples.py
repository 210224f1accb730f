"""``kaos samples list|deploy|delete``: the project's sample manifests.

The repository's ``samples/`` stays the one source (``make run`` and the tests read it);
a built wheel carries a copy as data files under ``<prefix>/share/kaos/samples`` (see
``[tool.setuptools.data-files]`` in pyproject.toml), so no file is duplicated in the tree
and no symlink is needed. A sample's name is its file name without ``.yaml``; its
description is the comment at the top of the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.deploy import apply_and_wait
from kaos_cli.kinds import BY_KIND
from kaos_cli.output import emit
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


def samples_dir(environ: dict[str, str] | None = None) -> Path:
    """``$KAOS_SAMPLES``, else this checkout's ``samples/``, else the installed copy."""
    env = os.environ if environ is None else environ
    candidates = [Path(env["KAOS_SAMPLES"])] if env.get("KAOS_SAMPLES") else []
    candidates += [
        Path(__file__).resolve().parents[3] / "samples",
        Path(sys.prefix) / "share" / "kaos" / "samples",
    ]
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.yaml")):
            return candidate
    raise CliError(
        "the KAOS samples were not found: set KAOS_SAMPLES to a samples directory",
        EXIT_ENVIRONMENT,
    )


def description(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    return text.split(". ")[0].rstrip(".") if text else ""


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def catalogue() -> list[dict[str, Any]]:
    return [
        {
            "name": path.stem,
            "objects": [f"{d['kind']}/{d['metadata']['name']}" for d in documents(path)],
            "description": description(path),
        }
        for path in sorted(samples_dir().glob("*.yaml"))
    ]


def sample(name: str) -> list[dict[str, Any]]:
    path = samples_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted(samples_dir().glob("*.yaml")))
        raise CliError(f"no sample {name}: choose one of {known} (kaos samples list)")
    return documents(path)


def complete_sample(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    try:
        return [p.stem for p in sorted(samples_dir().glob(f"{incomplete}*.yaml"))]
    except CliError:
        return []


@click.group(
    "samples",
    context_settings=CONTEXT_SETTINGS,
    help="The sample manifests shipped with KAOS: list, deploy or delete them.",
)
def samples_group() -> None:
    pass


@samples_group.command("list", help="The samples, with the objects each creates.")
@common_options()
def list_cmd(cx: Cx) -> int:
    items = catalogue()
    rows = [[i["name"], ", ".join(i["objects"]), i["description"]] for i in items]
    emit(
        cx.fmt,
        items,
        ["name", "objects", "description"],
        rows,
        empty="no samples",
        wrap=["description"],
    )
    return 0


@samples_group.command(
    "deploy", help="Apply a sample into the namespace; --wait until its KAOS objects are Ready."
)
@click.argument("name", shell_complete=complete_sample)
@click.option("--wait", is_flag=True, help="show progress until Ready, or fail with the reason")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="seconds to wait")
@common_options()
def deploy_cmd(cx: Cx, name: str, wait: bool, timeout: float) -> int:
    return apply_and_wait(cx, sample(name), wait, timeout)


@samples_group.command("delete", help="Delete the objects a sample created.")
@click.argument("name", shell_complete=complete_sample)
@common_options()
def delete_cmd(cx: Cx, name: str) -> int:
    deleted = []
    for doc in reversed(sample(name)):
        kind = BY_KIND.get(doc["kind"])
        resource = kind.resource if kind else doc["kind"].lower()
        if cx.kube.delete(resource, doc["metadata"]["name"], wait=False):
            deleted.append(f"{doc['kind']}/{doc['metadata']['name']}")
    if cx.fmt == "table":
        for ref in deleted:
            print(f"{ref} deleted")
    else:
        emit(cx.fmt, {"deleted": deleted})
    return 0
