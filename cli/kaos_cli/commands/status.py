"""``kaos system status``: is KAOS well here, and if not, what is wrong.

It reads what a platform team checks first: the operator's Lease (is someone leading, and
renewing in time?) and Deployment, the installed CRD versions against the ones this CLI
was built with, resources by phase and the agents that are degraded or failed; it exits 1
when anything there is unhealthy, so scripts can gate on it. The operator is looked for in
``-n`` (default ``kaos-system``); when neither its Lease nor its Deployment is there, in
every namespace the user may list, and the output says where it was found. Messages are
printed whole (wrapped to the terminal), coloured by ``kaos_cli.health``'s tones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
from kaos_core.crds import VERSION, reasons
from kaos_core.crds.generate import crd_document
from rich.text import Text

from kaos_cli.commands.common import Cx, common_options
from kaos_cli.health import health
from kaos_cli.kinds import KINDS
from kaos_cli.kubectl.sync import Kube
from kaos_cli.objects import condition
from kaos_cli.output import TONE_STYLE, console, print_json, print_yaml, table
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

DEFAULT_NAMESPACE = "kaos-system"
LEASES = "leases.coordination.k8s.io"
OPERATOR_SELECTOR = "app.kubernetes.io/component=operator"


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


def _leading_first(leases: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Leases by how alive they are: fresh ones first, then the latest renewed."""

    def rank(lease: dict[str, Any]) -> tuple[bool, str]:
        spec = lease.get("spec") or {}
        return bool(lease_health(lease, now)["fresh"]), str(spec.get("renewTime") or "")

    return sorted(leases, key=rank, reverse=True)


def find_operator(
    kube: Kube, namespace: str, lease_name: str, now: datetime
) -> tuple[str, dict[str, Any] | None, list[dict[str, Any]]]:
    """The namespace the operator runs in, its Lease and its Deployments: ``namespace``
    when either is there, else the namespace of the most alive Lease of that name found
    anywhere (when the user may list Leases across namespaces)."""
    scoped = Kube(context=kube.context, namespace=namespace)
    lease = scoped.find(LEASES, lease_name)
    deployments = scoped.items("deployments", selector=OPERATOR_SELECTOR)
    if lease is not None or deployments:
        return namespace, lease, deployments
    try:
        elsewhere = kube.items(
            LEASES, all_namespaces=True, field_selector=f"metadata.name={lease_name}"
        )
    except CliError as exc:
        if exc.exit_code == EXIT_ENVIRONMENT:
            raise
        return namespace, None, []  # not allowed to look further
    if not elsewhere:
        return namespace, None, []
    found = _leading_first(elsewhere, now)[0]
    there = str(found["metadata"].get("namespace"))
    moved = Kube(context=kube.context, namespace=there)
    return there, found, moved.items("deployments", selector=OPERATOR_SELECTOR)


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
    """Why an agent is not well (its memory, or a failure), from ``health``."""
    verdict = health(agent)
    if verdict.degraded:
        memory = condition(agent, reasons.MEMORY_DEGRADED) or {}
        text = f"{reasons.MEMORY_DEGRADED}: {memory.get('reason')}: {memory.get('message') or ''}"
        return text.rstrip(": ")
    if verdict.tone == "error":
        st = agent.get("status") or {}
        ready = condition(agent, reasons.READY) or {}
        return f"Failed: {st.get('message') or ready.get('message') or ''}".rstrip(": ")
    return None


def status_document(
    kube: Kube, lease_name: str, watch_namespace: str | None, now: datetime
) -> dict[str, Any]:
    asked = kube.namespace or DEFAULT_NAMESPACE
    namespace, lease_obj, deployments = find_operator(kube, asked, lease_name, now)
    lease = lease_health(lease_obj, now)
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
            "asked": asked,
            "lease": lease_name,
            **lease,
            "deployment": deployment,
        },
        "crds": crds,
        "resources": resources,
        "degradedAgents": degraded,
    }


def print_status(doc: dict[str, Any]) -> None:
    out = console()
    op = doc["operator"]
    verdict = ("healthy", "ok") if doc["healthy"] else ("unhealthy", "error")
    out.print(Text("KAOS: ").append(verdict[0], style=TONE_STYLE[verdict[1]]))
    if op["namespace"] != op["asked"]:
        out.print(
            f"Operator: runs in namespace {op['namespace']} (none in {op['asked']})",
            markup=False,
        )
    dep = op["deployment"]
    dep_text = f"{dep['name']} {dep['ready']}/{dep['replicas']} ready" if dep else "none"
    tone = "ok" if op["fresh"] else "error"
    out.print(
        Text(f"Operator: leader {op['leader'] or '-'} (")
        .append(op["detail"], style=TONE_STYLE[tone])
        .append(")")
    )
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
        table(
            ["agent", "why"],
            [[d["agent"], d["why"]] for d in doc["degradedAgents"]],
            wrap=["why"],
        )
    for problem in doc["problems"]:
        out.print(Text("problem:", style=TONE_STYLE["error"]).append(f" {problem}"))


@click.command(
    "status",
    help="Operator health and leadership (its Lease and Deployment, found in another "
    "namespace when not in -n), the CRD versions installed against this CLI's, resources "
    "by phase and degraded agents. Exits 1 when unhealthy.",
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
        print_status(doc)
    return 0 if doc["healthy"] else 1
