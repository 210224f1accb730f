"""The overview: every namespace's resources with their health, and its topology."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import quote

from kaos_cli.ui.model import Row, topology
from kaos_cli.ui.render.base import badge, chips, h, page, problem
from kaos_cli.ui.topology import render_svg

# The samples in the order that each finds what it needs (`kaos samples list`): the model
# server, the ModelAPI in front of it, the tools, the memory, then the agents that use them.
SAMPLES_IN_ORDER = ("devmodel", "modelapi", "mcpserver", "memorystore-local", "agents")


def deploy_commands(namespace: str | None) -> list[str]:
    """What to type to fill an empty console (the last waits until the agents are Ready)."""
    where = f" -n {namespace}" if namespace else ""
    last = len(SAMPLES_IN_ORDER) - 1
    return [
        f"kaos samples deploy {name}{where}{' --wait' if i == last else ''}"
        for i, name in enumerate(SAMPLES_IN_ORDER)
    ]


def empty_state(namespace: str | None) -> str:
    where = f"in namespace {namespace}" if namespace else "in any namespace"
    commands = "\n".join(deploy_commands(namespace))
    return (
        f'<section class="empty-state" id="empty"><p class="empty">No KAOS resources {h(where)} '
        "yet. Deploy the samples, in this order (<code>kaos samples list</code> says what each "
        f'creates):</p><pre class="commands" id="empty-commands">{h(commands)}</pre></section>'
    )


def link_for(row: Row) -> str:
    ns, name = quote(row.namespace), quote(row.name)
    if row.kind == "Agent":
        return f'<a href="/agents/{ns}/{name}">{h(row.name)}</a>'
    if row.kind == "MemoryStore":
        return f'<a href="/memory/{ns}/{name}">{h(row.name)}</a>'
    return h(row.name)


def cluster_answered(errors: Sequence[tuple[str, str]]) -> bool:
    """False when a listing or a watch could not reach the cluster at all."""
    return not any(kind == "unreachable" for kind, _ in errors)


def overview_fragment(
    rows: list[Row], errors: Iterable[tuple[str, str]], namespace: str | None = None
) -> str:
    """Every namespace's resources and topology; errors first (kind, message). A hidden
    marker says whether the cluster answered, for the header's live dot."""
    errors = list(errors)
    state = "reachable" if cluster_answered(errors) else "unreachable"
    parts = [f'<div id="cluster-state" data-cluster="{state}" hidden></div>']
    parts += [problem(message, kind) for kind, message in errors]
    namespaces = sorted({r.namespace for r in rows})
    if not namespaces and not errors:
        parts.append(empty_state(namespace))
    for ns in namespaces:
        mine = [r for r in rows if r.namespace == ns]
        body = "".join(
            f'<tr data-kind="{h(r.kind)}" data-name="{h(r.name)}" data-phase="{h(r.phase)}" '
            f'data-health="{h(r.health.word)}">'
            f'<td class="nowrap">{h(r.kind)}</td><td class="nowrap">{link_for(r)}</td>'
            f'<td class="nowrap">{badge(r.health)}</td>'
            f'<td class="conds">{chips(r.conditions)}</td>'
            f'<td class="endpoint">{h(r.endpoint) or "-"}</td><td>{h(r.age)}</td></tr>'
            for r in mine
        )
        parts.append(
            f'<section class="ns" data-namespace="{h(ns)}"><h2>namespace {h(ns)}</h2>'
            '<table class="resources"><thead><tr><th>kind</th><th>name</th>'
            "<th>health</th><th>conditions</th><th>endpoint</th><th>age</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
            f'<figure class="topo">{render_svg(topology(rows, ns))}'
            "<figcaption>topology: ModelAPIs · agents and their delegations · MCP servers and "
            "MemoryStores</figcaption></figure></section>"
        )
    return "".join(parts)


def overview_page(fragment: str, *, csrf: str, context: str, reachable: bool = True) -> str:
    body = (
        '<div id="overview" class="live-region" data-src="/fragments/overview" '
        f'data-events="/events">{fragment}</div>'
    )
    return page("Overview", body, csrf=csrf, context=context, live=reachable)
