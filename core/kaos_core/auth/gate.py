"""Who may call a service: the verification both the memory service and an agent run.

A caller presents its projected service-account token in ``X-Agent-Token``; the gate
verifies it for the service's audience, finds its ServiceAccount in the callers file the
operator writes, and checks that an ``X-Agent-Identity`` header, if sent, names the same
agent. Every 401 the gate raises carries the gate's challenge (``challenge_value``), which
the error middleware writes. What a request *without* a token means is each service's
own policy (the memory service refuses it, an agent serves it as an end user's call), so
it stays with them (``kaos_memory.auth``, ``kaos_agent.auth``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import ClassVar, Self

from kaos_core.auth.callers import Caller, CallersFile
from kaos_core.auth.config import CallerAuthSettings, VerifierSettings
from kaos_core.auth.review import TokenReviewVerifier
from kaos_core.auth.verify import (
    Clock,
    Forbidden,
    HttpsSource,
    JwksVerifier,
    TokenVerifier,
    Unauthenticated,
    VerifiedWorkload,
    discovery_source,
)
from kaos_core.wire import AGENT_IDENTITY_HEADER, AGENT_TOKEN_HEADER, header_values

log = logging.getLogger(__name__)


def presented_tokens(headers: Mapping[str, str]) -> list[str]:
    """Every ``X-Agent-Token`` value of a request (a repeat is the caller's to answer for)."""
    return header_values(headers, AGENT_TOKEN_HEADER)


def one_token(tokens: list[str]) -> str:
    """The one token presented; 401 when it was given more than once."""
    if len(tokens) > 1:
        raise Unauthenticated(f"{AGENT_TOKEN_HEADER} given more than once")
    return tokens[0].strip()


def build_verifier(settings: VerifierSettings, *, clock: Clock = time.time) -> TokenVerifier | None:
    """The verifier the settings ask for; ``None`` for mode ``off``."""
    if settings.mode == "off":
        return None
    http = HttpsSource(ca_file=settings.ca_file, token_file=settings.token_file)
    if settings.mode == "jwks":
        if not settings.issuer:
            raise ValueError("mode jwks needs an issuer")
        return JwksVerifier(
            settings.issuer,
            source=discovery_source(http, settings.issuer, jwks_url(settings)),
            leeway=settings.leeway,
            clock=clock,
            on_close=http.close,
        )
    if not settings.api_server:
        raise ValueError("mode tokenreview needs an API server URL")
    return TokenReviewVerifier(
        http, settings.api_server, cache_seconds=settings.review_cache_seconds, clock=clock
    )


def jwks_url(settings: VerifierSettings) -> str | None:
    """Where mode ``jwks`` fetches keys without discovery: the configured URL, else the
    API server's own endpoint for its issuer's keys (served by every API server, reachable
    in a pod whatever the issuer's name resolves to); ``None``: discover from the issuer."""
    if settings.jwks_url:
        return settings.jwks_url
    if settings.api_server:
        return settings.api_server.rstrip("/") + "/openid/v1/jwks"
    return None


def challenge_value(audience: str, code: str) -> str:
    """The RFC 9110 ``WWW-Authenticate`` challenge of a 401: the header and the audience."""
    return f'KaosAgentToken realm="{audience}", header="{AGENT_TOKEN_HEADER}", error="{code}"'


class CallerGate:
    """A service's token verifier and callers file; subclasses name the audience and how
    an unlisted caller is described."""

    audience: ClassVar[str]
    # Completes "service account <ns>/<name> is not ...".
    not_listed: ClassVar[str]

    def __init__(self, verifier: TokenVerifier, callers: CallersFile) -> None:
        self.verifier = verifier
        self.callers = callers

    @classmethod
    def from_settings(cls, settings: CallerAuthSettings) -> Self | None:
        """The gate the settings ask for; ``None`` when verification is off."""
        verifier = build_verifier(settings)
        return None if verifier is None else cls(verifier, CallersFile(settings.callers_file))

    def challenged(self, refusal: Unauthenticated) -> Unauthenticated:
        """``refusal`` with this gate's challenge: the header, the audience, the error."""
        return refusal.challenge(challenge_value(self.audience, refusal.code))

    async def admit_presented(self, tokens: list[str]) -> Caller:
        """``admit`` for the tokens a request presented (at least one); a 401 carries the
        gate's challenge."""
        try:
            return await self.admit(one_token(tokens))
        except Unauthenticated as exc:
            raise self.challenged(exc) from None

    async def admit(self, token: str) -> Caller:
        """The listed caller the token proves; ``Unauthenticated`` (401) for a token that
        fails verification, ``Forbidden`` (403) for a caller the file does not list,
        ``VerifierUnavailable`` (503)."""
        return self.listed(await self.verifier.verify(token, self.audience))

    def listed(self, workload: VerifiedWorkload) -> Caller:
        """The caller the callers file lists for a verified workload; ``Forbidden`` (403)
        for one it does not list."""
        caller = self.callers.lookup(workload.namespace, workload.service_account)
        if caller is None:
            log.info(
                "caller refused: not in the callers file",
                extra={
                    "audience": self.audience,
                    "namespace": workload.namespace,
                    "sa": workload.service_account,
                },
            )
            raise Forbidden(
                f"service account {workload.namespace}/{workload.service_account} is not"
                f" {self.not_listed}"
            )
        return caller

    @staticmethod
    def check_claim(caller: Caller, claimed_agent: str | None) -> None:
        """An ``X-Agent-Identity`` sent beside the token must name the token's agent (403)."""
        if claimed_agent is not None and claimed_agent != caller.identity:
            raise Forbidden(
                f"{AGENT_IDENTITY_HEADER} does not match the identity of the token"
                f" ({caller.identity})",
                code="identity_mismatch",
            )

    async def close(self) -> None:
        await self.verifier.close()
