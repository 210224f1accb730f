"""Forgetting a scope: the confirmation that says what goes, and the counts once gone."""

from __future__ import annotations

from urllib.parse import quote

from kaos_cli.ui.render.base import h, page, problem, table
from kaos_cli.ui.render.memory import Scope


def forget_confirm_page(
    *, namespace: str, store: str, scope: Scope, csrf: str, context: str
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    hidden = "".join(
        f'<input type="hidden" name="{k}" value="{h(v)}">'
        for k, v in (("level", scope.level), ("agent", scope.agent),
                     ("principal", scope.principal), ("session", scope.session),
                     ("csrf", csrf))
    )  # fmt: skip
    body = (
        f'<h1>Forget memory in {h(store)}</h1><div class="confirm" role="alertdialog">'
        f'<p id="erases">This erases {h(scope.erases(store))}.</p>'
        "<p>It cannot be undone.</p>"
        f'<form method="post" action="{base}/forget">{hidden}'
        '<button type="submit" class="danger" id="confirm-forget">Erase</button> '
        f'<a href="{base}?{scope.query()}">cancel</a></form></div>'
    )
    crumbs = f'<a href="/">overview</a> / <a href="{base}">memory {h(store)}</a> / forget'
    return page("Forget", body, csrf=csrf, context=context, crumbs=crumbs)


def forgotten_page(
    *,
    namespace: str,
    store: str,
    scope: Scope,
    counts: tuple[int, int, int],
    degraded: bool,
    csrf: str,
    context: str,
) -> str:
    base = f"/memory/{quote(namespace)}/{quote(store)}"
    rows = [
        ("short term (window turns)", h(counts[0])),
        ("medium term (digest versions)", h(counts[1])),
        ("long term (facts)", h(counts[2])),
    ]
    body = (
        f"<h1>Forgotten in {h(store)}</h1><p>Erased {h(scope.erases(store))}.</p>"
        + (
            problem("the erasure was degraded: a tier could not be reached", "degraded")
            if degraded
            else ""
        )
        + table(["tier", "erased"], rows, css="forgotten-table")
        + f'<p><a id="back" href="{base}?{scope.query()}">back to the inspector</a></p>'
    )
    crumbs = f'<a href="/">overview</a> / <a href="{base}">memory {h(store)}</a> / forgotten'
    return page("Forgotten", body, csrf=csrf, context=context, crumbs=crumbs)
