"""Verified identity, declared once for every service that verifies its callers.

``CallerAuth`` (how a caller agent's ``X-Agent-Token`` is verified, and the callers file
that says who may call) and ``UserAuth`` (how an end user's OIDC token is verified) are
read under each service's prefix: ``KAOS_MEMORY_AUTH_MODE`` for the memory service,
``AGENT_AUTH_MODE`` for an agent. ``VerifiedIdentity`` is the base of such a service's
settings: the two groups, the invariant between them, and the values the verifiers are
built from (``kaos_core.auth.config``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kaos_core.auth import names
from kaos_core.auth.config import (
    DEFAULT_LEEWAY,
    REVIEW_CACHE_SECONDS,
    AuthMode,
    CallerAuthSettings,
    UserAudience,
    UserAuthSettings,
)
from kaos_core.settings.model import ServiceSettings, SettingsGroup, group, setting


def _not_https(urls: dict[str, str | None]) -> list[str]:
    return [
        f"{variable} must be an https:// URL"
        for variable, url in urls.items()
        if url is not None and not url.startswith("https://")
    ]


class CallerAuth(SettingsGroup):
    """How a service verifies the agents that call it, and which of them may."""

    title: ClassVar[str] = "Verified agent identity"

    mode: AuthMode = setting(
        "how a caller's `X-Agent-Token` (its projected service-account token) is verified:"
        " `off`: not at all; `jwks`: offline against the service-account issuer's keys;"
        " `tokenreview`: by the API server (TokenReview; sees revoked tokens, costs a round"
        " trip per token and `{prefix}AUTH_REVIEW_CACHE_SECONDS`)",
        env="AUTH_MODE",
        default="off",
    )
    issuer: str | None = setting(
        "`jwks` (required there): the cluster's service-account issuer (`iss` of its tokens,"
        " e.g. `https://kubernetes.default.svc.cluster.local`). Its keys come from"
        " `{prefix}AUTH_JWKS_URL`, else `<API server>/openid/v1/jwks` when"
        " `{prefix}AUTH_API_SERVER` is set, else `<issuer>/.well-known/openid-configuration`",
        env="AUTH_ISSUER",
        default=None,
    )
    jwks_url: str | None = setting(
        "`jwks`: where to fetch the issuer's keys instead of discovery (e.g."
        " `https://kubernetes.default.svc/openid/v1/jwks`). Keys are fetched on first use and"
        " again for an unknown key id at most every 30 s",
        env="AUTH_JWKS_URL",
        default=None,
    )
    api_server: str | None = setting(
        "the API server URL (e.g. `https://kubernetes.default.svc`). `tokenreview` (required"
        " there) posts TokenReviews to it (the pod's ServiceAccount needs `create` on"
        " tokenreviews: the chart's `<release>-tokenreview` binding); `jwks` fetches the"
        " issuer's keys from it",
        env="AUTH_API_SERVER",
        default=None,
    )
    ca_file: Path | None = setting(
        "CA bundle for the issuer, the JWKS URL and the API server (in a pod:"
        " `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`)",
        env="AUTH_CA_FILE",
        default=None,
        default_doc="system CAs",
    )
    token_file: Path | None = setting(
        "the pod's own API-server token, sent as bearer to the issuer and the API server"
        " (re-read when it changes; in a pod:"
        " `/var/run/secrets/kubernetes.io/serviceaccount/token`)",
        env="AUTH_TOKEN_FILE",
        default=None,
    )
    leeway: float = setting(
        "seconds of clock skew tolerated on a token's `exp`, `nbf` and `iat` (`jwks`)",
        env="AUTH_LEEWAY",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )
    review_cache_seconds: float = setting(
        "`tokenreview`: seconds an accepted token's verdict is reused (never past its `exp`)",
        env="AUTH_REVIEW_CACHE_SECONDS",
        default=REVIEW_CACHE_SECONDS,
        ge=0,
        le=300,
    )
    callers_file: Path = setting(
        "the callers file the operator writes (the agents allowed to call: identity,"
        " namespace, ServiceAccount), re-read when it changes; a verified token of a"
        " ServiceAccount not listed is 403, and a missing or invalid file allows nobody",
        env="CALLERS_FILE",
        default=Path(names.CALLERS_PATH),
    )

    def problems(self, prefix: str) -> list[str]:
        found: list[str] = []
        mode = self.env_name("mode", prefix)
        if self.mode == "jwks" and not self.issuer:
            found.append(f"{mode}=jwks needs {self.env_name('issuer', prefix)}")
        if self.mode == "tokenreview" and not self.api_server:
            found.append(f"{mode}=tokenreview needs {self.env_name('api_server', prefix)}")
        # Keys and TokenReviews (with the pod's own bearer token) travel over TLS only.
        return found + _not_https(
            {
                self.env_name(field, prefix): getattr(self, field)
                for field in ("issuer", "jwks_url", "api_server")
            }
        )

    def settings(self) -> CallerAuthSettings:
        """What the verifier and the callers gate are built from."""
        return CallerAuthSettings(
            mode=self.mode,
            issuer=self.issuer,
            jwks_url=self.jwks_url,
            api_server=self.api_server,
            ca_file=self.ca_file,
            token_file=self.token_file,
            leeway=self.leeway,
            review_cache_seconds=self.review_cache_seconds,
            callers_file=self.callers_file,
        )


class UserAuth(SettingsGroup):
    """How a service verifies end users' OIDC tokens (``None`` issuer: principals as sent)."""

    title: ClassVar[str] = "Verified user identity"

    issuer: str | None = setting(
        "the OIDC issuer of end users' tokens (`iss`, an https URL; needs `{prefix}AUTH_MODE`)",
        env="USER_ISSUER",
        default=None,
    )
    audience: str | None = setting(
        "with a user issuer (required there): the audience user tokens must carry (`aud`),"
        " one for every agent (`kaos`), or a template of each agent's own with the"
        " placeholders `{namespace}` and `{name}` (e.g. `kaos.dev/agent/{namespace}/{name}`):"
        " an agent then accepts a token sent to it only for its own audience, and a token"
        " forwarded by a verified agent (and the memory service any forwarded token) for an"
        " audience of the template's form",
        env="USER_AUDIENCE",
        default=None,
        min_length=1,
    )
    principal_claim: str = setting(
        "the claim of a user token that names the principal",
        env="USER_PRINCIPAL_CLAIM",
        default=names.DEFAULT_PRINCIPAL_CLAIM,
        min_length=1,
    )
    jwks_url: str | None = setting(
        "where to fetch the user issuer's keys instead of discovery (https). Keys are fetched"
        " on first use and again for an unknown key id at most every 5 s (a key rotated at"
        " the provider is followed without a restart)",
        env="USER_JWKS_URL",
        default=None,
    )
    authorized_party: str | None = setting(
        "with a user issuer: the client a user token must have been issued to (its `azp`"
        " claim, or RFC 9068's `client_id`); unset: any client of the issuer",
        env="USER_AUTHORIZED_PARTY",
        default=None,
        min_length=1,
    )
    ca_file: Path | None = setting(
        "CA bundle for the user issuer and its keys",
        env="USER_CA_FILE",
        default=None,
        default_doc="system CAs",
    )
    leeway: float = setting(
        "seconds of clock skew tolerated on a user token's `exp`, `nbf` and `iat`",
        env="USER_LEEWAY",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )

    def problems(self, prefix: str) -> list[str]:
        if self.issuer is None:
            return []
        found: list[str] = []
        if not self.audience:
            issuer, audience = self.env_name("issuer", prefix), self.env_name("audience", prefix)
            found.append(f"{issuer} needs {audience}")
        else:
            try:
                UserAudience(self.audience)
            except ValueError as exc:
                found.append(f"{self.env_name('audience', prefix)}: {exc}")
        return found + _not_https(
            {self.env_name(field, prefix): getattr(self, field) for field in ("issuer", "jwks_url")}
        )

    def settings(self) -> UserAuthSettings | None:
        """What the user-token verifier is built from; ``None`` without an issuer."""
        if self.issuer is None or self.audience is None:
            return None
        return UserAuthSettings(
            issuer=self.issuer,
            audience=self.audience,
            principal_claim=self.principal_claim,
            jwks_url=self.jwks_url,
            authorized_party=self.authorized_party,
            ca_file=self.ca_file,
            leeway=self.leeway,
        )


class VerifiedIdentity(ServiceSettings):
    """The settings of a service that verifies its callers: ``callers`` (agents) and
    ``users`` (end users), under the service's prefix."""

    callers: CallerAuth = group(CallerAuth.title)
    users: UserAuth = group(UserAuth.title)

    def problems(self) -> list[str]:
        if self.users.issuer is None or self.callers.mode != "off":
            return []
        prefix = self.env_prefix
        return [
            f"{UserAuth.env_name('issuer', prefix)} needs {CallerAuth.env_name('mode', prefix)}"
            " (verified user identity builds on verified agent identity)"
        ]

    @property
    def auth(self) -> CallerAuthSettings:
        return self.callers.settings()

    @property
    def user_auth(self) -> UserAuthSettings | None:
        """How end users' tokens are verified; ``None``: principals as sent."""
        return self.users.settings()
