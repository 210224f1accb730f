"""Live updates: one ``kubectl get -w`` per kind feeds a ``Broker``; each open page holds
a server-sent event stream (``/events``) and re-fetches its fragment when told something
changed. A watch that breaks is recorded, so the overview says why it may be stale."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator

from aiohttp import web

from kaos_cli.kinds import KINDS
from kaos_cli.kubectl.aio import ClusterError
from kaos_cli.ui.security import event_stream
from kaos_cli.ui.state import CLUSTER, CONFIG

KEEP_ALIVE_SECONDS = 15
REWATCH_SECONDS = 2


class Broker:
    """Fan-out of "something changed" to every open event stream."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str]] = set()
        self.errors: dict[str, tuple[str, str]] = {}  # kind -> (problem, message)

    def publish(self, what: str) -> None:
        for queue in self._queues:
            if queue.empty():  # one pending notice is enough: the page re-reads everything
                queue.put_nowait(what)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[str]]:
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)


BROKER = web.AppKey("broker", Broker)


async def events(request: web.Request) -> web.StreamResponse:
    response = await event_stream(request)
    await response.write(b": connected\n\n")
    with request.app[BROKER].subscribe() as queue:
        while True:
            try:
                what = await asyncio.wait_for(queue.get(), KEEP_ALIVE_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            await response.write(f"event: changed\ndata: {json.dumps(what)}\n\n".encode())


async def watch_once(app: web.Application, kind: str, resource: str) -> None:
    """One watch of a kind, until it ends: publish each change and record why it broke.
    A recorded failure is cleared once the cluster answers again; a watch of an unchanged
    kind says nothing, so a plain listing tells."""
    broker, cluster = app[BROKER], app[CLUSTER]
    namespace = app[CONFIG].namespace
    try:
        if kind in broker.errors:
            await cluster.items(resource, namespace)
            broker.errors.pop(kind, None)
            broker.publish(kind)
        async for line in cluster.watch(resource, namespace):
            broker.errors.pop(kind, None)
            broker.publish(line or kind)
    except ClusterError as exc:
        if broker.errors.get(kind) != (exc.problem, exc.message):
            broker.errors[kind] = (exc.problem, exc.message)
            broker.publish(kind)


async def watch_kind(app: web.Application, kind: str, resource: str) -> None:
    """Follow one kind for as long as the console runs."""
    while True:
        await watch_once(app, kind, resource)
        await asyncio.sleep(REWATCH_SECONDS)  # back-off before re-watching (the watch ended)


async def watches(app: web.Application) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(watch_kind(app, k.kind, k.resource)) for k in KINDS]
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
