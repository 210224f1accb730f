"""Kubernetes users and their permissions, asked of the API server: admin access.

An administrator's call (the ``kaos memory`` CLI, no agent) presents the credential their
kubeconfig gives them (``Authorization: Bearer``): a service-account token, an OIDC or
exec-plugin token, anything the API server itself accepts. ``KubernetesAccess`` turns it
into a ``KubernetesUser`` with a TokenReview (``authentication.k8s.io/v1``, no audience:
the API server's own, the one such credentials carry) and asks a SubjectAccessReview
(``authorization.k8s.io/v1``) whether that user may do a verb on a resource, with the
user's name, uid, groups and extra exactly as the review returned them (so RBAC bindings
to groups and scoped tokens decide as they would for ``kubectl``).

Both answers are cached briefly, keyed by digests (never the token itself), and never
past the token's own expiry when it has one: a revoked binding or token takes effect
within ``cache_seconds``. Refused credentials are not cached. ``Unauthenticated`` (401)
is a credential the API server does not accept, ``VerifierUnavailable`` (503) an API
server that cannot be reached or refuses the reviews themselves (this service's own
permissions). The credential is never logged nor echoed.

Like ``verify`` (whose ``HttpsSource`` it reuses), this needs PyJWT for the expiry.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kaos_core.auth.config import REVIEW_CACHE_SECONDS
from kaos_core.auth.review import REVIEW_CACHE_ENTRIES, unverified_expiry
from kaos_core.auth.verify import (
    MAX_TOKEN_BYTES,
    Clock,
    HttpsSource,
    Unauthenticated,
    VerifierUnavailable,
)

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class KubernetesUser:
    """Who the API server says a credential belongs to."""

    username: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)
    # The credential's expiry when it says (a JWT's ``exp``): no verdict outlives it.
    expires_at: float | None = None


@dataclass(frozen=True)
class ResourceAttributes:
    """What an access review asks about (``resourceAttributes`` of a SubjectAccessReview)."""

    group: str
    resource: str
    verb: str
    namespace: str
    name: str
    subresource: str = ""

    def describe(self) -> str:
        """``delete memorystores.kaos.tools/data "x" in namespace "y"``, for messages."""
        what = f"{self.resource}.{self.group}"
        if self.subresource:
            what += f"/{self.subresource}"
        return f'{self.verb} {what} "{self.name}" in namespace "{self.namespace}"'

    def body(self) -> dict[str, str]:
        attrs = {
            "group": self.group,
            "resource": self.resource,
            "verb": self.verb,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.subresource:
            attrs["subresource"] = self.subresource
        return attrs


def check_credential(token: str) -> None:
    """Refuse what cannot be a credential before sending it anywhere. Not only JWTs: a
    static or bootstrap token is any printable text."""
    if not token:
        raise Unauthenticated("the bearer credential is empty", code="missing_token")
    if len(token) > MAX_TOKEN_BYTES:
        raise Unauthenticated(f"the bearer credential is larger than {MAX_TOKEN_BYTES} bytes")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise Unauthenticated("the bearer credential is not a token")


class _Cache:
    """Verdicts until a deadline each, the oldest dropped past ``REVIEW_CACHE_ENTRIES``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: OrderedDict[str, tuple[Any, float]] = OrderedDict()

    def get(self, key: str) -> Any:
        hit = self._entries.get(key)
        if hit is None or self._clock() >= hit[1]:
            return None
        return hit[0]

    def put(self, key: str, value: Any, until: float) -> None:
        self._entries[key] = (value, until)
        self._entries.move_to_end(key)
        while len(self._entries) > REVIEW_CACHE_ENTRIES:
            self._entries.popitem(last=False)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class KubernetesAccess:
    """TokenReviews and SubjectAccessReviews against one API server."""

    def __init__(
        self,
        http: HttpsSource,
        api_server: str,
        *,
        cache_seconds: float = REVIEW_CACHE_SECONDS,
        clock: Clock = time.time,
    ) -> None:
        self._http = http
        self._base = api_server.rstrip("/")
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._users = _Cache(clock)
        self._decisions = _Cache(clock)

    def _until(self, user: KubernetesUser) -> float:
        until = self._clock() + self._cache_seconds
        return until if user.expires_at is None else min(until, user.expires_at)

    async def authenticate(self, token: str) -> KubernetesUser:
        """The user the API server says ``token`` is; ``Unauthenticated`` if it does not
        accept it."""
        check_credential(token)
        key = _digest(token)
        cached = self._users.get(key)
        if isinstance(cached, KubernetesUser):
            return cached
        user = await self._token_review(token)
        self._users.put(key, user, self._until(user))
        return user

    async def _token_review(self, token: str) -> KubernetesUser:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            # No audiences: the API server's own, which is what kubeconfig credentials are for.
            "spec": {"token": token},
        }
        status, doc = await self._http.request("POST", self._base + TOKEN_REVIEWS, body)
        if status not in (200, 201) or not isinstance(doc, dict):
            log.warning("TokenReview refused", extra={"status": status})
            raise VerifierUnavailable(f"the API server refused the TokenReview (HTTP {status})")
        result = doc.get("status") or {}
        user = result.get("user") or {}
        username = user.get("username")
        if not result.get("authenticated") or not isinstance(username, str) or not username:
            raise Unauthenticated("the credential was not accepted by the API server")
        groups = user.get("groups") or []
        extra = user.get("extra") or {}
        return KubernetesUser(
            username=username,
            uid=user.get("uid") if isinstance(user.get("uid"), str) else None,
            groups=tuple(g for g in groups if isinstance(g, str)),
            extra={
                k: [v for v in vs if isinstance(v, str)]
                for k, vs in extra.items()
                if isinstance(k, str) and isinstance(vs, list)
            },
            expires_at=unverified_expiry(token) if token.count(".") == 2 else None,
        )

    async def allowed(self, user: KubernetesUser, attributes: ResourceAttributes) -> bool:
        """Whether RBAC (any authorizer of the API server) lets ``user`` do ``attributes``."""
        key = _digest(
            user.username,
            user.uid or "",
            ",".join(sorted(user.groups)),
            repr(sorted(user.extra.items())),
            repr(sorted(attributes.body().items())),
        )
        cached = self._decisions.get(key)
        if isinstance(cached, bool):
            return cached
        decision = await self._access_review(user, attributes)
        self._decisions.put(key, decision, self._until(user))
        return decision

    async def _access_review(self, user: KubernetesUser, attributes: ResourceAttributes) -> bool:
        spec: dict[str, Any] = {
            "user": user.username,
            "groups": list(user.groups),
            "resourceAttributes": attributes.body(),
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        status, doc = await self._http.request("POST", self._base + ACCESS_REVIEWS, body)
        if status not in (200, 201) or not isinstance(doc, dict):
            log.warning("SubjectAccessReview refused", extra={"status": status})
            raise VerifierUnavailable(
                f"the API server refused the SubjectAccessReview (HTTP {status})"
            )
        result = doc.get("status") or {}
        return result.get("allowed") is True and result.get("denied") is not True

    async def close(self) -> None:
        await self._http.close()
