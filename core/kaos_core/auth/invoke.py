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

The same question for any other verb and virtual subresource of an Agent
(``InvokeAccess.check(user, verb=..., subresource=...)``, the names below): ``create
agents/approve`` (deciding a paused run's approval), ``get agents/usage`` (its token
ledger), ``get agents/audit`` (its audit trail).

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
# The other virtual subresources of an Agent RBAC is asked about, with their verbs.
APPROVE_SUBRESOURCE = "approve"  # create: decide a paused run's approval
USAGE_SUBRESOURCE = "usage"  # get: read its token ledger
AUDIT_SUBRESOURCE = "audit"  # get: read its audit trail
GET = "get"
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


def agent_attributes(
    namespace: str, name: str, *, verb: str = VERB, subresource: str = SUBRESOURCE
) -> ResourceAttributes:
    """``<verb> agents.kaos.tools/<subresource>`` of one Agent (``subresource=""``: the
    Agent itself)."""
    return ResourceAttributes(
        group=GROUP,
        resource=RESOURCE,
        subresource=subresource,
        verb=verb,
        namespace=namespace,
        name=name,
    )


def invoke_attributes(namespace: str, name: str) -> ResourceAttributes:
    """``create agents.kaos.tools/invoke`` of one Agent."""
    return agent_attributes(namespace, name)


class InvokeAccess:
    """One agent's questions to RBAC: may this verified user invoke it (the default), or
    do another verb on another of its subresources?"""

    def __init__(
        self, access: KubernetesAccess, mapping: ClaimMapping, *, namespace: str, name: str
    ) -> None:
        self.access = access
        self.mapping = mapping
        self.namespace = namespace
        self.name = name
        self.attributes = invoke_attributes(namespace, name)

    def attributes_for(self, verb: str, subresource: str) -> ResourceAttributes:
        if verb == VERB and subresource == SUBRESOURCE:
            return self.attributes
        return agent_attributes(self.namespace, self.name, verb=verb, subresource=subresource)

    async def allowed(
        self, user: VerifiedUser, *, verb: str = VERB, subresource: str = SUBRESOURCE
    ) -> bool:
        """Whether RBAC lets ``user`` do ``verb`` on this Agent's ``subresource``. Raises
        ``Unauthenticated`` (401: the token names no Kubernetes user) or
        ``VerifierUnavailable`` (503: the API server cannot be asked); never allows on
        an error."""
        subject = self.mapping.user(user.claims, user.issuer, user.expires_at)
        return await self.access.allowed(subject, self.attributes_for(verb, subresource))

    async def check(
        self, user: VerifiedUser, *, verb: str = VERB, subresource: str = SUBRESOURCE
    ) -> None:
        """Return when RBAC lets ``user`` do ``verb`` on this Agent's ``subresource``
        (by default: invoke it). Raises ``Forbidden`` (403 ``agent_not_granted``),
        ``Unauthenticated`` (401: the token names no Kubernetes user) or
        ``VerifierUnavailable`` (503: the API server cannot be asked)."""
        subject = self.mapping.user(user.claims, user.issuer, user.expires_at)
        attributes = self.attributes_for(verb, subresource)
        if not await self.access.allowed(subject, attributes):
            if attributes is self.attributes:
                how = (
                    "grant it with kaos agent grant, or a binding of the ClusterRole"
                    f" <release>-{CLUSTER_ROLE_SUFFIX}"
                )
            else:
                how = "grant it with a Role binding naming this Agent"
            raise Forbidden(
                f'user "{subject.username}" may not {attributes.describe()} ({how})',
                code="agent_not_granted",
            )

    async def close(self) -> None:
        await self.access.close()
