"""A steady stream of chat turns and A2A tasks against one Agent's Service, until told to
stop: what flows while the kind suite's chart upgrade rolls every workload.

Run as a process (``python -m tests.support.steady_load URL AGENT RUN``) where the
Service's address routes (the real node's network namespace). Each chat turn has a
session of its own and a marker word (``up-<run>-...``) the test looks for in the memory
store afterwards; each A2A task is a blocking ``SendMessage``. Two clients of each kind
run in a loop, each pausing ``PAUSE_SECONDS`` between requests. It prints ``STARTED``
once one turn of each kind succeeded, stops sending when a line arrives on its stdin (or
it closes), waits for what is in flight, and prints one line of JSON: the report.

Only a request that provably started nothing is sent again, as a client would: a
connection refused, or a 503 whose error says the replica is shutting down. Those are
counted (``retried``); any other failure is recorded and judged by the test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

CLIENTS = 2
# Between two requests of one client: a steady stream, bounded so that the node's model
# proxy (LiteLLM, on two cores) is not what fails.
PAUSE_SECONDS = 0.5
TIMEOUT = aiohttp.ClientTimeout(total=60)
ATTEMPTS = 10
# GetTask polls of a task a send answered still working (0.2 s apart).
FOLLOW_POLLS = 300


@dataclass
class Report:
    chats: dict[str, str] = field(default_factory=dict)  # session -> marker, answered
    tasks: int = 0  # A2A tasks completed
    retried: int = 0
    followed: int = 0  # A2A tasks answered still working, followed to their end
    failures: list[str] = field(default_factory=list)


def _shutting_down(status: int, body: bytes) -> bool:
    return status == 503 and b"shutting_down" in body


async def _paused(stop: asyncio.Event) -> bool:
    """True once told to stop, else after the pause between two requests."""
    try:
        await asyncio.wait_for(stop.wait(), PAUSE_SECONDS)
    except TimeoutError:
        return False
    return True


def _said(status: int, answer: dict[str, Any] | None, text: str) -> str:
    return f"{status} {json.dumps(answer)[:300] if answer is not None else text}"


async def _send(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str],
    report: Report,
) -> tuple[int, dict[str, Any] | None, str]:  # fmt: skip
    """The answer's status, JSON and text; sent again only when nothing started."""
    last = "the replica was shutting down"
    for _ in range(ATTEMPTS):
        try:
            async with http.post(url, json=body, headers=headers, timeout=TIMEOUT) as resp:
                raw = await resp.read()
                if _shutting_down(resp.status, raw):
                    report.retried += 1
                    last = "the replica was shutting down"
                    await asyncio.sleep(0.2)
                    continue
                try:
                    return resp.status, json.loads(raw), ""
                except ValueError:
                    return resp.status, None, raw[:200].decode(errors="replace")
        except aiohttp.ClientConnectorError as exc:
            # Refused: the request reached no pod.
            report.retried += 1
            last = type(exc).__name__
            await asyncio.sleep(0.2)
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Taken and then lost (a pod that stopped mid-request): a failure.
            return 0, None, type(exc).__name__
    return 0, None, f"gave up after {ATTEMPTS} attempts ({last})"


async def _chats(
    http: aiohttp.ClientSession, url: str, agent: str, run: str, client: int,
    report: Report, stop: asyncio.Event,
) -> None:  # fmt: skip
    n = 0
    while not await _paused(stop):
        n += 1
        marker = f"up-{run}-c{client}-{n}"
        session = f"session-{marker}"
        headers = {"X-Session-Id": session, "X-Principal": f"upgrader-{run}"}
        body = {"model": agent, "messages": [{"role": "user", "content": f"remember {marker}"}]}
        status, answer, text = await _send(
            http, f"{url}/v1/chat/completions", body, headers, report
        )
        if status == 200 and answer is not None and answer.get("choices"):
            report.chats[session] = marker
        else:
            report.failures.append(
                f"chat {marker}: {status} {json.dumps(answer)[:300] if answer else text}"
            )


async def _tasks(
    http: aiohttp.ClientSession, url: str, run: str, client: int, report: Report,
    stop: asyncio.Event,
) -> None:  # fmt: skip
    n = 0
    while not await _paused(stop):
        n += 1
        marker = f"task-{run}-c{client}-{n}"
        message = {
            "messageId": marker, "role": "ROLE_USER", "parts": [{"text": f"note {marker}"}],
        }  # fmt: skip
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        headers = {"X-Principal": f"upgrader-{run}", "A2A-Version": "1.0"}
        status, answer, text = await _send(http, f"{url}/", body, headers, report)
        task = ((answer or {}).get("result") or {}).get("task") or {}
        # A blocking send may answer a task still working (its run handed over to another
        # replica as the pod stopped): a client follows it with GetTask, as here.
        follow = 0
        while status == 200 and _state(task) in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"):
            follow += 1
            if follow > FOLLOW_POLLS:
                break
            await asyncio.sleep(0.2)
            get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
            status, answer, text = await _send(http, f"{url}/", get, headers, report)
            task = ((answer or {}).get("result") or {}) if answer is not None else {}
        if follow:
            report.followed += 1
        if status == 200 and _state(task) == "TASK_STATE_COMPLETED":
            report.tasks += 1
        elif status == 200 and task:
            said = " ".join(
                p.get("text", "") for p in task["status"].get("message", {}).get("parts", [])
            )
            report.failures.append(f"task {marker}: {_state(task)}: {said[:300]}")
        else:
            report.failures.append(f"task {marker}: {_said(status, answer, text)}")


def _state(task: dict[str, Any]) -> str:
    return str((task.get("status") or {}).get("state", ""))


async def _main(url: str, agent: str, run: str) -> Report:
    report = Report()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stop.set)
    # A connection per request, as kube-proxy balances them: a kept-alive connection that
    # a stopping pod closes as a request goes out is a client's race, not the upgrade's.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        workers = [
            *(_chats(http, url, agent, run, i, report, stop) for i in range(CLIENTS)),
            *(_tasks(http, url, run, i, report, stop) for i in range(CLIENTS)),
        ]
        running = [asyncio.ensure_future(w) for w in workers]
        while not (report.chats and report.tasks) and not stop.is_set():
            if report.failures:
                break
            await asyncio.sleep(0.05)
        print("STARTED", flush=True)
        await asyncio.gather(*running)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("agent")
    parser.add_argument("run")
    args = parser.parse_args()
    report = asyncio.run(_main(args.url.rstrip("/"), args.agent, args.run))
    print(json.dumps(asdict(report)), flush=True)


if __name__ == "__main__":
    main()
