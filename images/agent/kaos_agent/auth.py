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
- a request with neither is an end user's call and proceeds as it always did. Users'
  own tokens (``Authorization``) are a later step (issue 14); until then the network
  policy and the caller's own front door are what guard end-user access.

Every 401 carries a ``WWW-Authenticate`` challenge naming the header and the audience.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaos_core.agent_env import DELEGATION_DEPTH_HEADER
from kaos_core.auth import names
from kaos_core.auth.callers import Caller
from kaos_core.auth.gate import CallerGate, challenge_value, one_token, presented_tokens
from kaos_core.auth.verify import Unauthenticated
from kaos_core.errors import KaosError
from kaos_core.memory.identity import AGENT_IDENTITY_HEADER, parse_identity

from kaos_agent.context import parse_depth

AUDIENCE = names.AGENT_AUDIENCE


def challenge(exc: KaosError) -> dict[str, str]:
    """The headers of a refusal: the RFC 9110 challenge on a 401, nothing otherwise."""
    if exc.status != 401:
        return {}
    return {"WWW-Authenticate": challenge_value(AUDIENCE, exc.code)}


def claims_delegation(headers: Mapping[str, str], body_depth: object = None) -> bool:
    """Whether a request says it comes from another agent (identity or depth above 0).

    A depth that is not an integer is left to the request's own parser (a 400)."""
    if AGENT_IDENTITY_HEADER in headers:
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

        Raises ``Unauthenticated`` (401), ``Forbidden`` (403), ``VerifierUnavailable``
        (503), or ``BadRequest`` for an unusable identity header."""
        tokens = presented_tokens(headers)
        if not tokens:
            if claims_delegation(headers, body_depth):
                raise Unauthenticated(
                    f"{names.AGENT_TOKEN_HEADER} is required: this agent verifies who delegates"
                    f" to it ({AGENT_IDENTITY_HEADER} or a delegation depth alone is not an"
                    " identity)",
                    code="missing_token",
                )
            # An end user's call: unverified for now (users' tokens are issue 14).
            return None
        caller = await self.admit(one_token(tokens))
        self.check_claim(caller, parse_identity(headers).agent)
        return caller
