"""Issue 36's acceptance on the real node: an Agent with three replicas sharing an external
(PostgreSQL) task store, behind its Service, under a bounded A2A load while one replica's
pod is deleted.

It runs on the kind suite's deployment (the chart on images built from this checkout, the
development model behind LiteLLM, the development PostgreSQL whose connection Secret the
suite's namespace holds) when that deployment is on the test cluster's real node: the load
runs in the node's network namespace, so the Service's kube-proxy rules spread it over the
replicas as they would a pod's requests. On a kind cluster it is skipped (its Service
addresses do not route from the host).

Each task asks the development model for one call of a real MCP tool (``tick``, an
MCPServer whose log line per call is the count) with the task's own label; the model's
script answers each label with its own call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from kaos_agent.a2a.checkpoint import INTERRUPTED

from tests.e2e.kind.helpers import (
    EXTERNAL_TASK_STORE,
    KindDeployment,
    devmodel_agent,
    post_json,
    python_tools,
    wait_ready,
)
from tests.support.a2a_load import label_of
from tests.support.cluster import wait_until
from tests.support.procs import REPO_ROOT

pytestmark = [pytest.mark.kind, pytest.mark.realnode, pytest.mark.timeout(1800)]

TASKS = int(os.environ.get("KAOS_REPLICA_TASKS", "200"))
# Tasks sent a second. Unbounded, 200 tasks at once on two cores starve the LiteLLM proxy
# of the sample ModelAPI until its liveness probe (1 s) restarts it, and runs fail on the
# model ("the model could not answer"): this is the node's throughput, not the agent's.
RATE = float(os.environ.get("KAOS_REPLICA_RATE", "5"))
READY_TIMEOUT = 300.0
# A slow call: longer than the agent's grace period (the operator's 30 s less the preStop
# sleep and the margin: 15 s) and its preStop sleep (5 s).
SLOW = 30.0
TICK_MARK = "kaos-tick "
TOOLS = '''
import asyncio


async def tick(label: str, seconds: float = 0.5) -> str:
    """Counts a call (one log line) and takes ``seconds``."""
    print("kaos-tick " + label, flush=True)
    await asyncio.sleep(seconds)
    return "ticked " + label
'''


def _apply(kind: KindDeployment, *objects: dict[str, Any]) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    kind.kubectl("apply", "-f", "-", input=doc)


def _get(kind: KindDeployment, *args: str) -> dict[str, Any]:
    found = kind.get(*args)
    assert found is not None, args
    return found


def _objects(run: str) -> tuple[str, str, list[dict[str, Any]]]:
    tools, agent = f"tick-{run}", f"replicas-{run}"
    obj = devmodel_agent(
        agent,
        mcpServers=[tools],
        replicas=3,
        taskStore=EXTERNAL_TASK_STORE,
        config={"reasoningLoopMaxSteps": 4},
        # A killed replica's tasks are claimed within seconds, not the default half minute.
        container={"env": [{"name": "TASK_LEASE_SECONDS", "value": "6"}]},
    )
    return tools, agent, [python_tools(tools, TOOLS), obj]


def _slow(i: int) -> bool:
    """The tasks whose call outlasts the grace period: sent before the pod is deleted, those
    it runs are handed over with their call in flight (resumed elsewhere, the call reported
    interrupted)."""
    return i % 10 == 5 and i < TASKS // 2


def _script(run: str) -> list[dict[str, Any]]:
    """One rule per task: its label calls ``tick`` with that label; a tool result answers."""
    rules: list[dict[str, Any]] = [
        {
            "match": f"^{label_of(run, i)}$",
            "tool_call": {
                "name": "tick",
                "arguments": {"label": label_of(run, i), "seconds": SLOW if _slow(i) else 0.5},
            },
        }
        for i in range(TASKS)
    ]
    rules.append({"after_tool": "tick", "reply": "done: {result}"})
    return rules


def _agent_pods(kind: KindDeployment, agent: str) -> list[dict[str, Any]]:
    pods = _get(kind, "pods", "-l", f"app.kubernetes.io/instance={agent}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and all(s.get("ready") for s in statuses)


def test_three_replicas_answer_every_task_while_one_pod_is_deleted(kind: KindDeployment) -> None:
    if kind.in_netns is None:
        pytest.skip(
            "the load needs the real node's network namespace (a kind cluster's is not the host's)"
        )
    run = uuid.uuid4().hex[:6]
    tools, agent, objects = _objects(run)
    _apply(kind, *objects)
    try:
        wait_ready(kind, agent, READY_TIMEOUT)
        wait_until(
            lambda: len([p for p in _agent_pods(kind, agent) if _ready(p)]) == 3,
            timeout=READY_TIMEOUT,
            what="three agent replicas Ready",
        )
        service = _get(kind, "service", agent)
        url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
        with kind.forward("devmodel", 8000) as model:
            post_json(model + "/control/script", {"rules": _script(run)})
            report, deleted, seconds = _load(kind, kind.in_netns, url, run, agent)
            post_json(model + "/control/reset", {})
        ticks = _tool_calls(kind, tools)
        resumed = _resumed(kind, agent)
        print(
            f"\n{TASKS} tasks ended in {seconds:.1f}s (sent in {report['seconds_to_send']:.1f}s)"
            f"; pod {deleted} deleted; {resumed} resumed on another replica;"
            f" {report['refused_stopping']} sends refused by the stopping replica, sent again"
        )
        _judge(report, ticks)
        # Each task handed over (claimed by a surviving replica) had its call in flight: the
        # model was told it was interrupted, and it was not made again (``_judge``).
        interrupted = [f for f in report["final"].values() if f["answer"] == f"done: {INTERRUPTED}"]
        assert len(interrupted) == resumed, (len(interrupted), resumed)
    finally:
        kind.kubectl(
            "delete",
            f"agent/{agent}",
            f"mcpserver/{tools}",
            "--wait=false",
            check=False,
        )


def _load(
    kind: KindDeployment, in_netns: Any, url: str, run: str, agent: str
) -> tuple[dict[str, Any], str, float]:
    """Run the load; once half the tasks are sent, delete one replica's pod (it runs some,
    and more are sent while it stops)."""
    argv = in_netns(
        sys.executable, "-m", "tests.support.a2a_load", url, run, str(TASKS), f"--rate={RATE}"
    )
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deleted = ""
    try:
        for line in proc.stdout:
            if line.strip() == "SENT":
                continue
            if line.strip() == "HALF":
                deleted = _agent_pods(kind, agent)[0]["metadata"]["name"]
                kind.kubectl("delete", "pod", deleted, "--wait=false")
                continue
            report: dict[str, Any] = json.loads(line)
            break
        else:
            raise AssertionError("the load ended without a report")
    finally:
        assert proc.wait(timeout=60) == 0
    return report, deleted, time.monotonic() - started


def _tool_calls(kind: KindDeployment, tools: str) -> Counter[str]:
    logs = kind.kubectl(
        "logs",
        "-l",
        f"app.kubernetes.io/instance={tools}",
        "--tail=-1",
        "--max-log-requests=5",
    ).stdout
    return Counter(
        line.split(TICK_MARK, 1)[1].strip() for line in logs.splitlines() if TICK_MARK in line
    )


def _resumed(kind: KindDeployment, agent: str) -> int:
    logs = kind.kubectl(
        "logs",
        "-l",
        f"app.kubernetes.io/instance={agent}",
        "--tail=-1",
        "--max-log-requests=5",
        check=False,
    ).stdout
    return logs.count("resuming a task whose replica stopped")


def _judge(report: dict[str, Any], ticks: Counter[str]) -> None:
    ends = Counter((f["state"], f.get("reason")) for f in report["final"].values())
    print(f"ends: {dict(ends)}")
    assert report["send_errors"] == [], report["send_errors"][:5]
    assert len(report["sent"]) == TASKS
    assert report["not_found"] == [], report["not_found"][:5]
    assert report["other_errors"] == [], report["other_errors"][:5]
    ids = set(report["sent"].values())
    assert set(report["final"]) == ids, f"{len(ids - set(report['final']))} tasks never ended"
    assert report["listed_total"] and all(n == TASKS for n in report["listed_total"])
    assert all(missing == 0 for missing in report["listed_missing"])
    # A cancel answered canceled sticks; one refused found the task already ended.
    for task_id, answer in report["cancels"].items():
        ended = report["final"][task_id]["state"]
        if answer == "TASK_STATE_CANCELED":
            assert ended == "TASK_STATE_CANCELED", (task_id, ended)
        else:
            assert answer == "-32002" and ended != "TASK_STATE_CANCELED", (task_id, answer)
    assert any(a == "TASK_STATE_CANCELED" for a in report["cancels"].values())
    # Every task not cancelled completed, its tool called exactly once; no call twice.
    for label, task_id in report["sent"].items():
        final = report["final"][task_id]
        if report["cancels"].get(task_id) == "TASK_STATE_CANCELED":
            assert ticks[label] <= 1, (label, ticks[label])
            continue
        assert final["state"] == "TASK_STATE_COMPLETED", (label, final)
        assert final["answer"] in (f"done: ticked {label}", f"done: {INTERRUPTED}"), final
        assert ticks[label] == 1, (label, ticks[label])
    assert max(ticks.values()) == 1
