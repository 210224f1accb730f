"""Admin access through Kubernetes RBAC, at the edge of a secured memory service.

Under verified agent identity (``KAOS_MEMORY_AUTH_MODE`` not ``off``) a request without
``X-Agent-Token`` but with ``Authorization: Bearer <credential>`` is an administrator's
call (the ``kaos memory`` CLI): no agent, any principal, the ``store`` level allowed. It
is admitted only when

1. the API server accepts the credential (a TokenReview: service-account tokens, OIDC
   and exec-plugin tokens alike; the user name and groups are kept), and
2. a SubjectAccessReview says that user may ``get`` (recall, list, audit) or ``delete``
   (forget) the virtual subresource ``memorystores/data`` (API group ``kaos.tools``) of
   this service's own MemoryStore (``KAOS_MEMORY_STORE_NAMESPACE``/``_NAME``).

The chart's ClusterRoles ``<release>-memory-reader`` and ``<release>-memory-admin`` grant
exactly those verbs, for users to bind. Answers: 401 (with an RFC 6750 ``Bearer``
challenge) for a missing or refused credential, 403 naming the verb and resource for a
user RBAC does not allow, or for an admin call this service cannot check (no store or
API server configured) or that writes (writes come from agents), 503 when the API server
cannot be reached. All of it happens before the body is read, so a refusal reads and
writes nothing. The admitted user is the request's ``Actor`` (the audit's "who").

Under the trusted-header posture (auth ``off``) none of this runs: a request without an
agent identity is the admin path, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web
from kaos_core.auth.access import KubernetesAccess, KubernetesUser, ResourceAttributes
from kaos_core.auth.oidc import bearer_challenge
from kaos_core.auth.verify import Forbidden, HttpsSource, Unauthenticated
from kaos_core.wire import (
    AGENT_IDENTITY_HEADER,
    AUTHORIZATION_HEADER,
    Identity,
    header_values,
    parse_identity,
)

from kaos_memory.audit import ACTOR_KEY
from kaos_memory.settings import AdminSettings
from kaos_memory.storage.audit import Actor

# The documented virtual resource an administrator is authorised on.
API_GROUP = "kaos.tools"
RESOURCE = "memorystores"
SUBRESOURCE = "data"
# The verb each admin operation needs; anything else (a write) is not an admin operation.
VERBS: dict[str, str] = {
    "/v1/recall": "get",
    "/v1/list": "get",
    "/v1/audit": "get",
    "/v1/forget": "delete",
    # An export reads everything in its scope; an import writes, as no agent does.
    "/v1/export": "get",
    "/v1/import": "create",
    # Quarantined facts (``kaos_memory.quarantine``): listed, released, erased.
    "/v1/quarantine/list": "get",
    "/v1/quarantine/release": "update",
    "/v1/quarantine/erase": "delete",
}
REALM = "kaos.dev/memory"


def bearer_values(headers: Mapping[str, str]) -> list[str]:
    return header_values(headers, AUTHORIZATION_HEADER)


def admin_call(headers: Mapping[str, str]) -> bool:
    """Whether a request without ``X-Agent-Token`` presents an admin credential."""
    return bool(bearer_values(headers))


def bearer_token(headers: Mapping[str, str]) -> str:
    """The one ``Authorization: Bearer`` credential; 401 for anything else."""
    values = bearer_values(headers)
    if len(values) != 1:
        raise Unauthenticated(f"{AUTHORIZATION_HEADER} given more than once")
    scheme, _, token = values[0].strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            f"{AUTHORIZATION_HEADER} must be 'Bearer <Kubernetes credential>'",
            code="invalid_request",
        )
    return token.strip()


def admin_challenge(code: str) -> str:
    """RFC 6750: the scheme, the realm, and the error of a refused credential."""
    return bearer_challenge(REALM, code)


class AdminGate:
    """One memory service's admin check: its store and its API server."""

    def __init__(self, access: KubernetesAccess | None, settings: AdminSettings) -> None:
        self.access = access
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: AdminSettings) -> AdminGate:
        access = None
        if settings.api_server:
            access = KubernetesAccess(
                HttpsSource(ca_file=settings.ca_file, token_file=settings.token_file),
                settings.api_server,
                cache_seconds=settings.cache_seconds,
            )
        return cls(access, settings)

    def attributes(self, verb: str) -> ResourceAttributes | None:
        ns, name = self.settings.store_namespace, self.settings.store_name
        if not ns or not name:
            return None
        return ResourceAttributes(
            group=API_GROUP,
            resource=RESOURCE,
            subresource=SUBRESOURCE,
            verb=verb,
            namespace=ns,
            name=name,
        )

    async def identify(self, request: web.Request) -> Identity:
        """The admin call's identity (no agent); the verified user is ``request[ACTOR_KEY]``."""
        try:
            token = bearer_token(request.headers)
            verb = VERBS.get(request.path)
            attributes = self.attributes(verb or "get")
            if self.access is None or attributes is None:
                raise Forbidden(
                    "admin access is not configured on this memory service (it needs"
                    " KAOS_MEMORY_STORE_NAMESPACE, KAOS_MEMORY_STORE_NAME and"
                    " KAOS_MEMORY_AUTH_API_SERVER); call it through an agent",
                    code="admin_not_configured",
                )
            user = await self.access.authenticate(token)
        except Unauthenticated as exc:
            raise exc.challenge(admin_challenge(exc.code)) from None
        if verb is None:
            raise Forbidden(
                "an admin call may recall, list, forget and read the audit; writes come"
                " from agents",
                code="admin_write_forbidden",
            )
        await self.authorize(user, attributes)
        claimed = parse_identity(request.headers)
        if claimed.agent is not None:
            raise Forbidden(
                f"an admin call acts as no agent: remove {AGENT_IDENTITY_HEADER}",
                code="admin_agent_forbidden",
            )
        request[ACTOR_KEY] = Actor(kind="admin", name=user.username, verified=True)
        return claimed

    async def authorize(self, user: KubernetesUser, attributes: ResourceAttributes) -> None:
        assert self.access is not None
        if not await self.access.allowed(user, attributes):
            raise Forbidden(
                f'user "{user.username}" may not {attributes.describe()}'
                " (bind the memory reader or memory admin ClusterRole)",
                code="admin_forbidden",
            )

    async def close(self) -> None:
        if self.access is not None:
            await self.access.close()
