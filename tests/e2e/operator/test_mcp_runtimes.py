"""The MCP runtime registry through the real API server: the operator's registry (the
chart's mcpRuntimes, as KAOS_MCP_RUNTIMES) turns an MCPServer into the runtime's
Deployment; custom runs any image; an unknown runtime is refused; the schema's rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kaos_operator.kube import CONFIGMAPS, DEPLOYMENTS, KubeClient, PermanentError

from tests.e2e.operator.helpers import condition, create, eventually, wait_phase
from tests.fixtures.operator import OperatorFactory

pytestmark = pytest.mark.cluster

REGISTRY = {
    "kubernetes": {
        "image": "ghcr.io/example/mcp-server-kubernetes:1.2.0",
        "command": ["mcp-server-kubernetes"],
        "args": ["--transport", "streamable-http"],
        "port": 3000,
        "params": "env",
        "paramsEnv": "MCP_K8S_OPTIONS",
        "env": {"LOG_LEVEL": "info"},
    },
    "fetch": {
        "image": "ghcr.io/example/mcp-fetch:0.6",
        "port": 8080,
        "params": "file",
        "paramsPath": "/etc/fetch/allow.txt",
    },
}


async def deployment_of(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return await kube.get(DEPLOYMENTS, ns, name)

    return await eventually(probe, within=60, what=f"Deployment {name}")


async def test_registry_custom_and_unknown_runtimes(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    operator_factory(KAOS_MCP_RUNTIMES=json.dumps(REGISTRY))
    await create(
        kube,
        ns,
        "MCPServer",
        "k8s",
        {"runtime": "kubernetes", "params": "--read-only", "serviceAccountName": "mcp-reader"},
    )
    await create(kube, ns, "MCPServer", "fetch", {"runtime": "fetch", "params": "example.com\n"})
    await create(
        kube,
        ns,
        "MCPServer",
        "mine",
        {
            "runtime": "custom",
            "image": "registry.example/my-tools:3",
            "command": ["my-tools", "serve"],
            "port": 9000,
            "path": "/rpc",
        },
    )
    await create(kube, ns, "MCPServer", "nope", {"runtime": "postgres"})

    dep = await deployment_of(kube, ns, "k8s")
    pod = dep["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    assert main["image"] == "ghcr.io/example/mcp-server-kubernetes:1.2.0"
    assert main["command"] == ["mcp-server-kubernetes"]
    assert main["args"] == ["--transport", "streamable-http"]
    assert main["ports"] == [{"name": "http", "containerPort": 3000, "protocol": "TCP"}]
    assert {e["name"]: e["value"] for e in main["env"]} == {
        "LOG_LEVEL": "info",
        "MCP_K8S_OPTIONS": "--read-only",
    }
    assert main["securityContext"]["runAsNonRoot"] is True
    assert "runAsUser" not in main["securityContext"]
    assert pod["serviceAccountName"] == "mcp-reader"
    assert pod["automountServiceAccountToken"] is True

    fetch = await deployment_of(kube, ns, "fetch")
    (main,) = fetch["spec"]["template"]["spec"]["containers"]
    assert main["volumeMounts"] == [{"name": "params", "mountPath": "/etc/fetch", "readOnly": True}]
    params = await kube.get(CONFIGMAPS, ns, "fetch-params")
    assert params is not None and params["data"] == {"allow.txt": "example.com\n"}

    mine = await deployment_of(kube, ns, "mine")
    (main,) = mine["spec"]["template"]["spec"]["containers"]
    assert (main["image"], main["command"]) == (
        "registry.example/my-tools:3",
        ["my-tools", "serve"],
    )
    assert main["ports"][0]["containerPort"] == 9000
    server = await wait_phase(kube, ns, "MCPServer", "mine", "Ready", within=60)
    assert server["status"]["endpoint"] == f"http://mine.{ns}.svc:8000/rpc"

    nope = await wait_phase(kube, ns, "MCPServer", "nope", "Failed", within=60)
    ready = condition(nope, "Ready")
    assert ready is not None and ready["reason"] == "RuntimeNotFound"
    assert "spec.runtime: postgres is not a runtime of the operator" in ready["message"]
    assert await kube.get(DEPLOYMENTS, ns, "nope") is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"runtime": "custom", "image": "x"}, "runtime custom requires image and command"),
        (
            {"params": "def f() -> int:\n    return 1\n", "command": ["sh"]},
            "command, args, port and path are for runtime custom",
        ),
        ({"runtime": "Not_A_Name"}, "spec.runtime"),
        ({"runtime": "custom", "image": "x", "command": ["a"], "port": 0}, "spec.port"),
    ],
)
async def test_runtime_rules_at_admission(
    kube: KubeClient, k8s_namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(PermanentError) as info:
        await create(kube, k8s_namespace, "MCPServer", "bad", spec)
    assert info.value.status == 422
    assert message in info.value.message, info.value.message
