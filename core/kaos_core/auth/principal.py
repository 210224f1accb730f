"""The principal of a delegated call under verified user identity: one derivation for the
memory service and an agent.

An agent that acts for an end user forwards the user's token (``X-User-Token``) beside its
own; the service it calls verifies that token itself and takes the principal from it, so
nobody downstream trusts a principal it was merely told. An ``X-Principal`` sent beside
the token must name the same principal. What a call without a forwarded token means is
each service's own policy (the memory service takes the calling agent as the principal,
an agent runs for itself), so ``forwarded_user`` answers ``None`` and leaves it to them;
so is the challenge a refusal carries (``kaos_memory.auth``, ``kaos_agent.auth``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kaos_core.auth.oidc import UserVerifier, VerifiedUser
from kaos_core.auth.verify import Forbidden, Unauthenticated
from kaos_core.wire import PRINCIPAL_HEADER, USER_TOKEN_HEADER, header_values


async def forwarded_user(headers: Mapping[str, str], users: UserVerifier) -> VerifiedUser | None:
    """The end user whose token a calling agent forwarded, verified; ``None`` without one.

    Raises ``Unauthenticated`` (401: the token is given twice or refused),
    ``Forbidden`` (403 ``principal_mismatch``: ``X-Principal`` names someone else) or
    ``VerifierUnavailable`` (503)."""
    forwarded = header_values(headers, USER_TOKEN_HEADER)
    if not forwarded:
        return None
    try:
        if len(forwarded) > 1:
            raise Unauthenticated(f"{USER_TOKEN_HEADER} given more than once")
        user = await users.verify(forwarded[0])
    except Unauthenticated as exc:
        raise Unauthenticated(f"user token refused: {exc.message}", code=exc.code) from None
    claimed = header_values(headers, PRINCIPAL_HEADER)
    if claimed and claimed != [user.principal]:
        raise Forbidden(
            f"{PRINCIPAL_HEADER} does not match the principal of the user's token",
            code="principal_mismatch",
        )
    return user
