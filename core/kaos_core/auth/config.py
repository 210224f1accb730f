"""What configures token verification, free of the JOSE library (settings modules and
the operator import it; only ``kaos_core.auth.verify`` needs PyJWT)."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from kaos_core.auth import names
from kaos_core.wire import AGENT_IDENTITY_RE, NAME_PATTERN, NAMESPACE_PATTERN

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


# What each placeholder of a per-agent user audience stands for, as a pattern: an Agent's
# namespace and name, as in its identity (``kaos_core.wire.AGENT_IDENTITY_RE``).
AUDIENCE_PLACEHOLDERS = {"namespace": NAMESPACE_PATTERN, "name": NAME_PATTERN}


class UserAudience:
    """The audience (``aud``) end users' tokens carry: one for every agent (a literal, such
    as ``kaos``), or each agent's own, from a template naming its namespace and name
    (``kaos.dev/agent/{namespace}/{name}``), so a token a client got for one agent is not
    accepted by another.

    An agent accepts a user's token sent to it only for its own audience (``of_agent``);
    the user's token forwarded to it by a verified agent, and to the memory service, for
    any audience of the template's form (``matches``): the calling agent vouches for the
    user it acts for, and the token must still have been meant for some agent. A literal
    is both, exactly. A template that is not usable is refused (``ValueError`` naming what
    is wrong): only the placeholders ``{namespace}`` and ``{name}``, each at most once,
    with text besides them; ``{{`` and ``}}`` are literal braces."""

    def __init__(self, template: str) -> None:
        if not template.strip():
            raise ValueError("the audience must not be empty")
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError:
            raise ValueError(
                f"audience template {template!r} has an unmatched brace (write {{{{ or }}}}"
                " for a literal one)"
            ) from None
        known = ", ".join(f"{{{name}}}" for name in AUDIENCE_PLACEHOLDERS)
        pattern: list[str] = []
        placeholders: list[str] = []
        for text, placeholder, spec, conversion in parsed:
            pattern.append(re.escape(text))
            if placeholder is None:
                continue
            if placeholder not in AUDIENCE_PLACEHOLDERS or spec or conversion:
                raise ValueError(
                    f"audience template {template!r} has a placeholder other than {known}"
                )
            if placeholder in placeholders:
                raise ValueError(
                    f"audience template {template!r} names {{{placeholder}}} more than once"
                )
            placeholders.append(placeholder)
            pattern.append(AUDIENCE_PLACEHOLDERS[placeholder])
        self.literal = "".join(text for text, *_ in parsed)
        if placeholders and not self.literal.strip():
            # A bare "{name}" would match the audiences of other services too.
            raise ValueError(f"audience template {template!r} needs text besides {known}")
        self.template = template
        self.placeholders = frozenset(placeholders)
        self._pattern = re.compile("".join(pattern))

    def __repr__(self) -> str:
        return f"UserAudience({self.template!r})"

    def __str__(self) -> str:
        return self.template

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserAudience) and other.template == self.template

    def __hash__(self) -> int:
        return hash(self.template)

    @property
    def per_agent(self) -> bool:
        """Whether each agent has its own audience (the template has placeholders)."""
        return bool(self.placeholders)

    def of_agent(self, namespace: str, name: str) -> str:
        """The audience of the Agent ``namespace/name`` (the literal for every agent)."""
        return self.template.format(namespace=namespace, name=name)

    def of_identity(self, identity: str) -> str:
        """The audience of the agent whose identity is ``kaos://agent/<ns>/<name>``."""
        match = AGENT_IDENTITY_RE.fullmatch(identity)
        if match is None:
            raise ValueError(f"{identity!r} is not an agent identity (kaos://agent/<ns>/<name>)")
        return self.of_agent(match["ns"], match["name"])

    def matches(self, audience: str) -> bool:
        """Whether ``audience`` is the audience of some agent (for a literal: is it)."""
        return self._pattern.fullmatch(audience) is not None


# What a token's ``aud`` is checked against: exactly one audience, or a template's form.
Audience = str | UserAudience


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

    def __post_init__(self) -> None:
        UserAudience(self.audience)  # refused here, before any token is verified

    @property
    def user_audience(self) -> UserAudience:
        """``audience`` as a literal or a per-agent template."""
        return UserAudience(self.audience)

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
