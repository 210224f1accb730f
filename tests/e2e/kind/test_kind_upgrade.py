"""Issue 36's rolling upgrade: ``helm upgrade`` of the release to new images while chat
turns and A2A tasks flow, on the kind suite's deployment on the real node.

The Agent under traffic has two replicas (so a PodDisruptionBudget), an external task store
and the external MemoryStore (two stateless replicas on PostgreSQL). The upgrade gives
every KAOS image a new tag (the same image content under a new name in the node's
containerd: what the chart sees of a release's new version), so the chart rolls the
operator and the new operator rolls every agent and memory service it deployed. The
stream (``tests.support.steady_load``) runs in the node's network namespace, through the
Agent's Service, from before the upgrade until every rolled workload is Ready again.

Judged: no request failed (only a refused connection or a stopping replica's 503 is sent
again, as a client would), and every answered chat turn is in the memory store (its
session's window holds it): no memory write was lost.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pytest
from kaos_core.memory.client import MemoryServiceClient

from tests.e2e.kind.helpers import (
    EXTERNAL_TASK_STORE,
    KindDeployment,
    devmodel_agent,
    memory_of,
    token,
    wait_ready,
)
from tests.fixtures.helm import locate_helm
from tests.support.cluster import wait_until
from tests.support.procs import REPO_ROOT

pytestmark = [pytest.mark.kind, pytest.mark.realnode, pytest.mark.timeout(1800)]

RELEASE, RELEASE_NAMESPACE = "kaos", "kaos-system"
STORE = "memory-pgvector"
READY_TIMEOUT = 300.0
UPGRADE_TIMEOUT = 600.0


def _agent(name: str) -> dict[str, Any]:
    return devmodel_agent(
        name,
        replicas=2,
        taskStore=EXTERNAL_TASK_STORE,
        config={"memory": {"type": "remote", "memoryStore": STORE}},
    )


def _images(deployment: dict[str, Any] | None) -> list[str]:
    assert deployment is not None
    return [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]


def _rolled(kind: KindDeployment, namespace: str, name: str, image: str) -> bool:
    """The Deployment asks for ``image`` and every pod it keeps runs it, Ready."""
    found = kind.get("deployment", name, "-n", namespace)
    if found is None or image not in _images(found):
        return False
    status = found.get("status") or {}
    want = found["spec"].get("replicas", 1)
    return bool(
        status.get("observedGeneration") == found["metadata"]["generation"]
        and status.get("updatedReplicas") == want
        and status.get("readyReplicas") == want
        and status.get("replicas") == want
    )


def _retag(kind: KindDeployment, image: str, suffix: str) -> str:
    assert kind.ctr is not None
    new = f"{image}-{suffix}"
    subprocess.run(kind.ctr("images", "tag", "--force", image, new), check=True, timeout=60)
    return new


def _tag(image: str) -> str:
    return image.rsplit(":", 1)[1]


def test_helm_upgrade_under_traffic_fails_no_request_and_loses_no_write(
    kind: KindDeployment,
) -> None:
    if kind.in_netns is None or kind.ctr is None:
        pytest.skip("the stream runs in the real node's network namespace (not a kind cluster)")
    helm = locate_helm()
    assert helm is not None
    run = token()[:8]
    agent = f"upgrade-{run}"
    kind.kubectl("apply", "-f", "-", input=json.dumps(_agent(agent)))
    try:
        wait_ready(kind, agent, READY_TIMEOUT)
        wait_until(
            lambda: _rolled(kind, kind.namespace, agent, _images(kind.get("deployment", agent))[0]),
            timeout=READY_TIMEOUT,
            what="both agent replicas Ready",
        )
        operator = kind.get("deployment", "-n", RELEASE_NAMESPACE, "-l",
                            "app.kubernetes.io/component=operator")  # fmt: skip
        assert operator is not None and len(operator["items"]) == 1, operator
        old = {
            "operator": _images(operator["items"][0])[0],
            "agent": _images(kind.get("deployment", agent))[0],
            "memory": _images(kind.get("deployment", STORE))[0],
        }
        new = {name: _retag(kind, image, f"up{run}") for name, image in old.items()}

        service = kind.get("service", agent)
        assert service is not None
        url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
        argv = kind.in_netns(sys.executable, "-m", "tests.support.steady_load", url, agent, run)
        load = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert load.stdin is not None and load.stdout is not None
        try:
            assert load.stdout.readline().strip() == "STARTED"
            upgrade = [
                str(helm), "upgrade", RELEASE, str(REPO_ROOT / "charts" / "kaos"),
                "--kubeconfig", str(kind.kubeconfig), "-n", RELEASE_NAMESPACE, "--reuse-values",
                "--set", f"images.operator.tag={_tag(new['operator'])}",
                "--set", f"images.memory.tag={_tag(new['memory'])}",
                "--set", f"images.agent.tag={_tag(new['agent'])}",
                "--set", f"images.mcp.tag={_tag(new['agent'])}",
                "--wait", f"--timeout={UPGRADE_TIMEOUT:g}s",
            ]  # fmt: skip
            upgraded = subprocess.run(
                upgrade, capture_output=True, text=True, timeout=UPGRADE_TIMEOUT + 60
            )
            assert upgraded.returncode == 0, upgraded.stderr
            # The new operator rolls what it deployed: the agent and the memory service.
            for namespace, name, image in (
                (kind.namespace, agent, new["agent"]),
                (kind.namespace, STORE, new["memory"]),
            ):
                wait_until(
                    functools.partial(_rolled, kind, namespace, name, image),
                    timeout=UPGRADE_TIMEOUT,
                    what=f"{name} rolled to {image}",
                )
        finally:
            report_line, _ = load.communicate("stop\n", timeout=120)
        report = json.loads(report_line.strip().splitlines()[-1])
        print(
            f"\nupgrade under traffic: {len(report['chats'])} chat turns and {report['tasks']}"
            f" A2A tasks answered ({report['followed']} answered still working and followed),"
            f" {report['retried']} sends refused and sent again,"
            f" {len(report['failures'])} failed"
        )
        assert report["failures"] == []
        assert report["chats"] and report["tasks"]
        missing = _unwritten(kind, agent, run, report["chats"])
        assert missing == [], f"{len(missing)} answered turns are not in memory: {missing[:5]}"
    finally:
        kind.kubectl("delete", f"agent/{agent}", "--wait=false", check=False)


def _unwritten(kind: KindDeployment, agent: str, run: str, chats: dict[str, str]) -> list[str]:
    """The sessions whose answered turn the memory store does not hold."""

    async def check(m: MemoryServiceClient) -> list[str]:
        missing = []
        for session, marker in chats.items():
            recalled = await m.recall("session", marker, session_id=session,
                                      principal=f"upgrader-{run}")  # fmt: skip
            said = [t.content for t in recalled.short_term.window if t.role == "user"]
            if not any(marker in text for text in said):
                missing.append(session)
        return missing

    with memory_of(kind, STORE, agent) as memory:
        return memory(check)
