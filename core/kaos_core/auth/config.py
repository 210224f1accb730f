"""What configures token verification, free of the JOSE library (settings modules and
the operator import it; only ``kaos_core.auth.verify`` needs PyJWT)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from kaos_core.auth import names

# One of ``names.AUTH_MODES``.
AuthMode = Literal["off", "jwks", "tokenreview"]

DEFAULT_LEEWAY = 30.0
REVIEW_CACHE_SECONDS = 10.0


@dataclass(frozen=True)
class VerifierSettings:
    """What ``build_verifier`` needs."""

    mode: AuthMode
    issuer: str | None = None
    jwks_url: str | None = None
    api_server: str | None = None
    ca_file: Path | None = None
    token_file: Path | None = None
    leeway: float = DEFAULT_LEEWAY
    review_cache_seconds: float = REVIEW_CACHE_SECONDS


@dataclass(frozen=True)
class CallerAuthSettings(VerifierSettings):
    """How a service verifies its callers' tokens, and the callers file that says who may
    call (``kaos_core.auth.gate``); the memory service and the agent each map their own
    variables onto it."""

    callers_file: Path = Path(names.CALLERS_PATH)


class UserFields(Protocol):
    """The ``user_*`` fields the agent's and the memory service's settings both declare."""

    @property
    def user_issuer(self) -> str | None: ...
    @property
    def user_audience(self) -> str | None: ...
    @property
    def user_principal_claim(self) -> str: ...
    @property
    def user_jwks_url(self) -> str | None: ...
    @property
    def user_ca_file(self) -> Path | None: ...
    @property
    def user_leeway(self) -> float: ...


@dataclass(frozen=True)
class UserAuthSettings:
    """How a service verifies end users' OIDC tokens (``kaos_core.auth.oidc``); the agent
    and the memory service each map their own variables onto it."""

    issuer: str
    audience: str
    principal_claim: str = names.DEFAULT_PRINCIPAL_CLAIM
    jwks_url: str | None = None
    ca_file: Path | None = None
    leeway: float = DEFAULT_LEEWAY
    # The client a token must have been issued to (``azp``/``client_id``); None: any.
    authorized_party: str | None = None

    @classmethod
    def of(cls, fields: UserFields) -> UserAuthSettings | None:
        """A service's user settings; ``None`` without an issuer (no verified users)."""
        if fields.user_issuer is None or fields.user_audience is None:
            return None
        return cls(
            issuer=fields.user_issuer,
            audience=fields.user_audience,
            principal_claim=fields.user_principal_claim,
            jwks_url=fields.user_jwks_url,
            ca_file=fields.user_ca_file,
            leeway=fields.user_leeway,
        )
