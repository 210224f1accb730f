"""Operator settings: posture and images from the environment, invariants at load."""

from __future__ import annotations

import pytest
from kaos_core.settings import SettingsError
from kaos_operator.settings import OperatorSettings


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
