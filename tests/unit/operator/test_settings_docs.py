"""The operator's settings tables are generated from the field docs, every field has one,
and the variables are the ones the chart sets."""

from __future__ import annotations

from pathlib import Path

from kaos_core.settings import region, settings_markdown
from kaos_operator.settings import GROUPS, OperatorSettings

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "images/operator/SETTINGS.md"

# Every variable the operator read before its settings were grouped (names never change).
VARIABLES = {
    "KAOS_SECURITY_ENABLED",
    "KAOS_USER_ISSUER",
    "KAOS_USER_AUDIENCE",
    "KAOS_USER_PRINCIPAL_CLAIM",
    "KAOS_USER_JWKS_URL",
    "KAOS_USER_AUTHORIZED_PARTY",
    # Who may talk to an agent, decided by RBAC (issue 35).
    "KAOS_USER_RBAC",
    "KAOS_USER_USERNAME_CLAIM",
    "KAOS_USER_USERNAME_PREFIX",
    "KAOS_USER_GROUPS_CLAIM",
    "KAOS_USER_GROUPS_PREFIX",
    "KAOS_TOKEN_VERIFICATION",
    "KAOS_SERVICE_ACCOUNT_ISSUER",
    # MCP servers verify their callers, the operator included; egress (issue 35).
    "KAOS_OPERATOR_SERVICE_ACCOUNT",
    "KAOS_OPERATOR_MCP_TOKEN_FILE",
    "KAOS_CLUSTER_EGRESS",
    "KAOS_KEDA_NAMESPACE",
    "KAOS_IMAGE_AGENT",
    "KAOS_IMAGE_MCP",
    "KAOS_IMAGE_MEMORY",
    "KAOS_IMAGE_LITELLM",
    "KAOS_IMAGE_OLLAMA",
    "KAOS_IMAGE_PULL_POLICY",
    "KAOS_TELEMETRY_ENDPOINT",
    "KAOS_TELEMETRY_SAMPLING_RATIO",
    "KAOS_TELEMETRY_CAPTURE_CONTENT",
    "KAOS_GATEWAY_API_ENABLED",
    "KAOS_GATEWAY_NAME",
    "KAOS_GATEWAY_NAMESPACE",
    "KAOS_GATEWAY_SECTION_NAME",
    "KAOS_MCP_RUNTIMES",
    "KUBECONFIG",
    "KAOS_OPERATOR_WATCH_NAMESPACE",
    "KAOS_OPERATOR_NAMESPACE",
    "KAOS_OPERATOR_HOST",
    "KAOS_OPERATOR_PORT",
    "KAOS_OPERATOR_LOG_LEVEL",
    "KAOS_OPERATOR_WORKERS",
    "KAOS_OPERATOR_BACKOFF_BASE",
    "KAOS_OPERATOR_BACKOFF_MAX",
    "KAOS_OPERATOR_LEADER_ELECTION",
    "KAOS_OPERATOR_LEASE_NAME",
    "KAOS_OPERATOR_IDENTITY",
    "KAOS_OPERATOR_LEASE_DURATION",
    "KAOS_OPERATOR_RENEW_DEADLINE",
    "KAOS_OPERATOR_RETRY_PERIOD",
}


def test_every_setting_is_documented_in_a_group() -> None:
    assert set(OperatorSettings.groups()) - set(GROUPS) == {"limits", "telemetry"}
    for name, group_cls in OperatorSettings.groups().items():
        for field, info in group_cls.model_fields.items():
            assert info.description, f"{name}.{field} has no description"


def test_the_committed_tables_are_the_generated_ones() -> None:
    committed = region(DOC.read_text(encoding="utf-8"), "operator settings")
    generated = settings_markdown(OperatorSettings, GROUPS, heading="###").strip("\n")
    assert committed == generated, f"{DOC} drifted from the settings: run hack/gen-docs"


def test_the_variable_names_are_unchanged() -> None:
    names = OperatorSettings.env_names()
    assert len(set(names)) == len(names)
    documented = {
        variable
        for name in GROUPS
        for variable in OperatorSettings.groups()[name].env_names(OperatorSettings.prefix_of(name))
    }
    assert documented == VARIABLES
    assert {"KAOS_HTTP_MAX_CONNECTIONS", "OTEL_EXPORTER_OTLP_ENDPOINT"} <= set(names)
