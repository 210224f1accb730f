"""What every page is drawn with: the frame, health badges, condition chips, banners."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape

from kaos_cli.health import Health
from kaos_cli.ui.model import Condition, Note


def h(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def short_time(stamp: str) -> str:
    """An API timestamp as month-day and time, to the second (UTC); as given otherwise."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return when.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def when(stamp: str) -> str:
    return f'<time datetime="{h(stamp)}" title="{h(stamp)}">{h(short_time(stamp))}</time>'


def live_dot(reachable: bool) -> str:
    """The header's dot: grey until the page's event stream is open (console.js turns it
    green), red while the cluster cannot be reached, whatever the stream does."""
    state = "reachable" if reachable else "unreachable"
    title = "connecting to the console" if reachable else "the cluster cannot be reached"
    css = "live" if reachable else "live down"
    return f'<span id="live" class="{css}" data-cluster="{state}" title="{title}">●</span>'


def page(
    title: str,
    body: str,
    *,
    csrf: str,
    context: str,
    crumbs: str = "",
    live: bool | None = None,
) -> str:
    """A whole page; ``live``: the overview's dot (True: the cluster answered, False: it
    cannot be reached), ``None`` on a page without live updates."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{h(title)} · KAOS console</title>"
        f'<meta name="kaos-csrf" content="{h(csrf)}">'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        '<header class="bar"><a class="brand" href="/">KAOS console</a>'
        f'<nav class="crumbs">{crumbs}</nav>'
        f'<span class="ctx">context: {h(context)}</span>'
        + ("" if live is None else live_dot(live))
        + "</header>"
        f"<main>{body}</main></body></html>"
    )


# kubectl's problems as banners: what tone each one is drawn in.
PROBLEM_TONES = {
    "unreachable": "error",
    "not-installed": "error",
    "not-found": "error",
    "failed": "error",
    "forbidden": "warn",
    "degraded": "warn",
    "hint": "hint",
}


def problem(message: str, kind: str = "failed") -> str:
    """A banner for a kubectl problem (or ``degraded``, ``hint``)."""
    tone = PROBLEM_TONES.get(kind, "error")
    return (
        f'<div class="problem problem-{h(kind)} tone-{tone}" data-check="cluster" '
        f'role="alert">{h(message)}</div>'
    )


def note(n: Note) -> str:
    """A banner that says which check it comes from (``data-check``)."""
    kind = f" problem-{h(n.problem)}" if n.problem else ""
    return (
        f'<div class="problem tone-{h(n.tone)}{kind}" data-check="{h(n.check)}" '
        f'role="alert">{h(n.message)}</div>'
    )


def notes(items: Iterable[Note]) -> str:
    return "".join(note(n) for n in items)


def badge(state: Health) -> str:
    """The health word in its tone, with the reason as its tooltip."""
    tip = f' title="{h(state.reason)}"' if state.reason else ""
    return (
        f'<span class="phase tone-{h(state.tone)}" data-tone="{h(state.tone)}"{tip}>'
        f"{h(state.word or '-')}</span>"
    )


def chips(conditions: Sequence[Condition]) -> str:
    out = []
    for c in conditions:
        css = f"chip tone-{c.tone}" + (" bad" if c.bad else "")
        if c.type == "MemoryDegraded" and c.bad:
            css += " degraded"
        tip = f"{c.type}={c.status} {c.reason}: {c.message}".strip(": ")
        out.append(
            f'<span class="{css}" title="{h(tip)}" data-condition="{h(c.type)}" '
            f'data-status="{h(c.status)}" data-tone="{c.tone}">{h(c.type)}'
            f"{'' if c.status == 'True' else '=' + h(c.status)}"
            f"{' (' + h(c.reason) + ')' if c.bad and c.reason else ''}</span>"
        )
    return "".join(out) or '<span class="muted">none yet</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, css: str = "") -> str:
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in r) + "</tr>" for r in rows)
    return f'<table class="{h(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
