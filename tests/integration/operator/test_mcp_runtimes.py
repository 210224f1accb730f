"""The MCP runtime registry: registered runtimes, custom, serviceAccountName, unknown
names refused, and status.availableTools read over MCP from a real kaos-mcp."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaos_core.crds import reasons
from kaos_core.settings import SettingsError
from kaos_operator.desired import McpContext, desired_mcpserver_objects
from kaos_operator.desired.mcpserver import server_endpoint
from kaos_operator.desired.overrides import OverrideRefused
from kaos_operator.reconcilers import build_reconcilers
from kaos_operator.settings import McpRuntime, OperatorSettings
from kaos_operator.tools import list_tool_names

from tests.fixtures.agent import McpFactory
from tests.support.operator_context import FakeContext, raw
from tests.support.operator_objects import IMAGES, SECURED, by_kind, env_of, mcp_server
from tests.support.procs import free_port

RUNTIMES = {
    "kubernetes": McpRuntime.model_validate(
        {
            "image": "example.test/mcp-k8s:1",
            "command": ["mcp-server-kubernetes"],
            "args": ["--transport", "http"],
            "port": 3000,
            "path": "/mcp",
            "params": "env",
            "paramsEnv": "K8S_MCP_CONFIG",
            "env": {"LOG_LEVEL": "info"},
        }
    ),
    "fetch": McpRuntime.model_validate(
        {"image": "example.test/fetch:2", "params": "file", "paramsPath": "/config/allow.txt"}
    ),
    "grep": McpRuntime.model_validate(
        {"image": "example.test/grep:3", "args": ["serve"], "params": "args", "path": "/rpc"}
    ),
}
TOOLS = 'def shout(text: str) -> str:\n    """Upper-case."""\n    return text.upper()\n'


def objects(**spec: Any) -> dict[str, dict[str, Any]]:
    ctx = McpContext(images=IMAGES, runtimes=RUNTIMES)
    return by_kind(desired_mcpserver_objects(mcp_server(**spec), ctx))


def main_of(dep: dict[str, Any]) -> dict[str, Any]:
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


def test_registered_runtime_with_params_in_env() -> None:
    objs = objects(runtime="kubernetes", params="readOnly: true", serviceAccountName="mcp-k8s")
    assert set(objs) == {"Deployment", "Service"}
    dep = objs["Deployment"]
    main = main_of(dep)
    assert main["image"] == "example.test/mcp-k8s:1"
    assert main["command"] == ["mcp-server-kubernetes"]
    assert main["args"] == ["--transport", "http"]
    assert main["ports"] == [{"name": "http", "containerPort": 3000, "protocol": "TCP"}]
    assert env_of(dep) == {"LOG_LEVEL": "info", "K8S_MCP_CONFIG": "readOnly: true"}
    assert main["readinessProbe"] == {"tcpSocket": {"port": "http"}, "periodSeconds": 10}
    # Its own user (not ours), but never root, nothing to escalate.
    assert main["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mcp-k8s"
    assert pod["automountServiceAccountToken"] is True
    # The Service keeps port 8000 and targets the runtime's named port.
    assert objs["Service"]["spec"]["ports"][0]["port"] == 8000
    assert objs["Service"]["spec"]["ports"][0]["targetPort"] == "http"


def test_registered_runtime_with_params_in_a_file_or_in_args() -> None:
    objs = objects(runtime="fetch", params="https://example.com\n")
    assert objs["ConfigMap"]["metadata"]["name"] == "tools-params"
    assert objs["ConfigMap"]["data"] == {"allow.txt": "https://example.com\n"}
    main = main_of(objs["Deployment"])
    assert main["volumeMounts"] == [{"name": "params", "mountPath": "/config", "readOnly": True}]
    assert objs["Deployment"]["spec"]["template"]["spec"]["volumes"] == [
        {"name": "params", "configMap": {"name": "tools-params"}}
    ]
    assert "command" not in main and "args" not in main  # the image's own entrypoint
    # Other params, other pod template: the pods restart with the new file.
    other = objects(runtime="fetch", params="https://example.org\n")["Deployment"]
    assert (
        other["spec"]["template"]["metadata"]["annotations"]
        != objs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    )

    main = main_of(objects(runtime="grep", params="--root=/data\n\n--max=5\n")["Deployment"])
    assert main["args"] == ["serve", "--root=/data", "--max=5"]


def test_custom_runtime_takes_image_command_port_and_path() -> None:
    spec: dict[str, Any] = {
        "runtime": "custom",
        "image": "example.test/my-tools:7",
        "command": ["python", "-m", "my_tools"],
        "args": ["--http"],
        "port": 9090,
        "path": "/v1/mcp",
        "params": "{}",
    }
    dep = objects(**spec)["Deployment"]
    main = main_of(dep)
    assert (main["image"], main["command"], main["args"]) == (
        "example.test/my-tools:7",
        ["python", "-m", "my_tools"],
        ["--http"],
    )
    assert main["ports"][0]["containerPort"] == 9090
    assert env_of(dep) == {"MCP_PARAMS": "{}"}
    ctx = McpContext(images=IMAGES, runtimes=RUNTIMES)
    assert server_endpoint(mcp_server(**spec), ctx) == "http://tools.ns.svc:8000/v1/mcp"
    assert server_endpoint(mcp_server(params=TOOLS), ctx) == "http://tools.ns.svc:8000/mcp"


async def test_an_unknown_runtime_is_refused_with_the_known_ones() -> None:
    ctx = FakeContext()
    ctx.settings = replace(ctx.settings, mcp_runtimes=RUNTIMES)
    ctx.add(raw("MCPServer", "tools", {"runtime": "postgres", "params": "x"}))
    await build_reconcilers(ctx)["MCPServer"].reconcile("ns", "tools")
    status = ctx.status_of("MCPServer", "ns", "tools")
    ready = next(c for c in status["conditions"] if c["type"] == reasons.READY)
    assert (ready["status"], ready["reason"]) == ("False", reasons.RUNTIME_NOT_FOUND)
    assert ready["message"] == (
        "spec.runtime: postgres is not a runtime of the operator "
        "(known: custom, fetch, grep, kubernetes, python-string)"
    )
    assert [(e.type_, e.reason) for e in ctx.events] == [("Warning", reasons.RUNTIME_NOT_FOUND)]
    assert ctx.applies == []


def test_the_registry_comes_from_the_operator_settings() -> None:
    registry = {"kubernetes": {"image": "r/k8s:1", "port": 3000, "params": "none"}}
    settings = OperatorSettings.from_env({"KAOS_MCP_RUNTIMES": json.dumps(registry)})
    assert settings.reconcile.mcp_runtimes["kubernetes"].port == 3000
    assert OperatorSettings.from_env({}).reconcile.mcp_runtimes == {}


@pytest.mark.parametrize(
    ("registry", "message"),
    [
        ("not json", "KAOS_MCP_RUNTIMES is not JSON"),
        ('{"custom": {"image": "x"}}', "KAOS_MCP_RUNTIMES: custom is a built-in runtime"),
        ('{"Bad_Name": {"image": "x"}}', "'Bad_Name' is not a runtime name"),
        ('{"k": {"image": "x", "port": 0}}', "KAOS_MCP_RUNTIMES: k.port"),
        ('{"k": {"image": "x", "params": "stdin"}}', "KAOS_MCP_RUNTIMES: k.params"),
        ('{"k": {"imag": "x"}}', "KAOS_MCP_RUNTIMES: k.image"),
    ],
)
def test_a_bad_registry_stops_the_operator_naming_the_entry(registry: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        OperatorSettings.from_env({"KAOS_MCP_RUNTIMES": registry})


async def test_available_tools_are_read_over_mcp(mcp_server_factory: McpFactory) -> None:
    source = (
        TOOLS + '\ndef count(text: str) -> int:\n    """Words."""\n    return len(text.split())\n'
    )
    server = mcp_server_factory(source)
    asked: list[str] = []

    async def loopback(url: str, token: str | None) -> list[str]:
        # The Service's name resolves only in the cluster: the same request, to the
        # process serving it here.
        asked.append(url)
        return await list_tool_names(f"http://127.0.0.1:{server.port}/mcp", token)

    ctx = FakeContext()
    ctx.add(raw("MCPServer", "tools", {"params": source}))
    rec = build_reconcilers(ctx, tool_lister=loopback)["MCPServer"]
    await rec.reconcile("ns", "tools")
    assert "availableTools" not in ctx.status_of("MCPServer", "ns", "tools")  # not up yet
    assert asked == []

    ctx.deployment_available("ns", "tools")
    await rec.reconcile("ns", "tools")
    # Listed beside the reconcile, which does not wait: the end of the listing wakes it.
    listing = ctx.status_of("MCPServer", "ns", "tools")["conditions"]
    assert any(
        (c["type"], c["status"], c["reason"])
        == (reasons.TOOLS_LISTED, "Unknown", reasons.TOOLS_LISTING)
        for c in listing
    )
    await ctx.woken("MCPServer", "ns", "tools")
    await rec.reconcile("ns", "tools")
    status = ctx.status_of("MCPServer", "ns", "tools")
    assert sorted(status["availableTools"]) == ["count", "shout"]
    listed = next(c for c in status["conditions"] if c["type"] == reasons.TOOLS_LISTED)
    assert (listed["status"], listed["reason"]) == ("True", reasons.TOOLS_READ)
    assert asked == ["http://tools.ns.svc:8000/mcp"]

    # Same generation: no second listing.
    await rec.reconcile("ns", "tools")
    assert len(asked) == 1


async def test_a_server_that_does_not_answer_is_reported() -> None:
    closed = free_port()

    async def nowhere(url: str, token: str | None) -> list[str]:
        return await list_tool_names(f"http://127.0.0.1:{closed}/mcp", token)

    ctx = FakeContext()
    ctx.add(raw("MCPServer", "tools", {"params": TOOLS}))
    now = [datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)]
    rec = build_reconcilers(ctx, tool_lister=nowhere, clock=lambda: now[0])["MCPServer"]
    await rec.reconcile("ns", "tools")
    ctx.deployment_available("ns", "tools")
    await rec.reconcile("ns", "tools")
    await ctx.woken("MCPServer", "ns", "tools")
    await rec.reconcile("ns", "tools")
    status = ctx.status_of("MCPServer", "ns", "tools")
    listed = next(c for c in status["conditions"] if c["type"] == reasons.TOOLS_LISTED)
    assert (listed["status"], listed["reason"]) == ("False", reasons.TOOL_LIST_FAILED)
    assert listed["message"] == (
        "tools/list at http://tools.ns.svc:8000/mcp failed (ClientConnectorError); retrying"
    )
    assert "availableTools" not in status
    # Nothing else would list again (the Service may answer soon after its pod is Ready):
    # the reconcile asks to run again, later each time it fails.
    assert rec.take_recheck("ns", "tools") == 2.0
    assert rec.take_recheck("ns", "tools") is None
    now[0] += timedelta(seconds=2)
    await rec.reconcile("ns", "tools")
    retrying = ctx.status_of("MCPServer", "ns", "tools")["conditions"]
    assert any(  # the failure stands while the retry runs
        (c["type"], c["status"], c["reason"])
        == (reasons.TOOLS_LISTED, "False", reasons.TOOL_LIST_FAILED)
        for c in retrying
    )
    await ctx.woken("MCPServer", "ns", "tools")
    await rec.reconcile("ns", "tools")
    assert rec.take_recheck("ns", "tools") == 4.0
    # The workload itself is fine: the listing does not decide readiness.
    assert status["phase"] == reasons.PHASE_READY


def test_the_network_policy_admits_agents_on_the_runtime_port() -> None:
    ctx = McpContext(images=IMAGES, posture=SECURED, clients=("a1",), runtimes=RUNTIMES)
    objs = by_kind(desired_mcpserver_objects(mcp_server(runtime="kubernetes"), ctx))
    (rule,) = objs["NetworkPolicy"]["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 3000}]


def test_another_runtimes_variables_are_the_platforms_but_tracing() -> None:
    env = [{"name": "MCP_TOOLS_STRING", "value": "theirs"}]
    dep = objects(runtime="kubernetes", container={"env": env})["Deployment"]
    assert env_of(dep)["MCP_TOOLS_STRING"] == "theirs"
    with pytest.raises(OverrideRefused, match="OTEL_SERVICE_NAME is reserved for the operator"):
        objects(
            runtime="kubernetes", container={"env": [{"name": "OTEL_SERVICE_NAME", "value": "x"}]}
        )
