"""The cluster's identity posture: what the operator makes memory services and agents
enforce. No Agent or MemoryStore can change it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from kaos_core.auth.config import UserAudience
from kaos_core.auth.names import (
    DEFAULT_PRINCIPAL_CLAIM,
    DEFAULT_SERVICE_ACCOUNT_ISSUER,
    DEFAULT_USER_AUDIENCE,
)
from kaos_core.crds.egress import EgressRule, cluster_egress
from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator

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
        "with a user issuer: the audience end users' tokens must carry, one for every agent"
        " (`kaos`), or each agent's own from a template with the placeholders `{namespace}`"
        " and `{name}` (e.g. `kaos.dev/agent/{namespace}/{name}`): an agent then accepts a"
        " user's token sent to it only for its own audience, so a token a client got for one"
        " agent is refused (401) by the others, while a token an agent forwards when it"
        " delegates, and the memory service, accept an audience of the template's form",
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
    user_authorized_party: str | None = setting(
        "with a user issuer: the client user tokens must have been issued to (`azp`, or"
        " RFC 9068's `client_id`); unset: any client of the issuer",
        default=None,
    )
    # Used only with a user issuer: who may talk to which agent, decided by Kubernetes RBAC
    # (``kaos_core.auth.invoke``), and who a token names there (the API server's OIDC flags).
    # On by default: a verified user is served only where granted (deny by default).
    user_rbac: bool = setting(
        "with a user issuer: an agent serves a verified user only when Kubernetes RBAC lets"
        " them `create` its `agents/invoke` subresource (`kaos agent grant`; the chart's"
        " `<release>-agent-user` ClusterRole); refused users get 403 `agent_not_granted`."
        " `false` gives that up: every user the issuer vouches for may talk to every agent"
        " (and, through delegation, to every agent it delegates to); without a user issuer"
        " it changes nothing",
        default=True,
    )
    user_username_claim: str = setting(
        "with `KAOS_USER_RBAC`: the user token's claim naming the Kubernetes user (as"
        " kube-apiserver `--oidc-username-claim`)",
        default="sub",
        min_length=1,
    )
    user_username_prefix: str | None = setting(
        "with `KAOS_USER_RBAC`: put before the user name (as `--oidc-username-prefix`; `-`:"
        " nothing); unset: `<issuer>#`, nothing for `email`",
        default=None,
    )
    user_groups_claim: str | None = setting(
        "with `KAOS_USER_RBAC`: the user token's claim listing groups (as"
        " `--oidc-groups-claim`); unset: no groups from the token",
        default=None,
    )
    user_groups_prefix: str | None = setting(
        "with `KAOS_USER_RBAC`: put before each group (as `--oidc-groups-prefix`)",
        default=None,
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
    # Used only with security on: MCP servers verify their callers, the operator included.
    operator_service_account: str | None = setting(
        "with security on: the operator's own ServiceAccount as `<namespace>/<name>` (the"
        " chart sets it); MCP servers let it list their tools (`status.availableTools`) and"
        " call none, and the NetworkPolicies of MCP servers, ModelAPIs and MemoryStores admit"
        " the operator pods of that namespace (`app.kubernetes.io/component: operator`), whose"
        " reads fill their status; unset: neither",
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
    )
    operator_mcp_token_file: Path | None = setting(
        "with security on: the operator's projected token of audience `kaos.dev/mcp` (the"
        " chart mounts it), presented when it lists an MCP server's tools; re-read when"
        " kubelet rotates it",
        default=None,
    )
    cluster_egress: str | None = setting(
        "with security on: where every KAOS pod may connect beyond DNS and the resources it"
        " references, as a comma list of `CIDR:PORT` (e.g. the API server's address for"
        " token verification, `172.18.0.2/32:6443`, and a tracing collector); unset: nowhere"
        " else (see the security docs, egress)",
        default=None,
    )

    keda_namespace: str = setting(
        "with security on: the namespace KEDA runs in; an Agent KEDA scales admits its pods"
        " on the agent's port in its NetworkPolicy (KEDA reads the agent's `GET /load`)",
        default="keda",
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    )

    @field_validator("cluster_egress")
    @classmethod
    def _egress(cls, value: str | None) -> str | None:
        cluster_egress(value)  # refused at load, naming the entry
        return value

    @field_validator("user_audience")
    @classmethod
    def _user_audience(cls, value: str) -> str:
        UserAudience(value)  # refused at load: an unknown placeholder, an unmatched brace
        return value

    @property
    def egress(self) -> list[EgressRule]:
        """``cluster_egress`` as rules (checked at load)."""
        return cluster_egress(self.cluster_egress)

    @property
    def operator_account(self) -> tuple[str, str] | None:
        """The operator's ServiceAccount as ``(namespace, name)``; None when not set."""
        if self.operator_service_account is None:
            return None
        namespace, _, name = self.operator_service_account.partition("/")
        return namespace, name

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
