"""Who may talk to an agent: Kubernetes RBAC, asked with a SubjectAccessReview.

Under verified user identity an agent may also require that RBAC allows each verified
user to ``create`` the virtual subresource ``agents/invoke`` (API group ``kaos.tools``) of
that Agent, its own namespace and name. Platform teams grant it with ordinary
RoleBindings to the chart's ClusterRole ``<release>-agent-user`` (``kaos agent grant``).

The user and groups asked about come from the user's verified token the way the API
server's own OIDC authenticator maps them (``--oidc-username-claim``,
``--oidc-username-prefix``, ``--oidc-groups-claim``, ``--oidc-groups-prefix``), so one
binding means the same to ``kubectl`` and to KAOS when both are configured alike
(``ClaimMapping``): the user name is the username claim behind its prefix (no prefix
configured: the issuer URL and ``#``, except for ``email``; ``-``: none), each group the
groups claim's value behind the groups prefix, and every user is in
``system:authenticated`` as the API server's users are. A mapped name or group in the
``system:`` form is never taken from a token: nobody becomes ``system:masters`` by
choosing their own groups at the identity provider.

Decisions are ``KubernetesAccess``'s (the memory service's admin check): cached briefly
and boundedly, never past the token's expiry; refused unless the API server says
``allowed``; an API server that cannot be asked is ``VerifierUnavailable`` (503), never
an allow. The same question is asked for the user on whose behalf a delegation runs, at
the agent delegated to, so a user reaches no agent through another (no confused deputy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaos_core.auth.access import KubernetesAccess, KubernetesUser, ResourceAttributes
from kaos_core.auth.oidc import VerifiedUser
from kaos_core.auth.verify import Forbidden, Unauthenticated
from kaos_core.crds.common import GROUP

RESOURCE = "agents"
SUBRESOURCE = "invoke"
VERB = "create"
# The chart's ClusterRole granting it: ``<release>-agent-user``.
CLUSTER_ROLE_SUFFIX = "agent-user"
# Every authenticated user of the API server is in this group; so is every verified user.
AUTHENTICATED_GROUP = "system:authenticated"
RESERVED_PREFIX = "system:"
# ``--oidc-username-prefix=-``: no prefix at all.
NO_PREFIX = "-"
EMAIL_CLAIM = "email"


@dataclass(frozen=True)
class ClaimMapping:
    """Where a token's Kubernetes user and groups are, as the API server's OIDC flags say."""

    username_claim: str = "sub"
    # ``None``: the API server's default (``<issuer>#`` unless the claim is ``email``).
    username_prefix: str | None = None
    # ``None``: no groups from the token (only ``system:authenticated``).
    groups_claim: str | None = None
    groups_prefix: str = ""

    def prefix_for(self, issuer: str) -> str:
        if self.username_prefix == NO_PREFIX:
            return ""
        if self.username_prefix is not None:
            return self.username_prefix
        return "" if self.username_claim == EMAIL_CLAIM else f"{issuer}#"

    def user(
        self, claims: Mapping[str, Any], issuer: str, expires_at: float | None
    ) -> KubernetesUser:
        """The Kubernetes user a verified token's claims name; ``Unauthenticated`` (401)
        when they name none."""
        value = claims.get(self.username_claim)
        if not isinstance(value, str) or not value:
            raise Unauthenticated(
                f"token has no string '{self.username_claim}' claim (the Kubernetes user name)"
            )
        if self.username_claim == EMAIL_CLAIM and claims.get("email_verified", True) is not True:
            # The API server's rule: an unverified address names nobody.
            raise Unauthenticated("token's email is not verified (email_verified)")
        username = self.prefix_for(issuer) + value
        if username.lower().startswith(RESERVED_PREFIX):
            raise Unauthenticated(
                f"token claim '{self.username_claim}' names a Kubernetes system user"
            )
        return KubernetesUser(username=username, groups=self.groups(claims), expires_at=expires_at)

    def groups(self, claims: Mapping[str, Any]) -> tuple[str, ...]:
        found: list[str] = []
        if self.groups_claim is not None:
            raw = claims.get(self.groups_claim)
            # The API server takes one string or a list of strings; anything else is refused
            # rather than read as no groups (a deny could become an allow elsewhere).
            if isinstance(raw, str):
                raw = [raw]
            if raw is not None and (
                not isinstance(raw, list) or not all(isinstance(g, str) for g in raw)
            ):
                raise Unauthenticated(
                    f"token claim '{self.groups_claim}' is neither a string nor a list of strings"
                )
            for group in raw or []:
                name = self.groups_prefix + group
                if group and not name.lower().startswith(RESERVED_PREFIX) and name not in found:
                    found.append(name)
        return (*found, AUTHENTICATED_GROUP)


def invoke_attributes(namespace: str, name: str) -> ResourceAttributes:
    """``create agents.kaos.tools/invoke`` of one Agent."""
    return ResourceAttributes(
        group=GROUP,
        resource=RESOURCE,
        subresource=SUBRESOURCE,
        verb=VERB,
        namespace=namespace,
        name=name,
    )


class InvokeAccess:
    """One agent's question to RBAC: may this verified user invoke it?"""

    def __init__(
        self, access: KubernetesAccess, mapping: ClaimMapping, *, namespace: str, name: str
    ) -> None:
        self.access = access
        self.mapping = mapping
        self.attributes = invoke_attributes(namespace, name)

    async def check(self, user: VerifiedUser) -> None:
        """Return when RBAC lets ``user`` invoke this agent. Raises ``Forbidden`` (403
        ``agent_not_granted``), ``Unauthenticated`` (401: the token names no Kubernetes
        user) or ``VerifierUnavailable`` (503: the API server cannot be asked)."""
        subject = self.mapping.user(user.claims, user.issuer, user.expires_at)
        if not await self.access.allowed(subject, self.attributes):
            raise Forbidden(
                f'user "{subject.username}" may not {self.attributes.describe()}'
                " (grant it with kaos agent grant, or a binding of the ClusterRole"
                f" <release>-{CLUSTER_ROLE_SUFFIX})",
                code="agent_not_granted",
            )

    async def close(self) -> None:
        await self.access.close()
