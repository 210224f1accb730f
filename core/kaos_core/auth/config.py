"""What configures token verification, free of the JOSE library (settings modules and
the operator import it; only ``kaos_core.auth.verify`` needs PyJWT)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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
