"""The memory service's verified-identity settings: names shared with the operator,
contradictions refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaos_core.auth import names
from kaos_core.settings import SettingsError
from kaos_memory.settings import MemorySettings, load_memory_settings


def test_variables_are_the_ones_the_operator_sets() -> None:
    fields = {
        names.MEMORY_AUTH_MODE: "auth_mode",
        names.MEMORY_AUTH_ISSUER: "auth_issuer",
        names.MEMORY_AUTH_API_SERVER: "auth_api_server",
        names.MEMORY_AUTH_CA_FILE: "auth_ca_file",
        names.MEMORY_AUTH_TOKEN_FILE: "auth_token_file",
        names.MEMORY_CALLERS_FILE: "callers_file",
    }
    for variable, field in fields.items():
        assert MemorySettings.env_name(field) == variable


def test_defaults_are_off() -> None:
    auth = load_memory_settings({}).auth
    assert auth.mode == "off"
    assert auth.callers_file == Path(names.CALLERS_PATH)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"KAOS_MEMORY_AUTH_MODE": "jwks"},
            "KAOS_MEMORY_AUTH_MODE=jwks needs KAOS_MEMORY_AUTH_ISSUER",
        ),
        (
            {"KAOS_MEMORY_AUTH_MODE": "tokenreview"},
            "KAOS_MEMORY_AUTH_MODE=tokenreview needs KAOS_MEMORY_AUTH_API_SERVER",
        ),
        (
            {"KAOS_MEMORY_AUTH_MODE": "jwks", "KAOS_MEMORY_AUTH_ISSUER": "http://issuer"},
            "KAOS_MEMORY_AUTH_ISSUER must be an https:// URL",
        ),
        ({"KAOS_MEMORY_AUTH_MODE": "bearer"}, "KAOS_MEMORY_AUTH_MODE"),
    ],
)
def test_contradictions_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_memory_settings(env)


def test_a_complete_jwks_posture_loads() -> None:
    auth = load_memory_settings(
        {
            "KAOS_MEMORY_AUTH_MODE": "jwks",
            "KAOS_MEMORY_AUTH_ISSUER": names.DEFAULT_SERVICE_ACCOUNT_ISSUER,
            "KAOS_MEMORY_AUTH_API_SERVER": names.IN_CLUSTER_API_SERVER,
            "KAOS_MEMORY_AUTH_CA_FILE": names.IN_CLUSTER_CA_FILE,
            "KAOS_MEMORY_AUTH_TOKEN_FILE": names.IN_CLUSTER_TOKEN_FILE,
        }
    ).auth
    assert auth.mode == "jwks"
    assert auth.token_file == Path(names.IN_CLUSTER_TOKEN_FILE)
