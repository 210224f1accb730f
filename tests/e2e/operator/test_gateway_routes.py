"""Gateway API: with it on, spec.gatewayRoute becomes an HTTPRoute attached to the
configured Gateway, validated by the Gateway API CRDs themselves (sigs.k8s.io/gateway-api,
the release hack/gateway-api-crds pins), owned by the resource and pruned with the block."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_operator.kube import HTTPROUTES, KubeClient, PermanentError, ResourceType

from tests.e2e.operator.helpers import (
    MCPSERVERS,
    condition,
    create,
    eventually,
    proxy_api,
    wait_phase,
)
from tests.fixtures.operator import OperatorFactory

pytestmark = pytest.mark.cluster

GATEWAYS = ResourceType("gateway.networking.k8s.io", "v1", "gateways", "Gateway")
TOOLS = 'def shout(text: str) -> str:\n    """Upper-case."""\n    return text.upper()\n'


async def route_of(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return await kube.get(HTTPROUTES, ns, name)

    return await eventually(probe, within=60, what=f"HTTPRoute {name}")


async def test_routes_for_agent_modelapi_and_mcpserver(
    kube: KubeClient,
    k8s_namespace: str,
    gateway_api_crds: list[str],
    operator_factory: OperatorFactory,
) -> None:
    ns = k8s_namespace
    assert "httproutes.gateway.networking.k8s.io" in gateway_api_crds
    await kube.create(
        GATEWAYS,
        ns,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "kaos"},
            "spec": {
                "gatewayClassName": "example",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
    )
    operator_factory(
        KAOS_GATEWAY_API_ENABLED="true",
        KAOS_GATEWAY_NAME="kaos",
        KAOS_GATEWAY_NAMESPACE=ns,
        KAOS_GATEWAY_SECTION_NAME="http",
    )
    await create(
        kube, ns, "ModelAPI", "llm", {**proxy_api(), "gatewayRoute": {"pathPrefix": "/llm"}}
    )
    await create(kube, ns, "MCPServer", "tools", {"params": TOOLS, "gatewayRoute": {}})
    timeouts = {"request": "120s", "backendRequest": "90s"}
    await create(
        kube, ns, "Agent", "a1", {"modelAPI": "llm", "gatewayRoute": {"timeouts": timeouts}}
    )

    route = await route_of(kube, ns, "a1")
    (ref,) = route["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("Agent", "a1", True)
    assert route["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kaos-operator"
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "kaos",
            "namespace": ns,
            "sectionName": "http",
        }
    ]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{ns}/agent/a1"}}]
    assert rule["filters"] == [
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
        }
    ]
    (backend,) = rule["backendRefs"]
    assert (backend["kind"], backend["name"], backend["port"]) == ("Service", "a1", 8000)
    assert rule["timeouts"] == timeouts

    llm = await route_of(kube, ns, "llm")
    (rule,) = llm["spec"]["rules"]
    assert rule["matches"][0]["path"] == {"type": "PathPrefix", "value": "/llm"}
    assert rule["backendRefs"][0]["port"] == 4000
    assert "timeouts" not in rule

    tools = await route_of(kube, ns, "tools")
    assert tools["spec"]["rules"][0]["matches"][0]["path"]["value"] == f"/{ns}/mcpserver/tools"
    assert tools["spec"]["rules"][0]["backendRefs"][0]["port"] == 8000

    api = await wait_phase(kube, ns, "ModelAPI", "llm", "Ready", within=60)
    routed = condition(api, "Routed")
    assert routed is not None and (routed["status"], routed["reason"]) == ("True", "RouteApplied")
    assert routed["message"] == f"HTTPRoute llm on Gateway {ns}/kaos, path prefix /llm"

    # The block removed: the route is pruned like any object the resource no longer wants.
    await kube.request(
        "PATCH",
        MCPSERVERS.path(ns, "tools"),
        body={"spec": {"gatewayRoute": None}},
        content_type="application/merge-patch+json",
    )

    async def pruned() -> bool:
        return await kube.get(HTTPROUTES, ns, "tools") is None

    await eventually(pruned, within=60, what="the MCPServer's HTTPRoute to be pruned")
    assert await kube.get(HTTPROUTES, ns, "a1") is not None


@pytest.mark.parametrize(
    ("route", "field", "message"),
    [
        (
            {"timeouts": {"request": "10s", "backendRequest": "1m"}},
            "spec.gatewayRoute.timeouts",
            "backendRequest must not exceed request",
        ),
        (
            {"timeouts": {"request": "ten seconds"}},
            "spec.gatewayRoute.timeouts.request",
            "should match",
        ),
        ({"pathPrefix": "no-slash"}, "spec.gatewayRoute.pathPrefix", "should match"),
        ({"pathPrefix": "/trailing/"}, "spec.gatewayRoute.pathPrefix", "should match"),
    ],
)
async def test_bad_routes_are_refused_naming_the_field(
    kube: KubeClient, k8s_namespace: str, route: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(PermanentError) as info:
        await create(
            kube, k8s_namespace, "Agent", "bad", {"modelAPI": "llm", "gatewayRoute": route}
        )
    assert info.value.status == 422
    assert field in info.value.message and message in info.value.message, info.value.message
