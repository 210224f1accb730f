"""Every failure of a request as a page, in one place.

Handlers (and the guard) raise ``PageError``; a failed kubectl call they do not handle
arrives as ``ClusterError``; aiohttp raises its own 404 and 405. This middleware draws each
as an error page with the way back to the overview (or, for a script's ``fetch``, as
``{"error": ...}``), and anything unexpected as a 500 that says where the details are: in
the terminal running ``kaos ui``, never in the response.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from kaos_cli.kinds import Kind
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui.model import Missing, NotFound, PageError
from kaos_cli.ui.pages.common import html
from kaos_cli.ui.render.errors import error_page, not_found_page
from kaos_cli.ui.state import CLUSTER, CONFIG

log = logging.getLogger("kaos_cli.ui")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# What a kubectl problem means for the page that needed the call.
CLUSTER_STATUS = {"forbidden": 403, "not-found": 404}
CLUSTER_TITLES = {
    "unreachable": "The cluster cannot be reached",
    "forbidden": "Permission denied",
    "not-installed": "KAOS is not installed in this cluster",
    "not-found": "Not found",
}
HTTP_MESSAGES = {
    404: "the console has no page at {path}",
    405: "{path} does not answer {method} requests",
    413: "the request is larger than the console accepts",
}


def page_error(request: web.Request, exc: Exception) -> PageError:
    """The page to draw for a failure (pure but for the request's path and method)."""
    if isinstance(exc, PageError):
        return exc
    if isinstance(exc, ClusterError):
        status = CLUSTER_STATUS.get(exc.problem, 502)
        title = CLUSTER_TITLES.get(exc.problem, "kubectl failed")
        return PageError(status, title, exc.message, exc.problem)
    if isinstance(exc, web.HTTPException):
        said = HTTP_MESSAGES.get(exc.status, "the console cannot answer this request")
        message = said.format(path=request.path, method=request.method)
        return PageError(exc.status, exc.reason, message, "not-found")
    return PageError(
        500,
        "The console failed",
        "the console failed to answer this request: the terminal running kaos ui has the "
        "details; reload to try again",
    )


def draw(request: web.Request, error: PageError) -> web.Response:
    """HTML for a page the browser navigated to, JSON for the page's own ``fetch``."""
    if "text/html" not in request.headers.get("Accept", ""):
        return web.json_response({"error": error.message}, status=error.status)
    context = request.app[CONFIG].context
    if isinstance(error, NotFound):
        return html(not_found_page(error.missing, context=context), error.status)
    text = error_page(error.title, error.message, kind=error.problem, context=context)
    return html(text, error.status)


@web.middleware
async def error_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # a redirect is an answer, not a failure
        response = draw(request, page_error(request, exc))
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except ConnectionResetError:
        raise  # the browser went away: nobody to draw a page for
    except (PageError, ClusterError) as exc:
        return draw(request, page_error(request, exc))
    except Exception as exc:
        log.error("the console failed on %s %s", request.method, request.path, exc_info=exc)
        return draw(request, page_error(request, exc))


async def missing(app: web.Application, kind: Kind, namespace: str, name: str) -> Missing:
    """What the console can say about an object that is not there: close names in its
    namespace, other namespaces that have one of that name, whether the namespace exists.
    Each is left out when the identity may not list it."""
    cluster = app[CLUSTER]
    every = app[CONFIG].namespace is None
    try:
        items = await cluster.items(kind.resource, None if every else namespace)
    except ClusterError:
        return Missing(kind.kind, name, namespace)
    here: list[str] = []
    elsewhere: list[str] = []
    for obj in items:
        meta = obj.get("metadata") or {}
        ns, found = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if ns == namespace:
            here.append(found)
        elif found == name:
            elsewhere.append(ns)
    close = difflib.get_close_matches(name, here, n=3, cutoff=0.6)
    exists: bool | None = True if here else None
    if not here:
        try:
            await cluster.json("get", "namespace", namespace)
            exists = True
        except ClusterError as exc:
            exists = False if exc.problem == "not-found" else None
    return Missing(
        kind.kind, name, namespace, tuple(close), tuple(sorted(elsewhere)), tuple(sorted(here)),
        exists,
    )  # fmt: skip
