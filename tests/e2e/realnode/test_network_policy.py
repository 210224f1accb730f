"""The secured posture's NetworkPolicies, enforced on the real node (kube-router).

The policies are the operator's own output: its desired-state builders
(``kaos_operator.desired``), the pure functions its reconcilers apply, for a MemoryStore,
an MCPServer, a ModelAPI and three Agents under ``security.enabled``
(``tests/e2e/operator/test_security_objects.py`` shows the reconcilers write exactly these
and recompute them as Agents change and go). Each resource's pod is a real container on
the node carrying the labels the builders give that resource's pods, answering on the
port its policy names with its own name; connections are real TCP connections made from
inside other pods. Two HTTP servers on the host's end of the node's link stand for an
address outside the cluster: the ModelAPI's ``spec.egress`` allows one of them.

Without a policy every pod reaches every other and both servers (so a refused connection
later is the policy's doing); with them a resource admits only its referrers (ingress),
a pod connects only where its resource refers (egress), and editing an Agent's
``agentNetwork.access`` or deleting an Agent closes its paths while every pod keeps
running as it was.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kaos_core.crds import Agent
from kaos_operator.desired.agent import AgentContext, desired_agent_objects
from kaos_operator.desired.mcpserver import McpContext, desired_mcpserver_objects
from kaos_operator.desired.memorystore import MemoryStoreContext, desired_memorystore_objects
from kaos_operator.desired.modelapi import ModelAPIContext, desired_modelapi_objects
from kaos_operator.desired.security import (
    agents_bound_to,
    agents_using_mcp,
    agents_using_model_api,
    callers_of_agent,
    stores_using_model_api,
)

from tests.e2e.realnode.conftest import NodeCluster
from tests.support.cluster import wait_until
from tests.support.operator_objects import IMAGES, SECURED, agent, mcp_server, model_api, store
from tests.support.realnode import TOOLBOX_IMAGE

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]

READY_TIMEOUT = 120.0
# How long kube-router may take to program a policy change (it syncs on the event).
ENFORCED_TIMEOUT = 60.0
# One connection attempt: a refused or dropped SYN ends it.
ATTEMPT_SECONDS = "3"
REMOTE = {"type": "remote", "memoryStore": "mem"}
# The namespace every resource of the operator's is in; the objects are built for it.
NS = f"np-{uuid.uuid4().hex[:8]}"


def agents(access_of_a: list[str], *, with_a: bool = True) -> list[Agent]:
    """a: bound to the store, uses the MCP server and the ModelAPI, may delegate to b
    (``access_of_a``); b: closed (``expose: false``), bound to the store too; stranger:
    an Agent of the same namespace bound to nothing of these (another ModelAPI)."""
    found = [
        agent("b", NS, agentNetwork={"expose": False}, config={"memory": REMOTE}),
        agent("stranger", NS, modelAPI="elsewhere"),
    ]
    if with_a:
        a = agent("a", NS, mcpServers=["tools"], agentNetwork={"access": access_of_a},
                  config={"memory": REMOTE})  # fmt: skip
        found.insert(0, a)
    return found


def desired(everyone: list[Agent], egress: str) -> dict[str, list[dict[str, Any]]]:
    """resource name -> the operator's desired objects for it, with security on; the
    ModelAPI may connect to ``egress`` (``host:port``, its provider)."""
    host, port = egress.split(":")
    provider = [{"cidr": f"{host}/32", "ports": [{"port": int(port)}]}]
    mem, tools = store("mem", NS), mcp_server("tools", NS)
    llm = model_api("llm", NS, mode="Proxy", proxyConfig={"models": ["openai/gpt-4o-mini"]},
                    egress=provider)  # fmt: skip
    url = f"http://llm.{NS}.svc:4000"
    objects = {
        "mem": desired_memorystore_objects(mem, MemoryStoreContext(
            images=IMAGES, posture=SECURED, model_api_url=url, summarization_model="m",
            embedding_model="m", callers=tuple(agents_bound_to("mem", everyone)))),
        "tools": desired_mcpserver_objects(tools, McpContext(
            images=IMAGES, posture=SECURED, clients=tuple(agents_using_mcp("tools", everyone)))),
        "llm": desired_modelapi_objects(llm, ModelAPIContext(
            images=IMAGES, posture=SECURED,
            agent_clients=tuple(agents_using_model_api("llm", everyone)),
            store_clients=tuple(stores_using_model_api("llm", [mem])))),
    }  # fmt: skip
    for a in everyone:
        objects[a.name] = desired_agent_objects(a, AgentContext(
            images=IMAGES, posture=SECURED, model_api_url=url, model_name="m",
            memory_endpoint=f"http://mem.{NS}.svc:8080",
            callers=tuple(callers_of_agent(a.name, everyone))))  # fmt: skip
    return objects


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def policy(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The NetworkPolicy as the operator applies it, less its owner reference: no custom
    resource exists here to own it, and the garbage collector deletes an object whose
    owner is missing."""
    obj = json.loads(json.dumps(one(objects, "NetworkPolicy")))
    obj["metadata"].pop("ownerReferences", None)
    return obj


@dataclass(frozen=True)
class Target:
    name: str
    ip: str
    port: int


class World:
    """The pods of the resources in ``NS``, an outsider in another namespace, and the
    servers off the cluster (``servers``: name -> ``host:port``)."""

    def __init__(self, node: NodeCluster, other_ns: str, servers: dict[str, str]) -> None:
        self.node, self.other_ns = node, other_ns
        self.targets: dict[str, Target] = {}
        for name, address in servers.items():
            host, port = address.split(":")
            self.targets[name] = Target(name, host, int(port))

    def kubectl(self, *args: str, **kw: Any) -> Any:
        return self.node.cluster.kubectl(*args, **kw)

    def apply(self, ns: str, *objects: dict[str, Any]) -> None:
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        self.kubectl("apply", "-n", ns, "-f", "-", input=doc)

    def pods(self, ns: str) -> dict[str, Any]:
        items = json.loads(self.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        return {p["metadata"]["name"]: p for p in items}

    def start(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        """One pod per resource, labelled as the operator labels its pods, serving its name
        on its policy's port; the outsider carries agent a's labels, in another namespace."""
        ports = {}
        for name, objs in objects.items():
            labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
            ports[name] = policy(objs)["spec"]["ingress"][0]["ports"][0]["port"]
            self.apply(NS, serving_pod(name, labels, ports[name]))
        a_labels = one(objects["a"], "Deployment")["spec"]["template"]["metadata"]["labels"]
        self.apply(self.other_ns, serving_pod("outsider", a_labels, 8000))
        for name, port in ports.items():
            self.targets[name] = Target(name, self.ready(NS, name)["status"]["podIP"], port)
        self.ready(self.other_ns, "outsider")

    def ready(self, ns: str, name: str) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            pod = self.pods(ns).get(name) or {}
            statuses = pod.get("status", {}).get("containerStatuses") or []
            return pod if statuses and all(s.get("ready") for s in statuses) else None

        return wait_until(probe, timeout=READY_TIMEOUT, what=f"pod {ns}/{name} Ready")

    def connect(self, source: str, target: str) -> str | None:
        """What ``target`` answers a connection made from inside ``source``'s pod; None
        when the connection fails (busybox's ``timeout`` bounds the attempt)."""
        ns = self.other_ns if source == "outsider" else NS
        t = self.targets[target]
        got = self.kubectl("exec", "-n", ns, source, "--", "busybox", "timeout", ATTEMPT_SECONDS,
                           "wget", "-q", "-O", "-", f"http://{t.ip}:{t.port}/",
                           check=False)  # fmt: skip
        return got.stdout.strip() if got.returncode == 0 else None

    def reaches(self, source: str, target: str) -> None:
        answer = wait_until(lambda: self.connect(source, target), timeout=ENFORCED_TIMEOUT,
                            what=f"{source} reaching {target}")  # fmt: skip
        assert answer == target, (source, target, answer)

    def refused(self, source: str, target: str) -> None:
        wait_until(lambda: self.connect(source, target) is None, timeout=ENFORCED_TIMEOUT,
                   what=f"{source} refused at {target}")  # fmt: skip

    def identities(self) -> dict[str, tuple[str, list[tuple[str, int]]]]:
        """Each pod's uid and its containers' IDs and restart counts: a pod restarted or
        replaced shows here."""
        found = {}
        for ns in (NS, self.other_ns):
            for name, pod in self.pods(ns).items():
                statuses = pod["status"].get("containerStatuses") or []
                containers = [(s["containerID"], s["restartCount"]) for s in statuses]
                found[name] = (pod["metadata"]["uid"], containers)
        return found


def serving_pod(name: str, labels: dict[str, str], port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": TOOLBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", f"mkdir -p /tmp/www && echo {name} > "
                            f"/tmp/www/index.html && exec httpd -f -p {port} -h /tmp/www"],
                # The kubelet probes from the node: a policy never fences the node out.
                "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
            }],
        },
    }  # fmt: skip


# (source, target) of each connection the operator's policies must refuse, and of each
# they must let through. Ingress: every kind, from another namespace and from an unbound
# Agent. Egress: to an exposed Agent (whose ingress admits anyone) from each kind's pod
# that does not refer to it, and off the cluster: only the ModelAPI, only to the server
# its spec.egress names.
REFUSED = [(s, t) for t in ("mem", "tools", "llm", "b") for s in ("outsider", "stranger")]
EGRESS_REFUSED = [("stranger", "a"), ("b", "a"), ("a", "stranger"), ("mem", "a"),
                  ("tools", "a"), ("llm", "a"), ("llm", "other"), ("a", "provider"),
                  ("tools", "provider"), ("mem", "provider")]  # fmt: skip
ALLOWED = [("a", "mem"), ("a", "tools"), ("a", "llm"), ("mem", "llm"), ("a", "b"),
           ("b", "mem"), ("b", "llm"), ("outsider", "a"), ("llm", "provider")]  # fmt: skip


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{self.server.name}\n".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def servers(real_node: NodeCluster) -> Iterator[dict[str, str]]:
    """Two HTTP servers on the host's end of the node's link (pods reach it through the
    node's namespace, as they would an address outside the cluster), each answering its
    name: ``provider`` (the ModelAPI's spec.egress names it) and ``other``."""
    node = real_node.local._node
    assert node is not None
    started = {}
    for name in ("provider", "other"):
        server = ThreadingHTTPServer((node.host_ip, 0), _Answer)
        server.name = name  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started[name] = server
    try:
        yield {name: f"{node.host_ip}:{s.server_address[1]}" for name, s in started.items()}
    finally:
        for server in started.values():
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def world(real_node: NodeCluster, servers: dict[str, str]) -> Iterator[World]:
    other = f"np-other-{uuid.uuid4().hex[:8]}"
    for ns in (NS, other):
        real_node.cluster.kubectl("create", "namespace", ns)
    w = World(real_node, other, servers)
    try:
        yield w
    finally:
        for ns in (NS, other):
            real_node.cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_only_the_referrers_reach_each_resource_and_removal_closes_the_path(
    world: World, servers: dict[str, str]
) -> None:
    provider = servers["provider"]
    objects = desired(agents(["b"]), provider)
    world.start(objects)
    # No policy yet: the bridge lets everything through, refused pairs included.
    for source, target in REFUSED + EGRESS_REFUSED + ALLOWED:
        assert world.connect(source, target) == target, (source, target)
    before = world.identities()

    world.apply(NS, *(policy(objs) for objs in objects.values()))
    for source, target in REFUSED + EGRESS_REFUSED:
        world.refused(source, target)
    for source, target in ALLOWED:
        world.reaches(source, target)
    # Enforced as a whole: no refused pair got through once the allowed ones settled.
    leaks = [pair for pair in REFUSED + EGRESS_REFUSED if world.connect(*pair) is not None]
    assert leaks == []

    # a no longer names b in agentNetwork.access: b's policy drops a (and a's own, b).
    edited = desired(agents([]), provider)
    world.apply(NS, policy(edited["a"]), policy(edited["b"]))
    world.refused("a", "b")
    world.reaches("a", "mem")

    # a is deleted: the store, the MCP server and the ModelAPI stop admitting its pods
    # (a's own policy goes with it, as its owner reference would take it).
    gone = desired(agents([], with_a=False), provider)
    world.apply(NS, *(policy(gone[name]) for name in ("mem", "tools", "llm")))
    world.kubectl("delete", "networkpolicy", "-n", NS, "a")
    for target in ("mem", "tools", "llm"):
        world.refused("a", target)
    world.reaches("b", "mem")

    # Nothing was restarted or replaced to get there.
    assert world.identities() == before
