"""Issue 36's rolling upgrade: ``helm upgrade`` from the previous version's images and chart
to this checkout's, while chat turns and A2A tasks flow, on the kind suite's deployment on
the real node.

The previous version (``tests.support.cluster.previous``) is the commit before the newest
change to the images or the chart: its tree comes out of git, ``hack/images`` builds its
three images (cached by their inputs) and ``ctr`` puts them on the node. The release is
first taken to that version (the previous chart with its images: the previous operator
rolls what it deployed onto its images), and the Agent under traffic is made by the
previous operator. Then the stream starts and the release is upgraded to this checkout's
chart and images; the new operator rolls every agent and memory service it deployed.

The Agent under traffic has two replicas (so a PodDisruptionBudget), an external task store
and the external MemoryStore (two stateless replicas on PostgreSQL). The stream
(``tests.support.steady_load``) runs in the node's network namespace, through the Agent's
Service, from before the upgrade until every rolled workload is Ready again.

Judged: no request failed (only a refused connection or a stopping replica's 503 is sent
again, as a client would), and every answered chat turn is in the memory store (its
session's window holds it): no memory write was lost.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
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
from tests.support.cluster.host import cache_dir
from tests.support.cluster.previous import (
    KAOS_IMAGES,
    NoHistory,
    PreviousVersion,
    build_images,
    export_tree,
    previous_commit,
)
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


def _release_tags(helm: str, kind: KindDeployment) -> dict[str, str]:
    """The image tags the release runs now (its values, as hack/kind/deploy set them)."""
    shown = subprocess.run(
        [helm, "get", "values", RELEASE, "-n", RELEASE_NAMESPACE, "-o", "json",
         "--kubeconfig", str(kind.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    images = json.loads(shown.stdout)["images"]
    return {name: str(images[name]["tag"]) for name in (*KAOS_IMAGES, "mcp")}


def _helm_upgrade(helm: str, kind: KindDeployment, chart: Path, tags: dict[str, str]) -> None:
    """The release onto ``chart`` with those image tags, the rest of its values kept."""
    argv = [helm, "upgrade", RELEASE, str(chart), "--kubeconfig", str(kind.kubeconfig),
            "-n", RELEASE_NAMESPACE, "--reset-then-reuse-values",
            *(arg for name, tag in tags.items() for arg in ("--set", f"images.{name}.tag={tag}")),
            "--wait", f"--timeout={UPGRADE_TIMEOUT:g}s"]  # fmt: skip
    upgraded = subprocess.run(argv, capture_output=True, text=True, timeout=UPGRADE_TIMEOUT + 60)
    assert upgraded.returncode == 0, upgraded.stderr


def _image(kind: KindDeployment, namespace: str, name: str, tag: str) -> str:
    """The image of the Deployment's first container, under ``tag``."""
    return f"{_images(kind.get('deployment', name, '-n', namespace))[0].rsplit(':', 1)[0]}:{tag}"


def _wait_rolled(kind: KindDeployment, workloads: list[tuple[str, str, str]]) -> None:
    for namespace, name, image in workloads:
        wait_until(
            functools.partial(_rolled, kind, namespace, name, image),
            timeout=UPGRADE_TIMEOUT,
            what=f"{name} rolled to {image}",
        )


def _operator(kind: KindDeployment) -> str:
    found = kind.get("deployment", "-n", RELEASE_NAMESPACE, "-l",
                     "app.kubernetes.io/component=operator")  # fmt: skip
    assert found is not None and len(found["items"]) == 1, found
    return str(found["items"][0]["metadata"]["name"])


@pytest.fixture(scope="module")
def previous(kind: KindDeployment, tmp_path_factory: pytest.TempPathFactory) -> PreviousVersion:
    """The previous version, its images built and on the node."""
    if kind.in_netns is None or kind.ctr is None:
        pytest.skip("the stream runs in the real node's network namespace (not a kind cluster)")
    try:
        commit = previous_commit()
    except NoHistory as exc:
        pytest.skip(f"no previous version to upgrade from: {exc}")
    version = PreviousVersion(commit, export_tree(commit, cache_dir() / "upgrade-from"))
    logs = tmp_path_factory.mktemp("previous")
    for _ref, archive in build_images(version, os.environ, logs, lambda line: None).values():
        subprocess.run(kind.ctr("images", "import", "--platform", "linux/amd64", str(archive)),
                       check=True, capture_output=True, timeout=900)  # fmt: skip
    return version


def test_helm_upgrade_from_the_previous_version_under_traffic_fails_no_request_and_loses_no_write(
    kind: KindDeployment, previous: PreviousVersion
) -> None:
    helm = locate_helm()
    assert helm is not None and kind.in_netns is not None
    run = token()[:8]
    agent = f"upgrade-{run}"
    operator = _operator(kind)
    current = _release_tags(str(helm), kind)
    restore = True
    try:
        # The release at the previous version, as a cluster that ran it would be.
        _helm_upgrade(str(helm), kind, previous.chart, dict.fromkeys(current, previous.tag))
        _wait_rolled(kind, [
            (RELEASE_NAMESPACE, operator, _image(kind, RELEASE_NAMESPACE, operator, previous.tag)),
            (kind.namespace, STORE, _image(kind, kind.namespace, STORE, previous.tag)),
        ])  # fmt: skip
        kind.kubectl("apply", "-f", "-", input=json.dumps(_agent(agent)))
        wait_ready(kind, agent, READY_TIMEOUT)
        _wait_rolled(kind, [(kind.namespace, agent,
                             _image(kind, kind.namespace, agent, previous.tag))])  # fmt: skip

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
            _helm_upgrade(str(helm), kind, REPO_ROOT / "charts" / "kaos", current)
            restore = False
            # The new operator rolls what it deployed: the agent and the memory service.
            _wait_rolled(kind, [
                (RELEASE_NAMESPACE, operator,
                 _image(kind, RELEASE_NAMESPACE, operator, current["operator"])),
                (kind.namespace, agent, _image(kind, kind.namespace, agent, current["agent"])),
                (kind.namespace, STORE, _image(kind, kind.namespace, STORE, current["memory"])),
            ])  # fmt: skip
        finally:
            report_line, _ = load.communicate("stop\n", timeout=120)
        report = json.loads(report_line.strip().splitlines()[-1])
        print(
            f"\nupgrade from {previous.commit[:12]} under traffic: {len(report['chats'])} chat"
            f" turns and {report['tasks']} A2A tasks answered ({report['followed']} answered"
            f" still working and followed), {report['retried']} sends refused and sent again,"
            f" {len(report['failures'])} failed"
        )
        assert report["failures"] == []
        assert report["chats"] and report["tasks"]
        missing = _unwritten(kind, agent, run, report["chats"])
        assert missing == [], f"{len(missing)} answered turns are not in memory: {missing[:5]}"
    finally:
        kind.kubectl("delete", f"agent/{agent}", "--wait=false", check=False)
        if restore:
            # The suite's deployment back at this checkout's version for what runs after.
            _helm_upgrade(str(helm), kind, REPO_ROOT / "charts" / "kaos", current)


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
