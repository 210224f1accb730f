"""Who may talk to an agent, as the operator projects it: the posture's RBAC values become
the agent's ``AGENT_RBAC*`` variables only with users and ``user_rbac`` on, and the
agent loads what it is given."""

from __future__ import annotations

from kaos_agent.settings import AgentSettings
from kaos_core.auth import names as auth
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.settings import Posture

from tests.support.operator_objects import IMAGES, SECURED, agent, by_kind, env_of

USERS = Posture(
    security_enabled=True,
    user_issuer="https://idp.example.test/realms/kaos",
    user_rbac=True,
    user_username_claim="email",
    user_username_prefix="oidc:",
    user_groups_claim="groups",
    user_groups_prefix="oidc:",
)


def _env(posture: Posture) -> dict[str, str]:
    ctx = AgentContext(
        images=IMAGES, posture=posture, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )
    return env_of(by_kind(desired_agent_objects(agent("billing"), ctx))["Deployment"])


def test_the_rbac_posture_is_projected_into_the_agent() -> None:
    env = _env(USERS)
    rbac_names = {auth.AGENT_RBAC, auth.AGENT_RBAC_CACHE_SECONDS}
    projected = {
        k: v
        for k, v in env.items()
        if k in rbac_names or k.startswith(("AGENT_RBAC_USERNAME", "AGENT_RBAC_GROUPS"))
    }
    assert projected == {
        auth.AGENT_RBAC: "true",
        auth.AGENT_RBAC_USERNAME_CLAIM: "email",
        auth.AGENT_RBAC_USERNAME_PREFIX: "oidc:",
        auth.AGENT_RBAC_GROUPS_CLAIM: "groups",
        auth.AGENT_RBAC_GROUPS_PREFIX: "oidc:",
    }
    # The agent it configures loads, asking about its own Agent through the API server.
    values = {k: v for k, v in env.items() if isinstance(v, str)}  # POD_NAME: the kubelet's
    settings = AgentSettings.from_env({**values, "MODEL_API_URL": "http://m", "MODEL_NAME": "m"})
    assert settings.user_rbac.enabled
    assert settings.callers.api_server == auth.IN_CLUSTER_API_SERVER
    assert settings.agent.identity is not None and settings.agent.identity.endswith("/billing")


def test_with_users_rbac_is_on_unless_turned_off_and_unset_values_are_left_to_the_agent() -> None:
    # ``user_rbac`` not named: on (deny by default); an explicit ``False`` opts out.
    env = _env(Posture(security_enabled=True, user_issuer="https://idp.example.test"))
    assert env[auth.AGENT_RBAC] == "true"
    assert env[auth.AGENT_RBAC_USERNAME_CLAIM] == "sub"
    for name in (auth.AGENT_RBAC_USERNAME_PREFIX, auth.AGENT_RBAC_GROUPS_CLAIM,
                 auth.AGENT_RBAC_GROUPS_PREFIX):  # fmt: skip
        assert name not in env


def test_without_users_or_without_user_rbac_nothing_is_projected() -> None:
    for posture in (
        SECURED.model_copy(update={"user_rbac": True}),
        USERS.model_copy(update={"user_rbac": False}),
    ):
        env = _env(posture)
        assert auth.AGENT_RBAC not in env
        assert not [k for k in env if k.startswith(("AGENT_RBAC_USERNAME", "AGENT_RBAC_GROUPS"))]
