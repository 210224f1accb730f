"""The commands every KAOS kind has: list, get, describe, logs, delete.

``add_resource_commands`` turns a row of the kinds table (``kaos_cli.kinds``) into the
shared commands of its group; each kind's module adds its ``deploy`` options.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from kaos_cli.commands.common import Cx, all_namespaces_option, common_options, complete_resource
from kaos_cli.commands.describe import describe_object
from kaos_cli.kinds import Kind
from kaos_cli.kubectl.sync import Kube
from kaos_cli.objects import explain, status
from kaos_cli.output import emit, info
from kaos_cli.tools import CliError, first_line

# -- list / get -----------------------------------------------------------------------


def rows_of(kind: Kind, items: Iterable[dict[str, Any]], with_ns: bool) -> list[list[object]]:
    rows: list[list[object]] = []
    ordered = sorted(
        items, key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"])
    )
    for item in ordered:
        row: list[object] = [item["metadata"]["name"], *(get(item) for _, get in kind.columns)]
        if with_ns:
            row.insert(0, item["metadata"].get("namespace"))
        rows.append(row)
    return rows


def headers_of(kind: Kind, with_ns: bool) -> list[str]:
    return [*(["namespace"] if with_ns else []), "name", *(h for h, _ in kind.columns)]


def list_objects(kind: Kind, cx: Cx, all_namespaces: bool) -> int:
    items = cx.kube.items(kind.resource, all_namespaces=all_namespaces)
    if not items and not all_namespaces:
        # kubectl lists nothing, without complaint, in a namespace that does not exist.
        cx.kube.require_namespace()
    where = "any namespace" if all_namespaces else cx.kube.where()
    emit(
        cx.fmt,
        items,
        headers_of(kind, all_namespaces),
        rows_of(kind, items, all_namespaces),
        empty=f"no {kind.plural} found in {where}",
    )
    return 0


def get_object(kind: Kind, cx: Cx, name: str) -> int:
    obj = cx.kube.get(kind.resource, name, missing=kind.missing())
    emit(cx.fmt, obj, headers_of(kind, False), rows_of(kind, [obj], False))
    return 0


# -- logs / delete --------------------------------------------------------------------


def pick_pod(kube: Kube, kind: Kind, name: str) -> dict[str, Any]:
    """The pod to read logs from: a ready one first, newest first."""
    pods = kube.items("pods", selector=kind.selector(name))
    if not pods:
        obj = kube.get(kind.resource, name, missing=kind.missing())
        why = explain(obj)
        phase = status(obj).get("phase") or "no phase yet"
        raise CliError(
            f"{kind.cli} {name} has no pods ({phase}{': ' + why if why else ''}); "
            f"see: kaos {kind.cli} describe {name}"
        )

    def rank(pod: dict[str, Any]) -> tuple[bool, str]:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        ready = bool(statuses) and all(c.get("ready") for c in statuses)
        return ready, str(pod["metadata"].get("creationTimestamp", ""))

    return max(pods, key=rank)


def pick_container(kind: Kind, pod: dict[str, Any], wanted: str | None) -> str:
    names = [str(c["name"]) for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        if wanted not in names:
            raise CliError(f"pod {pod['metadata']['name']} has no container {wanted}: {names}")
        return wanted
    for candidate in kind.containers:
        if candidate in names:
            return candidate
    if not names:
        raise CliError(f"pod {pod['metadata']['name']} has no containers")
    return names[0]


def logs(
    kind: Kind, cx: Cx, name: str, follow: bool, tail: int | None, container: str | None
) -> int:
    pod = pick_pod(cx.kube, kind, name)
    chosen = pick_container(kind, pod, container)
    args = ["logs", pod["metadata"]["name"], "-c", chosen]
    if follow:
        args.append("-f")
    if tail is not None:
        args += ["--tail", str(tail)]
    info(f"# {pod['metadata']['name']} container {chosen}")
    proc = cx.kube.popen(*args)
    try:
        _, err = proc.communicate()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 0
    if proc.returncode != 0:
        raise CliError(f"kubectl logs {pod['metadata']['name']}: {first_line(err)}")
    return 0


def delete(kind: Kind, cx: Cx, names: tuple[str, ...], wait: bool) -> int:
    missing, deleted = [], []
    for name in names:
        if cx.kube.delete(kind.resource, name, wait=wait):
            deleted.append(f"{kind.cli}/{name}")
            if cx.fmt == "table":
                print(f"{kind.cli}/{name} deleted")
        else:
            missing.append(name)
    if cx.fmt != "table":
        emit(cx.fmt, {"deleted": deleted})
    if missing:
        cx.kube.require_namespace()
        raise CliError(
            f"{kind.cli} {', '.join(missing)} not found in {cx.kube.where()}; {kind.missing()}"
        )
    return 0


# -- the shared commands --------------------------------------------------------------


def add_resource_commands(group: click.Group, kind: Kind) -> None:
    complete = complete_resource(kind.resource)
    plural = kind.plural

    @group.command("list", help=f"List {plural} with their phase (table, -o json|yaml).")
    @all_namespaces_option
    @common_options()
    def list_cmd(cx: Cx, all_namespaces: bool) -> int:
        return list_objects(kind, cx, all_namespaces)

    @group.command("get", help=f"One {kind.kind}: its table row, or the object with -o json|yaml.")
    @click.argument("name", shell_complete=complete)
    @common_options()
    def get_cmd(cx: Cx, name: str) -> int:
        return get_object(kind, cx, name)

    @group.command(
        "describe",
        help=f"Why {kind.a} is in its phase: spec, conditions (reason, message), "
        "events and the objects the operator made, with their readiness.",
    )
    @click.argument("name", shell_complete=complete)
    @common_options()
    def describe_cmd(cx: Cx, name: str) -> int:
        return describe_object(kind, cx, name)

    @group.command(
        "logs",
        help=f"Print the logs of {kind.a}'s pod (a ready one, newest first) and its "
        f"main container ({' or '.join(kind.containers)}).",
    )
    @click.argument("name", shell_complete=complete)
    @click.option("-f", "--follow", is_flag=True, help="keep printing new lines")
    @click.option("--tail", type=int, default=None, help="only the last N lines")
    @click.option("-c", "--container", default=None, help="another container of the pod")
    @common_options()
    def logs_cmd(cx: Cx, name: str, follow: bool, tail: int | None, container: str | None) -> int:
        return logs(kind, cx, name, follow, tail, container)

    @group.command("delete", help=f"Delete {plural} (the operator removes what it made).")
    @click.argument("names", nargs=-1, required=True, shell_complete=complete)
    @click.option("--wait", is_flag=True, help="return once the objects are gone")
    @common_options()
    def delete_cmd(cx: Cx, names: tuple[str, ...], wait: bool) -> int:
        return delete(kind, cx, names, wait)
