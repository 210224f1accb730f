"""Helpers of the kind suite: kubectl against the kind cluster, port-forwards through the
``kaos`` CLI's own helper, the chat and memory clients, and polling with deadlines."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kaos_cli.clients.agent import chat
from kaos_cli.kubectl.forward import port_forward
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.wire import agent_identity

from tests.support.cluster import wait_until

T = TypeVar("T")

AGENT_PORT = 8000
MEMORY_PORT = 8080
CHAT_TIMEOUT = 120.0
# Deadlines of the waits on the cluster: pods are scheduled, pulled from the node's cache
# and pass their readiness probes; the operator reconciles within seconds.
ROLLOUT_TIMEOUT = 300.0
RECONCILE_TIMEOUT = 180.0
# Long-term facts appear after a fold in the background: extraction and embeddings
# through the ModelAPI (LiteLLM) and the development model server.
FOLD_TIMEOUT = 300.0
CRD = "kaos.tools"
# One hack/kind step may take this long: a cold first run builds four images and pulls
# LiteLLM and PostgreSQL into the node.
STEP_TIMEOUT = float(os.environ.get("KAOS_KIND_STEP_TIMEOUT", "3600"))
# pytest-timeout counts the package fixture's set-up (up, build-images, deploy) against
# the first test, so the suite's tests get room for all three steps.
SUITE_TIMEOUT = 3 * STEP_TIMEOUT + 900


@dataclass(frozen=True)
class KindDeployment:
    """The deployed kind cluster: its kubeconfig and the namespace of the samples."""

    cluster: str
    namespace: str
    kubeconfig: Path
    kubectl_path: str
    # The container IDs the node's runtime itself lists (containerd's k8s.io namespace):
    # what proves a Ready pod is a real container.
    runtime_containers: Callable[[], set[str]] = lambda: set()
    # "kind" or "real-node": the provider that made the cluster.
    provider: str = "kind"
    # On the real node: the host before the cluster came up, and what takes the cluster
    # down (as `make cluster-down` does) and returns the host after (once; the fixture's
    # teardown calls it too). The kind provider's cluster lives in Docker: None.
    host_before: dict[str, Any] | None = None
    take_down: Callable[[], dict[str, Any]] | None = None
    # On the real node: a command line run in the node's network namespace, where Service
    # addresses route as they do for pods.
    in_netns: Callable[..., list[str]] | None = None
    # On the real node: a ``ctr`` command line on the node's containerd (its CRI namespace).
    ctr: Callable[..., list[str]] | None = None

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.kubectl_path, "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def get(self, *args: str) -> dict[str, Any] | None:
        """``kubectl get <args> -o json``; None when the object does not exist."""
        proc = self.kubectl("get", *args, "-o", "json", check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr:
                return None
            raise AssertionError(f"kubectl get {' '.join(args)}: {proc.stderr}")
        document: dict[str, Any] = json.loads(proc.stdout)
        return document

    def identity(self, agent: str) -> str:
        """The X-Agent-Identity of an Agent of the samples namespace."""
        return agent_identity(self.namespace, agent)

    @contextmanager
    def forward(self, service: str, port: int) -> Iterator[str]:
        """A ``kubectl port-forward`` to ``svc/<service>`` (the CLI's helper, which reads
        KUBECONFIG: the suite's fixture points it at the kind cluster)."""
        with port_forward(self.kubectl_path, self.namespace, service, port) as url:
            yield url


def token() -> str:
    """A value no other test or run writes: what a test looks for in answers and memory."""
    return uuid.uuid4().hex[:12]


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def has_condition(obj: dict[str, Any] | None, type_: str, status: str) -> bool:
    found = condition(obj, type_)
    return found is not None and found.get("status") == status


def ask(
    kind: KindDeployment, agent: str, message: str, *, session: str, principal: str
) -> dict[str, Any]:
    """One chat completion with ``agent`` through a port-forward to its Service."""
    with kind.forward(agent, AGENT_PORT) as url:
        return asyncio.run(
            chat(
                url,
                agent,
                message,
                session=session,
                principal=principal,
                request_timeout=CHAT_TIMEOUT,
            )
        )


def answer_text(payload: dict[str, Any]) -> str:
    assert payload.get("object") == "chat.completion", payload
    content = payload["choices"][0]["message"]["content"]
    assert isinstance(content, str), payload
    return content


class StoreClient:
    """Calls on one memory service as one agent (strict: a failed write raises), over a
    port-forward that stays open across calls (see ``memory_of``)."""

    def __init__(self, url: str, identity: str) -> None:
        self.url = url
        self.identity = identity

    def __call__(self, call: Callable[[MemoryServiceClient], Awaitable[T]]) -> T:
        async def go() -> T:
            async with MemoryServiceClient(
                self.url, agent_identity=self.identity, timeout=30, failure_mode="strict"
            ) as client:
                assert await client.ready(), f"memory service at {self.url} is not ready"
                return await call(client)

        return asyncio.run(go())


@contextmanager
def memory_of(kind: KindDeployment, store: str, agent: str) -> Iterator[StoreClient]:
    """The store's service, reached as ``agent`` through a port-forward to its Service."""
    with kind.forward(store, MEMORY_PORT) as url:
        yield StoreClient(url, kind.identity(agent))


def with_memory(
    kind: KindDeployment,
    store: str,
    agent: str,
    call: Callable[[MemoryServiceClient], Awaitable[T]],
) -> T:
    """One ``call`` against the store as ``agent``, through its own port-forward."""
    with memory_of(kind, store, agent) as memory:
        return memory(call)


def _pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return has_condition(pod, "Ready", "True")


def restart_pods(kind: KindDeployment, deployment: str, selector: str) -> list[str]:
    """Delete every pod of ``deployment`` and wait until as many new ones are Ready and the
    old ones are gone (a port-forward to the Service must not pick a dying pod)."""
    pods = kind.get("pods", "-l", selector)
    assert pods is not None
    old = {p["metadata"]["uid"] for p in pods["items"]}
    assert old, f"no pods match {selector}"
    kind.kubectl("delete", "pods", "-l", selector, "--wait=false")

    def replaced() -> list[str] | None:
        dep = kind.get("deployment", deployment)
        now = kind.get("pods", "-l", selector)
        if dep is None or now is None:
            return None
        items = now["items"]
        uids = [p["metadata"]["uid"] for p in items]
        if old & set(uids) or len(items) != dep["spec"]["replicas"]:
            return None
        return uids if all(_pod_ready(p) for p in items) else None

    return wait_until(replaced, timeout=ROLLOUT_TIMEOUT, what=f"new Ready pods of {deployment}")


def store_selector(store: str) -> str:
    """The label selector of a MemoryStore's pods (kaos_operator.desired.common)."""
    return f"app.kubernetes.io/name=memorystore,app.kubernetes.io/instance={store}"


def wait_for_condition(
    kind: KindDeployment,
    resource: str,
    name: str,
    type_: str,
    status: str,
    *,
    timeout: float = RECONCILE_TIMEOUT,
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = kind.get(f"{resource}.{CRD}", name)
        return condition(obj, type_) if has_condition(obj, type_, status) else None

    return wait_until(probe, timeout=timeout, what=f"{resource}/{name} condition {type_}={status}")


def wait_ready(kind: KindDeployment, agent: str, timeout: float) -> None:
    """Wait for the Agent's Ready condition; on timeout fail with what stands in its way:
    its conditions and its pods' states."""
    try:
        wait_for_condition(kind, "agent", agent, "Ready", "True", timeout=timeout)
    except AssertionError:
        obj = kind.get(f"agent.{CRD}", agent) or {}
        conditions = [
            f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
            for c in (obj.get("status") or {}).get("conditions") or []
        ]
        pods = kind.get("pods", "-l", f"app.kubernetes.io/instance={agent}") or {}
        states = [
            f"{p['metadata']['name']} {p.get('status', {}).get('phase')} "
            + json.dumps(p.get("status", {}).get("containerStatuses") or [])[:600]
            for p in pods.get("items") or []
        ]
        raise AssertionError(
            f"agent {agent} not Ready after {timeout:g}s\nconditions: {conditions}\npods: {states}"
        ) from None


# The chart's development PostgreSQL, whose connection Secret the suite's namespace holds.
EXTERNAL_TASK_STORE = {
    "type": "external",
    "connectionSecret": {"name": "kaos-pgvector-connection", "key": "dsn"},
}


def python_tools(name: str, source: str) -> dict[str, Any]:
    """An MCPServer running ``source``'s functions as tools (the python-string runtime)."""
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {"runtime": "python-string", "params": source},
    }


def devmodel_agent(name: str, **spec: Any) -> dict[str, Any]:
    """An Agent on the development model, with ``spec``'s fields beside its model's."""
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"modelAPI": "devmodel-api", "model": "openai/devmodel", **spec},
    }


def post_json(url: str, body: dict[str, Any]) -> None:
    """POST ``body`` as JSON (the development model's ``/control`` routes, through a
    port-forward); anything but 200 fails the test."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200
