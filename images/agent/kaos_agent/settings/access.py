"""Who may talk to the agent: Kubernetes RBAC for verified users (``kaos_core.auth.invoke``)."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.auth import names as auth_names
from kaos_core.auth.invoke import ClaimMapping
from kaos_core.settings import SettingsGroup, setting

DEFAULT_RBAC_CACHE_SECONDS = 5.0


class UserRbac(SettingsGroup):
    """Whether RBAC decides which verified users the agent serves, and who a token names."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Who may talk to the agent"

    enabled: bool = setting(
        "serve a verified user only when Kubernetes RBAC lets them `create` the `agents/invoke`"
        " subresource (API group `kaos.tools`) of this Agent (a SubjectAccessReview through"
        " `AGENT_AUTH_API_SERVER` with `AGENT_AUTH_TOKEN_FILE`; the pod's ServiceAccount needs"
        " `create` on subjectaccessreviews: the chart's `<release>-agent-review`); refused:"
        " 403 `agent_not_granted`, the API server unreachable: 503. Needs `AGENT_USER_ISSUER`,"
        " `AGENT_AUTH_API_SERVER` and `AGENT_IDENTITY` (its namespace and name are the"
        " Agent's). Delegations carrying a user's token are asked for that user",
        env=auth_names.AGENT_RBAC,
        default=False,
    )
    username_claim: str = setting(
        "the claim of a user token that names the Kubernetes user (as the API server's"
        " `--oidc-username-claim`)",
        env=auth_names.AGENT_RBAC_USERNAME_CLAIM,
        default="sub",
        min_length=1,
    )
    username_prefix: str | None = setting(
        "put before the username claim (as `--oidc-username-prefix`); `-`: nothing",
        env=auth_names.AGENT_RBAC_USERNAME_PREFIX,
        default=None,
        default_doc="`<issuer>#`, nothing for `email`",
    )
    groups_claim: str | None = setting(
        "the claim of a user token listing the user's groups, a string or a list of strings"
        " (as `--oidc-groups-claim`); every user is also in `system:authenticated`, and"
        " groups in the `system:` form are ignored",
        env=auth_names.AGENT_RBAC_GROUPS_CLAIM,
        default=None,
        default_doc="no groups from the token",
        min_length=1,
    )
    groups_prefix: str = setting(
        "put before each group (as `--oidc-groups-prefix`)",
        env=auth_names.AGENT_RBAC_GROUPS_PREFIX,
        default="",
    )
    cache_seconds: float = setting(
        "seconds a decision is reused (never past the token's `exp`): a revoked binding takes"
        " effect within this",
        env=auth_names.AGENT_RBAC_CACHE_SECONDS,
        default=DEFAULT_RBAC_CACHE_SECONDS,
        ge=0,
        le=60,
    )

    def mapping(self) -> ClaimMapping:
        return ClaimMapping(
            username_claim=self.username_claim,
            username_prefix=self.username_prefix,
            groups_claim=self.groups_claim,
            groups_prefix=self.groups_prefix,
        )
