"""Issue 37's approval gate on the kind suite's deployment: a paused task survives the
deletion of every pod of its Agent.

The Agent has two replicas and an external (PostgreSQL) task store; its gate holds every
call of ``charge``, a real MCP tool whose log line per call is the count. The development
model's script makes the call; the task pauses in input-required with nothing charged;
every agent pod is deleted and the Deployment's new pods come up; the task is still
waiting there, another user's approval is refused (403) and changes nothing, the run's
own user approves, and the call is made once and the run completes.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.e2e.kind.helpers import (
    AGENT_PORT,
    EXTERNAL_TASK_STORE,
    KindDeployment,
    devmodel_agent,
    post_json,
    python_tools,
    token,
    wait_ready,
)
from tests.support.cluster import wait_until

pytestmark = [pytest.mark.kind, pytest.mark.timeout(900)]

READY_TIMEOUT = 300.0
MARK = "kaos-charge "
TOOLS = '''
def charge(label: str) -> str:
    """Charges the card (one log line per call: the count)."""
    print("kaos-charge " + label, flush=True)
    return "charged " + label
'''


def _objects(run: str) -> tuple[str, str, list[dict[str, Any]]]:
    tools, agent = f"pay-{run}", f"gated-{run}"
    obj = devmodel_agent(
        agent,
        mcpServers=[tools],
        replicas=2,
        taskStore=EXTERNAL_TASK_STORE,
        approvals={"rules": [{"mcpServer": tools, "tools": ["charge"]}]},
    )
    return tools, agent, [python_tools(tools, TOOLS), obj]


def _rpc(url: str, principal: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = {"Content-Type": "application/json", "X-Principal": principal, "A2A-Version": "1.0"}
    request = urllib.request.Request(url + "/", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _state(answer: Any) -> str:
    result = answer.get("result") or {}
    task = result.get("task", result)
    return str(task.get("status", {}).get("state", ""))


def _pods(kind: KindDeployment, agent: str) -> set[str]:
    found = kind.get("pods", "-l", f"app.kubernetes.io/instance={agent}") or {}
    return {
        p["metadata"]["name"]
        for p in found.get("items") or []
        if not p["metadata"].get("deletionTimestamp")
        and all(s.get("ready") for s in p.get("status", {}).get("containerStatuses") or [{}])
    }


def _charges(kind: KindDeployment, tools: str) -> list[str]:
    logs = kind.kubectl("logs", "-l", f"app.kubernetes.io/instance={tools}", "--tail=-1").stdout
    return [line.split(MARK, 1)[1].strip() for line in logs.splitlines() if MARK in line]


def test_a_paused_task_survives_deleting_every_pod_of_its_agent(kind: KindDeployment) -> None:
    run = token()[:8]
    tools, agent, objects = _objects(run)
    label = f"pay-{run}"
    kind.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": objects}))  # fmt: skip
    try:
        wait_ready(kind, agent, READY_TIMEOUT)
        wait_until(lambda: len(_pods(kind, agent)) == 2, timeout=READY_TIMEOUT,
                   what="both agent replicas Ready")  # fmt: skip
        script = [
            {"match": f"^{label}$", "tool_call": {"name": "charge", "arguments": {"label": label}}},
            {"after_tool": "charge", "reply": "done: {result}"},
        ]
        message = {"messageId": f"m-{run}", "role": "ROLE_USER", "parts": [{"text": label}]}
        with kind.forward("devmodel", 8000) as model:
            post_json(model + "/control/script", {"rules": script})
            with kind.forward(agent, AGENT_PORT) as url:
                status, answer = _rpc(url, "alice", "SendMessage", {"message": message})
            assert status == 200, answer
            assert _state(answer) == "TASK_STATE_INPUT_REQUIRED", answer
            task_id = (answer["result"].get("task") or answer["result"])["id"]
            assert _charges(kind, tools) == []

            before = _pods(kind, agent)
            kind.kubectl("delete", "pod", *sorted(before), "--wait=true", timeout=120)
            wait_until(
                lambda: len(_pods(kind, agent) - before) == 2,
                timeout=READY_TIMEOUT,
                what="two new agent pods Ready",
            )
            with kind.forward(agent, AGENT_PORT) as url:
                status, answer = _rpc(url, "alice", "GetTask", {"id": task_id})
                assert _state(answer) == "TASK_STATE_INPUT_REQUIRED", answer
                approve = {"messageId": f"d-{run}", "role": "ROLE_USER", "taskId": task_id,
                           "parts": [{"data": {"decision": "approve"}}]}  # fmt: skip
                refused, answer = _rpc(url, "bob", "SendMessage", {"message": approve})
                assert refused == 403, answer
                status, answer = _rpc(url, "alice", "GetTask", {"id": task_id})
                assert _state(answer) == "TASK_STATE_INPUT_REQUIRED", answer

                status, answer = _rpc(url, "alice", "SendMessage", {"message": approve})
                assert status == 200, answer

                def ended() -> dict[str, Any] | None:
                    _, got = _rpc(url, "alice", "GetTask", {"id": task_id})
                    return got if _state(got) == "TASK_STATE_COMPLETED" else None

                done = wait_until(ended, timeout=120, what="the approved task completed")
            post_json(model + "/control/reset", {})
        assert f"done: charged {label}" in json.dumps(done)
        assert _charges(kind, tools) == [label]
    finally:
        kind.kubectl("delete", f"agent/{agent}", f"mcpserver/{tools}", "--wait=false",
                     check=False)  # fmt: skip
