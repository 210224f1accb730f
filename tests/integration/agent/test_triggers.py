"""Webhook triggers over HTTP on loopback, against the development model: a signed delivery
starts exactly one A2A task, which completes with the rendered message as its input; every
refusal (unknown trigger, bad or missing signature, stale timestamp, replayed delivery,
over the rate) answers its status and starts nothing, as the task list over A2A shows; and
replicas sharing a PostgreSQL task store share the replay check and the rate.

The agent is the application ``create_app`` builds (with ``setup_triggers`` added while the
factory does not call it yet), served on loopback in the test's loop; two of them on one
PostgreSQL database are two replicas."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from kaos_agent.app import A2A_KEY, create_app
from kaos_agent.settings import AgentSettings
from kaos_agent.triggers import setup_triggers
from kaos_agent.triggers.http import TRIGGERS_KEY
from kaos_agent.triggers.signature import sign

from tests.fixtures.agent import agent_env
from tests.support.devmodel import DevModel
from tests.support.procs import free_port

SECRET = b"s3cret-for-tests"
OWNER = "agent:hooks"
TEMPLATE = "Review PR #{{ number }} by {{ user.login }}: {{ title }} {{ labels }}"
PAYLOAD = {"number": 7, "user": {"login": "ada"}, "title": "Fix {{ number }}", "labels": ["x"]}
RENDERED = 'Review PR #7 by ada: Fix {{ number }} ["x"]'


def trigger_env(tmp_path: Path, *, max_per_minute: int = 10, **extra: object) -> dict[str, Any]:
    secrets = tmp_path / "trigger-secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "pr").write_bytes(SECRET + b"\n")
    triggers = [{"name": "pr", "message": TEMPLATE, "maxPerMinute": max_per_minute}]
    return {
        "AGENT_TRIGGERS": json.dumps(triggers),
        "AGENT_TRIGGER_SECRETS_DIR": str(secrets),
        **extra,
    }


@contextlib.asynccontextmanager
async def serve(devmodel: DevModel, env: dict[str, Any]) -> AsyncIterator[str]:
    port = free_port()
    settings = AgentSettings.from_env(agent_env(devmodel, port, "hooks", **env))
    app = create_app(settings)
    if TRIGGERS_KEY not in app:  # until the app factory registers the triggers itself
        setup_triggers(app, settings, lambda: app[A2A_KEY])
    server = TestServer(app, host="127.0.0.1", port=port)
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await server.close()


def signed_headers(
    body: bytes, *, delivery: str, at: float | None = None, secret: bytes = SECRET
) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    return {
        "X-Hub-Signature-256": sign(secret, stamp, body),
        "X-KAOS-Timestamp": stamp,
        "X-KAOS-Delivery": delivery,
        "Content-Type": "application/json",
    }


async def deliver(
    url: str, body: bytes, headers: dict[str, str], trigger: str = "pr"
) -> tuple[int, dict[str, Any], dict[str, str]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/triggers/{trigger}", data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(), dict(resp.headers)


async def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"X-Principal": OWNER, "A2A-Version": "1.0"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url + "/", json=body, headers=headers) as r,
    ):
        assert r.status == 200
        answer: dict[str, Any] = await r.json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def task_ids(url: str) -> list[str]:
    return [t["id"] for t in (await rpc(url, "ListTasks", {})).get("tasks", [])]


async def counted(url: str, outcome: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        text = await resp.text()
    line = f'kaos_agent_triggers_total{{outcome="{outcome}",trigger="pr"}} '
    found = [float(x.removeprefix(line)) for x in text.splitlines() if x.startswith(line)]
    return found[0] if found else 0.0


BODY = json.dumps(PAYLOAD).encode()


async def until(condition: Any, what: str, within: float = 30.0) -> Any:
    """Poll ``await condition()`` until it is truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not (value := await condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
    return value


async def test_a_signed_delivery_starts_one_task_with_the_rendered_message(
    tmp_path: Path, devmodel: DevModel
) -> None:
    async with serve(devmodel, trigger_env(tmp_path)) as url:
        assert await task_ids(url) == []
        status, answer, _ = await deliver(url, BODY, signed_headers(BODY, delivery="d-1"))
        assert status == 202, answer
        task_id = answer["taskId"]

        async def completed() -> dict[str, Any] | None:
            task = await rpc(url, "GetTask", {"id": task_id})
            return task if task["status"]["state"] == "TASK_STATE_COMPLETED" else None

        task = await until(completed, "the trigger's task to complete")
        assert await task_ids(url) == [task_id]
        assert task["history"][0]["parts"] == [{"text": RENDERED}]
        assert task["contextId"] == "trigger-pr-d-1"
        assert task["artifacts"][0]["parts"] == [{"text": f"Echo: {RENDERED}"}]
        asked = [r["messages"][-1]["content"] for r in await devmodel.arequests()]
        assert asked.count(RENDERED) == 1
        assert await counted(url, "started") == 1.0


async def test_refused_deliveries_answer_their_status_and_start_nothing(
    tmp_path: Path, devmodel: DevModel
) -> None:
    now = time.time()
    async with serve(devmodel, trigger_env(tmp_path)) as url:
        status, first, _ = await deliver(url, BODY, signed_headers(BODY, delivery="d-1"))
        assert status == 202
        before = await task_ids(url)

        wrong_key = signed_headers(BODY, delivery="d-2", secret=b"not the secret")
        unsigned = {k: v for k, v in wrong_key.items() if k != "X-Hub-Signature-256"}
        github_form = signed_headers(BODY, delivery="d-3")
        # GitHub's own digest, over the body alone: not the one scheme accepted.
        github_form["X-Hub-Signature-256"] = (
            "sha256=" + hmac.new(SECRET, BODY, "sha256").hexdigest()
        )
        tampered = signed_headers(BODY, delivery="d-4")
        cases = [
            ("unknown trigger", BODY, signed_headers(BODY, delivery="d-5"), "nope", 404,
             "unknown_trigger"),
            ("wrong key", BODY, wrong_key, "pr", 401, "invalid_signature"),
            ("no signature", BODY, unsigned, "pr", 401, "invalid_signature"),
            ("body changed", BODY + b" ", tampered, "pr", 401, "invalid_signature"),
            ("github form", BODY, github_form, "pr", 401, "invalid_signature"),
            ("old", BODY, signed_headers(BODY, delivery="d-6", at=now - 301), "pr", 401,
             "stale_timestamp"),
            ("future", BODY, signed_headers(BODY, delivery="d-7", at=now + 400), "pr", 401,
             "stale_timestamp"),
            ("replayed id", BODY, signed_headers(BODY, delivery="d-1", at=now + 1), "pr", 409,
             "replayed_delivery"),
            ("no delivery id", BODY,
             {k: v for k, v in signed_headers(BODY, delivery="x").items()
              if k != "X-KAOS-Delivery"}, "pr", 400, "bad_delivery_id"),
        ]  # fmt: skip
        for what, body, headers, trigger, want_status, want_code in cases:
            status, answer, sent = await deliver(url, body, headers, trigger)
            assert (status, answer["error"]["code"]) == (want_status, want_code), what
            assert "taskId" not in answer, what
            if status == 401:
                assert "WWW-Authenticate" in sent, what
        assert await task_ids(url) == before == [first["taskId"]]
        assert await counted(url, "invalid_signature") == 4.0
        assert await counted(url, "replayed_delivery") == 1.0


async def test_the_same_signed_delivery_under_another_id_is_a_replay(
    tmp_path: Path, devmodel: DevModel
) -> None:
    async with serve(devmodel, trigger_env(tmp_path)) as url:
        headers = signed_headers(BODY, delivery="d-1")
        status, _, _ = await deliver(url, BODY, headers)
        assert status == 202
        status, answer, _ = await deliver(url, BODY, {**headers, "X-KAOS-Delivery": "d-2"})
        assert (status, answer["error"]["code"]) == (409, "replayed_delivery")
        assert len(await task_ids(url)) == 1


async def test_deliveries_over_the_rate_are_refused_with_retry_after(
    tmp_path: Path, devmodel: DevModel
) -> None:
    async with serve(devmodel, trigger_env(tmp_path, max_per_minute=2)) as url:
        for n in (1, 2):
            body = json.dumps({**PAYLOAD, "number": n}).encode()
            status, _, _ = await deliver(url, body, signed_headers(body, delivery=f"d-{n}"))
            assert status == 202
        # GitHub's delivery header names a delivery as well.
        headers = signed_headers(BODY, delivery="x", at=time.time() + 1)
        del headers["X-KAOS-Delivery"]
        headers["X-GitHub-Delivery"] = "d-3"
        status, answer, sent = await deliver(url, BODY, headers)
        assert (status, answer["error"]["code"]) == (429, "rate_limited")
        assert 1 <= int(sent["Retry-After"]) <= 60
        assert len(await task_ids(url)) == 2


async def test_replay_memory_survives_a_restart_on_a_local_store(
    tmp_path: Path, devmodel: DevModel
) -> None:
    env = trigger_env(tmp_path, TASK_STORE_TYPE="local", TASK_STORE_PATH=tmp_path / "tasks.db")
    headers = signed_headers(BODY, delivery="d-1")
    async with serve(devmodel, env) as url:
        status, _, _ = await deliver(url, BODY, headers)
        assert status == 202
    async with serve(devmodel, env) as url:
        status, answer, _ = await deliver(url, BODY, headers)
        assert (status, answer["error"]["code"]) == (409, "replayed_delivery")
        assert len(await task_ids(url)) == 1


@pytest.mark.parametrize("second", ["same id", "over the rate"])
async def test_replicas_sharing_postgresql_share_the_replay_check_and_the_rate(
    tmp_path: Path, devmodel: DevModel, pg_dsn: str, second: str
) -> None:
    def replica(pod: str) -> dict[str, Any]:
        return trigger_env(
            tmp_path,
            max_per_minute=1,
            TASK_STORE_TYPE="external",
            TASK_STORE_DSN=pg_dsn,
            POD_NAME=pod,
        )

    async with serve(devmodel, replica("one")) as one, serve(devmodel, replica("two")) as two:
        status, first, _ = await deliver(one, BODY, signed_headers(BODY, delivery="d-1"))
        assert status == 202
        again = "d-1" if second == "same id" else "d-2"
        status, answer, _ = await deliver(
            two, BODY, signed_headers(BODY, delivery=again, at=time.time() + 1)
        )
        want = (409, "replayed_delivery") if second == "same id" else (429, "rate_limited")
        assert (status, answer["error"]["code"]) == want
        assert await task_ids(two) == [first["taskId"]]


async def test_replicas_admitting_at_once_never_exceed_the_rate_between_them(
    tmp_path: Path, devmodel: DevModel, pg_dsn: str
) -> None:
    def replica(pod: str) -> dict[str, Any]:
        return trigger_env(
            tmp_path,
            max_per_minute=3,
            TASK_STORE_TYPE="external",
            TASK_STORE_DSN=pg_dsn,
            POD_NAME=pod,
        )

    async with serve(devmodel, replica("one")) as one, serve(devmodel, replica("two")) as two:

        async def send(n: int) -> int:
            body = json.dumps({**PAYLOAD, "number": n}).encode()
            status, _, _ = await deliver(
                (one, two)[n % 2], body, signed_headers(body, delivery=f"d-{n}")
            )
            return status

        statuses = await asyncio.gather(*(send(n) for n in range(12)))
        assert sorted(statuses) == [202] * 3 + [429] * 9
        assert len(await task_ids(one)) == 3
