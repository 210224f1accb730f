"""Verified agent identity at the edge of the memory service (``KAOS_MEMORY_AUTH_MODE``).

With a mode other than ``off`` the ``X-Agent-Identity`` header is no longer an identity:
every ``/v1/*`` request must carry the calling agent's projected service-account token
(``X-Agent-Token``, audience ``kaos.dev/memory``). The token is verified (``jwks`` or
``tokenreview``), its ServiceAccount looked up in the callers file the operator writes for
this store, and the identity listed there replaces whatever the header said, before the
body is read and before scope derivation, so a refused request reads and writes nothing.

- no token, or a token given twice: 401;
- no token but ``Authorization: Bearer``: an admin call, admitted by Kubernetes RBAC
  (``kaos_memory.admin``);
- a token that fails verification: 401;
- a valid token of a ServiceAccount that is not an agent bound to this store: 403;
- an ``X-Agent-Identity`` header that names another agent than the token's: 403.

Every 401 carries a ``WWW-Authenticate`` challenge naming the header and the audience
(the error carries it; the error middleware writes it). A request with neither credential
is offered the admin's ``Bearer`` scheme as well.

With a user issuer as well (``KAOS_MEMORY_USER_ISSUER``, verified user identity) the
principal is derived here, authoritatively (``derive_principal``): from the user token
the agent forwards (``X-User-Token``, verified by the derivation the agent runs too,
``kaos_core.auth.principal``), or, without one, only the calling agent's own identity (a
self-subjected run: autonomous, or delegated for no user). An ``X-Principal`` that says
otherwise is 403, before anything is read or written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from aiohttp import web
from kaos_core.auth import names
from kaos_core.auth.callers import Caller
from kaos_core.auth.gate import CallerGate, presented_tokens
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.principal import forwarded_user
from kaos_core.auth.verify import Forbidden, Unauthenticated
from kaos_core.wire import (
    AGENT_IDENTITY_HEADER,
    AGENT_TOKEN_HEADER,
    USER_TOKEN_HEADER,
    Identity,
    parse_identity,
)

from kaos_memory.admin import AdminGate, admin_call, admin_challenge

AUDIENCE = names.MEMORY_AUDIENCE


class MemoryAuth(CallerGate):
    """The token verifier and the callers file of one memory service."""

    audience = AUDIENCE
    not_listed = "an agent bound to this memory store"
    # Verified user identity: set by the app when a user issuer is configured.
    users: UserVerifier | None = None

    # Admin calls (``Authorization: Bearer``, no agent token): ``kaos_memory.admin``.
    admin: AdminGate | None = None

    async def identify(self, request: web.Request) -> Identity:
        """The request's identity headers with the agent replaced by the verified one.

        The token is checked first, so a request without one is 401 whatever else its
        headers say; one with a Kubernetes credential instead is an admin call."""
        tokens = presented_tokens(request.headers)
        if not tokens:
            if self.admin is not None and admin_call(request.headers):
                return await self.admin.identify(request)
            refusal = self.challenged(
                Unauthenticated(
                    f"{AGENT_TOKEN_HEADER} is required: this memory service verifies"
                    f" who calls it ({AGENT_IDENTITY_HEADER} alone is not an identity; admin"
                    " access without an agent presents a Kubernetes credential as"
                    " Authorization: Bearer)",
                    code="missing_token",
                )
            )
            if self.admin is not None:
                # Neither credential: the admin's scheme is offered beside the agent's.
                refusal.challenge(admin_challenge(refusal.code))
            raise refusal
        caller = await self.admit_presented(tokens)
        claimed = parse_identity(request.headers)
        self.check_claim(caller, claimed.agent)
        principal = claimed.principal
        if self.users is not None:
            principal = await self.derive_principal(request.headers, caller, claimed.principal)
        return dataclasses.replace(claimed, agent=caller.identity, principal=principal)

    async def derive_principal(
        self, headers: Mapping[str, str], caller: Caller, claimed: str | None
    ) -> str:
        """The principal of an agent's call under verified user identity: the forwarded user
        token's (a differing ``X-Principal`` is 403), else the agent's own identity."""
        assert self.users is not None
        try:
            user = await forwarded_user(headers, self.users)
        except Unauthenticated as exc:
            raise self.challenged(exc) from None
        if user is not None:
            return user.principal
        if claimed is not None and claimed != caller.identity:
            raise Forbidden(
                f"principal {claimed!r} is not proven: forward the user's token in"
                f" {USER_TOKEN_HEADER} (without one only the agent itself,"
                f" {caller.identity}, may be the principal)",
                code="principal_not_proven",
            )
        return caller.identity

    async def close(self) -> None:
        await super().close()
        if self.users is not None:
            await self.users.close()
        if self.admin is not None:
            await self.admin.close()
