"""Operator settings: posture and images from the environment, invariants at load."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaos_core.settings import SettingsError
from kaos_operator.settings import OperatorSettings, lease_namespace


def test_posture_from_env() -> None:
    open_ = OperatorSettings.from_env({})
    assert not open_.posture.require_principal and not open_.posture.require_agent_identity
    secured = OperatorSettings.from_env({"KAOS_SECURITY_ENABLED": "true"})
    assert secured.posture.require_agent_identity and not secured.posture.require_principal
    users = OperatorSettings.from_env(
        {"KAOS_SECURITY_ENABLED": "true", "KAOS_USER_ISSUER": "https://idp.example.test"}
    )
    assert users.posture.require_principal and users.posture.user_identity
    # An issuer without security is not a secured user identity.
    lone = OperatorSettings.from_env({"KAOS_USER_ISSUER": "https://idp.example.test"})
    assert not lone.posture.user_identity


def test_images_from_env() -> None:
    s = OperatorSettings.from_env(
        {"KAOS_IMAGE_AGENT": "r/agent:9", "KAOS_IMAGE_PULL_POLICY": "Always"}
    )
    assert s.images.agent == "r/agent:9"
    assert s.images.pull_policy == "Always"


def test_lease_timing_invariant() -> None:
    with pytest.raises(SettingsError, match="KAOS_OPERATOR_RENEW_DEADLINE"):
        OperatorSettings.from_env(
            {"KAOS_OPERATOR_LEASE_DURATION": "5", "KAOS_OPERATOR_RENEW_DEADLINE": "6"}
        )
    with pytest.raises(SettingsError, match="KAOS_IMAGE_PULL_POLICY"):
        OperatorSettings.from_env({"KAOS_IMAGE_PULL_POLICY": "Sometimes"})


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts:
  - {name: plain, context: {cluster: c, user: u}}
  - {name: team, context: {cluster: c, user: u, namespace: team-a}}
current-context: %s
"""


def test_lease_namespace_follows_the_operator(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    sa.write_text("kaos-prod\n")
    team = tmp_path / "team.yaml"
    team.write_text(KUBECONFIG % "team")
    plain = tmp_path / "plain.yaml"
    plain.write_text(KUBECONFIG % "plain")
    missing = tmp_path / "missing"

    # In a pod: the downward API's POD_NAMESPACE, else the service account's namespace.
    assert lease_namespace(None, environ={"POD_NAMESPACE": "ops"}) == "ops"
    assert lease_namespace(None, environ={}, service_account_namespace=sa) == "kaos-prod"
    # Outside: the kubeconfig context's namespace, else "default" (as kubectl says).
    assert lease_namespace(str(team), environ={}, service_account_namespace=sa) == "team-a"
    assert lease_namespace(str(plain), environ={}, service_account_namespace=missing) == "default"
    assert lease_namespace(str(missing), environ={}, service_account_namespace=missing) == "default"
    broken = tmp_path / "broken.yaml"
    broken.write_text("contexts: [")
    assert lease_namespace(str(broken), environ={}, service_account_namespace=missing) == "default"


def test_an_explicit_lease_namespace_wins(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(KUBECONFIG % "team")
    s = OperatorSettings.from_env({"KUBECONFIG": str(team), "KAOS_OPERATOR_NAMESPACE": "ops"})
    assert s.leader.namespace == "ops"
    assert OperatorSettings.from_env({"KUBECONFIG": str(team)}).leader.namespace == "team-a"
