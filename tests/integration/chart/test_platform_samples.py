"""samples/platform: one realistic use of each field a platform team configures
(overrides, routes, proxy settings, runtimes), valid against the generated CRDs and the
models, with chart values the operator reads. The end-to-end test applies them to a real
API server (tests/e2e/operator/test_platform_samples.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kaos_operator.settings import OperatorSettings

from tests.fixtures.helm import SAMPLES_DIR, Helm, find_object
from tests.unit.chart.test_samples import MODELS, crd_schemas, unknown_fields

PLATFORM = SAMPLES_DIR / "platform"


def platform_objects() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(PLATFORM.glob("*.yaml"))
        if path.name != "values-platform.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def _paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        out = {prefix} if prefix else set()
        for key, sub in value.items():
            out |= _paths(sub, f"{prefix}.{key}" if prefix else key)
        return out
    if isinstance(value, list):
        return {prefix}.union(*(_paths(v, prefix) for v in value)) if value else {prefix}
    return {prefix}


@pytest.mark.parametrize(
    "doc",
    [pytest.param(d, id=f"{d['kind']}/{d['metadata']['name']}") for d in platform_objects()],
)
def test_platform_sample_matches_its_crd(doc: dict[str, Any]) -> None:
    schema = crd_schemas()[doc["kind"]]
    assert unknown_fields(doc["spec"], schema["properties"]["spec"], "spec") == []
    MODELS[doc["kind"]].model_validate(doc)


def test_every_new_field_has_a_sample() -> None:
    used: set[str] = set()
    for doc in platform_objects():
        used |= {f"{doc['kind']}:{p}" for p in _paths(doc["spec"])}
    wanted = {
        "Agent:container.env.valueFrom.secretKeyRef",
        "Agent:container.envFrom.configMapRef",
        "Agent:container.resources.requests",
        "Agent:container.volumeMounts",
        "Agent:pod.labels",
        "Agent:pod.annotations",
        "Agent:pod.nodeSelector",
        "Agent:pod.tolerations",
        "Agent:pod.affinity.nodeAffinity",
        "Agent:pod.topologySpreadConstraints",
        "Agent:pod.priorityClassName",
        "Agent:pod.imagePullSecrets",
        "Agent:pod.volumes.configMap",
        "Agent:gatewayRoute.timeouts.backendRequest",
        "ModelAPI:proxyConfig.provider",
        "ModelAPI:proxyConfig.apiKeySecretRef",
        "ModelAPI:proxyConfig.configYaml.fromSecretKeyRef",
        "ModelAPI:proxyConfig.env.valueFrom.secretKeyRef",
        "ModelAPI:gatewayRoute.timeouts.request",
        "MCPServer:runtime",
        "MCPServer:serviceAccountName",
        "MCPServer:command",
        "MCPServer:port",
        "MCPServer:gatewayRoute",
    }
    assert wanted - used == set()


def test_platform_values_reach_the_operator(helm: Helm) -> None:
    values = yaml.safe_load((PLATFORM / "values-platform.yaml").read_text())
    objects = helm.template(values=values)
    data = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    settings = OperatorSettings.from_env(data).reconcile
    assert settings.gateway is not None and settings.gateway.name == "edge"
    assert settings.mcp_runtimes["kubernetes"].params == "args"
    # The sample servers name a runtime the values register.
    runtimes = {d["spec"]["runtime"] for d in platform_objects() if d["kind"] == "MCPServer"}
    assert runtimes <= {"custom", "python-string", *settings.mcp_runtimes}
