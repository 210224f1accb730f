"""Verified agent identity at the edge of the memory service (``KAOS_MEMORY_AUTH_MODE``).

With a mode other than ``off`` the ``X-Agent-Identity`` header is no longer an identity:
every ``/v1/*`` request must carry the calling agent's projected service-account token
(``X-Agent-Token``, audience ``kaos.dev/memory``). The token is verified (``jwks`` or
``tokenreview``), its ServiceAccount looked up in the callers file the operator writes for
this store, and the identity listed there replaces whatever the header said, before the
body is read and before scope derivation, so a refused request reads and writes nothing.

- no token, or a token given twice: 401 (also for admin calls, which have no verified
  identity yet);
- a token that fails verification: 401;
- a valid token of a ServiceAccount that is not an agent bound to this store: 403;
- an ``X-Agent-Identity`` header that names another agent than the token's: 403.

Every 401 carries a ``WWW-Authenticate`` challenge naming the header and the audience.
"""

from __future__ import annotations

import dataclasses

from aiohttp import web
from kaos_core.auth import names
from kaos_core.auth.gate import CallerGate, challenge_value, one_token, presented_tokens
from kaos_core.auth.verify import Unauthenticated
from kaos_core.memory.identity import AGENT_IDENTITY_HEADER, Identity, parse_identity

AUDIENCE = names.MEMORY_AUDIENCE
# Set on a refused request so the response gets its challenge (see ``add_challenge``).
_CHALLENGE_KEY = "kaos_memory_auth_challenge"


class MemoryAuth(CallerGate):
    """The token verifier and the callers file of one memory service."""

    audience = AUDIENCE
    not_listed = "an agent bound to this memory store"

    async def identify(self, request: web.Request) -> Identity:
        """The request's identity headers with the agent replaced by the verified one.

        The token is checked first, so a request without one is 401 whatever else its
        headers say."""
        try:
            tokens = presented_tokens(request.headers)
            if not tokens:
                raise Unauthenticated(
                    f"{names.AGENT_TOKEN_HEADER} is required: this memory service verifies"
                    f" who calls it ({AGENT_IDENTITY_HEADER} alone is not an identity; admin"
                    " access without an agent needs a verified identity too)",
                    code="missing_token",
                )
            caller = await self.admit(one_token(tokens))
        except Unauthenticated as exc:
            request[_CHALLENGE_KEY] = exc.code
            raise
        claimed = parse_identity(request.headers)
        self.check_claim(caller, claimed.agent)
        return dataclasses.replace(claimed, agent=caller.identity)


async def add_challenge(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the RFC 9110 challenge on every 401 the edge answered."""
    code = request.get(_CHALLENGE_KEY)
    if code is not None and response.status == 401:
        response.headers["WWW-Authenticate"] = challenge_value(AUDIENCE, code)
