"""The chart's ``gatewayAPI`` and ``mcpRuntimes`` values: validated by the schema (and the
chart's own check), rendered into the operator's ConfigMap and RBAC, and read back by the
operator's settings."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_operator.settings import GatewayRef, OperatorSettings

from tests.fixtures.helm import Helm, find_object

SCHEMA_ERROR = "values don't meet the specifications of the schema(s)"
KUBERNETES = {
    "image": "ghcr.io/example/mcp-server-kubernetes:1.2.0",
    "command": ["mcp-server-kubernetes"],
    "port": 3000,
    "params": "env",
    "paramsEnv": "MCP_K8S_OPTIONS",
    "env": {"LOG_LEVEL": "info"},
}


def route_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    role = find_object(objects, "ClusterRole", "kaos-operator")
    return [r for r in role["rules"] if "gateway.networking.k8s.io" in r["apiGroups"]]


def test_off_by_default_no_route_rights(helm: Helm) -> None:
    objects = helm.template()
    data = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    settings = OperatorSettings.from_env(data)
    assert settings.reconcile.gateway is None
    assert settings.reconcile.mcp_runtimes == {}
    assert route_rules(objects) == []


def test_gateway_and_registry_reach_the_operator(helm: Helm) -> None:
    values = {
        "gatewayAPI": {
            "enabled": True,
            "gateway": {"name": "edge", "namespace": "gateways", "sectionName": "https"},
        },
        "mcpRuntimes": {"kubernetes": KUBERNETES},
    }
    objects = helm.template(values=values)
    data = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    settings = OperatorSettings.from_env(data).reconcile
    assert settings.gateway == GatewayRef(name="edge", namespace="gateways", section_name="https")
    runtime = settings.mcp_runtimes["kubernetes"]
    assert (runtime.image, runtime.port, runtime.params_env) == (
        KUBERNETES["image"],
        3000,
        "MCP_K8S_OPTIONS",
    )
    assert route_rules(objects) == [
        {
            "apiGroups": ["gateway.networking.k8s.io"],
            "resources": ["httproutes"],
            "verbs": ["get", "list", "watch", "create", "patch", "delete"],
        }
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"gatewayAPI": {"enabled": "yes"}}, "at '/gatewayAPI/enabled'"),
        ({"gatewayAPI": {"gateway": {"name": "Not_A_Name"}}}, "at '/gatewayAPI/gateway/name'"),
        ({"gatewayAPI": {"hostname": "x"}}, "at '/gatewayAPI': additional properties 'hostname'"),
        ({"mcpRuntimes": {"k": {"port": 3000}}}, "at '/mcpRuntimes/k': missing property 'image'"),
        ({"mcpRuntimes": {"k": {"image": "x", "params": "stdin"}}}, "at '/mcpRuntimes/k/params'"),
        ({"mcpRuntimes": {"k": {"image": "x", "imag": "y"}}}, "additional properties 'imag'"),
        ({"mcpRuntimes": {"custom": {"image": "x"}}}, "invalid propertyName 'custom'"),
        ({"mcpRuntimes": {"Bad_1": {"image": "x"}}}, "invalid propertyName 'Bad_1'"),
    ],
)
def test_bad_values_fail_with_the_schema_message(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    proc = helm.template_text(values=values, check=False)
    assert proc.returncode != 0
    assert SCHEMA_ERROR in proc.stderr
    assert message in proc.stderr, proc.stderr


def test_gateway_api_without_a_gateway_fails_naming_both_values(helm: Helm) -> None:
    proc = helm.template_text("gatewayAPI.enabled=true", check=False)
    assert proc.returncode != 0
    assert "gatewayAPI.enabled needs gatewayAPI.gateway.name" in proc.stderr
