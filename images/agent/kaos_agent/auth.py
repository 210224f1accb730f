"""Verified agent identity at the agent's edge: who delegates to it (``AGENT_AUTH_MODE``).

Both entry points (chat completions and A2A) call ``AgentAuth.check`` before they read
the message or start a run, so a refused request runs nothing and calls no model:

- a request carrying ``X-Agent-Token``: the token is verified for audience
  ``kaos.dev/agent`` (anything else, e.g. a memory token, is 401), its ServiceAccount
  must be listed in the callers file the operator writes for this agent (else 403), and
  an ``X-Agent-Identity`` header, when present, must name the listed identity (else 403);
- a request that claims to be a delegation (an ``X-Agent-Identity`` header, or a
  delegation depth above 0 in ``X-KAOS-Delegation-Depth`` or A2A metadata
  ``kaos.delegationDepth``) without a token: 401;
- a request with neither is an end user's call.

With a user issuer configured (``AGENT_USER_ISSUER``, verified user identity) the principal
is proven too (``UserAuth``):

- an end user's call needs ``Authorization: Bearer <token>``: the user's OIDC token is
  verified (``kaos_core.auth.oidc``) and the principal is its principal claim; without a
  token 401 with an RFC 6750 ``Bearer`` challenge. With a per-agent user audience
  (``AGENT_USER_AUDIENCE`` a template such as ``kaos.dev/agent/{namespace}/{name}``) the
  token must carry this agent's own audience, rendered from its identity: a token a
  client got for another agent is 401 ``invalid_token`` here;
- a verified delegation carries the user's token as the calling agent forwarded it
  (``X-User-Token``), verified the same way, but for any agent's audience of the
  template's form (the token was meant for the agent the user called, which the
  verified, listed caller vouches for; RBAC is still asked about the user); a
  delegation without one acts for no user,
  so the run self-subjects (its principal is this agent's own identity, as an autonomous
  run's is) and never writes under a principal it was merely told (the derivation the
  memory service runs too, ``kaos_core.auth.principal``);
- ``X-Principal`` is refused (400): nobody may name the principal any more;
- with ``AGENT_RBAC`` the verified user, the end user's or the one a delegation
  carries, must be allowed by Kubernetes RBAC to invoke this agent (``kaos_agent.access``),
  else 403 ``agent_not_granted``.

Every 401 carries a ``WWW-Authenticate`` challenge: ``KaosAgentToken`` naming the header
and the audience for an agent token, ``Bearer`` for a user token. The error carries it;
the error middleware (or, for A2A, the JSON-RPC refusal) writes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaos_core.auth import names
from kaos_core.auth.callers import Caller
from kaos_core.auth.config import CallerAuthSettings, UserAudience, UserAuthSettings
from kaos_core.auth.gate import CallerGate, presented_tokens
from kaos_core.auth.invoke import InvokeAccess
from kaos_core.auth.oidc import UserVerifier, VerifiedUser, bearer_challenge, bearer_token
from kaos_core.auth.principal import forwarded_user
from kaos_core.auth.verify import Unauthenticated
from kaos_core.errors import BadRequest, KaosError
from kaos_core.wire import (
    AGENT_IDENTITY_HEADER,
    AGENT_TOKEN_HEADER,
    AUTHORIZATION_HEADER,
    DELEGATION_DEPTH_HEADER,
    PRINCIPAL_HEADER,
    USER_TOKEN_HEADER,
    header_values,
    parse_identity,
)

from kaos_agent.context import Verified, parse_depth

AUDIENCE = names.AGENT_AUDIENCE
# The error of a user's 401 that carried no credential (RFC 6750 3.1: its challenge names
# no error).
MISSING_USER_TOKEN = "missing_user_token"


def user_refusal(exc: Unauthenticated) -> Unauthenticated:
    """A refused user token with its RFC 6750 ``Bearer`` challenge (no error attribute when
    the request carried no credentials)."""
    if exc.code == MISSING_USER_TOKEN:
        return exc.challenge(bearer_challenge(AUDIENCE))
    return exc.challenge(bearer_challenge(AUDIENCE, "invalid_token", exc.message))


def claims_delegation(headers: Mapping[str, str], body_depth: object = None) -> bool:
    """Whether a request says it comes from another agent (identity or depth above 0).

    A depth that is not an integer is left to the request's own parser (a 400)."""
    if AGENT_IDENTITY_HEADER in headers or USER_TOKEN_HEADER in headers:
        return True
    raw: object = headers.get(DELEGATION_DEPTH_HEADER)
    for value in (raw, body_depth):
        if value is None:
            continue
        try:
            if parse_depth(value) > 0:
                return True
        except KaosError:
            continue
    return False


class AgentAuth(CallerGate):
    """The token verifier and the callers file of one agent."""

    audience = AUDIENCE
    not_listed = "an agent allowed to delegate to this agent"

    async def check(
        self, headers: Mapping[str, str], *, body_depth: object = None
    ) -> Caller | None:
        """The verified calling agent; ``None`` for an end user's call (no delegation claim).

        Raises ``Unauthenticated`` (401, with the gate's challenge), ``Forbidden`` (403),
        ``VerifierUnavailable`` (503), or ``BadRequest`` for an unusable identity header."""
        tokens = presented_tokens(headers)
        if not tokens:
            if claims_delegation(headers, body_depth):
                raise self.challenged(
                    Unauthenticated(
                        f"{AGENT_TOKEN_HEADER} is required: this agent verifies who delegates"
                        f" to it ({AGENT_IDENTITY_HEADER} or a delegation depth alone is not"
                        " an identity)",
                        code="missing_token",
                    )
                )
            # An end user's call: verified by ``UserAuth`` when the posture asks for it.
            return None
        caller = await self.admit_presented(tokens)
        self.check_claim(caller, parse_identity(headers).agent)
        return caller


class UserAuth:
    """End users' tokens under verified user identity (``AGENT_USER_ISSUER``)."""

    def __init__(
        self,
        verifier: UserVerifier,
        own_identity: str | None,
        access: InvokeAccess | None = None,
    ) -> None:
        self.verifier = verifier
        self.own_identity = own_identity
        # What a token sent to this agent directly must carry: its own audience.
        self.own_audience = own_audience(verifier.audience, own_identity)
        # Whether RBAC lets each verified user invoke this agent; None: every verified user.
        self.access = access

    async def identify(self, headers: Mapping[str, str], caller: Caller | None) -> Verified:
        """What the request proves of its user; every 401 carries a ``Bearer`` challenge."""
        try:
            if caller is not None:
                return await self._delegated(headers, caller)
            return await self._admitted(await self._end_user(headers), None)
        except Unauthenticated as exc:
            raise user_refusal(exc) from None

    async def end_user(self, headers: Mapping[str, str]) -> VerifiedUser:
        """The end user a request's bearer token proves, RBAC not asked (an endpoint other
        than a run asks its own question: ``InvokeAccess.check(user, verb=...,
        subresource=...)``); every 401 carries a ``Bearer`` challenge."""
        try:
            return await self._end_user(headers)
        except Unauthenticated as exc:
            raise user_refusal(exc) from None

    async def _delegated(self, headers: Mapping[str, str], caller: Caller) -> Verified:
        # The caller's principal header is checked against the token it forwards, and
        # means nothing without one (the run then acts for this agent).
        user = await forwarded_user(headers, self.verifier)
        if user is None:
            return Verified(caller=caller, derived=True, principal=self.own_identity)
        # The user a delegation acts for is asked about as if they called: no user reaches
        # an agent through another one they may use.
        return await self._admitted(user, caller)

    async def _admitted(self, user: VerifiedUser, caller: Caller | None) -> Verified:
        if self.access is not None:
            await self.access.check(user)
        return self._verified(user, caller)

    async def _end_user(self, headers: Mapping[str, str]) -> VerifiedUser:
        if header_values(headers, PRINCIPAL_HEADER):
            raise BadRequest(
                f"{PRINCIPAL_HEADER} is not accepted: this agent takes the principal from the"
                " user's verified token (Authorization: Bearer)",
                code="principal_header_refused",
            )
        values = header_values(headers, AUTHORIZATION_HEADER)
        if len(values) > 1:
            raise Unauthenticated(f"{AUTHORIZATION_HEADER} given more than once")
        token = bearer_token(values[0] if values else None)
        if token is None:
            raise Unauthenticated(
                "this agent needs the user's token: Authorization: Bearer <token>",
                code=MISSING_USER_TOKEN,
            )
        try:
            return await self.verifier.verify(token, self.own_audience)
        except Unauthenticated as exc:
            raise Unauthenticated(f"user token refused: {exc.message}") from None

    @staticmethod
    def _verified(user: VerifiedUser, caller: Caller | None) -> Verified:
        return Verified(
            caller=caller, derived=True, principal=user.principal, user_token=user.token
        )

    async def close(self) -> None:
        await self.verifier.close()
        if self.access is not None:
            await self.access.close()


def own_audience(audience: UserAudience, identity: str | None) -> str:
    """The audience user tokens sent to the agent ``identity`` carry: the literal, or the
    per-agent template rendered for it (``ValueError`` without an identity to render)."""
    if not audience.per_agent:
        return audience.literal
    if identity is None:
        raise ValueError(
            f"the per-agent user audience {audience.template!r} needs the agent's identity"
            " (AGENT_IDENTITY)"
        )
    return audience.of_identity(identity)


class EdgeAuth:
    """Everything an agent verifies before a run: the delegating agent (``AgentAuth``) and,
    under verified user identity, the user (``UserAuth``). Either may be absent."""

    def __init__(self, agents: AgentAuth | None, users: UserAuth | None) -> None:
        self.agents = agents
        self.users = users

    @classmethod
    def from_settings(
        cls,
        agents: CallerAuthSettings,
        users: UserAuthSettings | None,
        own_identity: str | None,
        access: InvokeAccess | None = None,
    ) -> EdgeAuth | None:
        agent_auth = AgentAuth.from_settings(agents)
        user_auth = (
            None
            if users is None
            else UserAuth(UserVerifier.from_settings(users), own_identity, access)
        )
        if agent_auth is None and user_auth is None:
            return None
        return cls(agent_auth, user_auth)

    async def check(self, headers: Mapping[str, str], *, body_depth: object = None) -> Verified:
        """What the request proves; raises ``Unauthenticated`` (401), ``Forbidden`` (403),
        ``VerifierUnavailable`` (503) or ``BadRequest`` (400)."""
        caller = None
        if self.agents is not None:
            caller = await self.agents.check(headers, body_depth=body_depth)
        if self.users is None:
            return Verified(caller=caller)
        return await self.users.identify(headers, caller)

    async def close(self) -> None:
        for part in (self.agents, self.users):
            if part is not None:
                await part.close()
