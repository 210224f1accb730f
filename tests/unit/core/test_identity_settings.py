"""The caller and user identity settings are declared once, in the core, and read under
each service's prefix: the memory service's ``KAOS_MEMORY_*`` and the agent's ``AGENT_*``."""

from __future__ import annotations

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.auth import names
from kaos_core.settings import ServiceSettings, SettingsError
from kaos_core.settings.auth import CallerAuth, UserAuth, VerifiedIdentity
from kaos_memory.settings import MemorySettings

SERVICES: list[type[ServiceSettings]] = [MemorySettings, AgentSettings]


def _declaring(cls: type, attribute: str) -> type:
    """The class whose own body declares ``attribute`` (a field or a property)."""
    for klass in cls.__mro__:
        if attribute in vars(klass).get("__annotations__", {}) or attribute in vars(klass):
            return klass
    raise AssertionError(f"{cls.__name__} has no {attribute}")


def _identity_variables(service: type[ServiceSettings]) -> dict[str, type]:
    """Every variable of ``service`` that is about identity -> the class declaring its field."""
    prefix = service.env_prefix
    out: dict[str, type] = {}
    for name, group_cls in service.groups().items():
        for field in group_cls.model_fields:
            variable = group_cls.env_name(field, service.prefix_of(name))
            suffix = variable.removeprefix(prefix)
            if suffix.startswith(("AUTH_", "USER_")) or suffix == "CALLERS_FILE":
                out[suffix] = _declaring(group_cls, field)
    return out


def test_each_identity_field_has_one_definition() -> None:
    memory, agent = (_identity_variables(service) for service in SERVICES)
    assert memory.keys() == agent.keys()
    assert len(memory) == len(CallerAuth.model_fields) + len(UserAuth.model_fields)
    for suffix, declared in memory.items():
        assert declared is agent[suffix], suffix
        assert declared in (CallerAuth, UserAuth), (suffix, declared)
        assert declared.__module__ == "kaos_core.settings.auth"


def test_the_groups_validator_and_views_are_declared_once() -> None:
    for service in SERVICES:
        assert service.groups()["callers"] is CallerAuth
        assert service.groups()["users"] is UserAuth
        for attribute in ("auth", "user_auth", "callers", "users"):
            assert _declaring(service, attribute) is VerifiedIdentity, (service, attribute)
    assert _declaring(CallerAuth, "problems") is CallerAuth
    assert _declaring(UserAuth, "problems") is UserAuth


@pytest.mark.parametrize(
    ("service", "variables"),
    [
        (
            MemorySettings,
            {
                names.MEMORY_AUTH_MODE,
                names.MEMORY_AUTH_ISSUER,
                names.MEMORY_AUTH_API_SERVER,
                names.MEMORY_AUTH_CA_FILE,
                names.MEMORY_AUTH_TOKEN_FILE,
                names.MEMORY_CALLERS_FILE,
                names.MEMORY_USER_ISSUER,
                names.MEMORY_USER_AUDIENCE,
                names.MEMORY_USER_PRINCIPAL_CLAIM,
                names.MEMORY_USER_JWKS_URL,
                names.MEMORY_USER_CA_FILE,
                names.MEMORY_USER_LEEWAY,
            },
        ),
        (
            AgentSettings,
            {
                names.AGENT_AUTH_MODE,
                names.AGENT_AUTH_ISSUER,
                names.AGENT_AUTH_JWKS_URL,
                names.AGENT_AUTH_API_SERVER,
                names.AGENT_AUTH_CA_FILE,
                names.AGENT_AUTH_TOKEN_FILE,
                names.AGENT_AUTH_LEEWAY,
                names.AGENT_AUTH_REVIEW_CACHE_SECONDS,
                names.AGENT_CALLERS_FILE,
                names.AGENT_USER_ISSUER,
                names.AGENT_USER_AUDIENCE,
                names.AGENT_USER_PRINCIPAL_CLAIM,
                names.AGENT_USER_JWKS_URL,
                names.AGENT_USER_CA_FILE,
                names.AGENT_USER_LEEWAY,
            },
        ),
    ],
)
def test_the_operator_and_the_service_agree_on_the_names(
    service: type[ServiceSettings], variables: set[str]
) -> None:
    assert variables <= set(service.env_names())


@pytest.mark.parametrize(
    ("service", "base", "prefix"),
    [
        (MemorySettings, {}, "KAOS_MEMORY_"),
        (AgentSettings, {"MODEL_API_URL": "http://m:1", "MODEL_NAME": "m"}, "AGENT_"),
    ],
)
def test_one_validator_names_each_services_variables(
    service: type[ServiceSettings], base: dict[str, str], prefix: str
) -> None:
    with pytest.raises(SettingsError) as info:
        service.from_env({**base, f"{prefix}AUTH_MODE": "tokenreview"})
    assert f"{prefix}AUTH_MODE=tokenreview needs {prefix}AUTH_API_SERVER" in str(info.value)
    with pytest.raises(SettingsError) as info:
        service.from_env(
            {**base, f"{prefix}USER_ISSUER": "https://idp", f"{prefix}USER_AUDIENCE": "a"}
        )
    assert f"{prefix}USER_ISSUER needs {prefix}AUTH_MODE" in str(info.value)
    on = service.from_env(
        {
            **base,
            f"{prefix}AUTH_MODE": "jwks",
            f"{prefix}AUTH_ISSUER": "https://issuer",
            f"{prefix}USER_ISSUER": "https://idp",
            f"{prefix}USER_AUDIENCE": "a",
        }
    )
    assert isinstance(on, VerifiedIdentity)
    assert on.auth.mode == "jwks" and on.auth.issuer == "https://issuer"
    assert on.user_auth is not None and on.user_auth.audience == "a"
