"""samples/platform through the real API server and a real operator configured with
samples/platform/values-platform.yaml (as the chart renders it): every object is admitted,
none is refused, and each gets the Deployment (and HTTPRoute) its sample describes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kaos_operator.kube import DEPLOYMENTS, HTTPROUTES, KubeClient

from tests.e2e.operator.helpers import RT_OF, eventually, phase
from tests.fixtures.helm import SAMPLES_DIR
from tests.fixtures.operator import OperatorFactory

pytestmark = pytest.mark.cluster

PLATFORM = SAMPLES_DIR / "platform"


def operator_env() -> dict[str, str]:
    """What the chart's ConfigMap holds for these values (tests/integration/chart checks that)."""
    values = yaml.safe_load((PLATFORM / "values-platform.yaml").read_text())
    gateway = values["gatewayAPI"]["gateway"]
    return {
        "KAOS_GATEWAY_API_ENABLED": "true",
        "KAOS_GATEWAY_NAME": gateway["name"],
        "KAOS_GATEWAY_NAMESPACE": gateway["namespace"],
        "KAOS_GATEWAY_SECTION_NAME": gateway["sectionName"],
        "KAOS_MCP_RUNTIMES": json.dumps(values["mcpRuntimes"]),
    }


async def test_platform_samples_are_admitted_and_deployed(
    kube: KubeClient,
    k8s_namespace: str,
    gateway_api_crds: list[str],
    operator_factory: OperatorFactory,
) -> None:
    ns = k8s_namespace
    operator_factory(**operator_env())
    docs = [
        doc
        for path in sorted(PLATFORM.glob("*.yaml"))
        if path.name != "values-platform.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    for doc in docs:
        await kube.create(RT_OF[doc["kind"]], ns, doc)

    async def deployed(name: str) -> dict[str, Any] | None:
        return await kube.get(DEPLOYMENTS, ns, name)

    for doc in docs:
        name = doc["metadata"]["name"]

        async def probe(n: str = name) -> dict[str, Any] | None:
            return await deployed(n)

        await eventually(probe, within=90, what=f"Deployment {name}")
    for doc in docs:
        obj = await kube.get(RT_OF[doc["kind"]], ns, doc["metadata"]["name"])
        assert phase(obj) != "Failed", obj and obj.get("status")

    agent = await kube.get(DEPLOYMENTS, ns, "support-agent")
    assert agent is not None
    pod = agent["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}
    ]
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["SEARCH_API_TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "search-api", "key": "token"}
    }

    anthropic = await kube.get(DEPLOYMENTS, ns, "anthropic-api")
    assert anthropic is not None
    (volume,) = anthropic["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "litellm-config"

    tools = await kube.get(DEPLOYMENTS, ns, "cluster-tools")
    assert tools is not None
    assert tools["spec"]["template"]["spec"]["serviceAccountName"] == "cluster-reader"
    main = tools["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "ghcr.io/example/mcp-server-kubernetes:1.2.0"
    assert main["args"] == ["--transport", "streamable-http", "--read-only"]

    for name, prefix in (
        ("support-agent", "/support"),
        ("anthropic-api", f"/{ns}/modelapi/anthropic-api"),
        ("cluster-tools", f"/{ns}/mcpserver/cluster-tools"),
    ):

        async def routed(n: str = name) -> dict[str, Any] | None:
            return await kube.get(HTTPROUTES, ns, n)

        route = await eventually(routed, within=30, what=f"HTTPRoute {name}")
        assert route["spec"]["parentRefs"][0]["namespace"] == "gateway-system"
        assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == prefix
