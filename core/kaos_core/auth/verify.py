"""Verification of Kubernetes service-account tokens: who is calling, proven.

An agent presents its projected, audience-bound token (``wire.AGENT_TOKEN_HEADER``); a
service turns it into a ``VerifiedWorkload`` (namespace, ServiceAccount, and the pod when
the token is bound to one) or refuses it. Two verifiers share one interface:

- ``JwksVerifier`` (mode ``jwks``) checks the signature offline against the keys the
  cluster's service-account issuer publishes (a configured JWKS URL, else the API
  server's ``/openid/v1/jwks`` when an API server is configured, else the issuer's OIDC
  discovery document). Keys are fetched lazily, cached, and fetched again when a token
  names an unknown key id, at most once per ``refetch_interval`` (a flood of made-up key
  ids cannot turn into a flood of fetches). Callers that need the keys while a fetch is
  under way wait for that one fetch, not a fetch each; an answer that holds no usable
  key (``{}``, ``{"keys": "garbage"}``) is a failed fetch and keeps the keys already
  cached; a document larger than ``MAX_DOCUMENT_BYTES`` is refused unread. A token whose
  signature verified is
  remembered (by its SHA-256, with the key that verified it) so an agent's next call with
  the same token costs a hash, not an RSA verification; its claims (expiry, audience) are
  still checked on every call, and a key the issuer no longer publishes voids what it
  verified. Fast and independent of the API server, but
  blind to revocation: a token of a deleted pod or ServiceAccount stays valid until it
  expires (projected tokens live an hour at most, ``names.TOKEN_EXPIRATION_SECONDS``).
- ``TokenReviewVerifier`` (mode ``tokenreview``, ``kaos_core.auth.review``) asks the API server
  (``authentication.k8s.io/v1`` TokenReview with the expected audience): authoritative,
  revocation included, at the cost of a round trip, which a short cache absorbs.

``Unauthenticated`` (401) is anything wrong with the token itself; ``Forbidden`` (403) a
valid token whose workload may not do what it asks (decided by the caller, e.g. with the
callers file); ``VerifierUnavailable`` (503) a verifier that cannot reach its source of
truth. Tokens are credentials: they are never logged and never echoed in an error.

This module needs the ``pyjwt`` and ``cryptography`` packages (the ``memory`` and
``agent`` extras); nothing else in ``kaos_core`` imports it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

import aiohttp

from kaos_core import errors
from kaos_core.auth.config import DEFAULT_LEEWAY, Audience, UserAudience
from kaos_core.auth.tokenfile import TokenFile
from kaos_core.errors import KaosError
from kaos_core.tracing import client_session
from kaos_core.wire import AUTHORIZATION_HEADER, WWW_AUTHENTICATE_HEADER

if TYPE_CHECKING:
    import jwt

log = logging.getLogger(__name__)

Clock = Callable[[], float]
JwksSource = Callable[[], Awaitable[Mapping[str, Any]]]

# A projected token is ~1 KB; anything this large is refused before it is parsed.
MAX_TOKEN_BYTES = 16 * 1024
# Asymmetric signatures only: never ``none``, never HS* (an HMAC "signed" with the
# issuer's public key would otherwise verify against it).
ALLOWED_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "ES256", "ES384", "ES512"})
# The least time between two fetches an unknown key id asks for: a key the issuer has just
# published verifies within it, a flood of made-up key ids costs one fetch per interval.
KEY_REFETCH_INTERVAL = 5.0
# After a failed fetch, the next attempt waits this long from the failure (an issuer outage
# must not turn every request into a fetch), but recovery stays quick.
FAILED_FETCH_RETRY = 1.0
# Key sets and discovery documents are a few kilobytes; an issuer (or whoever answers in
# its name) that sends more is refused before the body is read, never held in memory.
MAX_DOCUMENT_BYTES = 512 * 1024
# Tokens whose signature verified, remembered by hash (an agent presents the same
# projected token until kubelet rotates it, so a handful per agent).
SIGNATURE_CACHE_ENTRIES = 4096
FETCH_TIMEOUT = 5.0

_SUBJECT_RE = re.compile(r"^system:serviceaccount:(?P<ns>[^:]+):(?P<sa>[^:]+)$")


class Unauthenticated(KaosError):
    """The token is missing, malformed, forged, expired or meant for someone else.

    Raised where the realm is not known (a verifier serves any service); the service's
    edge adds its challenge (``challenge``) before the error leaves it."""

    status = 401
    code = "invalid_token"

    def challenge(self, value: str) -> Self:
        """This refusal, its answer carrying one more ``WWW-Authenticate`` challenge."""
        return self.with_header(WWW_AUTHENTICATE_HEADER, value)


class Forbidden(errors.Forbidden):
    """A valid token whose workload may not make this call."""

    code = "caller_not_allowed"


class VerifierUnavailable(KaosError):
    """The issuer's keys or the API server cannot be reached: nobody can be verified."""

    status = 503
    code = "auth_unavailable"


@dataclass(frozen=True)
class VerifiedWorkload:
    """The workload a valid token proves: its ServiceAccount, and its pod when bound."""

    namespace: str
    service_account: str
    pod_name: str | None = None
    pod_uid: str | None = None
    # The token's own expiry (epoch seconds): no cached verdict may outlive it.
    expires_at: float | None = None

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


class TokenVerifier(Protocol):
    async def verify(self, token: str, audience: str) -> VerifiedWorkload: ...

    async def close(self) -> None: ...


# ------------------------------------------------------------------------ pure checks


def precheck(token: str) -> None:
    """Refuse what is not even shaped like a JWT, before any parsing."""
    if len(token) > MAX_TOKEN_BYTES:
        raise Unauthenticated(f"token is larger than {MAX_TOKEN_BYTES} bytes")
    if not token.isascii() or token.count(".") != 2 or not all(token.split(".")[:2]):
        raise Unauthenticated("token is not a JWT (header.payload.signature)")


def parse_subject(subject: object) -> tuple[str, str]:
    """``system:serviceaccount:<ns>:<sa>`` as ``(ns, sa)``; anything else is refused."""
    match = _SUBJECT_RE.fullmatch(subject) if isinstance(subject, str) else None
    if match is None:
        raise Unauthenticated("token subject is not a service account")
    return match["ns"], match["sa"]


def _number(claims: Mapping[str, Any], name: str, *, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise Unauthenticated(f"token has no '{name}' claim")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unauthenticated(f"token claim '{name}' is not a number")
    return float(value)


def check_lifetime(claims: Mapping[str, Any], *, now: float, leeway: float) -> float:
    """``exp`` (required), ``nbf`` and ``iat`` against ``now`` with ``leeway`` seconds of
    skew; the expiry."""
    exp = _number(claims, "exp", required=True)
    nbf = _number(claims, "nbf", required=False)
    iat = _number(claims, "iat", required=True)
    assert exp is not None and iat is not None
    if now >= exp + leeway:
        raise Unauthenticated("token has expired")
    if nbf is not None and now + leeway < nbf:
        raise Unauthenticated("token is not valid yet")
    if now + leeway < iat or exp < iat:
        raise Unauthenticated("token was issued in the future")
    return exp


def check_registered(
    claims: Mapping[str, Any], *, issuer: str, audience: Audience, now: float, leeway: float
) -> float:
    """``iss`` (exactly), ``aud`` (contains ``audience``; for a per-agent template, an
    audience of its form) and the lifetime; the expiry."""
    if claims.get("iss") != issuer:
        raise Unauthenticated("token was issued by another issuer")
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    meant = audience.matches if isinstance(audience, UserAudience) else audience.__eq__
    if not any(isinstance(each, str) and meant(each) for each in audiences):
        raise Unauthenticated(f"token is not meant for audience {audience}")
    return check_lifetime(claims, now=now, leeway=leeway)


def check_claims(
    claims: Mapping[str, Any], *, issuer: str, audience: str, now: float, leeway: float
) -> VerifiedWorkload:
    """The registered and Kubernetes claims of a token whose signature was verified."""
    exp = check_registered(claims, issuer=issuer, audience=audience, now=now, leeway=leeway)
    namespace, service_account = parse_subject(claims.get("sub"))
    k8s = claims.get("kubernetes.io")
    if not isinstance(k8s, dict):
        raise Unauthenticated("token has no kubernetes.io claims")
    sa = k8s.get("serviceaccount")
    if (
        k8s.get("namespace") != namespace
        or not isinstance(sa, dict)
        or sa.get("name") != service_account
    ):
        raise Unauthenticated("token subject and kubernetes.io claims disagree")
    pod = k8s.get("pod")
    pod_name = pod.get("name") if isinstance(pod, dict) else None
    pod_uid = pod.get("uid") if isinstance(pod, dict) else None
    return VerifiedWorkload(
        namespace=namespace,
        service_account=service_account,
        pod_name=pod_name if isinstance(pod_name, str) else None,
        pod_uid=pod_uid if isinstance(pod_uid, str) else None,
        expires_at=exp,
    )


# ------------------------------------------------------------------------ HTTPS client


class HttpsSource:
    """HTTPS to the issuer or the API server: the cluster's CA, and the service's own
    (rotated) token as bearer when a token file is set. The session is made lazily, so
    nothing is dialled at start (readiness never depends on the issuer)."""

    def __init__(
        self, *, ca_file: Path | None, token_file: Path | None, timeout: float = FETCH_TIMEOUT
    ) -> None:
        self.ca_file = ca_file
        self.token = TokenFile(token_file) if token_file is not None else None
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            context = ssl.create_default_context(
                cafile=None if self.ca_file is None else str(self.ca_file)
            )
            self._session = client_session(
                timeout=self.timeout, connector=aiohttp.TCPConnector(ssl=context)
            )
        return self._session

    def _headers(self) -> dict[str, str]:
        # The API server serves its keys as ``application/jwk-set+json`` (406 otherwise).
        headers = {"Accept": "application/json, application/jwk-set+json"}
        bearer = self.token.read() if self.token is not None else None
        if bearer:
            headers[AUTHORIZATION_HEADER] = f"Bearer {bearer}"
        return headers

    async def request(
        self, method: str, url: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, Any]:
        """``(status, JSON document)``; transport errors and non-JSON raise
        ``VerifierUnavailable`` naming the URL (never a credential)."""
        try:
            async with self._http().request(
                method,
                url,
                data=None if body is None else json.dumps(body),
                headers=(
                    self._headers()
                    if body is None
                    else {**self._headers(), "Content-Type": "application/json"}
                ),
            ) as resp:
                status = resp.status
                doc = json.loads(await _bounded_body(resp, url))
        except (aiohttp.ClientError, TimeoutError, ValueError, ssl.SSLError) as exc:
            log.warning("auth backend unreachable", extra={"url": url, "error": type(exc).__name__})
            raise VerifierUnavailable(f"cannot reach {url} to verify tokens") from exc
        return status, doc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _bounded_body(resp: aiohttp.ClientResponse, url: str) -> bytes:
    """The answer's body, or ``VerifierUnavailable`` past ``MAX_DOCUMENT_BYTES`` (judged by
    its length header when it has one, else while it arrives)."""
    too_large = VerifierUnavailable(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    if resp.content_length is not None and resp.content_length > MAX_DOCUMENT_BYTES:
        log.warning("auth backend answer too large", extra={"url": url})
        raise too_large
    body = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            log.warning("auth backend answer too large", extra={"url": url})
            raise too_large
    return bytes(body)


def discovery_source(http: HttpsSource, issuer: str, jwks_url: str | None) -> JwksSource:
    """Fetch the issuer's key set: from ``jwks_url`` when given, else from the
    ``jwks_uri`` of ``{issuer}/.well-known/openid-configuration``."""
    resolved: list[str] = [jwks_url] if jwks_url else []

    async def get(url: str) -> Mapping[str, Any]:
        status, doc = await http.request("GET", url)
        if status != 200 or not isinstance(doc, dict):
            log.warning("auth backend refused", extra={"url": url, "status": status})
            raise VerifierUnavailable(f"{url} answered HTTP {status}")
        return doc

    async def fetch() -> Mapping[str, Any]:
        if not resolved:
            config = await get(issuer.rstrip("/") + "/.well-known/openid-configuration")
            uri = config.get("jwks_uri")
            if config.get("issuer") != issuer or not isinstance(uri, str):
                raise VerifierUnavailable("the issuer's discovery document does not match it")
            resolved.append(uri)
        return await get(resolved[0])

    return fetch


# ------------------------------------------------------------------------ JWKS mode


def usable_keys(doc: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    """The signing keys of a key set by key id; ``VerifierUnavailable`` when it holds none,
    so a malformed answer (``{}``, ``"keys"`` not a list, only unusable keys) counts as a
    failed fetch and the keys already cached stay."""
    import jwt

    keys: dict[str, jwt.PyJWK] = {}
    raw = doc.get("keys")
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            key = jwt.PyJWK(item)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue  # a key of a kind we cannot use (or do not allow) is skipped
        if key.algorithm_name in ALLOWED_ALGORITHMS and key.public_key_use in (None, "sig"):
            # A key without an id is only usable when it is the issuer's only key.
            keys[key.key_id or ""] = key
    if not keys:
        log.warning("issuer key set holds no usable key; the cached keys stay")
        raise VerifierUnavailable("the issuer's key set holds no usable signing key")
    return keys


class JwksVerifier:
    """Offline verification against the issuer's published keys."""

    def __init__(
        self,
        issuer: str,
        *,
        source: JwksSource,
        leeway: float = DEFAULT_LEEWAY,
        clock: Clock = time.time,
        refetch_interval: float = KEY_REFETCH_INTERVAL,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.issuer = issuer
        self.leeway = leeway
        self._source = source
        self._clock = clock
        self._refetch_interval = refetch_interval
        self._on_close = on_close
        self._keys: dict[str, jwt.PyJWK] = {}
        # sha256(token) -> (its verified claims, the key that verified them).
        self._verified: OrderedDict[str, tuple[Mapping[str, Any], jwt.PyJWK]] = OrderedDict()
        self._fetched = False
        self._next_fetch = float("-inf")
        # The fetch under way, which every caller that needs the keys meanwhile awaits.
        self._fetching: asyncio.Future[None] | None = None

    async def verify(self, token: str, audience: str) -> VerifiedWorkload:
        return self._check(await self.verified_claims(token), audience)

    async def verified_claims(self, token: str) -> Mapping[str, Any]:
        """The claims of a token whose signature one of the issuer's keys verified (none of
        the claims checked yet); ``Unauthenticated`` otherwise. Also the signature step
        of end users' tokens (``kaos_core.auth.oidc``)."""
        precheck(token)
        digest = hashlib.sha256(token.encode()).hexdigest()
        remembered = self._verified.get(digest)
        if remembered is not None:
            claims, key = remembered
            if key in self._keys.values():
                self._verified.move_to_end(digest)
                return claims
            del self._verified[digest]  # its key is gone: verify again (and likely refuse)
        claims, key = await self._verify_signature(token)
        self._verified[digest] = (claims, key)
        while len(self._verified) > SIGNATURE_CACHE_ENTRIES:
            self._verified.popitem(last=False)
        return claims

    def _check(self, claims: Mapping[str, Any], audience: str) -> VerifiedWorkload:
        return check_claims(
            claims, issuer=self.issuer, audience=audience, now=self._clock(), leeway=self.leeway
        )

    async def _verify_signature(self, token: str) -> tuple[Mapping[str, Any], jwt.PyJWK]:
        """The token's claims and the key that verified its signature."""
        import jwt  # with its cryptography, only in a process that verifies tokens

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("token header is not valid") from None
        alg = header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            raise Unauthenticated(
                f"token algorithm is not one of {', '.join(sorted(ALLOWED_ALGORITHMS))}"
            )
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        if key.algorithm_name != alg:
            raise Unauthenticated("token algorithm does not match its signing key")
        try:
            # Signature only: the claims are checked below with the injected clock.
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                options={
                    "verify_signature": True,
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "verify_iss": False,
                    "verify_sub": False,
                    "verify_jti": False,
                },
            )
        except jwt.PyJWTError:
            raise Unauthenticated("token signature is not valid") from None
        return claims, key

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        found = self._lookup(kid)
        if found is not None:
            return found
        if self._fetching is not None or self._clock() >= self._next_fetch:
            await self._fetch()
            found = self._lookup(kid)
        if found is not None:
            return found
        if not self._fetched:
            raise VerifierUnavailable("the service-account issuer's keys are not available")
        raise Unauthenticated("token is signed by an unknown key")

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is not None:
            return self._keys.get(kid)
        # A token without a key id can only be matched when the issuer has one key.
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _fetch(self) -> None:
        """Join the fetch under way, or start one. It is shielded: a caller that gives up
        (its client left) does not cancel the fetch the others wait for."""
        if self._fetching is None:
            fetching = asyncio.ensure_future(self._refresh())
            fetching.add_done_callback(self._fetched_now)
            self._fetching = fetching
        await asyncio.shield(self._fetching)

    def _fetched_now(self, fetching: asyncio.Future[None]) -> None:
        self._fetching = None
        if not fetching.cancelled():
            fetching.exception()  # each waiter has it; nobody is left to be told twice

    async def _refresh(self) -> None:
        try:
            keys = usable_keys(await self._source())
        except VerifierUnavailable:
            # From the failure, not from the start of a fetch that may have hung for its
            # whole timeout: the next callers are not each sent to the issuer again.
            self._next_fetch = self._clock() + FAILED_FETCH_RETRY
            raise
        self._next_fetch = self._clock() + self._refetch_interval
        self._keys, self._fetched = keys, True
        log.info("issuer keys fetched", extra={"issuer": self.issuer, "keys": len(keys)})

    async def close(self) -> None:
        if self._on_close is not None:
            await self._on_close()
