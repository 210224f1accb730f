"""container/pod overrides and the ModelAPI's proxy settings, through the real API server:
every field applied, the objects the operator makes read back field by field, a refused
override reported as a condition and an Event, and bad values refused at admission."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from kaos_operator.kube import (
    CONFIGMAPS,
    DEPLOYMENTS,
    EVENTS,
    KubeClient,
    PermanentError,
    ResourceType,
)

from tests.e2e.operator.helpers import (
    AGENTS,
    condition,
    create,
    eventually,
    proxy_api,
    store_spec,
    volume_for,
    wait_phase,
)
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

SECRETS = ResourceType("", "v1", "secrets", "Secret")
PRIORITY_CLASSES = ResourceType(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)

LITELLM_CONFIG = """\
model_list:
  - model_name: fast
    litellm_params:
      model: anthropic/claude-3-5-haiku-latest
      api_key: os.environ/MODEL_API_KEY
"""


@pytest.fixture
async def priority_class(kube: KubeClient) -> AsyncIterator[str]:
    name = f"kaos-test-{uuid.uuid4().hex[:8]}"
    await kube.create(
        PRIORITY_CLASSES,
        None,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
        },
    )
    try:
        yield name
    finally:
        await kube.delete(PRIORITY_CLASSES, None, name)


async def secret(kube: KubeClient, ns: str, name: str, data: dict[str, str]) -> None:
    await kube.create(
        SECRETS,
        ns,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data},
    )


async def deployment_of(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return await kube.get(DEPLOYMENTS, ns, name)

    return await eventually(probe, within=60, what=f"Deployment {name}")


async def test_agent_overrides_reach_its_pod_template(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess, priority_class: str
) -> None:
    ns = k8s_namespace
    await secret(kube, ns, "team", {"token": "s3cret"})
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    spec: dict[str, Any] = {
        "modelAPI": "llm",
        "container": {
            "env": [
                {"name": "HTTPS_PROXY", "value": "http://proxy.corp:3128"},
                {
                    "name": "TEAM_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "team", "key": "token"}},
                },
            ],
            "envFrom": [{"configMapRef": {"name": "site"}, "prefix": "SITE_"}],
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": 1}},
            "volumeMounts": [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
        },
        "pod": {
            "labels": {"team": "search"},
            "annotations": {"example.com/owner": "search-team"},
            "nodeSelector": {"pool": "agents"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}
            ],
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 50,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"team": "search"}},
                            },
                        }
                    ]
                }
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"team": "search"}},
                }
            ],
            "priorityClassName": priority_class,
            "imagePullSecrets": [{"name": "regcred"}],
            "volumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca", "optional": True}}],
        },
    }
    await create(kube, ns, "Agent", "a1", spec)
    dep = await deployment_of(kube, ns, "a1")

    template = dep["spec"]["template"]
    pod = template["spec"]
    (main,) = pod["containers"]
    env = {e["name"]: e for e in main["env"]}
    assert env["HTTPS_PROXY"] == {"name": "HTTPS_PROXY", "value": "http://proxy.corp:3128"}
    assert env["TEAM_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "team", "key": "token"}}
    assert env["AGENT_NAME"]["value"] == "a1"  # the operator's own, first and unchanged
    assert [e["name"] for e in main["env"]][-2:] == ["HTTPS_PROXY", "TEAM_TOKEN"]
    assert main["envFrom"] == [{"configMapRef": {"name": "site"}, "prefix": "SITE_"}]
    assert main["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"cpu": "1"},
    }
    assert main["volumeMounts"] == [
        {"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}
    ]
    assert main["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert main["securityContext"]["runAsNonRoot"] is True
    assert template["metadata"]["labels"]["team"] == "search"
    assert template["metadata"]["labels"]["app.kubernetes.io/instance"] == "a1"
    assert template["metadata"]["annotations"]["example.com/owner"] == "search-team"
    assert dep["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "agent",
        "app.kubernetes.io/instance": "a1",
    }
    assert pod["nodeSelector"] == {"pool": "agents"}
    assert pod["tolerations"] == spec["pod"]["tolerations"]
    assert pod["affinity"] == spec["pod"]["affinity"]
    assert pod["topologySpreadConstraints"] == spec["pod"]["topologySpreadConstraints"]
    assert pod["priorityClassName"] == priority_class
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    # The API server defaults a ConfigMap volume's mode (0644).
    assert pod["volumes"] == [
        {"name": "corp-ca", "configMap": {"name": "corp-ca", "optional": True, "defaultMode": 420}}
    ]
    assert pod["securityContext"]["runAsNonRoot"] is True


async def test_a_refused_override_is_a_condition_and_a_warning_event(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm"})
    before = await deployment_of(kube, ns, "a1")

    await kube.request(
        "PATCH",
        AGENTS.path(ns, "a1"),
        body={
            "spec": {
                "container": {
                    "env": [{"name": "MEMORY_REQUIRE_AGENT_IDENTITY", "value": "false"}],
                    "readinessProbe": {"tcpSocket": {"port": 1}},
                }
            }
        },
        content_type="application/merge-patch+json",
    )
    agent = await wait_phase(kube, ns, "Agent", "a1", "Failed", within=60)
    ready = condition(agent, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "OverrideRefused")
    assert ready["message"] == (
        "spec.container.readinessProbe: the operator's probes are fixed; "
        "spec.container.env: MEMORY_REQUIRE_AGENT_IDENTITY is set by the operator"
    )

    async def warning() -> dict[str, Any] | None:
        for e in (await kube.list(EVENTS, ns)).get("items", []):
            if e["involvedObject"]["name"] == "a1" and e["reason"] == "OverrideRefused":
                return dict(e)
        return None

    event = await eventually(warning, within=30, what="an OverrideRefused event")
    assert event["type"] == "Warning"
    assert "spec.container.readinessProbe" in event["message"]
    # Nothing was applied: the Deployment is the one from before the refusal.
    after = await kube.get(DEPLOYMENTS, ns, "a1")
    assert after is not None
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"]["template"] == before["spec"]["template"]


async def test_model_api_config_from_a_secret_api_key_and_env(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await secret(kube, ns, "litellm", {"config.yaml": LITELLM_CONFIG})
    await secret(kube, ns, "anthropic", {"key": "sk-test"})
    spec = {
        "mode": "Proxy",
        "proxyConfig": {
            "models": ["fast"],
            "configYaml": {"fromSecretKeyRef": {"name": "litellm", "key": "config.yaml"}},
            "apiKeySecretRef": {"name": "anthropic", "key": "key"},
            "env": [{"name": "LITELLM_LOG", "value": "ERROR"}],
        },
    }
    await create(kube, ns, "ModelAPI", "llm", spec)
    dep = await deployment_of(kube, ns, "llm")
    pod = dep["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    (volume,) = pod["volumes"]
    assert volume["name"] == "config"
    assert volume["secret"]["secretName"] == "litellm"
    assert volume["secret"]["items"] == [{"key": "config.yaml", "path": "config.yaml"}]
    assert main["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/litellm", "readOnly": True}
    ]
    assert main["args"] == ["--config", "/etc/litellm/config.yaml", "--port", "4000"]
    env = {e["name"]: e for e in main["env"]}
    assert env["MODEL_API_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "anthropic", "key": "key"}
    }
    assert env["LITELLM_LOG"]["value"] == "ERROR"
    # No ConfigMap of the operator's: the Secret is the config.
    assert await kube.get(CONFIGMAPS, ns, "llm-litellm") is None
    api = await wait_phase(kube, ns, "ModelAPI", "llm", "Ready", within=60)
    assert api["status"]["models"] == ["fast"]


async def test_model_api_inline_config_and_provider(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    inline = {
        "mode": "Proxy",
        "proxyConfig": {"models": ["fast"], "configYaml": {"fromString": LITELLM_CONFIG}},
    }
    await create(kube, ns, "ModelAPI", "inline", inline)
    provider = {"mode": "Proxy", "proxyConfig": {"models": ["gpt-4o-mini"], "provider": "openai"}}
    await create(kube, ns, "ModelAPI", "openai", provider)

    async def config_of(name: str) -> dict[str, Any] | None:
        cm = await kube.get(CONFIGMAPS, ns, f"{name}-litellm")
        return yaml.safe_load(cm["data"]["config.yaml"]) if cm else None

    assert await eventually(
        lambda: config_of("inline"), what="the inline config"
    ) == yaml.safe_load(LITELLM_CONFIG)
    config = await eventually(lambda: config_of("openai"), what="the provider's config")
    assert config["model_list"] == [
        {"model_name": "gpt-4o-mini", "litellm_params": {"model": "openai/gpt-4o-mini"}}
    ]


async def test_hosted_model_api_reports_its_pull(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    # The model store's claim (10Gi by default) on a static volume: no provisioner here.
    await volume_for(kube, ns, "ol-models", size="10Gi")
    await create(
        kube, ns, "ModelAPI", "ol", {"mode": "Hosted", "serverConfig": {"model": "smollm2:135m"}}
    )
    api = await wait_phase(kube, ns, "ModelAPI", "ol", "Ready", within=60)
    pulled = condition(api, "ModelPulled")
    assert pulled is not None
    assert (pulled["status"], pulled["reason"], pulled["message"]) == (
        "True",
        "Pulled",
        "smollm2:135m pulled and answering",
    )


# -- admission: the schema and CEL rules the models generate --------------------------


async def refused(kube: KubeClient, ns: str, kind: str, spec: dict[str, Any]) -> str:
    with pytest.raises(PermanentError) as info:
        await create(kube, ns, kind, "bad", spec)
    assert info.value.status == 422, info.value
    return info.value.message


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"pod": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
            "spec.pod.tolerations[0]",
            "a toleration with operator Exists takes no value",
        ),
        (
            {"pod": {"tolerations": [{"key": "k", "operator": "Maybe"}]}},
            "spec.pod.tolerations[0].operator",
            'supported values: "Exists", "Equal"',
        ),
        (
            {"pod": {"tolerations": [{"key": "k", "tolerationSeconds": 5}]}},
            "spec.pod.tolerations[0]",
            "tolerationSeconds needs effect NoExecute",
        ),
        (
            {
                "container": {
                    "env": [
                        {
                            "name": "A",
                            "value": "x",
                            "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                        }
                    ]
                }
            },
            "spec.container.env[0]",
            "an env entry takes value or valueFrom, not both",
        ),
        (
            {
                "container": {
                    "env": [
                        {
                            "name": "A",
                            "valueFrom": {
                                "secretKeyRef": {"name": "s", "key": "k"},
                                "configMapKeyRef": {"name": "c", "key": "k"},
                            },
                        }
                    ]
                }
            },
            "spec.container.env[0].valueFrom",
            "valueFrom takes exactly one of secretKeyRef",
        ),
        (
            {"container": {"env": [{"name": "1BAD"}]}},
            "spec.container.env[0].name",
            "should match",
        ),
        (
            {"container": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
            "spec.container.env[1]",
            "Duplicate value",
        ),
        (
            {"container": {"resources": {"limits": {"cpu": "lots"}}}},
            "spec.container.resources.limits.cpu",
            "should match",
        ),
        (
            {"pod": {"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]}},
            "spec.pod.volumes[0]",
            "a volume takes exactly one of configMap, secret, emptyDir, persistentVolumeClaim",
        ),
        (
            {"pod": {"volumes": [{"name": "v", "hostPath": {"path": "/"}}]}},
            "spec.pod.volumes[0]",
            "a volume takes exactly one of",
        ),
        (
            {"pod": {"priorityClassName": "Not_Valid"}},
            "spec.pod.priorityClassName",
            "should match",
        ),
        (
            {
                "pod": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In"}]}
                                ]
                            }
                        }
                    }
                }
            },
            "spec.pod.affinity.nodeAffinity",
            "In, NotIn, Gt and Lt need values",
        ),
    ],
)
async def test_bad_override_values_are_refused_naming_the_field(
    kube: KubeClient, k8s_namespace: str, spec: dict[str, Any], field: str, message: str
) -> None:
    text = await refused(kube, k8s_namespace, "Agent", {"modelAPI": "llm", **spec})
    assert field in text and message in text, text


@pytest.mark.parametrize(
    ("proxy", "field", "message"),
    [
        (
            {"configYaml": {}},
            "spec.proxyConfig.configYaml",
            "configYaml takes exactly one of fromString, fromSecretKeyRef",
        ),
        (
            {"configYaml": {"fromString": "a: 1"}, "apiBase": "http://x"},
            "spec.proxyConfig",
            "configYaml replaces the generated config",
        ),
        ({"provider": "Open AI"}, "spec.proxyConfig.provider", "should match"),
        (
            {"env": [{"name": "A", "valueFrom": {}}]},
            "spec.proxyConfig.env[0].valueFrom",
            "valueFrom takes exactly one of",
        ),
    ],
)
async def test_bad_proxy_config_is_refused_naming_the_field(
    kube: KubeClient, k8s_namespace: str, proxy: dict[str, Any], field: str, message: str
) -> None:
    spec = {"mode": "Proxy", "proxyConfig": {"models": ["m"], **proxy}}
    text = await refused(kube, k8s_namespace, "ModelAPI", spec)
    assert field in text and message in text, text


async def test_store_mcp_and_model_api_overrides(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    overrides: dict[str, Any] = {
        "container": {
            "env": [
                {
                    "name": "HTTP_PROXY",
                    "valueFrom": {"secretKeyRef": {"name": "proxy", "key": "url"}},
                }
            ]
        },
        "pod": {
            "tolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "imagePullSecrets": [{"name": "regcred"}],
        },
    }
    await create(kube, ns, "ModelAPI", "llm", {**proxy_api(), **overrides})
    await create(
        kube, ns, "MCPServer", "tools", {"params": "def f() -> int:\n    return 1\n", **overrides}
    )
    external = {"type": "external", "connectionSecret": {"name": "pg"}}
    await create(kube, ns, "MemoryStore", "mem", store_spec(storage=external, **overrides))
    for name in ("llm", "tools", "mem"):
        dep = await deployment_of(kube, ns, name)
        pod = dep["spec"]["template"]["spec"]
        assert pod["tolerations"] == overrides["pod"]["tolerations"], name
        assert pod["imagePullSecrets"] == [{"name": "regcred"}], name
        (main,) = pod["containers"]
        assert main["env"][-1] == overrides["container"]["env"][0], name
