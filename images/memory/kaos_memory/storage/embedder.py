"""Query embeddings for recall: the service's own HTTP client, batched under load.

A recall embeds its query before the vector search. Through Mem0's embedder that is the
OpenAI client on a worker thread: most of a query's cost is the client's own work, plus a
thread hop each way (the figures: docs/benchmarks.md, "Measured figures behind the
design"); and under load every concurrent recall is its own model request. Here the call
is one aiohttp request on the event loop, and the requests of concurrent recalls share
model calls: at most ``MAX_IN_FLIGHT`` calls are open, and queries that arrive meanwhile
wait and go together in the next call (up to ``MAX_BATCH``). A lone recall never waits
for a batch to fill, so batching adds nothing to its latency.

Background work (Mem0's extraction) keeps Mem0's own embedder: its calls are Mem0's,
and its batching is Mem0's. The request is what Mem0's OpenAI embedder sends (the same
model, ``dimensions`` and ``encoding_format``, newlines as spaces), so a query and the
facts it is compared with are embedded alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
import yarl
from aiohttp.helpers import get_env_proxy_for_url
from kaos_core.tracing import client_session

from kaos_memory.settings import ModelSettings
from kaos_memory.storage.errors import StorageError, StorageUnavailable

log = logging.getLogger(__name__)

# Open model calls at once: two keep the model busy while the next batch gathers.
MAX_IN_FLIGHT = 2
# Queries in one call (OpenAI's own limit is far higher; Mem0 chunks by 100).
MAX_BATCH = 64
# Statuses after which the same call may succeed later.
_TEMPORARY = frozenset({408, 425, 429, 500, 502, 503, 504})


class QueryEmbedder:
    """``embed(text)`` over ``POST {embedding_base_url}/embeddings``."""

    def __init__(self, models: ModelSettings) -> None:
        self._url = models.embedding_base_url.rstrip("/") + "/embeddings"
        self._model = models.embedding_model
        self._dims = models.embedding_dims
        self._headers = {"Content-Type": "application/json"}
        if models.embedding_api_key:
            self._headers["Authorization"] = f"Bearer {models.embedding_api_key}"
        self._timeout = aiohttp.ClientTimeout(total=models.embed_timeout)
        self._http: aiohttp.ClientSession | None = None
        self._proxy: tuple[yarl.URL, aiohttp.BasicAuth | None] | None = None
        self._waiting: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._in_flight = 0
        self._calls: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        # The proxy the environment names for the model (HTTP(S)_PROXY, NO_PROXY), as
        # Mem0's client finds it, looked up once: with ``trust_env`` aiohttp looks it up
        # and reads ``~/.netrc`` on every request, which showed in the event loop's profile
        # under concurrent recalls. The model's credentials are its API key.
        try:
            self._proxy = get_env_proxy_for_url(yarl.URL(self._url))
        except LookupError:
            self._proxy = None
        self._http = client_session(timeout=self._timeout)

    async def close(self) -> None:
        for task in list(self._calls):
            task.cancel()
        for _, waiter in self._waiting:
            waiter.cancel()
        self._waiting.clear()
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def embed(self, text: str) -> list[float]:
        """The embedding of ``text``; ``StorageError`` when the model fails."""
        if self._http is None:
            raise RuntimeError("query embedder is not started")
        waiter: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._waiting.append((text.replace("\n", " "), waiter))
        self._dispatch()
        return await waiter

    def _dispatch(self) -> None:
        # Waiters whose recall gave up (timeout, client gone) are not sent.
        self._waiting = [(t, w) for t, w in self._waiting if not w.done()]
        while self._waiting and self._in_flight < MAX_IN_FLIGHT:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            self._in_flight += 1
            task = asyncio.create_task(self._call(batch))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[tuple[str, asyncio.Future[list[float]]]]) -> None:
        try:
            vectors = await self._request([text for text, _ in batch])
        except StorageError as exc:
            for _, waiter in batch:
                if not waiter.done():
                    waiter.set_exception(exc)
        except BaseException:
            for _, waiter in batch:
                waiter.cancel()
            raise
        else:
            for (_, waiter), vector in zip(batch, vectors, strict=True):
                if not waiter.done():
                    waiter.set_result(vector)
        finally:
            self._in_flight -= 1
            self._dispatch()

    async def _request(self, texts: Sequence[str]) -> list[list[float]]:
        assert self._http is not None
        body = {
            "input": list(texts),
            "model": self._model,
            "encoding_format": "float",
            "dimensions": self._dims,
        }
        try:
            proxy, proxy_auth = self._proxy or (None, None)
            async with self._http.post(
                self._url, json=body, headers=self._headers, proxy=proxy, proxy_auth=proxy_auth
            ) as resp:
                if resp.status != 200:
                    log.warning("embedding call answered HTTP %d", resp.status)
                    if resp.status in _TEMPORARY:
                        raise StorageUnavailable("embedding model unavailable")
                    raise StorageError("embedding model failed")
                doc = await resp.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("embedding call failed", exc_info=True)
            raise StorageUnavailable("embedding model unavailable") from exc
        except ValueError as exc:
            raise StorageError("embedding model answered no JSON") from exc
        return self._vectors(doc, len(texts))

    def _vectors(self, doc: Any, count: int) -> list[list[float]]:
        """The answer's vectors in input order; ``StorageError`` for any other shape."""
        try:
            items = sorted(doc["data"], key=lambda item: int(item["index"]))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError("embedding model answered an unexpected document") from exc
        if len(vectors) != count or any(len(v) != self._dims for v in vectors):
            raise StorageError("embedding model answered the wrong number or size of vectors")
        return vectors
