"""Error pages: what went wrong in words, what to do, and the way back to the overview.

None carries an exception's text: a page says what the console tried and what kubectl or
the service answered, in the console's own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from kaos_cli.ui.model import Missing
from kaos_cli.ui.render.base import h, page, problem

PAGES = {"Agent": "agents", "MemoryStore": "memory"}
KNOWN_SHOWN = 20  # names listed on a not-found page; the rest are counted
BACK = '<p class="back"><a id="back" href="/">← back to the overview</a></p>'


def object_link(kind: str, namespace: str, name: str) -> str:
    path = f"/{PAGES[kind]}/{quote(namespace)}/{quote(name)}"
    return f'<a href="{h(path)}">{h(name)}</a>'


def error_page(title: str, message: str, *, kind: str = "failed", context: str) -> str:
    """An error page; it carries no CSRF token (it has no form, and a refused request's
    page must not hand one out)."""
    body = f'<h1 id="error-title">{h(title)}</h1>{problem(message, kind)}{BACK}'
    return page(title, body, csrf="", context=context, crumbs='<a href="/">overview</a>')


def _names(kind: str, namespace: str, names: Sequence[str]) -> str:
    shown = ", ".join(object_link(kind, namespace, n) for n in names[:KNOWN_SHOWN])
    more = len(names) - KNOWN_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def not_found_page(missing: Missing, *, context: str) -> str:
    kind, name, ns = missing.kind, missing.name, missing.namespace
    title = f"No {kind} {name} in namespace {ns}"
    parts = [f'<h1 id="not-found">{h(title)}</h1>']
    if missing.close:
        suggested = " or ".join(object_link(kind, ns, n) for n in missing.close)
        parts.append(f'<p id="did-you-mean">Did you mean {suggested}?</p>')
    for other in missing.elsewhere:
        parts.append(
            f'<p class="elsewhere">{"An" if kind[0] in "AEIOU" else "A"} {h(kind)} named '
            f"{h(name)} is in namespace {h(other)}: "
            f"{object_link(kind, other, name)}</p>"
        )
    if missing.namespace_exists is False:
        parts.append(f'<p id="known">Namespace {h(ns)} does not exist.</p>')
    elif missing.known is not None:
        parts.append(
            f'<p id="known">The {h(kind)}s in namespace {h(ns)}: '
            f"{_names(kind, ns, missing.known)}.</p>"
            if missing.known
            else f'<p id="known">Namespace {h(ns)} has no {h(kind)}s.</p>'
        )
    parts.append(BACK)
    crumbs = f'<a href="/">overview</a> / {h(kind.lower())} {h(name)}'
    return page(title, "".join(parts), csrf="", context=context, crumbs=crumbs)
