"""``kaos system install|uninstall|status``: the KAOS chart through helm, and its health.

Install is ``helm upgrade --install`` so it also upgrades; the development PostgreSQL
with pgvector is opt-in (``--pgvector-memory-enabled``). Helm and a reachable cluster
are checked first so their absence is one clear line (exit 2), not helm's stack of
messages. Uninstall leaves the CRDs, as helm does: deleting them deletes every KAOS
resource in the cluster, which only an explicit ``kubectl delete crd`` should do.
Status reads what a platform team checks first: the operator's Lease (is someone leading,
and renewing in time?) and Deployment, the installed CRD versions against the ones this
CLI was built with, resources by phase and the agents that are degraded; it exits 1 when
anything there is unhealthy, so scripts can gate on it.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from kaos_core.crds import VERSION
from kaos_core.crds.generate import crd_document

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.kinds import CRD_NAMES, KINDS
from kaos_cli.kubectl.sync import Kube
from kaos_cli.objects import condition
from kaos_cli.output import console, emit, print_json, print_yaml, table
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError, find_tool, first_line, run

DEFAULT_RELEASE = "kaos"
DEFAULT_NAMESPACE = "kaos-system"
_UNREACHABLE = ("kubernetes cluster unreachable", "connection refused", "no such host")


def find_chart(explicit: str | None) -> str:
    """The chart to install: ``--chart``, ``$KAOS_CHART`` or this checkout's charts/kaos."""
    candidate = explicit or os.environ.get("KAOS_CHART")
    if candidate:
        path = Path(candidate)
        if path.is_dir() and not (path / "Chart.yaml").is_file():
            raise CliError(f"{candidate} is not a chart (no Chart.yaml)", EXIT_ENVIRONMENT)
        if not path.exists():
            raise CliError(f"chart {candidate} does not exist", EXIT_ENVIRONMENT)
        return str(path)
    # cli/kaos_cli/commands/system.py -> the repository root holds charts/kaos.
    checkout = Path(__file__).resolve().parents[3] / "charts" / "kaos"
    if (checkout / "Chart.yaml").is_file():
        return str(checkout)
    raise CliError(
        "the KAOS chart was not found: pass --chart PATH or set KAOS_CHART", EXIT_ENVIRONMENT
    )


def _check_cluster(context: str | None) -> None:
    """Fail early when no cluster answers. Without kubectl, helm's own error decides."""
    try:
        find_tool("kubectl")
    except CliError:
        return
    Kube(context=context).require_cluster()


def _helm_failed(what: str, stderr: str) -> CliError:
    lowered = stderr.lower()
    if any(marker in lowered for marker in _UNREACHABLE):
        return CliError(f"no Kubernetes cluster reachable: {first_line(stderr)}", EXIT_ENVIRONMENT)
    detail = stderr.strip() or "(no output)"
    return CliError(f"{what} failed:\n{detail}")


def _seconds(duration: str) -> float:
    """Seconds of a helm duration like 90s, 5m or 1h (for our own subprocess timeout)."""
    units = {"s": 1, "m": 60, "h": 3600}
    total, number = 0.0, ""
    for char in duration:
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            raise CliError(f"--timeout {duration}: expected a duration like 90s or 5m", 2)
    if number:
        total += float(number)
    return total or 300.0


@click.group(
    "system",
    context_settings=CONTEXT_SETTINGS,
    help="Install, upgrade, uninstall KAOS in the cluster and check its health.",
)
def system_group() -> None:
    pass


def _release_options(fn: Any) -> Any:
    fn = click.option(
        "--timeout", default="5m", show_default=True, help="helm timeout, e.g. 90s or 5m"
    )(fn)
    fn = click.option("--wait", is_flag=True, help="wait until the release's objects are ready")(fn)
    fn = click.option(
        "--release", default=DEFAULT_RELEASE, show_default=True, help="helm release name"
    )(fn)
    return common_options(namespace_help=f"namespace of the release (default {DEFAULT_NAMESPACE})")(
        fn
    )


def _helm_argv(helm: str, cx: Cx) -> list[str]:
    argv = [helm]
    if cx.kube.context:
        argv += ["--kube-context", cx.kube.context]
    return argv


@system_group.command(
    "install",
    help="Install or upgrade the KAOS chart (helm upgrade --install). Each run states the whole "
    "configuration: values not given return to the chart's defaults, so repeat "
    "--pgvector-memory-enabled and --set on upgrades.",
)
@click.option(
    "--pgvector-memory-enabled",
    is_flag=True,
    help="also deploy the development PostgreSQL with pgvector and its connection "
    "Secret (devPgvector.enabled=true); never for production",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="a chart value, as helm --set (repeatable)",
)
@click.option(
    "-f",
    "--values",
    "values_files",
    multiple=True,
    metavar="FILE",
    help="a values file, as helm -f (repeatable)",
)
@click.option(
    "--chart",
    default=None,
    help="chart directory or archive (default: $KAOS_CHART, else charts/kaos of this "
    "source checkout)",
)
@_release_options
def install_cmd(
    cx: Cx,
    pgvector_memory_enabled: bool,
    sets: tuple[str, ...],
    values_files: tuple[str, ...],
    chart: str | None,
    release: str,
    wait: bool,
    timeout: str,
) -> int:
    # Usage errors first: a typo is reported without contacting any cluster.
    for assignment in sets:
        if "=" not in assignment:
            raise CliError(f"--set {assignment}: expected KEY=VALUE", EXIT_ENVIRONMENT)
    seconds = _seconds(timeout)
    namespace = cx.kube.namespace or DEFAULT_NAMESPACE
    helm = find_tool("helm")
    chart_path = find_chart(chart)
    _check_cluster(cx.kube.context)
    argv = [
        *_helm_argv(helm, cx),
        "upgrade",
        "--install",
        release,
        chart_path,
        "--namespace",
        namespace,
        "--create-namespace",
    ]
    for values_file in values_files:
        argv += ["--values", values_file]
    if pgvector_memory_enabled:
        argv += ["--set", "devPgvector.enabled=true"]
    for assignment in sets:
        argv += ["--set", assignment]
    if wait:
        argv.append("--wait")
    argv += ["--timeout", timeout]
    proc = run(argv, timeout=seconds + 60)
    if proc.returncode != 0:
        raise _helm_failed("helm upgrade --install", proc.stderr)
    if cx.fmt == "table":
        sys.stdout.write(proc.stdout)
    else:
        emit(cx.fmt, {"release": release, "namespace": namespace, "chart": chart_path})
    return 0


@system_group.command("uninstall", help="Uninstall KAOS (the CRDs stay, and so do your resources).")
@_release_options
def uninstall_cmd(cx: Cx, release: str, wait: bool, timeout: str) -> int:
    seconds = _seconds(timeout)
    namespace = cx.kube.namespace or DEFAULT_NAMESPACE
    helm = find_tool("helm")
    _check_cluster(cx.kube.context)
    argv = [*_helm_argv(helm, cx), "uninstall", release, "--namespace", namespace]
    if wait:
        argv.append("--wait")
    argv += ["--timeout", timeout]
    proc = run(argv, timeout=seconds + 60)
    if proc.returncode != 0:
        if "not found" in proc.stderr.lower():
            raise CliError(f"release {release} not found in namespace {namespace}")
        raise _helm_failed("helm uninstall", proc.stderr)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(
        "The KAOS CRDs stay installed; to delete them and every KAOS resource:\n"
        f"  kubectl delete crd {' '.join(CRD_NAMES)}\n"
    )
    return 0


def _parse_time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def lease_health(lease: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """Who leads and whether the Lease is renewed within its duration."""
    if lease is None:
        return {"leader": None, "fresh": False, "detail": "no Lease: no operator has run here"}
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or None
    renewed = _parse_time(spec.get("renewTime"))
    duration = float(spec.get("leaseDurationSeconds") or 15)
    if not holder:
        return {"leader": None, "fresh": False, "detail": "the Lease has no holder"}
    if renewed is None:
        return {"leader": holder, "fresh": False, "detail": "the Lease was never renewed"}
    age = (now - renewed).total_seconds()
    fresh = age <= duration
    detail = f"renewed {age:.0f}s ago, lease {duration:g}s"
    return {"leader": holder, "fresh": fresh, "detail": detail if fresh else detail + ": stale"}


def crd_state(kube: Kube) -> list[dict[str, Any]]:
    rows = []
    for kind in KINDS:
        live = kube.find("customresourcedefinitions", kind.resource)
        versions = [
            v["name"]
            for v in ((live or {}).get("spec") or {}).get("versions") or []
            if v.get("served")
        ]
        storage = next(
            (
                v["name"]
                for v in ((live or {}).get("spec") or {}).get("versions") or []
                if v.get("storage")
            ),
            None,
        )
        schema = None
        if live is not None:
            want = crd_document(kind.info)["spec"]["versions"][0]["schema"]
            have = next(
                (v.get("schema") for v in live["spec"]["versions"] if v["name"] == VERSION), None
            )
            schema = "current" if have == want else "differs"
        rows.append(
            {
                "crd": kind.resource,
                "installed": versions,
                "storage": storage,
                "cli": VERSION,
                "schema": schema,
                "ok": live is not None and VERSION in versions,
            }
        )
    return rows


def _degraded(agent: dict[str, Any]) -> str | None:
    st = agent.get("status") or {}
    memory = condition(agent, "MemoryDegraded")
    if memory and memory.get("status") == "True":
        return f"MemoryDegraded: {memory.get('reason')}: {memory.get('message') or ''}".rstrip(": ")
    if st.get("phase") == "Failed":
        return f"Failed: {st.get('message') or ''}".rstrip(": ")
    return None


def status_document(
    kube: Kube, lease_name: str, watch_namespace: str | None, now: datetime
) -> dict[str, Any]:
    namespace = kube.namespace or DEFAULT_NAMESPACE
    scoped = Kube(context=kube.context, namespace=namespace)
    lease = lease_health(scoped.find("leases.coordination.k8s.io", lease_name), now)
    deployments = scoped.items("deployments", selector="app.kubernetes.io/component=operator")
    deployment = None
    if deployments:
        dep = deployments[0]
        want = (dep.get("spec") or {}).get("replicas", 1)
        ready = (dep.get("status") or {}).get("readyReplicas") or 0
        deployment = {"name": dep["metadata"]["name"], "ready": ready, "replicas": want}
    crds = crd_state(kube)
    resources: dict[str, dict[str, int]] = {}
    degraded = []
    failed = []
    where = Kube(context=kube.context, namespace=watch_namespace)
    for kind in KINDS:
        if not next(c for c in crds if c["crd"] == kind.resource)["ok"]:
            continue
        counts: dict[str, int] = {}
        for obj in where.items(kind.resource, all_namespaces=watch_namespace is None):
            phase = (obj.get("status") or {}).get("phase") or "Pending"
            counts[phase] = counts.get(phase, 0) + 1
            ref = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            if phase == "Failed":
                failed.append(f"{kind.cli} {ref}")
            why = _degraded(obj) if kind.kind == "Agent" else None
            if why:
                degraded.append({"agent": ref, "why": why})
        resources[kind.cli] = counts
    problems = []
    if not lease["fresh"]:
        problems.append(f"operator not leading: {lease['detail']}")
    if deployment is not None and deployment["ready"] < 1:
        problems.append(f"operator Deployment {deployment['name']} has no ready replica")
    problems += [f"CRD {c['crd']} lacks version {VERSION}" for c in crds if not c["ok"]]
    problems += [f"{ref} is Failed" for ref in failed]
    problems += [f"agent {d['agent']} degraded" for d in degraded]
    return {
        "healthy": not problems,
        "problems": problems,
        "operator": {
            "namespace": namespace,
            "lease": lease_name,
            **lease,
            "deployment": deployment,
        },
        "crds": crds,
        "resources": resources,
        "degradedAgents": degraded,
    }


@system_group.command(
    "status",
    help="Operator health and leadership (its Lease and Deployment), the CRD versions installed "
    "against this CLI's, resources by phase and degraded agents. Exits 1 when unhealthy.",
)
@click.option(
    "--lease",
    "lease_name",
    default="kaos-operator",
    show_default=True,
    help="name of the operator's leader Lease",
)
@click.option(
    "--watch-namespace",
    default=None,
    metavar="NS",
    help="count resources only in this namespace (default: all)",
)
@common_options(namespace_help=f"the operator's namespace (default {DEFAULT_NAMESPACE})")
def status_cmd(cx: Cx, lease_name: str, watch_namespace: str | None) -> int:
    doc = status_document(cx.kube, lease_name, watch_namespace, datetime.now(UTC))
    if cx.fmt == "json":
        print_json(doc)
    elif cx.fmt == "yaml":
        print_yaml(doc)
    else:
        out = console()
        op = doc["operator"]
        verdict = "[green]healthy[/green]" if doc["healthy"] else "[red]unhealthy[/red]"
        out.print(f"KAOS: {verdict}")
        dep = op["deployment"]
        dep_text = f"{dep['name']} {dep['ready']}/{dep['replicas']} ready" if dep else "none"
        out.print(f"Operator: leader {op['leader'] or '-'} ({op['detail']})", markup=False)
        out.print(f"  Lease {op['namespace']}/{op['lease']}; Deployment: {dep_text}", markup=False)
        out.print("\n[bold]CRDs[/bold]")
        table(
            ["crd", "installed", "cli", "schema"],
            [
                [c["crd"], ",".join(c["installed"]) or "missing", c["cli"], c["schema"]]
                for c in doc["crds"]
            ],
        )
        out.print("\n[bold]Resources by phase[/bold]")
        table(
            ["kind", "phases"],
            [
                [k, ", ".join(f"{p} {n}" for p, n in sorted(v.items())) or "none"]
                for k, v in doc["resources"].items()
            ],
        )
        if doc["degradedAgents"]:
            out.print("\n[bold]Degraded agents[/bold]")
            table(["agent", "why"], [[d["agent"], d["why"]] for d in doc["degradedAgents"]])
        for problem in doc["problems"]:
            out.print(f"[red]problem:[/red] {problem}")
    return 0 if doc["healthy"] else 1
