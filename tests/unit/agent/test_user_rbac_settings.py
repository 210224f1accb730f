"""``AGENT_RBAC``: the settings it needs, checked at load, and what the agent builds
from them (``kaos_agent.access``)."""

from __future__ import annotations

import pytest
from kaos_agent.access import invoke_access
from kaos_agent.settings import AgentSettings
from kaos_core.settings import SettingsError

BASE = {
    "MODEL_API_URL": "http://model:8000",
    "MODEL_NAME": "m",
    "AGENT_AUTH_MODE": "jwks",
    "AGENT_AUTH_ISSUER": "https://k8s.test",
    "AGENT_AUTH_API_SERVER": "https://k8s.test",
    "AGENT_IDENTITY": "kaos://agent/finance/billing",
    "AGENT_USER_ISSUER": "https://idp.example.test",
    "AGENT_USER_AUDIENCE": "kaos",
    "AGENT_RBAC": "true",
}


async def test_the_check_asks_about_this_agent_with_the_configured_mapping() -> None:
    env = {**BASE, "AGENT_RBAC_USERNAME_CLAIM": "email", "AGENT_RBAC_GROUPS_CLAIM": "groups",
           "AGENT_RBAC_GROUPS_PREFIX": "oidc:", "AGENT_RBAC_USERNAME_PREFIX": "-"}  # fmt: skip
    access = invoke_access(AgentSettings.from_env(env))
    assert access is not None
    try:
        assert access.attributes.body() == {
            "group": "kaos.tools",
            "resource": "agents",
            "subresource": "invoke",
            "verb": "create",
            "namespace": "finance",
            "name": "billing",
        }
        assert access.mapping.username_claim == "email"
        assert access.mapping.prefix_for("https://idp.example.test") == ""
        assert (access.mapping.groups_claim, access.mapping.groups_prefix) == ("groups", "oidc:")
    finally:
        await access.close()
    off = AgentSettings.from_env({**BASE, "AGENT_RBAC": "false"})
    assert invoke_access(off) is None


@pytest.mark.parametrize(
    "missing", ["AGENT_USER_ISSUER", "AGENT_AUTH_API_SERVER", "AGENT_IDENTITY"]
)
def test_user_rbac_without_what_it_asks_with_fails_at_load(missing: str) -> None:
    env = {k: v for k, v in BASE.items() if k != missing}
    if missing == "AGENT_USER_ISSUER":
        env.pop("AGENT_USER_AUDIENCE")
    with pytest.raises(SettingsError, match=f"AGENT_RBAC=true needs {missing}"):
        AgentSettings.from_env(env)


def test_the_cache_time_is_bounded() -> None:
    with pytest.raises(SettingsError, match="AGENT_RBAC_CACHE_SECONDS"):
        AgentSettings.from_env({**BASE, "AGENT_RBAC_CACHE_SECONDS": "3600"})
