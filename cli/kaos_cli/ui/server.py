"""The console's web application: an aiohttp factory with typed keys and cleanup contexts.

Every request passes the guard (``security``), and every failure becomes an error page in
one place (``pages.errors``); the overview stays live through one
kubectl watch per kind and a server-sent event stream per page (``live``); the pages
(``pages``) read the cluster through kubectl and reach agents and memory services
through port-forwards the console holds until it stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from aiohttp import web

from kaos_cli.kubectl.aio import Cluster
from kaos_cli.kubectl.forward import Forwards
from kaos_cli.ui.live import BROKER, Broker, events, watches
from kaos_cli.ui.pages.agent import agent_page, chat
from kaos_cli.ui.pages.agent_ops import decide
from kaos_cli.ui.pages.errors import error_pages
from kaos_cli.ui.pages.memory import forget, forget_confirm, memory_page
from kaos_cli.ui.pages.overview import overview, overview_fragment
from kaos_cli.ui.security import guard, secure_headers
from kaos_cli.ui.state import CLUSTER, CONFIG, FORWARDS, HTTP, MEMORY, Memory, UiConfig

STATIC_DIR = Path(__file__).parent / "static"
MAX_REQUEST_BYTES = 256 * 1024


async def _resources(app: web.Application) -> AsyncIterator[None]:
    app[HTTP] = aiohttp.ClientSession()
    yield
    await app[FORWARDS].close()
    await app[HTTP].close()


def create_app(config: UiConfig, cluster: Cluster, *, watch: bool = True) -> web.Application:
    # The error pages wrap the guard, so its refusals are drawn like every other failure.
    app = web.Application(middlewares=[error_pages, guard], client_max_size=MAX_REQUEST_BYTES)
    app.on_response_prepare.append(secure_headers)
    app[CONFIG] = config
    app[CLUSTER] = cluster
    app[FORWARDS] = Forwards(cluster)
    app[BROKER] = Broker()
    app[MEMORY] = Memory()
    app.cleanup_ctx.append(_resources)
    if watch:
        app.cleanup_ctx.append(watches)
    app.router.add_get("/", overview)
    app.router.add_get("/fragments/overview", overview_fragment)
    app.router.add_get("/events", events)
    app.router.add_get("/agents/{ns}/{name}", agent_page)
    app.router.add_post("/agents/{ns}/{name}/chat", chat)
    app.router.add_post("/agents/{ns}/{name}/decide", decide)
    app.router.add_get("/memory/{ns}/{store}", memory_page)
    app.router.add_get("/memory/{ns}/{store}/forget", forget_confirm)
    app.router.add_post("/memory/{ns}/{store}/forget", forget)
    app.router.add_static("/static", STATIC_DIR, follow_symlinks=False)
    return app
