"""The four KAOS kinds as command groups: list, get, describe, logs, delete, deploy.

Each kind is described once (``Kind``: its CRD, its table columns, the container its
logs come from); ``add_resource_commands`` turns that into the shared commands, and each
kind's module adds its ``deploy`` options. ``describe`` shows what a user needs to see
why an object is not Ready without kubectl: the spec, the conditions with their reasons
and messages, the object's events, and the objects the operator made with their state.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml
from kaos_core.crds import API_VERSION, MCPServer, MemoryStore, ModelAPI
from kaos_core.crds import Agent as AgentCRD
from kaos_core.crds.common import KindInfo
from rich.text import Text

from kaos_cli.common import Cx, all_namespaces_option, common_options, complete_resource
from kaos_cli.kube import Kube, condition, explain
from kaos_cli.output import console, emit, info, print_json, print_yaml, table
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError, first_line

Row = Callable[[dict[str, Any]], object]
OWNED = "deployments,services,configmaps,persistentvolumeclaims,pods"
POLL_SECONDS = 1.0


def age(obj: dict[str, Any], now: datetime | None = None) -> str:
    """kubectl-style age of an object (``45s``, ``12m``, ``3h``, ``2d``)."""
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    return since(created, now)


def since(stamp: str | None, now: datetime | None = None) -> str:
    if not stamp:
        return "-"
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "-"
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def ready_of(obj: dict[str, Any]) -> str:
    ready = condition(obj, "Ready")
    return str(ready.get("status", "Unknown")) if ready else "Unknown"


@dataclass(frozen=True)
class Kind:
    """One KAOS kind as the CLI presents it."""

    cli: str
    info: KindInfo
    containers: tuple[str, ...]
    columns: tuple[tuple[str, Row], ...]

    @property
    def resource(self) -> str:
        return self.info.crd_name

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def component(self) -> str:
        return self.info.kind.lower()

    def selector(self, name: str) -> str:
        return f"app.kubernetes.io/name={self.component},app.kubernetes.io/instance={name}"

    @property
    def a(self) -> str:
        """The kind with its article: an Agent, a ModelAPI, an MCPServer."""
        return f"{'an' if self.kind in ('Agent', 'MCPServer') else 'a'} {self.kind}"

    def missing(self) -> str:
        return f"list them with: kaos {self.cli} list"


def _memory(obj: dict[str, Any]) -> str:
    memory = (spec(obj).get("config") or {}).get("memory") or {}
    text = str(memory.get("type", "local"))
    return f"{text}:{memory['memoryStore']}" if memory.get("memoryStore") else text


def _models(obj: dict[str, Any]) -> str:
    s = spec(obj)
    if s.get("mode") == "Hosted":
        return str((s.get("serverConfig") or {}).get("model") or "-")
    return ",".join((s.get("proxyConfig") or {}).get("models") or status(obj).get("models") or [])


def _replicas(obj: dict[str, Any]) -> str:
    st = status(obj)
    if st.get("replicas") is None:
        return "-"
    return f"{st.get('readyReplicas') or 0}/{st.get('replicas')}"


PHASE: tuple[str, Row] = ("phase", lambda o: status(o).get("phase"))
AGE: tuple[str, Row] = ("age", age)

AGENT = Kind(
    "agent",
    AgentCRD.info,
    ("agent",),
    (
        ("modelapi", lambda o: spec(o).get("modelAPI")),
        ("model", lambda o: spec(o).get("model")),
        ("mcp", lambda o: ",".join(spec(o).get("mcpServers") or [])),
        ("memory", _memory),
        ("delegates", lambda o: ",".join((spec(o).get("agentNetwork") or {}).get("access") or [])),
        PHASE,
        ("ready", ready_of),
        AGE,
    ),
)
MODELAPI = Kind(
    "modelapi",
    ModelAPI.info,
    ("litellm", "ollama"),
    (
        ("mode", lambda o: spec(o).get("mode")),
        ("models", _models),
        PHASE,
        ("endpoint", lambda o: status(o).get("endpoint")),
        AGE,
    ),
)
MCP = Kind(
    "mcp",
    MCPServer.info,
    ("mcp",),
    (
        ("runtime", lambda o: spec(o).get("runtime")),
        PHASE,
        ("endpoint", lambda o: status(o).get("endpoint")),
        AGE,
    ),
)
MEMORYSTORE = Kind(
    "memorystore",
    MemoryStore.info,
    ("memory",),
    (
        ("storage", lambda o: (spec(o).get("storage") or {}).get("type", "local")),
        ("ready", _replicas),
        PHASE,
        ("endpoint", lambda o: status(o).get("endpoint")),
        AGE,
    ),
)
KINDS = (AGENT, MODELAPI, MCP, MEMORYSTORE)
BY_KIND = {k.kind: k for k in KINDS}


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
    where = "any namespace" if all_namespaces else cx.kube.where()
    emit(
        cx.fmt,
        items,
        headers_of(kind, all_namespaces),
        rows_of(kind, items, all_namespaces),
        empty=f"no {kind.info.plural} found in {where}",
    )
    return 0


def get_object(kind: Kind, cx: Cx, name: str) -> int:
    obj = cx.kube.get(kind.resource, name, missing=kind.missing())
    emit(cx.fmt, obj, headers_of(kind, False), rows_of(kind, [obj], False))
    return 0


# -- describe -------------------------------------------------------------------------


def owned_objects(kube: Kube, kind: Kind, name: str) -> list[dict[str, Any]]:
    """What the operator made for the object, with a one-word readiness each."""
    found = []
    for obj in kube.items(OWNED, selector=kind.selector(name)):
        found.append(
            {
                "kind": obj.get("kind"),
                "name": obj["metadata"]["name"],
                "ready": _object_state(obj),
                "age": age(obj),
            }
        )
    return found


def _object_state(obj: dict[str, Any]) -> str:
    st = obj.get("status") or {}
    kind = obj.get("kind")
    if kind == "Deployment":
        want = (obj.get("spec") or {}).get("replicas", 1)
        return f"{st.get('readyReplicas') or 0}/{want} ready"
    if kind == "Pod":
        statuses = st.get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        return f"{st.get('phase', 'Unknown')} {ready}/{len(statuses) or '?'} ready"
    if kind == "PersistentVolumeClaim":
        return str(st.get("phase", "Pending"))
    if kind == "Service":
        ports = ",".join(str(p.get("port")) for p in (obj.get("spec") or {}).get("ports") or [])
        return f"port {ports}" if ports else "exists"
    return "exists"


def events_of(kube: Kube, kind: str, name: str) -> list[dict[str, Any]]:
    items = kube.items(
        "events", field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    )

    def when(e: dict[str, Any]) -> str:
        return str(e.get("lastTimestamp") or e.get("eventTime") or "")

    return [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message"),
            "count": e.get("count") or 1,
            "last": when(e)[:19].replace("T", " "),
        }
        for e in sorted(items, key=when)
    ]


def description(kube: Kube, kind: Kind, name: str) -> dict[str, Any]:
    obj = kube.get(kind.resource, name, missing=kind.missing())
    st = status(obj)
    return {
        "kind": kind.kind,
        "name": name,
        "namespace": obj["metadata"].get("namespace"),
        "phase": st.get("phase"),
        "message": st.get("message") or explain(obj),
        "endpoint": st.get("endpoint"),
        "spec": spec(obj),
        "conditions": st.get("conditions") or [],
        "events": events_of(kube, kind.kind, name),
        "owned": owned_objects(kube, kind, name),
    }


def describe_object(kind: Kind, cx: Cx, name: str) -> int:
    doc = description(cx.kube, kind, name)
    if cx.fmt == "json":
        print_json(doc)
        return 0
    if cx.fmt == "yaml":
        print_yaml(doc)
        return 0
    out = console()
    out.print(f"[bold]{kind.kind}[/bold] {doc['namespace']}/{name}")
    out.print(f"Phase:     {doc['phase'] or '-'}")
    if doc["message"]:
        out.print(f"Message:   {doc['message']}", markup=False)
    if doc["endpoint"]:
        out.print(f"Endpoint:  {doc['endpoint']}", markup=False)
    out.print("\n[bold]Spec[/bold]")
    for line in yaml.safe_dump(doc["spec"], sort_keys=False).splitlines():
        out.print(f"  {line}", markup=False)
    out.print("\n[bold]Conditions[/bold]")
    table(
        ["type", "status", "reason", "message", "since"],
        [
            [
                c.get("type"),
                c.get("status"),
                c.get("reason"),
                c.get("message"),
                since(c.get("lastTransitionTime")),
            ]
            for c in doc["conditions"]
        ],
    )
    out.print("\n[bold]Owned objects[/bold]")
    if doc["owned"]:
        table(["kind", "name", "ready", "age"], [list(o.values()) for o in doc["owned"]])
    else:
        out.print("  (none yet)")
    out.print("\n[bold]Events[/bold]")
    if doc["events"]:
        table(
            ["last", "type", "reason", "count", "message"],
            [[e["last"], e["type"], e["reason"], e["count"], e["message"]] for e in doc["events"]],
        )
    else:
        out.print("  (none)")
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
        raise CliError(
            f"{kind.cli} {', '.join(missing)} not found in {cx.kube.where()}; {kind.missing()}"
        )
    return 0


# -- deploy / wait --------------------------------------------------------------------


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


# -- the shared commands --------------------------------------------------------------


def add_resource_commands(group: click.Group, kind: Kind) -> None:
    complete = complete_resource(kind.resource)
    plural = kind.info.plural

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
