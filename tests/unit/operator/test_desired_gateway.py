"""spec.gatewayRoute: the HTTPRoute each kind gets, and the Routed condition."""

from __future__ import annotations

from dataclasses import replace

from kaos_core.crds import reasons
from kaos_operator.desired import (
    AgentContext,
    McpContext,
    ModelAPIContext,
    desired_agent_objects,
    desired_mcpserver_objects,
    desired_modelapi_objects,
)
from kaos_operator.reconcilers import build_reconcilers
from kaos_operator.settings import GatewayRef

from tests.support.operator_context import FakeContext, raw
from tests.support.operator_objects import IMAGES, OPEN, agent, by_kind, mcp_server, model_api

GATEWAY = GatewayRef(name="edge", namespace="gateways", section_name="https")
TOOLS = "def up(x: str) -> str:\n    return x.upper()\n"


def agent_ctx(gateway: GatewayRef | None = GATEWAY) -> AgentContext:
    return AgentContext(
        images=IMAGES,
        posture=OPEN,
        model_api_url="http://llm.ns.svc:4000",
        model_name="m",
        gateway=gateway,
    )


def test_agent_route_default_prefix_timeouts_and_parent() -> None:
    timeouts = {"request": "2m", "backendRequest": "90s"}
    route = by_kind(desired_agent_objects(agent(gatewayRoute={"timeouts": timeouts}), agent_ctx()))[
        "HTTPRoute"
    ]
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["metadata"]["name"] == "a1" and route["metadata"]["namespace"] == "ns"
    assert route["metadata"]["ownerReferences"][0]["kind"] == "Agent"
    assert route["spec"] == {
        "parentRefs": [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": "edge",
                "namespace": "gateways",
                "sectionName": "https",
            }
        ],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/ns/agent/a1"}}],
                "filters": [
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {
                            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                        },
                    }
                ],
                "backendRefs": [{"group": "", "kind": "Service", "name": "a1", "port": 8000}],
                "timeouts": timeouts,
            }
        ],
    }


def test_modelapi_and_mcp_routes_use_their_ports_and_prefixes() -> None:
    ctx = ModelAPIContext(images=IMAGES, gateway=replace(GATEWAY, namespace="", section_name=None))
    proxy = {"models": ["openai/m"]}
    api = model_api(mode="Proxy", proxyConfig=proxy, gatewayRoute={"pathPrefix": "/models/llm"})
    route = by_kind(desired_modelapi_objects(api, ctx))["HTTPRoute"]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"][0]["path"]["value"] == "/models/llm"
    assert rule["backendRefs"][0]["port"] == 4000
    assert "timeouts" not in rule
    # No Gateway namespace configured: the resource's own; no section: every listener.
    assert route["spec"]["parentRefs"][0]["namespace"] == "ns"
    assert "sectionName" not in route["spec"]["parentRefs"][0]

    hosted = model_api(mode="Hosted", serverConfig={"model": "m"}, gatewayRoute={})
    assert (
        by_kind(desired_modelapi_objects(hosted, ctx))["HTTPRoute"]["spec"]["rules"][0][
            "backendRefs"
        ][0]["port"]
        == 11434
    )

    server = mcp_server(params=TOOLS, gatewayRoute={})
    route = by_kind(desired_mcpserver_objects(server, McpContext(images=IMAGES, gateway=GATEWAY)))[
        "HTTPRoute"
    ]
    assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/ns/mcpserver/tools"


def test_no_route_without_the_block_or_without_gateway_api() -> None:
    assert "HTTPRoute" not in by_kind(desired_agent_objects(agent(), agent_ctx()))
    assert "HTTPRoute" not in by_kind(
        desired_agent_objects(agent(gatewayRoute={}), agent_ctx(gateway=None))
    )


async def test_routed_condition_says_why_there_is_no_route() -> None:
    ctx = FakeContext()
    ctx.add(raw("MCPServer", "tools", {"params": TOOLS, "gatewayRoute": {}}))
    await build_reconcilers(ctx)["MCPServer"].reconcile("ns", "tools")
    status = ctx.status_of("MCPServer", "ns", "tools")
    routed = next(c for c in status["conditions"] if c["type"] == reasons.ROUTED)
    assert (routed["status"], routed["reason"]) == ("False", reasons.GATEWAY_API_DISABLED)
    assert "gatewayAPI.enabled" in routed["message"]
    assert ("HTTPRoute", "ns", "tools") not in ctx.objects

    ctx.settings = replace(ctx.settings, gateway=GATEWAY)
    await build_reconcilers(ctx)["MCPServer"].reconcile("ns", "tools")
    status = ctx.status_of("MCPServer", "ns", "tools")
    routed = next(c for c in status["conditions"] if c["type"] == reasons.ROUTED)
    assert (routed["status"], routed["reason"]) == ("True", reasons.ROUTE_APPLIED)
    assert (
        routed["message"]
        == "HTTPRoute tools on Gateway gateways/edge, path prefix /ns/mcpserver/tools"
    )
    assert ("HTTPRoute", "ns", "tools") in ctx.objects
