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
import logging

from aiohttp import web
from kaos_core.auth import names
from kaos_core.auth.callers import CallersFile
from kaos_core.auth.verify import (
    Forbidden,
    TokenVerifier,
    Unauthenticated,
    VerifierSettings,
    build_verifier,
)
from kaos_core.memory.identity import AGENT_IDENTITY_HEADER, Identity, parse_identity

from kaos_memory.settings import AuthSettings

log = logging.getLogger(__name__)

AUDIENCE = names.MEMORY_AUDIENCE
# Set on a refused request so the response gets its challenge (see ``add_challenge``).
_CHALLENGE_KEY = "kaos_memory_auth_challenge"


class MemoryAuth:
    """The token verifier and the callers file of one memory service."""

    def __init__(self, verifier: TokenVerifier, callers: CallersFile) -> None:
        self.verifier = verifier
        self.callers = callers

    @classmethod
    def from_settings(cls, settings: AuthSettings) -> MemoryAuth | None:
        verifier = build_verifier(
            VerifierSettings(
                mode=settings.mode,
                issuer=settings.issuer,
                jwks_url=settings.jwks_url,
                api_server=settings.api_server,
                ca_file=settings.ca_file,
                token_file=settings.token_file,
                leeway=settings.leeway,
                review_cache_seconds=settings.review_cache_seconds,
            )
        )
        return None if verifier is None else cls(verifier, CallersFile(settings.callers_file))

    async def identify(self, request: web.Request) -> Identity:
        """The request's identity headers with the agent replaced by the verified one.

        The token is checked first, so a request without one is 401 whatever else its
        headers say."""
        try:
            token = _single_token(request)
            workload = await self.verifier.verify(token, AUDIENCE)
        except Unauthenticated as exc:
            request[_CHALLENGE_KEY] = exc.code
            raise
        caller = self.callers.lookup(workload.namespace, workload.service_account)
        if caller is None:
            log.info(
                "caller refused: not bound to this store",
                extra={"namespace": workload.namespace, "sa": workload.service_account},
            )
            raise Forbidden(
                f"service account {workload.namespace}/{workload.service_account} is not an"
                " agent bound to this memory store"
            )
        claimed = parse_identity(request.headers)
        if claimed.agent is not None and claimed.agent != caller.identity:
            raise Forbidden(
                f"{AGENT_IDENTITY_HEADER} does not match the identity of the token"
                f" ({caller.identity})",
                code="identity_mismatch",
            )
        return dataclasses.replace(claimed, agent=caller.identity)

    async def close(self) -> None:
        await self.verifier.close()


def _single_token(request: web.Request) -> str:
    tokens = request.headers.getall(names.AGENT_TOKEN_HEADER, [])
    if not tokens:
        raise Unauthenticated(
            f"{names.AGENT_TOKEN_HEADER} is required: this memory service verifies who calls"
            f" it ({AGENT_IDENTITY_HEADER} alone is not an identity; admin access without an"
            " agent needs a verified identity too)",
            code="missing_token",
        )
    if len(tokens) > 1:
        raise Unauthenticated(f"{names.AGENT_TOKEN_HEADER} given more than once")
    return tokens[0].strip()


async def add_challenge(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the RFC 9110 challenge on every 401 the edge answered."""
    code = request.get(_CHALLENGE_KEY)
    if code is not None and response.status == 401:
        response.headers["WWW-Authenticate"] = (
            f'KaosAgentToken realm="{AUDIENCE}", header="{names.AGENT_TOKEN_HEADER}",'
            f' error="{code}"'
        )
