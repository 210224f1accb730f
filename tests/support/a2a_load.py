"""A bounded A2A load against one URL (an Agent's Service), for the real node's replica
test: ``N`` tasks sent without waiting (every tenth cancelled right after it was sent),
then all of them got and listed until every one has ended. Every answer is recorded as it
came, so the test judges them.

Run as a process (``python -m tests.support.a2a_load URL RUN N``) where the Service's
address routes: in the real node's network namespace, its kube-proxy rules spread the
requests over the replicas as they would a pod's. Tasks go at a bounded rate; it prints
``HALF`` once half were accepted (the test deletes a pod then), ``SENT`` once all were
and, last, one line of JSON: the report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
PARALLEL = 16
# Every CANCEL_EVERY-th task is cancelled (just after it was sent).
CANCEL_EVERY = 10


@dataclass
class Report:
    sent: dict[str, str] = field(default_factory=dict)  # label -> task id
    send_errors: list[str] = field(default_factory=list)
    refused_stopping: int = 0  # sends a stopping replica refused (then sent again)
    cancels: dict[str, str] = field(default_factory=dict)  # task id -> canceled | refused code
    not_found: list[str] = field(default_factory=list)  # "<method> <id>"
    other_errors: list[str] = field(default_factory=list)
    final: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> state, answer
    listed_total: list[int] = field(default_factory=list)
    listed_missing: list[int] = field(default_factory=list)
    seconds_to_send: float = 0.0
    seconds_to_end: float = 0.0


def label_of(run: str, i: int) -> str:
    return f"job-{run}-{i:03d}"


class Client:
    def __init__(self, http: aiohttp.ClientSession, url: str, principal: str) -> None:
        self.http, self.url, self.principal = http, url, principal

    async def rpc(
        self, method: str, params: dict[str, Any], *, retry: bool = True
    ) -> tuple[int, dict[str, Any]]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"X-Principal": self.principal, "A2A-Version": "1.0"}
        # A connection the deleted pod closed is retried (not a send: it could start a
        # second task): the answer is what is judged.
        attempts = 5 if retry else 1
        for attempt in range(attempts):
            try:
                async with self.http.post(self.url + "/", json=body, headers=headers) as resp:
                    return resp.status, await resp.json(content_type=None)
            except (aiohttp.ClientConnectionError, TimeoutError):
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")


def _record_error(report: Report, method: str, task_id: str, answer: dict[str, Any]) -> None:
    error = answer.get("error") or {}
    if "not found" in str(error.get("message", "")):
        report.not_found.append(f"{method} {task_id}")
    else:
        report.other_errors.append(f"{method} {task_id}: {json.dumps(error)[:300]}")


async def send_all(client: Client, report: Report, run: str, count: int, rate: float) -> None:
    """Send ``count`` tasks, ``rate`` a second (0: as fast as ``PARALLEL`` allows); print
    ``HALF`` once half of them were accepted."""
    gate = asyncio.Semaphore(PARALLEL)
    start = time.monotonic()

    async def one(i: int) -> None:
        if rate > 0:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        label = label_of(run, i)
        params = {
            "message": {
                "messageId": f"m-{label}",
                "contextId": f"c-{label}",
                "role": "ROLE_USER",
                "parts": [{"text": label}],
            },
            "configuration": {"returnImmediately": True},
        }
        for attempt in range(8):
            async with gate:
                status, answer = await client.rpc("SendMessage", params, retry=False)
            # A replica that is stopping refused it (no task made): sent again, as a
            # client does, and the Service takes it elsewhere.
            if status != 503 or (answer.get("error") or {}).get("data", {}).get("code") != (
                "shutting_down"
            ):
                break
            report.refused_stopping += 1
            await asyncio.sleep(0.2 * (attempt + 1))
        if status == 200 and "result" in answer:
            report.sent[label] = answer["result"]["task"]["id"]
            if len(report.sent) == count // 2:
                print("HALF", flush=True)
            if i % CANCEL_EVERY == 0:  # while it runs (it may have ended: then refused)
                await cancel(client, report, report.sent[label])
        else:
            report.send_errors.append(f"{label}: {status} {json.dumps(answer)[:300]}")

    await asyncio.gather(*(one(i) for i in range(count)))


async def cancel(client: Client, report: Report, task_id: str) -> None:
    status, answer = await client.rpc("CancelTask", {"id": task_id})
    if status == 200 and "result" in answer:
        report.cancels[task_id] = answer["result"]["status"]["state"]
    else:
        report.cancels[task_id] = str((answer.get("error") or {}).get("code", status))
        if answer.get("error", {}).get("code") != -32002:  # not cancelable: it ended
            _record_error(report, "CancelTask", task_id, answer)


async def until_all_ended(client: Client, report: Report, within: float) -> None:
    gate = asyncio.Semaphore(PARALLEL)
    deadline = time.monotonic() + within
    pending = set(report.sent.values())

    async def get(task_id: str) -> None:
        async with gate:
            status, answer = await client.rpc("GetTask", {"id": task_id})
        if status != 200 or "result" not in answer:
            _record_error(report, "GetTask", task_id, answer)
            return
        task = answer["result"]
        state = task["status"]["state"]
        if state in TERMINAL:
            artifacts = task.get("artifacts") or [{}]
            parts = artifacts[0].get("parts") or [{}]
            why = (task["status"].get("message") or {}).get("parts") or [{}]
            report.final[task_id] = {
                "state": state,
                "answer": parts[0].get("text"),
                "reason": why[0].get("text"),
            }
            pending.discard(task_id)

    while pending and time.monotonic() < deadline:
        await asyncio.gather(*(get(i) for i in list(pending)))
        status, answer = await client.rpc("ListTasks", {"pageSize": 1000})
        if status == 200 and "result" in answer:
            listed = {t["id"] for t in answer["result"].get("tasks", [])}
            report.listed_total.append(int(answer["result"].get("totalSize", 0)))
            report.listed_missing.append(len(set(report.sent.values()) - listed))
        else:
            _record_error(report, "ListTasks", "-", answer)
        if pending:
            await asyncio.sleep(0.5)


async def main(url: str, run: str, count: int, rate: float, within: float) -> Report:
    report = Report()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        client = Client(http, url, principal=f"load-{run}")
        started = time.monotonic()
        await send_all(client, report, run, count, rate)
        report.seconds_to_send = time.monotonic() - started
        print("SENT", flush=True)
        await until_all_ended(client, report, within)
        report.seconds_to_end = time.monotonic() - started
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("run")
    parser.add_argument("count", type=int)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--within", type=float, default=600.0)
    args = parser.parse_args()
    done = asyncio.run(main(args.url, args.run, args.count, args.rate, args.within))
    sys.stdout.write(json.dumps(asdict(done)) + "\n")
