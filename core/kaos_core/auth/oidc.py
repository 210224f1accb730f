"""Verification of end users' OIDC tokens: who the principal is, proven.

With a user issuer configured, an agent takes the principal of a run from the user's
token (``Authorization: Bearer`` from a client, ``wire.USER_TOKEN_HEADER`` when another
agent forwards it) and the memory service derives it again from the token the agent
forwards, so neither trusts a principal it was told. ``UserVerifier`` checks:

- the signature, against the issuer's published keys (OIDC discovery, or a configured
  JWKS URL), with the key handling of service-account tokens (``JwksVerifier``: keys
  cached, an unknown key id refetches at most every ``USER_KEY_REFETCH_INTERVAL``
  seconds, so a key rotated at the provider is followed within that, without a restart,
  while a flood of made-up key ids costs one fetch per interval; asymmetric algorithms
  only, so neither
  ``alg: none`` nor an HMAC keyed with the public key verifies; a verified signature is
  remembered by the token's hash);
- ``iss`` (exactly the issuer), ``aud`` (contains the configured audience; for a
  per-agent template, ``UserAudience``, an audience of its form, or exactly the one the
  caller names: an agent names its own for a token sent to it directly), ``exp``, ``nbf``
  and ``iat`` with a leeway; when an authorized party is configured, ``azp`` (or
  ``client_id``) is that client;
- the principal claim (``sub`` by default): a non-empty string that is a valid principal
  (``validate_subject``: printable, bounded, never the wildcard) and never in a form
  reserved for agents or the cluster (``is_reserved_principal``): user and agent
  principals cannot collide;
- that it is not a Kubernetes service-account token (a ``kubernetes.io`` claim or a
  ``system:serviceaccount:`` subject): an agent's identity is never a user's.

Anything wrong is ``Unauthenticated`` (401); an unreachable issuer
``VerifierUnavailable`` (503). Tokens are credentials: never logged, never echoed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kaos_core.auth.config import Audience, UserAuthSettings
from kaos_core.auth.verify import (
    KEY_REFETCH_INTERVAL,
    Clock,
    HttpsSource,
    JwksVerifier,
    Unauthenticated,
    check_registered,
    discovery_source,
)
from kaos_core.errors import BadRequest, KaosError
from kaos_core.wire import validate_subject

_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# Principals in these forms are not users': see ``is_reserved_principal``.
RESERVED_PRINCIPAL_PREFIXES = ("kaos:", "system:")
# Identity providers rotate signing keys on their own schedule: a token signed with a key
# published since the last fetch verifies once this long has passed since that fetch.
USER_KEY_REFETCH_INTERVAL = KEY_REFETCH_INTERVAL


@dataclass(frozen=True)
class VerifiedUser:
    """The end user a valid token proves."""

    principal: str
    issuer: str
    expires_at: float
    # The token itself, to forward to the services the run calls; never in a repr or a log.
    token: str = field(repr=False)
    # Its verified claims, for what else is read from them (the Kubernetes user and groups
    # an agent asks RBAC about, ``kaos_core.auth.invoke``).
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def check_user_claims(
    claims: Mapping[str, Any],
    *,
    issuer: str,
    audience: Audience,
    principal_claim: str,
    now: float,
    leeway: float,
    authorized_party: str | None = None,
) -> tuple[str, float]:
    """The principal and expiry of a user token whose signature was verified."""
    expires = check_registered(claims, issuer=issuer, audience=audience, now=now, leeway=leeway)
    if authorized_party is not None:
        # OIDC's ``azp``; an RFC 9068 access token names its client in ``client_id``.
        party = claims.get("azp", claims.get("client_id"))
        if party != authorized_party:
            raise Unauthenticated("token was issued to another client (azp)")
    subject = claims.get("sub")
    if "kubernetes.io" in claims or (
        isinstance(subject, str) and subject.startswith(_SERVICE_ACCOUNT_PREFIX)
    ):
        raise Unauthenticated("a service-account token is not a user's token")
    value = claims.get(principal_claim)
    if not isinstance(value, str):
        raise Unauthenticated(f"token has no string '{principal_claim}' claim")
    try:
        principal = validate_subject("principal", value)
    except KaosError:
        raise Unauthenticated(
            f"token claim '{principal_claim}' is not a usable principal"
        ) from None
    if is_reserved_principal(principal):
        # An agent's self-subjected runs have its identity as principal: a user who could
        # claim that form would be the agent, its memory included.
        raise Unauthenticated(
            f"token claim '{principal_claim}' takes a form reserved for agents and the"
            " cluster's own users"
        )
    return principal, expires


def is_reserved_principal(value: str) -> bool:
    """Whether ``value`` has a form no user's principal may take: an agent identity
    (``kaos://agent/...``, any ``kaos:`` form) or a Kubernetes user (``system:...``),
    compared without case or surrounding space."""
    return value.strip().lower().startswith(RESERVED_PRINCIPAL_PREFIXES)


class UserVerifier:
    """An issuer's user tokens, verified for the configured audience (or, per call, one
    audience of it)."""

    def __init__(
        self,
        settings: UserAuthSettings,
        *,
        keys: JwksVerifier,
        clock: Clock = time.time,
    ) -> None:
        self.settings = settings
        self.audience = settings.user_audience
        self._keys = keys
        self._clock = clock

    @classmethod
    def from_settings(cls, settings: UserAuthSettings, *, clock: Clock = time.time) -> UserVerifier:
        http = HttpsSource(ca_file=settings.ca_file, token_file=None)
        keys = JwksVerifier(
            settings.issuer,
            source=discovery_source(http, settings.issuer, settings.jwks_url),
            leeway=settings.leeway,
            clock=clock,
            refetch_interval=USER_KEY_REFETCH_INTERVAL,
            on_close=http.close,
        )
        return cls(settings, keys=keys, clock=clock)

    async def verify(self, token: str, audience: str | None = None) -> VerifiedUser:
        """The user ``token`` proves; ``Unauthenticated`` (401) or ``VerifierUnavailable``.

        The token must carry ``audience`` when given (an agent's own), else the configured
        audience: the literal, or any audience of a per-agent template's form."""
        token = token.strip()
        claims = await self._keys.verified_claims(token)
        s = self.settings
        expected: Audience = (
            audience
            if audience is not None
            else self.audience
            if self.audience.per_agent
            else self.audience.literal
        )
        principal, expires = check_user_claims(
            claims,
            issuer=s.issuer,
            audience=expected,
            principal_claim=s.principal_claim,
            now=self._clock(),
            leeway=s.leeway,
            authorized_party=s.authorized_party,
        )
        return VerifiedUser(
            principal=principal, issuer=s.issuer, expires_at=expires, token=token, claims=claims
        )

    async def close(self) -> None:
        await self._keys.close()


def bearer_token(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; ``None`` when absent.

    A value with another scheme (``Basic``, a bare token) is refused: a client that sends
    credentials must send them the way RFC 6750 says."""
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise BadRequest(
            "Authorization must be 'Bearer <token>' (RFC 6750)", code="invalid_request"
        )
    return token.strip()


def bearer_challenge(realm: str, code: str | None = None, description: str | None = None) -> str:
    """RFC 6750 ``WWW-Authenticate``: no error attribute when no credentials were sent."""
    value = f'Bearer realm="{realm}"'
    if code is not None:
        value += f', error="{code}"'
    if description is not None:
        value += f', error_description="{description.replace(chr(34), chr(39))}"'
    return value
