"""Recall's query embedder against a real ``kaos-devmodel``: what it sends, how concurrent
queries share model calls, and what a failing model becomes (the storage error family)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from kaos_memory.settings import ModelSettings
from kaos_memory.storage.embedder import MAX_BATCH, MAX_IN_FLIGHT, QueryEmbedder
from kaos_memory.storage.errors import StorageError, StorageUnavailable

from tests.support.devmodel import DevModel
from tests.support.loopback import served


def models(
    model: DevModel, *, key: str | None = "embed-key", dims: int | None = None
) -> ModelSettings:
    return ModelSettings(
        summarization_base_url=model.base_url,
        summarization_api_key=None,
        summarization_model="summarizer",
        embedding_base_url=model.base_url,
        embedding_api_key=key,
        embedding_model="embedder",
        embedding_dims=dims or model.embedding_dims,
        timeout=10.0,
        embed_timeout=10.0,
    )


@pytest.fixture
async def embedder(devmodel: DevModel) -> AsyncIterator[QueryEmbedder]:
    e = QueryEmbedder(models(devmodel))
    await e.start()
    try:
        yield e
    finally:
        await e.close()


async def reference(model: DevModel, text: str) -> list[float]:
    """The vector the model gives ``text`` on its own (what Mem0's embedder would get)."""
    body = {"input": [text], "model": "embedder", "dimensions": model.embedding_dims}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{model.base_url}/embeddings", json=body) as resp,
    ):
        assert resp.status == 200
        vector: list[float] = (await resp.json())["data"][0]["embedding"]
        return vector


async def test_a_lone_query_is_one_call_as_mem0_sends_it(
    embedder: QueryEmbedder, devmodel: DevModel
) -> None:
    vector = await embedder.embed("where does\nalice live")
    # Only this test's calls: another module's memory service may share the model.
    calls = [c for c in await devmodel.aembedding_requests() if "alice" in " ".join(c["input"])]
    assert len(calls) == 1
    # Newlines as spaces, the role's model and key: what Mem0's OpenAI embedder sends.
    assert calls[0]["input"] == ["where does alice live"]
    assert calls[0]["model"] == "embedder"
    expected_key = hashlib.sha256(b"Bearer embed-key").hexdigest()
    assert calls[0]["authorization_sha256"] == expected_key
    assert vector == await reference(devmodel, "where does alice live")


async def test_concurrent_queries_share_calls_and_each_gets_its_own_vector(
    embedder: QueryEmbedder, devmodel: DevModel
) -> None:
    # A slow model: the queries arriving while the first calls are open gather.
    await devmodel.aset_faults(delay=0.3, routes=["embeddings"])
    texts = [f"question number {i} about rivers" for i in range(100)]
    vectors = await asyncio.gather(*(embedder.embed(t) for t in texts))
    await devmodel.aset_faults()
    calls = [c for c in await devmodel.aembedding_requests() if set(c["input"]) <= set(texts)]
    sent = [text for call in calls for text in call["input"]]
    assert sorted(sent) == sorted(texts)  # each query once
    # The first calls go at once; everything after waits for one and shares the next.
    assert len(calls) <= MAX_IN_FLIGHT + -(-(len(texts) - MAX_IN_FLIGHT) // MAX_BATCH)
    assert max(len(call["input"]) for call in calls) <= MAX_BATCH
    for text, vector in zip(texts[::17], vectors[::17], strict=True):
        assert vector == await reference(devmodel, text)


async def test_a_query_given_up_before_its_call_is_not_sent(
    embedder: QueryEmbedder, devmodel: DevModel
) -> None:
    await devmodel.aset_faults(delay=0.3, routes=["embeddings"])
    busy = [asyncio.ensure_future(embedder.embed(f"busy {i}")) for i in range(MAX_IN_FLIGHT)]
    given_up = asyncio.ensure_future(embedder.embed("nobody waits for me"))
    # One turn of the loop: the three tasks run to their first wait, in order, so the
    # last one is queued behind the open calls (a yield, not a timed wait).
    await asyncio.sleep(0)
    given_up.cancel()
    await asyncio.gather(*busy)
    after = await embedder.embed("sent after")
    await devmodel.aset_faults()
    sent = [text for call in await devmodel.aembedding_requests() for text in call["input"]]
    assert "nobody waits for me" not in sent
    assert "sent after" in sent
    assert after == await reference(devmodel, "sent after")


@pytest.mark.parametrize(
    ("status", "error"), [(503, StorageUnavailable), (429, StorageUnavailable), (400, StorageError)]
)
async def test_a_failing_model_is_a_storage_error(
    embedder: QueryEmbedder, devmodel: DevModel, status: int, error: type[StorageError]
) -> None:
    await devmodel.aset_faults(error_rate=1.0, status=status, routes=["embeddings"])
    with pytest.raises(StorageError) as caught:
        await embedder.embed("anything")
    assert type(caught.value) is error
    # Fixed words only: nothing of the model's answer travels on.
    assert "injected" not in str(caught.value)


async def test_an_unreachable_model_is_unavailable() -> None:
    nowhere = DevModel(url="http://127.0.0.1:9")
    e = QueryEmbedder(models(nowhere, key=None, dims=8))
    await e.start()
    try:
        with pytest.raises(StorageUnavailable):
            await e.embed("anything")
    finally:
        await e.close()


@pytest.fixture
async def forward_proxy(devmodel: DevModel) -> AsyncIterator[tuple[str, list[str]]]:
    """A forward HTTP proxy on loopback that sends what it is asked for to the development
    model, whatever host the request names: its URL, and the hosts it was asked for."""
    asked: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        asked.append(request.host)
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{devmodel.url}{request.path}",
                data=await request.read(),
                headers={"Content-Type": request.content_type},
            ) as resp,
        ):
            return web.Response(
                body=await resp.read(), status=resp.status, content_type="application/json"
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    async with served(app) as port:
        yield f"http://127.0.0.1:{port}", asked


async def test_the_model_is_reached_through_the_proxy_the_environment_names(
    devmodel: DevModel, forward_proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy, asked = forward_proxy
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    # A host only the proxy can reach (.invalid never resolves).
    behind = DevModel(url="http://model.kaos.invalid", embedding_dims=devmodel.embedding_dims)
    e = QueryEmbedder(models(behind))
    await e.start()
    try:
        assert await e.embed("where does alice live") == await reference(
            devmodel, "where does alice live"
        )
    finally:
        await e.close()
    assert asked == ["model.kaos.invalid"]

    # A host NO_PROXY names is called directly: here, that fails (the host does not resolve).
    monkeypatch.setenv("NO_PROXY", "kaos.invalid")
    e = QueryEmbedder(models(behind))
    await e.start()
    try:
        with pytest.raises(StorageUnavailable):
            await e.embed("where does alice live")
    finally:
        await e.close()
    assert asked == ["model.kaos.invalid"]
