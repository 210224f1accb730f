"""A real model in the cluster: a Hosted ModelAPI (Ollama, SmolLM2-135M) pulls its model
from a registry inside the cluster (CNCF Distribution, as an air-gapped cluster has),
a Proxy ModelAPI (LiteLLM) stands in front of it, agents answer through both, and a
MemoryStore digests and extracts with it.

Runs on the real node only: kind's nodes would need the Ollama and registry images loaded
too, which hack/kind/build-images does not build.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kaos_cli.clients.agent import stream_chat
from kaos_cli.kubectl.forward import port_forward
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from tests.e2e.kind.helpers import (
    AGENT_PORT,
    FOLD_TIMEOUT,
    ROLLOUT_TIMEOUT,
    SUITE_TIMEOUT,
    KindDeployment,
    answer_text,
    ask,
    condition,
    memory_of,
    token,
    wait_for_condition,
)
from tests.support.cluster import wait_until
from tests.support.ollama import create_model, serve_ollama, why_ollama_cannot_run
from tests.support.realstack import FOLD_BUDGET, FOLD_LINES

pytestmark = [pytest.mark.kind, pytest.mark.realmodel, pytest.mark.timeout(SUITE_TIMEOUT)]

MODEL = "smollm2:135m"
REGISTRY_NS = "kaos-models"
REGISTRY_IMAGE = "kaos.local/registry:dev"
OLLAMA_IMAGE = "kaos.local/ollama:dev"
REGISTRY_PORT = 5000
BLOBS_PORT = 8080
# The name pods pull by: a Service of the registry namespace.
SOURCE = f"models.{REGISTRY_NS}.svc.cluster.local:{REGISTRY_PORT}/library/{MODEL}"
# Ollama follows a blob redirect only to another host name (it then expects a Location
# header the same host does not give): blob GETs are sent to a second Service, a file
# server over the registry's storage (the registry's `redirect` storage middleware).
REGISTRY_CONFIG = f"""\
version: 0.1
log: {{level: info}}
storage:
  filesystem: {{rootdirectory: /var/lib/registry}}
  delete: {{enabled: true}}
middleware:
  storage:
    - name: redirect
      options:
        baseurl: http://models-blobs.{REGISTRY_NS}.svc.cluster.local:{BLOBS_PORT}/
http:
  addr: :{REGISTRY_PORT}
"""
# A first start pulls 98 MB from the registry and loads the model on two busy cores.
MODEL_READY_TIMEOUT = 600.0
QUESTION = "What is the capital of France?"
SAMPLING = {"temperature": 0.0, "maxTokens": 64}


def _registry_objects() -> list[dict[str, Any]]:
    labels = {"app": "models"}
    secure = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532}
    locked = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    store = {"name": "store", "mountPath": "/var/lib/registry"}
    pod = {
        "securityContext": {**secure, "fsGroup": 65532},
        "containers": [
            {
                "name": "registry",
                "image": REGISTRY_IMAGE,
                "imagePullPolicy": "Never",
                "args": ["serve", "/etc/distribution/config.yml"],
                # No trace exporter: nothing collects the registry's spans here.
                "env": [{"name": "OTEL_TRACES_EXPORTER", "value": "none"}],
                "ports": [{"containerPort": REGISTRY_PORT}],
                "readinessProbe": {
                    "httpGet": {"path": "/v2/", "port": REGISTRY_PORT},
                    "periodSeconds": 1,
                },
                "securityContext": locked,
                "volumeMounts": [store, {"name": "config", "mountPath": "/etc/distribution"}],
            },
            {
                "name": "blobs",
                "image": REGISTRY_IMAGE,
                "imagePullPolicy": "Never",
                "command": [
                    "/bin/busybox",
                    "httpd",
                    "-f",
                    "-p",
                    str(BLOBS_PORT),
                    "-h",
                    "/var/lib/registry",
                ],
                "ports": [{"containerPort": BLOBS_PORT}],
                "readinessProbe": {"tcpSocket": {"port": BLOBS_PORT}, "periodSeconds": 1},
                "securityContext": locked,
                "volumeMounts": [{**store, "readOnly": True}],
            },
        ],
        "volumes": [
            {"name": "store", "emptyDir": {}},
            {"name": "config", "configMap": {"name": "models-registry"}},
        ],
    }

    def svc(name: str, port: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": labels, "ports": [{"port": port, "targetPort": port}]},
        }

    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "models-registry"},
            "data": {"config.yml": REGISTRY_CONFIG},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "models", "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        },
        svc("models", REGISTRY_PORT),
        svc("models-blobs", BLOBS_PORT),
    ]


def _kaos_objects() -> list[dict[str, Any]]:
    """The resources under test, in the samples namespace."""

    def resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "kaos.tools/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }

    hosted = resource(
        "ModelAPI",
        "smollm2",
        {
            "mode": "Hosted",
            "image": OLLAMA_IMAGE,
            "serverConfig": {
                "model": MODEL,
                "source": SOURCE,
                "insecureRegistry": True,
                # SmolLM2's whole context, so the memory service's prompts are not cut.
                "contextLength": 8192,
                "storage": {"size": "1Gi"},
            },
        },
    )
    proxy = resource(
        "ModelAPI",
        "smollm2-proxy",
        {
            "mode": "Proxy",
            "proxyConfig": {
                "provider": "openai",
                "apiBase": "http://smollm2:11434/v1",
                "models": [MODEL],
            },
        },
    )
    config = {
        "instructions": "You are a helpful assistant. Answer briefly.",
        "modelSettings": SAMPLING,
    }
    chat = resource(
        "Agent",
        "real-chat",
        {
            "modelAPI": "smollm2-proxy",
            "model": MODEL,
            "config": config,
        },
    )
    tools = resource(
        "Agent",
        "real-tools",
        {
            "modelAPI": "smollm2",
            "model": MODEL,
            "mcpServers": ["text-tools"],
            "config": config,
        },
    )
    store = resource(
        "MemoryStore",
        "memory-real",
        {
            "storage": {"type": "local", "size": "1Gi"},
            "models": {
                "summarization": {"modelAPI": "smollm2-proxy", "model": MODEL},
                "embedding": {
                    "modelAPI": "devmodel-api",
                    "model": "openai/devmodel",
                    "dimensions": 1536,
                },
            },
            # A small window: a few turns fold, and the model's prompt stays within its context;
            # the compact extraction prompt fits it too (Mem0's own is cut to Ollama's 4,096
            # tokens, and on the node's busy cores outlasts the service's model timeout, its
            # retries queueing in Ollama ahead of the next test's questions).
            "tiers": {
                "shortTerm": {"tokenBudget": FOLD_BUDGET, "idleFlushSeconds": 0},
                "longTerm": {"extractionSystemPrompt": "compact"},
            },
        },
    )
    return [hosted, proxy, chat, tools, store]


def _apply(kind: KindDeployment, ns: str, objects: list[dict[str, Any]]) -> None:
    doc = yaml.safe_dump_all(objects)
    proc = subprocess.run(
        [
            kind.kubectl_path,
            "--kubeconfig",
            str(kind.kubeconfig),
            "-n",
            ns,
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=kaos-realmodel",
            "-f",
            "-",
        ],
        input=doc,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def _in_ns(kind: KindDeployment, ns: str, *args: str, check: bool = True) -> Any:
    proc = subprocess.run(
        [kind.kubectl_path, "--kubeconfig", str(kind.kubeconfig), "-n", ns, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc


def _registry_ready(kind: KindDeployment, replicas: int) -> bool:
    got = _in_ns(kind, REGISTRY_NS, "get", "deployment", "models", "-o", "json", check=False)
    if got.returncode != 0:
        return False
    status = json.loads(got.stdout).get("status") or {}
    return int(status.get("readyReplicas") or 0) == replicas


def _push(kind: KindDeployment, workdir: Path) -> None:
    """``smollm2:135m`` made from its GGUF by an Ollama on this machine, pushed into the
    cluster's registry through a port-forward, as an operator seeds an air-gapped one."""
    with (
        serve_ollama(workdir) as local,
        port_forward(kind.kubectl_path, REGISTRY_NS, "models", REGISTRY_PORT) as registry,
    ):
        create_model(local, MODEL)
        address = registry.removeprefix("http://").rstrip("/")
        target = f"{address}/library/{MODEL}"
        local.cli("cp", MODEL, target)
        local.cli("push", "--insecure", target, timeout=600)


@dataclass(frozen=True)
class RealModel:
    kind: KindDeployment


@pytest.fixture(scope="module")
def real_model(
    kind: KindDeployment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealModel]:
    if kind.provider != "real-node":
        pytest.skip("the real-model lane runs on the real node (its images come from hack/images)")
    reason = why_ollama_cannot_run()
    if reason is not None:
        pytest.skip(f"real-model lane skipped: {reason}")
    if _in_ns(kind, REGISTRY_NS, "get", "namespace", REGISTRY_NS, check=False).returncode != 0:
        _in_ns(kind, REGISTRY_NS, "create", "namespace", REGISTRY_NS)
    _apply(kind, REGISTRY_NS, _registry_objects())
    wait_until(
        lambda: _registry_ready(kind, 1) or None,
        timeout=ROLLOUT_TIMEOUT,
        what="the in-cluster registry Ready",
    )
    _push(kind, tmp_path_factory.mktemp("ollama"))
    objects = _kaos_objects()
    _apply(kind, kind.namespace, objects)
    try:
        wait_for_condition(
            kind, "modelapis", "smollm2", "Ready", "True", timeout=MODEL_READY_TIMEOUT
        )
        wait_for_condition(kind, "modelapis", "smollm2", "CapabilitiesRead", "True")
        wait_for_condition(
            kind, "modelapis", "smollm2-proxy", "Ready", "True", timeout=ROLLOUT_TIMEOUT
        )
        for name in ("real-chat", "real-tools"):
            wait_for_condition(kind, "agents", name, "Ready", "True", timeout=ROLLOUT_TIMEOUT)
        wait_for_condition(
            kind, "memorystores", "memory-real", "Ready", "True", timeout=ROLLOUT_TIMEOUT
        )
        yield RealModel(kind)
    finally:
        for obj in reversed(objects):
            kind.kubectl(
                "delete",
                f"{obj['kind'].lower()}s.kaos.tools",
                obj["metadata"]["name"],
                "--wait=false",
                check=False,
            )
        _in_ns(kind, REGISTRY_NS, "delete", "namespace", REGISTRY_NS, "--wait=false", check=False)


def test_hosted_model_pulled_in_cluster_answers_through_litellm(real_model: RealModel) -> None:
    kind = real_model.kind
    hosted = kind.get("modelapis.kaos.tools", "smollm2")
    pulled = condition(hosted, "ModelPulled")
    assert pulled is not None and pulled["status"] == "True", hosted
    # Ollama's own report of the model: it answers, and cannot call tools.
    capabilities = (hosted or {}).get("status", {}).get("modelCapabilities", {})
    assert "completion" in capabilities.get(MODEL, []), hosted
    assert "tools" not in capabilities.get(MODEL, []), hosted
    # Its pod: the pinned image, not root, its model store on a claim.
    pods = kind.get("pods", "-l", "app.kubernetes.io/instance=smollm2")
    assert pods is not None and len(pods["items"]) == 1, pods
    spec = pods["items"][0]["spec"]
    assert spec["containers"][0]["image"] == OLLAMA_IMAGE
    assert spec["securityContext"].get("runAsNonRoot") is True, spec
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in spec["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims, spec["volumes"]
    # Ollama took the spec's context length (its server reports its settings at start).
    name = pods["items"][0]["metadata"]["name"]
    logs = _in_ns(kind, kind.namespace, "logs", name, "-c", "ollama")
    assert "OLLAMA_CONTEXT_LENGTH:8192" in logs.stdout, logs.stdout[-2000:]

    mark = token()
    payload = ask(kind, "real-chat", QUESTION, session=f"paris-{mark}", principal=f"ann-{mark}")
    answer = answer_text(payload)
    assert "Paris" in answer, answer
    # The token usage the model reported, not zeros.
    usage = payload.get("usage") or {}
    assert usage.get("prompt_tokens", 0) > 0 and usage.get("completion_tokens", 0) > 0, payload


def test_streamed_answer_arrives_in_several_chunks(real_model: RealModel) -> None:
    kind = real_model.kind
    mark = token()
    headers = {SESSION_HEADER: f"stream-{mark}", PRINCIPAL_HEADER: f"ann-{mark}"}

    async def pieces(url: str) -> list[str]:
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            return [p async for p in stream_chat(http, url, "real-chat", QUESTION, headers)]

    with kind.forward("real-chat", AGENT_PORT) as url:
        got = asyncio.run(pieces(url))
    assert len([p for p in got if p]) >= 2, got
    assert "Paris" in "".join(got), got


def test_agent_with_tools_on_a_model_without_tools_answers_and_says_so(
    real_model: RealModel,
) -> None:
    kind = real_model.kind
    # Set once the ModelAPI's capabilities are read (the fixture waited for that).
    warned = wait_for_condition(kind, "agents", "real-tools", "ToolsSupported", "False")
    agent = kind.get("agents.kaos.tools", "real-tools")
    assert MODEL in warned["message"], warned
    # Still Ready: it answers, without tools.
    assert (condition(agent, "Ready") or {}).get("status") == "True", agent
    mark = token()
    payload = ask(kind, "real-tools", QUESTION, session=f"tools-{mark}", principal=f"ann-{mark}")
    assert answer_text(payload).strip(), payload


def test_restarted_ollama_pod_is_ready_without_pulling_again(real_model: RealModel) -> None:
    # Before the store's test: LiteLLM carries on with a non-streaming upstream call whose
    # client went away, so the store's digest and extraction calls could outlive the store
    # and share Ollama's one slot with this question.
    kind = real_model.kind
    # With the registry gone, only the model store on the claim can make the pod Ready.
    _in_ns(kind, REGISTRY_NS, "scale", "deployment", "models", "--replicas=0")
    wait_until(
        lambda: _registry_ready(kind, 0) or None,
        timeout=ROLLOUT_TIMEOUT,
        what="the registry scaled to zero",
    )
    selector = "app.kubernetes.io/instance=smollm2"
    before = kind.get("pods", "-l", selector)
    assert before is not None and before["items"]
    old = {p["metadata"]["uid"] for p in before["items"]}
    kind.kubectl("delete", "pods", "-l", selector, "--wait=false")

    def back() -> bool | None:
        pods = kind.get("pods", "-l", selector)
        items = (pods or {}).get("items") or []
        fresh = [p for p in items if p["metadata"]["uid"] not in old]
        ready = fresh and all((condition(p, "Ready") or {}).get("status") == "True" for p in fresh)
        return True if ready and len(items) == len(fresh) else None

    wait_until(back, timeout=MODEL_READY_TIMEOUT, what="a new Ollama pod Ready")
    wait_for_condition(kind, "modelapis", "smollm2", "ModelPulled", "True")
    mark = token()
    # Asked of the agent on the Hosted ModelAPI itself: the first connection to the
    # replaced pod sometimes never opens; the agent gives it up and opens another
    # (kaos_agent.model_client.CONNECT_TIMEOUT), where LiteLLM, in front of the pod for
    # real-chat, waits it out for its own request timeout.
    answer = answer_text(
        ask(kind, "real-tools", QUESTION, session=f"again-{mark}", principal=f"ann-{mark}")
    )
    assert "Paris" in answer, answer


def test_store_digests_with_the_real_model(real_model: RealModel) -> None:
    kind = real_model.kind
    mark = token()
    principal, session = f"ann-{mark}", f"fold-{mark}"
    with memory_of(kind, "memory-real", "real-chat") as memory:
        for turn in FOLD_LINES:

            async def write(m: MemoryServiceClient, turn: tuple[str, str] = turn) -> Any:
                return await m.write([turn], session_id=session, principal=principal)

            memory(write)

        def digested() -> Any:
            got = memory(lambda m: m.recall("session", "", session_id=session, principal=principal))
            return got if got.medium_term.version else None

        recalled = wait_until(digested, timeout=FOLD_TIMEOUT, what="a digest by the real model")
    assert (recalled.medium_term.summary or "").strip(), recalled
    # Every turn is still somewhere: in the window or folded into the digest version.
    assert recalled.short_term.window or recalled.medium_term.version

    # The extraction of the same fold is asserted by tests/e2e/realmodel/
    # test_memory_real_model.py.
