"""The topology as an inline SVG drawn on the server (pure; no script, no layout engine).

Three columns: ModelAPIs on the left, Agents in the middle, MCP servers and MemoryStores
on the right. Spec references are straight lines labelled by what they mean; a
delegation (``agentNetwork.access``) is a curve between two agents. A referenced object
that does not exist is drawn dashed; every other box in its health's tone (the CLI's
colours: green Ready, amber Degraded, red Failed, blue on its way).
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from kaos_cli.ui.model import Graph, Node

BOX_W, BOX_H, GAP_Y, TOP = 210, 44, 26, 16
COLUMNS = {"ModelAPI": 20, "Agent": 380, "MCPServer": 760, "MemoryStore": 760}
WIDTH = 760 + BOX_W + 20


def _positions(graph: Graph) -> dict[str, tuple[int, int]]:
    rows: dict[int, int] = {}
    where: dict[str, tuple[int, int]] = {}
    for node in graph.nodes:
        x = COLUMNS.get(node.kind, 20)
        index = rows.get(x, 0)
        rows[x] = index + 1
        where[node.id] = (x, TOP + index * (BOX_H + GAP_Y))
    return where


def _box(node: Node, x: int, y: int, namespace: str) -> str:
    state = "missing" if not node.phase else node.health.word.lower()
    tone = "missing" if not node.phase else node.health.tone
    css = f"node kind-{node.kind.lower()} state-{escape(state)} tone-{tone}"
    word = node.health.word if node.phase else "not found"
    page = {"Agent": "agents", "MemoryStore": "memory"}.get(node.kind) if node.phase else None
    link = f"/{page}/{quote(namespace)}/{quote(node.name)}" if page else ""
    opening, closing = (f'<a href="{escape(link)}">', "</a>") if link else ("", "")
    return (
        f'{opening}<g class="{css}" data-node="{escape(node.id)}">'
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text x="{x + 10}" y="{y + 18}" class="name">{escape(node.name)}</text>'
        f'<text x="{x + 10}" y="{y + 35}" class="meta">{escape(node.kind)} · {escape(word)}'
        f"{': memory' if node.degraded else ''}</text></g>{closing}"
    )


def render_svg(graph: Graph) -> str:
    if not graph.nodes:
        return '<p class="empty">nothing deployed in this namespace</p>'
    at = _positions(graph)
    height = max(y for _, y in at.values()) + BOX_H + TOP
    lines: list[str] = []
    labelled: set[tuple[str, str]] = set()  # one label per target and meaning is enough
    for edge in graph.edges:
        (sx, sy), (tx, ty) = at[edge.source], at[edge.target]
        sy_mid, ty_mid = sy + BOX_H // 2, ty + BOX_H // 2
        label = escape(edge.label)
        if edge.label == "delegates":
            # Agents share a column: the curve leaves and enters on their left side,
            # away from the tool and memory edges on the right.
            bend = sx - 60 - abs(ty - sy) // 4
            lines.append(
                f'<path class="edge edge-delegates" d="M{sx} {sy_mid} C{bend} {sy_mid} '
                f'{bend} {ty_mid} {sx} {ty_mid}" marker-end="url(#arrow)"/>'
                f'<text class="edge-label delegates" x="{bend + 8}" '
                f'y="{(sy_mid + ty_mid) // 2 + 4}">{label}</text>'
            )
            continue
        if tx < sx:  # a ModelAPI on the left
            x1, x2 = sx, tx + BOX_W
        else:
            x1, x2 = sx + BOX_W, tx
        # The label sits near the target end, where edges to different targets part.
        lx, ly = x1 + (x2 - x1) * 3 // 4, sy_mid + (ty_mid - sy_mid) * 3 // 4
        text = (
            ""
            if (edge.target, edge.label) in labelled
            else f'<text class="edge-label" x="{lx - 16}" y="{ly - 5}">{label}</text>'
        )
        labelled.add((edge.target, edge.label))
        lines.append(
            f'<line class="edge edge-{label}" x1="{x1}" y1="{sy_mid}" x2="{x2}" y2="{ty_mid}" '
            f'marker-end="url(#arrow)"/>{text}'
        )
    boxes = [_box(n, *at[n.id], graph.namespace) for n in graph.nodes]
    return (
        f'<svg class="topology" role="img" aria-label="topology of {escape(graph.namespace)}" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg"><defs><marker id="arrow" viewBox="0 0 10 10" '
        f'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0 0 L10 5 L0 10 z"/></marker></defs>{"".join(lines)}{"".join(boxes)}</svg>'
    )
