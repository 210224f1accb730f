"""The operator on the test cluster with tracing on: a span per reconcile in Jaeger, and
the chart default projected as ``OTEL_*`` into the Deployments it makes, overridden by a
resource's own ``spec.telemetry``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from kaos_operator.kube import CONFIGMAPS, DEPLOYMENTS, KubeClient

from tests.e2e.operator.helpers import container_env, create, eventually, proxy_api, wait_phase
from tests.fixtures.operator import OperatorFactory
from tests.support.jaeger import CLIENT, Jaeger, Span

pytestmark = pytest.mark.cluster

TOOLS = 'def shout(text: str) -> str:\n    """Upper-case."""\n    return text.upper()\n'
DEFAULT = "http://collector.observability:4318"


async def test_reconciles_are_spans_and_pods_get_the_projected_otel_env(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory, jaeger: Jaeger
) -> None:
    ns = k8s_namespace
    since = datetime.now(UTC)
    operator_factory(
        OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_endpoint,
        OTEL_SERVICE_NAME=f"kaos-operator-{ns}",
        KAOS_TELEMETRY_ENDPOINT=DEFAULT,
        KAOS_TELEMETRY_SAMPLING_RATIO="0.5",
    )
    await create(kube, ns, "MCPServer", "tools", {"params": TOOLS})
    await create(kube, ns, "ModelAPI", "llm", {**proxy_api(), "telemetry": {"samplingRatio": 1}})
    await wait_phase(kube, ns, "MCPServer", "tools", "Ready", within=90)
    await wait_phase(kube, ns, "ModelAPI", "llm", "Ready", within=90)

    tools_dep = await kube.get(DEPLOYMENTS, ns, "tools")
    assert tools_dep is not None
    tools = container_env(tools_dep)
    assert tools["OTEL_EXPORTER_OTLP_ENDPOINT"] == DEFAULT
    assert tools["OTEL_SERVICE_NAME"] == "tools"
    assert tools["OTEL_TRACES_SAMPLER_ARG"] == "0.5"
    assert f"k8s.namespace.name={ns}" in tools["OTEL_RESOURCE_ATTRIBUTES"]
    assert "kaos.resource.kind=MCPServer" in tools["OTEL_RESOURCE_ATTRIBUTES"]
    llm_dep = await kube.get(DEPLOYMENTS, ns, "llm")
    assert llm_dep is not None
    llm = container_env(llm_dep)
    assert llm["OTEL_TRACES_SAMPLER_ARG"] == "1"  # the resource's own block wins
    assert llm["OTEL_ENDPOINT"] == f"{DEFAULT}/v1/traces"  # LiteLLM's otel callback
    config = await kube.get(CONFIGMAPS, ns, "llm-litellm")
    assert config is not None
    assert "callbacks:\n  - otel" in config["data"]["config.yaml"]

    def reconciles() -> list[Span] | None:
        found = jaeger.query.spans(f"kaos-operator-{ns}", since=since)
        mine = [
            s
            for s in found
            if s.name.startswith("reconcile ") and s.attr("k8s.namespace.name") == ns
        ]
        kinds = {s.attr("kaos.resource.kind") for s in mine}
        return mine if {"MCPServer", "ModelAPI"} <= kinds else None

    async def probe() -> list[Span] | None:
        return await asyncio.to_thread(reconciles)

    spans = await eventually(probe, within=60, what="reconcile spans in Jaeger")
    tools_spans = [s for s in spans if s.attr("kaos.resource.name") == "tools"]
    assert tools_spans and all(s.name == "reconcile MCPServer" for s in tools_spans)
    outcomes = {s.attr("kaos.reconcile.outcome") for s in tools_spans}
    assert "ok" in outcomes and outcomes <= {"ok", "gone", "permanent", "invalid", "error"}
    # The API calls a reconcile makes are its children (kaos_core.tracing client spans).
    calls = [
        s
        for r in tools_spans
        for s in jaeger.query.trace(r.trace_id)
        if s.parent_id == r.span_id and s.kind == CLIENT
    ]
    assert calls, [
        (s.name, s.kind, s.parent_id) for s in jaeger.query.trace(tools_spans[0].trace_id)
    ]
