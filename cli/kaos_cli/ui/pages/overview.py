"""The overview: every KAOS object the identity may list, live, with what stops each one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from aiohttp import web

from kaos_cli.kinds import KINDS
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui.live import BROKER
from kaos_cli.ui.model import Row, summarize
from kaos_cli.ui.pages.common import html
from kaos_cli.ui.render import overview as render
from kaos_cli.ui.state import CLUSTER, CONFIG

_ORDER = [k.kind for k in KINDS]


async def load_rows(app: web.Application) -> tuple[list[Row], list[tuple[str, str]]]:
    cluster, ns = app[CLUSTER], app[CONFIG].namespace
    results = await asyncio.gather(
        *(cluster.items(k.resource, ns) for k in KINDS), return_exceptions=True
    )
    rows: list[Row] = []
    errors: list[tuple[str, str]] = []
    now = datetime.now(UTC)
    for kind, result in zip(KINDS, results, strict=True):
        if isinstance(result, ClusterError):
            if (result.problem, result.message) not in errors:
                errors.append((result.problem, result.message))
            continue
        if isinstance(result, BaseException):
            raise result
        rows.extend(summarize(kind.kind, obj, now) for obj in result)
    for problem, message in app[BROKER].errors.values():
        if (problem, message) not in errors:
            errors.append((problem, message))
    rows.sort(key=lambda r: (r.namespace, _ORDER.index(r.kind), r.name))
    return rows, errors


async def overview(request: web.Request) -> web.Response:
    rows, errors = await load_rows(request.app)
    config = request.app[CONFIG]
    fragment = render.overview_fragment(rows, errors, config.namespace)
    return html(
        render.overview_page(
            fragment,
            csrf=config.csrf,
            context=config.context,
            reachable=render.cluster_answered(errors),
        )
    )


async def overview_fragment(request: web.Request) -> web.Response:
    rows, errors = await load_rows(request.app)
    return html(render.overview_fragment(rows, errors, request.app[CONFIG].namespace))
