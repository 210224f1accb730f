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

Every 401 carries a ``WWW-Authenticate`` challenge naming the header and the audience.

With a user issuer as well (``KAOS_MEMORY_USER_ISSUER``, verified user identity) the
principal is derived here, authoritatively (``derive_principal``): from the user token
the agent forwards (``X-User-Token``, verified like the agent does), or, without one, only
the calling agent's own identity (a self-subjected run: autonomous, or delegated for no
user). An ``X-Principal`` that says otherwise is 403, before anything is read or written.
"""

from __future__ import annotations

import dataclasses

from aiohttp import web
from kaos_core.auth import names
from kaos_core.auth.callers import Caller
from kaos_core.auth.gate import CallerGate, challenge_value, one_token, presented_tokens
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import Forbidden, Unauthenticated
from kaos_core.memory.identity import AGENT_IDENTITY_HEADER, Identity, header_values, parse_identity

from kaos_memory.admin import AdminGate, admin_call, mark_missing_credential

AUDIENCE = names.MEMORY_AUDIENCE
# Set on a refused request so the response gets its challenge (see ``add_challenge``).
_CHALLENGE_KEY = "kaos_memory_auth_challenge"


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
        if self.admin is not None and not presented_tokens(request.headers):
            if admin_call(request.headers):
                return await self.admin.identify(request)
            mark_missing_credential(request)
        try:
            tokens = presented_tokens(request.headers)
            if not tokens:
                raise Unauthenticated(
                    f"{names.AGENT_TOKEN_HEADER} is required: this memory service verifies"
                    f" who calls it ({AGENT_IDENTITY_HEADER} alone is not an identity; admin"
                    " access without an agent presents a Kubernetes credential as"
                    " Authorization: Bearer)",
                    code="missing_token",
                )
            caller = await self.admit(one_token(tokens))
        except Unauthenticated as exc:
            request[_CHALLENGE_KEY] = exc.code
            raise
        claimed = parse_identity(request.headers)
        self.check_claim(caller, claimed.agent)
        principal = claimed.principal
        if self.users is not None:
            principal = await self.derive_principal(request, caller, claimed.principal)
        return dataclasses.replace(claimed, agent=caller.identity, principal=principal)

    async def derive_principal(
        self, request: web.Request, caller: Caller, claimed: str | None
    ) -> str:
        """The principal of an agent's call under verified user identity: the forwarded user
        token's (a differing ``X-Principal`` is 403), else the agent's own identity."""
        assert self.users is not None
        forwarded = header_values(request.headers, names.USER_TOKEN_HEADER)
        if not forwarded:
            if claimed is not None and claimed != caller.identity:
                raise Forbidden(
                    f"principal {claimed!r} is not proven: forward the user's token in"
                    f" {names.USER_TOKEN_HEADER} (without one only the agent itself,"
                    f" {caller.identity}, may be the principal)",
                    code="principal_not_proven",
                )
            return caller.identity
        try:
            if len(forwarded) > 1:
                raise Unauthenticated(f"{names.USER_TOKEN_HEADER} given more than once")
            user = await self.users.verify(forwarded[0])
        except Unauthenticated as exc:
            request[_CHALLENGE_KEY] = exc.code
            raise Unauthenticated(f"user token refused: {exc.message}", code=exc.code) from None
        if claimed is not None and claimed != user.principal:
            raise Forbidden(
                "X-Principal does not match the principal of the user's token",
                code="principal_mismatch",
            )
        return user.principal

    async def close(self) -> None:
        await super().close()
        if self.users is not None:
            await self.users.close()
        if self.admin is not None:
            await self.admin.close()


async def add_challenge(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the RFC 9110 challenge on every 401 the edge answered."""
    code = request.get(_CHALLENGE_KEY)
    if code is not None and response.status == 401:
        response.headers["WWW-Authenticate"] = challenge_value(AUDIENCE, code)
