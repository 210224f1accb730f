"""``container`` and ``pod`` merged over every kind's Deployment, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.crds import reasons
from kaos_operator.desired import (
    AgentContext,
    McpContext,
    MemoryStoreContext,
    ModelAPIContext,
    desired_agent_objects,
    desired_mcpserver_objects,
    desired_memorystore_objects,
    desired_modelapi_objects,
)
from kaos_operator.desired.overrides import OverrideRefused
from kaos_operator.reconcilers import Outcome, build_reconcilers

from tests.support.operator_context import FakeContext, raw, ready_model_api
from tests.support.operator_objects import (
    IMAGES,
    OPEN,
    SECURED,
    agent,
    by_kind,
    env_of,
    mcp_server,
    model_api,
    store,
)

CONTAINER: dict[str, Any] = {
    "env": [
        {"name": "HTTPS_PROXY", "value": "http://proxy.corp:3128"},
        {"name": "TEAM_TOKEN", "valueFrom": {"secretKeyRef": {"name": "team", "key": "token"}}},
        {"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "region"}}},
    ],
    "envFrom": [{"secretRef": {"name": "bulk"}, "prefix": "X_"}],
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": 1024}},
    "volumeMounts": [{"name": "ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
}
POD: dict[str, Any] = {
    "labels": {"team": "search"},
    "annotations": {"prometheus.io/scrape": "true"},
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "priorityClassName": "high",
    "imagePullSecrets": [{"name": "regcred"}],
    "volumes": [{"name": "ca", "configMap": {"name": "corp-ca"}}],
}


def agent_dep(**spec: Any) -> dict[str, Any]:
    ctx = AgentContext(
        images=IMAGES, posture=OPEN, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )
    return by_kind(desired_agent_objects(agent(**spec), ctx))["Deployment"]


def store_dep(**spec: Any) -> dict[str, Any]:
    ctx = MemoryStoreContext(
        images=IMAGES,
        posture=OPEN,
        model_api_url="http://llm.ns.svc:4000",
        summarization_model="s",
        embedding_model="e",
    )
    return by_kind(desired_memorystore_objects(store(**spec), ctx))["Deployment"]


def deployments(**spec: Any) -> dict[str, dict[str, Any]]:
    """The Deployment of every kind (both ModelAPI modes) with the same extra spec."""
    proxy: dict[str, Any] = {"mode": "Proxy", "proxyConfig": {"models": ["openai/m"]}}
    hosted: dict[str, Any] = {"mode": "Hosted", "serverConfig": {"model": "smollm2:135m"}}
    tools: dict[str, Any] = {"params": "def up(x: str) -> str:\n    return x.upper()\n"}
    return {
        "Agent": agent_dep(**spec),
        "MemoryStore": store_dep(**spec),
        "ModelAPI/Proxy": by_kind(
            desired_modelapi_objects(model_api(**proxy, **spec), ModelAPIContext(images=IMAGES))
        )["Deployment"],
        "ModelAPI/Hosted": by_kind(
            desired_modelapi_objects(model_api(**hosted, **spec), ModelAPIContext(images=IMAGES))
        )["Deployment"],
        "MCPServer": by_kind(
            desired_mcpserver_objects(mcp_server(**tools, **spec), McpContext(images=IMAGES))
        )["Deployment"],
    }


def main_container(dep: dict[str, Any]) -> dict[str, Any]:
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


@pytest.mark.parametrize(
    "kind", ["Agent", "MemoryStore", "ModelAPI/Proxy", "ModelAPI/Hosted", "MCPServer"]
)
def test_overrides_are_merged_into_every_kind(kind: str) -> None:
    plain = deployments()[kind]
    dep = deployments(container=CONTAINER, pod=POD)[kind]
    c, base = main_container(dep), main_container(plain)

    # env: the operator's first, untouched, then the override's in order.
    assert c["env"][: len(base["env"])] == base["env"]
    assert c["env"][len(base["env"]) :] == CONTAINER["env"]
    assert c["envFrom"] == CONTAINER["envFrom"]
    assert c["resources"] == CONTAINER["resources"]
    assert c["volumeMounts"] == [*(base.get("volumeMounts") or []), *CONTAINER["volumeMounts"]]
    # What the operator owns is unchanged.
    for owned in ("ports", "readinessProbe", "livenessProbe", "securityContext", "image"):
        assert c.get(owned) == base.get(owned), owned

    template, plain_template = dep["spec"]["template"], plain["spec"]["template"]
    assert template["metadata"]["labels"] == {
        **plain_template["metadata"]["labels"],
        "team": "search",
    }
    assert template["metadata"]["annotations"] == {
        **(plain_template["metadata"].get("annotations") or {}),
        "prometheus.io/scrape": "true",
    }
    pod = template["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == POD["tolerations"]
    assert pod["affinity"] == POD["affinity"]
    assert pod["topologySpreadConstraints"] == POD["topologySpreadConstraints"]
    assert pod["priorityClassName"] == "high"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["volumes"] == [*(plain_template["spec"].get("volumes") or []), *POD["volumes"]]
    assert pod.get("securityContext") == plain_template["spec"].get("securityContext")
    # The selector never sees the extra labels (it is immutable on a Deployment).
    assert dep["spec"]["selector"] == plain["spec"]["selector"]


def test_no_overrides_leaves_the_deployment_as_it_was() -> None:
    assert deployments(container={}, pod={}) == deployments()


def test_affinity_replaces_the_store_spread_and_resources_replace_the_default() -> None:
    external = {"type": "external", "connectionSecret": {"name": "pg"}}
    spread = store_dep(storage=external)["spec"]["template"]["spec"]["affinity"]
    assert "podAntiAffinity" in spread
    dep = store_dep(storage=external, pod={"affinity": POD["affinity"]})
    assert dep["spec"]["template"]["spec"]["affinity"] == POD["affinity"]

    dep = agent_dep(container={"resources": {"limits": {"cpu": 2}}})
    assert main_container(dep)["resources"] == {"limits": {"cpu": 2}}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"container": {"env": [{"name": "AGENT_NAME", "value": "evil"}]}},
            "spec.container.env: AGENT_NAME is set by the operator",
        ),
        (
            {"container": {"env": [{"name": "MEMORY_REQUIRE_AGENT_IDENTITY", "value": "false"}]}},
            "spec.container.env: MEMORY_REQUIRE_AGENT_IDENTITY is set by the operator",
        ),
        (
            {"container": {"ports": [{"containerPort": 9000}]}},
            "spec.container.ports: the operator's ports are fixed",
        ),
        (
            {"container": {"livenessProbe": {"exec": {"command": ["true"]}}}},
            "spec.container.livenessProbe: the operator's probes are fixed",
        ),
        (
            {"container": {"readinessProbe": {"tcpSocket": {"port": 1}}}},
            "spec.container.readinessProbe: the operator's probes are fixed",
        ),
        (
            {"container": {"startupProbe": {"tcpSocket": {"port": 1}}}},
            "spec.container.startupProbe: the operator's probes are fixed",
        ),
        (
            {"container": {"securityContext": {"privileged": True}}},
            "spec.container.securityContext: the operator's security context is fixed",
        ),
        (
            {"pod": {"securityContext": {"runAsUser": 0}}},
            "spec.pod.securityContext: the operator's pod security context is fixed",
        ),
        (
            {"pod": {"labels": {"app.kubernetes.io/instance": "other"}}},
            "spec.pod.labels: app.kubernetes.io/instance is set by the operator",
        ),
        (
            {"pod": {"annotations": {"kaos.tools/anything": "x"}}},
            "spec.pod.annotations: kaos.tools/anything is reserved for the operator",
        ),
        (
            {"resources": {"limits": {"cpu": "1"}}, "container": {"resources": {}}},
            "spec.container.resources: spec.resources is set too; set one",
        ),
    ],
)
def test_overriding_what_the_operator_sets_is_refused(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(OverrideRefused) as info:
        agent_dep(**spec)
    assert info.value.problems == [problem]
    assert info.value.reason == reasons.OVERRIDE_REFUSED


def test_operator_volumes_and_mounts_are_refused_and_every_problem_is_named() -> None:
    ctx = AgentContext(
        images=IMAGES, posture=SECURED, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )
    secured = by_kind(desired_agent_objects(agent(), ctx))["Deployment"]
    own = main_container(secured)["volumeMounts"][0]
    spec: dict[str, Any] = {
        "container": {
            "env": [{"name": "AGENT_PORT", "value": "1"}],
            "volumeMounts": [{"name": "x", "mountPath": own["mountPath"]}],
        },
        "pod": {"volumes": [{"name": own["name"], "emptyDir": {}}]},
    }
    with pytest.raises(OverrideRefused) as info:
        desired_agent_objects(agent(**spec), ctx)
    assert info.value.problems == [
        "spec.container.env: AGENT_PORT is set by the operator",
        f"spec.container.volumeMounts: {own['mountPath']} is mounted by the operator",
        f"spec.pod.volumes: {own['name']} is a volume of the operator",
    ]


def test_each_kind_refuses_its_own_env_names() -> None:
    for kind, name in (
        ("MemoryStore", "KAOS_MEMORY_REQUIRE_PRINCIPAL"),
        ("ModelAPI/Proxy", "MODEL_API_KEY"),
        ("ModelAPI/Hosted", "OLLAMA_MODEL"),
        ("MCPServer", "MCP_TOOLS_STRING"),
    ):
        spec: dict[str, Any] = {"container": {"env": [{"name": name, "value": "x"}]}}
        if kind == "ModelAPI/Proxy":
            spec_api: dict[str, Any] = {
                "mode": "Proxy",
                "proxyConfig": {
                    "models": ["openai/m"],
                    "apiKeySecretRef": {"name": "k", "key": "v"},
                },
            }
            with pytest.raises(OverrideRefused, match=f"{name} is set by the operator"):
                desired_modelapi_objects(
                    model_api(**spec_api, **spec), ModelAPIContext(images=IMAGES)
                )
            continue
        with pytest.raises(OverrideRefused, match=f"{name} is (set by|reserved for) the operator"):
            deployments(**spec)[kind]


async def test_a_refusal_is_a_condition_and_an_event_and_applies_nothing() -> None:
    ctx = FakeContext()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm"}))
    rec = build_reconcilers(ctx)["Agent"]
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    applied = len(ctx.applies)
    good = ctx.objects[("Deployment", "ns", "a1")]

    bad = raw("Agent", "a1", {"modelAPI": "llm", "container": {"ports": [{"containerPort": 1}]}})
    bad["metadata"]["generation"] = 2
    bad["status"] = ctx.status_of("Agent", "ns", "a1")
    ctx.add(bad)
    assert await rec.reconcile("ns", "a1") == Outcome.INVALID

    status = ctx.status_of("Agent", "ns", "a1")
    ready = next(c for c in status["conditions"] if c["type"] == reasons.READY)
    assert (ready["status"], ready["reason"]) == ("False", reasons.OVERRIDE_REFUSED)
    assert ready["message"] == "spec.container.ports: the operator's ports are fixed"
    assert status["phase"] == reasons.PHASE_FAILED
    assert ctx.events[-1].type_ == "Warning"
    assert ctx.events[-1].reason == reasons.OVERRIDE_REFUSED
    assert "spec.container.ports" in ctx.events[-1].message
    # Nothing applied: the running Deployment is the one from before.
    assert len(ctx.applies) == applied
    assert ctx.objects[("Deployment", "ns", "a1")] == good


async def test_the_same_refusal_again_is_not_a_new_event() -> None:
    ctx = FakeContext()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm", "pod": {"securityContext": {}}}))
    rec = build_reconcilers(ctx)["Agent"]
    assert await rec.reconcile("ns", "a1") == Outcome.INVALID
    assert [e.reason for e in ctx.events] == [reasons.OVERRIDE_REFUSED]
    # The same refusal again: status unchanged, no new Event.
    assert await rec.reconcile("ns", "a1") == Outcome.INVALID
    assert len(ctx.events) == 1


def test_env_of_builder_reads_value_from() -> None:
    dep = agent_dep(container=CONTAINER)
    assert env_of(dep)["TEAM_TOKEN"] == {"secretKeyRef": {"name": "team", "key": "token"}}


@pytest.mark.parametrize(
    "name",
    [
        "AGENT_SUB_AGENTS",  # a peer agentNetwork.access does not grant
        "MCP_SERVERS",  # a tool server spec.mcpServers does not list
        "MEMORY_ENDPOINT",
        "AGENT_AUTH_MODE",  # the posture's, set only with security on
        "AUTONOMOUS_GOAL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ],
)
def test_names_the_operator_may_set_are_reserved_even_when_unset(name: str) -> None:
    assert name not in env_of(agent_dep())
    with pytest.raises(OverrideRefused) as info:
        agent_dep(container={"env": [{"name": name, "value": "x"}]})
    assert info.value.problems == [f"spec.container.env: {name} is reserved for the operator"]


def test_runtime_tunables_and_other_names_are_the_platforms() -> None:
    env = [
        {"name": "MODEL_TIMEOUT_SECONDS", "value": "120"},
        {"name": "MEMORY_TOP_K", "value": "5"},
        {"name": "MODEL_API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "v"}}},
    ]
    assert env_of(agent_dep(container={"env": env}))["MODEL_TIMEOUT_SECONDS"] == "120"
    with pytest.raises(OverrideRefused, match="KAOS_MEMORY_NEW_KNOB is reserved"):
        store_dep(container={"env": [{"name": "KAOS_MEMORY_NEW_KNOB", "value": "1"}]})
    server = mcp_server(
        params="def f() -> int:\n    return 1\n",
        container={"env": [{"name": "MCP_NEW_KNOB", "value": "x"}]},
    )
    with pytest.raises(OverrideRefused, match="MCP_NEW_KNOB is reserved for the operator"):
        desired_mcpserver_objects(server, McpContext(images=IMAGES))


async def test_a_waiting_agent_reports_its_refusal_at_once() -> None:
    ctx = FakeContext()  # no ModelAPI yet: the Agent would wait for it
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm", "container": {"startupProbe": {}}}))
    assert await build_reconcilers(ctx)["Agent"].reconcile("ns", "a1") == Outcome.INVALID
    status = ctx.status_of("Agent", "ns", "a1")
    ready = next(c for c in status["conditions"] if c["type"] == reasons.READY)
    assert ready["reason"] == reasons.OVERRIDE_REFUSED
    assert ctx.applies == []
