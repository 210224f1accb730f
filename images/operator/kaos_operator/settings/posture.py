"""The cluster's identity posture: what the operator makes memory services and agents
enforce. No Agent or MemoryStore can change it."""

from __future__ import annotations

from typing import ClassVar, Literal

from kaos_core.auth.names import (
    DEFAULT_PRINCIPAL_CLAIM,
    DEFAULT_SERVICE_ACCOUNT_ISSUER,
    DEFAULT_USER_AUDIENCE,
)
from kaos_core.settings import SettingsGroup, setting

# How memory services verify an agent's token when security is on (``names.AUTH_MODES``
# minus ``off``, which is what security off means).
TokenVerification = Literal["jwks", "tokenreview"]


class Posture(SettingsGroup):
    """The cluster's identity posture (see the memory architecture, "Posture")."""

    env_prefix: ClassVar[str | None] = "KAOS_"
    title: ClassVar[str] = "Identity posture"

    security_enabled: bool = setting(
        "enforce agent identity: every Agent runs as its own ServiceAccount with"
        " audience-bound tokens, memory services and agents accept only the agents allowed"
        " to call them (the callers files the operator keeps current), NetworkPolicies admit"
        " only those agents' pods, and memory writes without a verified agent identity fail"
        " closed",
        default=False,
    )
    user_issuer: str | None = setting(
        "OIDC issuer URL (https) of verified end users; unset: no user identity. Needs"
        " `KAOS_SECURITY_ENABLED`; with it, writes without a principal fail closed and agents"
        " may use the `user` read scope",
        default=None,
    )
    # Used only with a user issuer: what user tokens must carry and where the principal is.
    user_audience: str = setting(
        "with a user issuer: the audience end users' tokens must carry",
        default=DEFAULT_USER_AUDIENCE,
        min_length=1,
    )
    user_principal_claim: str = setting(
        "with a user issuer: the claim of a user token that names the principal",
        default=DEFAULT_PRINCIPAL_CLAIM,
        min_length=1,
    )
    user_jwks_url: str | None = setting(
        "with a user issuer: its key set URL, instead of OIDC discovery", default=None
    )
    # Used only with security on: how memory pods verify agents' service-account tokens,
    # and the issuer those tokens carry (the cluster's --service-account-issuer).
    token_verification: TokenVerification = setting(
        "with security on: how MemoryStore pods verify agents' service-account tokens,"
        " offline against the issuer's keys (`jwks`) or by asking the API server"
        " (`tokenreview`: the memory pods' ServiceAccount needs `create` on tokenreviews)",
        default="jwks",
    )
    service_account_issuer: str = setting(
        "the cluster's service-account issuer (its `--service-account-issuer`), the `iss` of"
        " the agents' projected tokens",
        default=DEFAULT_SERVICE_ACCOUNT_ISSUER,
        min_length=1,
    )

    @property
    def user_identity(self) -> bool:
        """Secured user identity: security on and an OIDC user issuer configured."""
        return self.security_enabled and bool(self.user_issuer)

    @property
    def require_principal(self) -> bool:
        return self.user_identity

    @property
    def require_agent_identity(self) -> bool:
        return self.security_enabled
