"""The development model counts the tokens it served as a provider bills them: the usage
each chat answer reported, streamed or not, in ``/control/stats`` (since the last reset)
and ``kaos_devmodel_tokens_total`` (since start); embeddings are not chat tokens."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kaos_devmodel import DevModelSettings, create_app


async def test_served_tokens_are_the_reported_usage_summed() -> None:
    async with TestClient(TestServer(create_app(DevModelSettings.from_env({})))) as client:
        reported: list[dict[str, Any]] = []
        body = {"model": "m", "messages": [{"role": "user", "content": "count these words"}]}
        plain = await client.post("/v1/chat/completions", json=body)
        reported.append((await plain.json())["usage"])
        streamed = await client.post(
            "/v1/chat/completions",
            json={**body, "stream": True, "stream_options": {"include_usage": True}},
        )
        events = [
            json.loads(line.removeprefix("data: "))
            for line in (await streamed.text()).splitlines()
            if line.startswith("data: {")
        ]
        reported.append(next(e["usage"] for e in events if e.get("usage")))
        await client.post("/v1/embeddings", json={"model": "e", "input": "not chat"})

        stats = await (await client.get("/control/stats")).json()
        assert stats["input_tokens"] == sum(u["prompt_tokens"] for u in reported) > 0
        assert stats["output_tokens"] == sum(u["completion_tokens"] for u in reported) > 0
        metrics = await (await client.get("/metrics")).text()
        assert (
            f'kaos_devmodel_tokens_total{{kind="input"}} {float(stats["input_tokens"])}' in metrics
        )
        assert (
            f'kaos_devmodel_tokens_total{{kind="output"}} {float(stats["output_tokens"])}'
            in metrics
        )

        await client.post("/control/reset", json={})
        stats = await (await client.get("/control/stats")).json()
        assert (stats["input_tokens"], stats["output_tokens"]) == (0, 0)
        # The metric counts since start, as a provider's meter does.
        assert (
            'kaos_devmodel_tokens_total{kind="input"} 0.0'
            not in await (await client.get("/metrics")).text()
        )
