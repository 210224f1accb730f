"""Settings, control routes and the base app's routes of ``kaos-devmodel``, served in-process."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kaos_core.settings import SettingsError
from kaos_devmodel import DevModelSettings, create_app
from kaos_devmodel.__main__ import main
from kaos_devmodel.faults import NOT_JSON, VERBOSE_REPEATS

Serve = Callable[..., AbstractAsyncContextManager[TestClient[Any, Any]]]


@pytest.fixture
def serve() -> Serve:
    @asynccontextmanager
    async def _serve(**env: str) -> AsyncIterator[TestClient[Any, Any]]:
        settings = DevModelSettings.from_env(
            {f"KAOS_DEVMODEL_{k.upper()}": v for k, v in env.items()}
        )
        async with TestClient(TestServer(create_app(settings))) as client:
            yield client

    return _serve


async def chat(client: TestClient[Any, Any], text: str, **extra: Any) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": text}], **extra}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.status == 200, await resp.text()
    doc: dict[str, Any] = await resp.json()
    return doc


async def test_startup_script_fires_and_reset_restores_it(serve: Serve) -> None:
    script = json.dumps([{"match": "ping", "reply": "pong", "times": 1}])
    async with serve(script=script) as client:
        assert (await chat(client, "ping"))["choices"][0]["message"]["content"] == "pong"
        assert (await chat(client, "ping"))["choices"][0]["message"]["content"] == "Echo: ping"
        listed = await (await client.get("/control/script")).json()
        assert listed == {"rules": [{"match": "ping", "reply": "pong", "times": 1, "fired": 1}]}

        replaced = await client.post("/control/script", json={"rules": [{"reply": "new"}]})
        assert (await replaced.json())["rules"] == [{"reply": "new", "fired": 0}]
        assert (await chat(client, "ping"))["choices"][0]["message"]["content"] == "new"

        assert (await client.post("/control/reset", json={})).status == 200
        assert (await chat(client, "ping"))["choices"][0]["message"]["content"] == "pong"
        stats = await (await client.get("/control/stats")).json()
        assert (stats["chat"], stats["scripted"], stats["echo"]) == (1, 1, 0)


async def test_script_file_in_yaml(serve: Serve, tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("rules:\n  - match: hi\n    reply: hello from yaml\n")
    async with serve(script_file=str(path)) as client:
        assert (await chat(client, "hi"))["choices"][0]["message"]["content"] == "hello from yaml"


async def test_bad_control_bodies_are_400(serve: Serve) -> None:
    async with serve() as client:
        bad_rule = await client.post("/control/script", json={"rules": [{"match": "x"}]})
        assert bad_rule.status == 400
        assert "exactly one" in (await bad_rule.json())["error"]["message"]
        for faults in ({"error_rate": 2}, {"routes": ["everything"]}, {"colour": "red"}):
            resp = await client.post("/control/faults", json=faults)
            assert resp.status == 400, faults
        not_json = await client.post(
            "/v1/chat/completions", data="{", headers={"Content-Type": "application/json"}
        )
        assert not_json.status == 400
        no_messages = await client.post("/v1/chat/completions", json={"model": "m"})
        assert no_messages.status == 400
        assert "messages" in (await no_messages.json())["error"]["message"]


async def test_faults_can_target_extraction_only(serve: Serve) -> None:
    async with serve() as client:
        faults = {"error_rate": 1.0, "status": 429, "routes": ["extraction"]}
        assert (await (await client.post("/control/faults", json=faults)).json())["status"] == 429
        assert (await client.get("/control/faults")).status == 200
        extraction = {
            "model": "m",
            "messages": [
                {"role": "system", "content": "# ROLE\n\nYou are a Memory Extractor."},
                {"role": "user", "content": "## New Messages\nuser: x\n"},
            ],
        }
        failed = await client.post("/v1/chat/completions", json=extraction)
        assert failed.status == 429
        assert (await failed.json())["error"]["code"] == "injected_fault"
        assert (await chat(client, "plain"))["choices"][0]["message"]["content"] == "Echo: plain"


async def test_startup_faults_from_settings(serve: Serve) -> None:
    async with serve(error_rate="1", error_status="502", fault_routes="models") as client:
        assert (await client.get("/v1/models")).status == 502
        assert (await chat(client, "fine"))["choices"][0]["message"]["content"] == "Echo: fine"


async def test_digest_cap_and_recorded_requests(serve: Serve) -> None:
    async with serve(digest_max_words="10") as client:
        body = {
            "model": "m",
            "messages": [
                {"role": "system", "content": "You write the KAOS session digest. Rules..."},
                {
                    "role": "user",
                    "content": "## Previous digest\nUser said: a b c.\n\n## New turns\n"
                    "user: d e f\nassistant: g h i\n",
                },
            ],
        }
        resp = await (await client.post("/v1/chat/completions", json=body)).json()
        assert (
            resp["choices"][0]["message"]["content"] == "User said: d e f.\nAssistant said: g h i."
        )
        (recorded,) = (await (await client.get("/control/requests")).json())["requests"]
        assert recorded["kind"] == "digest"
        assert recorded["messages"][1]["role"] == "user"


async def test_recorded_requests_carry_their_arrival_and_embedding_inputs(serve: Serve) -> None:
    # The erasure tests tell model calls that started after a point in time by these.
    async with serve(delay="0.2", fault_routes="chat") as client:
        before = time.time()
        await chat(client, "slow one")
        body = {"model": "e", "input": ["first text", "second text"]}
        assert (await client.post("/v1/embeddings", json=body)).status == 200
        (recorded,) = (await (await client.get("/control/requests")).json())["requests"]
        assert before <= recorded["received_at"] < before + 0.2, "arrival, not answer time"
        (embedded,) = (await (await client.get("/control/embeddings")).json())["requests"]
        assert embedded["input"] == ["first text", "second text"]
        assert embedded["received_at"] >= before
        await client.post("/control/reset", json={})
        assert (await (await client.get("/control/embeddings")).json())["requests"] == []


async def test_base_routes_and_answer_metrics(serve: Serve) -> None:
    async with serve() as client:
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status == 200
        await chat(client, "count me")
        metrics = await (await client.get("/metrics")).text()
        assert 'kaos_devmodel_answers_total{kind="echo"} 1.0' in metrics
        assert "kaos_devmodel_http_requests_total" in metrics
        model = await (await client.get("/v1/models/whatever")).json()
        assert model["id"] == "whatever"


def test_settings_errors_name_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="KAOS_DEVMODEL_SCRIPT: rule 0"):
        DevModelSettings.from_env({"KAOS_DEVMODEL_SCRIPT": '[{"match": "x"}]'})
    with pytest.raises(SettingsError, match="KAOS_DEVMODEL_SCRIPT_FILE: cannot read"):
        DevModelSettings.from_env({"KAOS_DEVMODEL_SCRIPT_FILE": str(tmp_path / "missing.json")})
    with pytest.raises(SettingsError, match="KAOS_DEVMODEL_FAULT_ROUTES"):
        DevModelSettings.from_env({"KAOS_DEVMODEL_FAULT_ROUTES": "chat,bogus"})
    with pytest.raises(SettingsError, match="KAOS_DEVMODEL_EMBEDDING_DIMS"):
        DevModelSettings.from_env({"KAOS_DEVMODEL_EMBEDDING_DIMS": "0"})


def test_main_exits_2_on_bad_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KAOS_DEVMODEL_ERROR_RATE", "3")
    with pytest.raises(SystemExit) as info:
        main(["--port", "0"])
    assert info.value.code == 2
    assert "KAOS_DEVMODEL_ERROR_RATE" in capsys.readouterr().err


async def test_a_request_held_across_a_reset_is_not_counted_after_it(serve: Serve) -> None:
    """A hung request the reset lets go answers afterwards, but counts nowhere: the next
    test's counters and request log start empty, whatever the last one left in flight."""
    async with serve() as client:
        hang = {"hang": True, "routes": ["chat"]}
        assert (await client.post("/control/faults", json=hang)).status == 200
        body = {"model": "m", "messages": [{"role": "user", "content": "held"}]}
        held = asyncio.ensure_future(client.post("/v1/chat/completions", json=body))
        async with asyncio.timeout(10):
            # Each poll is a request to the same server, so the held one gets to run.
            while (await (await client.get("/control/stats")).json())["hangs"] != 1:
                pass
        assert (await client.post("/control/reset", json={})).status == 200
        released = await held
        assert released.status == 200  # answered, after the reset
        stats = await (await client.get("/control/stats")).json()
        assert stats["chat"] == 0 and stats["echo"] == 0, stats
        assert (await (await client.get("/control/requests")).json())["requests"] == []
        assert (await chat(client, "fresh"))["choices"][0]["message"]["content"] == "Echo: fresh"
        assert (await (await client.get("/control/stats")).json())["chat"] == 1


EXTRACTION = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "# ROLE\n\nYou are a Memory Extractor."},
        {"role": "user", "content": "## New Messages\nuser: I keep bees\n"},
    ],
}
GOOD_EXTRACTION = '{"memory": [{"id": "0", "text": "I keep bees", "attributed_to": "user"}]}'


async def test_answer_faults_spoil_the_chosen_routes_answers(serve: Serve) -> None:
    async with serve() as client:

        async def extraction() -> tuple[str, str]:
            resp = await client.post("/v1/chat/completions", json=EXTRACTION)
            doc = await resp.json()
            (choice,) = doc["choices"]
            return choice["message"]["content"], choice["finish_reason"]

        assert await extraction() == (GOOD_EXTRACTION, "stop")
        spoiled = {
            "not_json": (NOT_JSON, "stop"),
            "empty": ("", "stop"),
            "cut_off": (GOOD_EXTRACTION[: len(GOOD_EXTRACTION) // 2], "length"),
            "verbose": ("\n".join([GOOD_EXTRACTION] * VERBOSE_REPEATS), "stop"),
        }
        for mode, expected in spoiled.items():
            faults: dict[str, Any] = {"answer": mode, "routes": ["extraction"]}
            assert (await client.post("/control/faults", json=faults)).status == 200
            assert await extraction() == expected, mode
            # Other kinds of request are answered as ever.
            assert (await chat(client, "hi"))["choices"][0]["message"]["content"] == "Echo: hi"

        # Only so many spoiled answers, then good ones again.
        faults = {"answer": "not_json", "answer_times": 2, "routes": ["extraction"]}
        assert (await client.post("/control/faults", json=faults)).status == 200
        assert [(await extraction())[0] for _ in range(3)] == [NOT_JSON, NOT_JSON, GOOD_EXTRACTION]
        stats = await (await client.get("/control/stats")).json()
        assert stats["extraction"] == 1 + len(spoiled) + 3

        # A streamed cut-off answer ends with the same finish reason.
        faults = {"answer": "cut_off", "routes": ["chat"]}
        assert (await client.post("/control/faults", json=faults)).status == 200
        resp = await client.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "abcdefgh"}],
                "stream": True,
            },
        )
        body = await resp.text()
        chunks = [
            json.loads(line.removeprefix("data: "))
            for line in body.splitlines()
            if line.startswith("data: {")
        ]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text == "Echo: abcdefgh"[: len("Echo: abcdefgh") // 2]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"

        bad = await client.post("/control/faults", json={"answer": "garbage"})
        assert bad.status == 400


async def test_answer_fault_from_settings(serve: Serve) -> None:
    async with serve(answer_fault="empty", fault_routes="extraction") as client:
        resp = await (await client.post("/v1/chat/completions", json=EXTRACTION)).json()
        assert resp["choices"][0]["message"]["content"] == ""
        assert (await chat(client, "ok"))["choices"][0]["message"]["content"] == "Echo: ok"
