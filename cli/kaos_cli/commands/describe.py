"""``kaos <kind> describe``: why an object is in its phase, without kubectl.

The spec, the conditions with their reasons and messages (whole, wrapped to the terminal),
the object's events, and the objects the operator made for it with a one-word readiness
each. Colours are ``kaos_cli.health``'s tones: ``MemoryDegraded True`` is a warning, not
green.
"""

from __future__ import annotations

from typing import Any

import yaml
from rich.text import Text

from kaos_cli.commands.common import Cx
from kaos_cli.health import condition_tone, health
from kaos_cli.kinds import Kind
from kaos_cli.kubectl.sync import Kube
from kaos_cli.objects import age, explain, since, spec, status
from kaos_cli.output import TONE_STYLE, Toned, console, print_json, print_yaml, table

OWNED = "deployments,services,configmaps,persistentvolumeclaims,poddisruptionbudgets,pods"


def owned_objects(kube: Kube, kind: Kind, name: str) -> list[dict[str, Any]]:
    """What the operator made for the object, with a one-word readiness each."""
    found = []
    for obj in kube.items(OWNED, selector=kind.selector(name)):
        found.append(
            {
                "kind": obj.get("kind"),
                "name": obj["metadata"]["name"],
                "ready": object_state(obj),
                "age": age(obj),
            }
        )
    return found


def object_state(obj: dict[str, Any]) -> str:
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
    if kind == "PodDisruptionBudget":
        return f"{st.get('disruptionsAllowed') or 0} disruptions allowed"
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
    verdict = health(obj)
    return {
        "kind": kind.kind,
        "name": name,
        "namespace": obj["metadata"].get("namespace"),
        "phase": st.get("phase"),
        "health": {"state": verdict.word, "tone": verdict.tone, "reason": verdict.reason},
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
    out.print(f"Phase:     {doc['phase'] or '-'}", markup=False)
    verdict = doc["health"]
    out.print(
        Text("Health:    ").append(
            verdict["state"] + (f" ({verdict['reason']})" if verdict["reason"] else ""),
            style=TONE_STYLE.get(verdict["tone"], ""),
        )
    )
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
                Toned(
                    c.get("status"),
                    condition_tone(
                        str(c.get("type")), str(c.get("status")), str(c.get("reason") or "")
                    ),
                ),
                c.get("reason"),
                c.get("message"),
                since(c.get("lastTransitionTime")),
            ]
            for c in doc["conditions"]
        ],
        wrap=["message"],
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
            [
                [
                    e["last"],
                    Toned(e["type"], "warn" if e["type"] == "Warning" else ""),
                    e["reason"],
                    e["count"],
                    e["message"],
                ]
                for e in doc["events"]
            ],
            wrap=["message"],
        )
    else:
        out.print("  (none)")
    return 0
