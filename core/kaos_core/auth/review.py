"""Mode ``tokenreview``: the API server verifies each service-account token.

``TokenReviewVerifier`` sends an ``authentication.k8s.io/v1`` TokenReview with the
expected audience: authoritative, revocation included, at the cost of a round trip,
which a short cache absorbs (never past the token's own expiry). Errors and the workload
it answers are ``kaos_core.auth.verify``'s.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict

from kaos_core.auth.config import REVIEW_CACHE_SECONDS
from kaos_core.auth.verify import (
    Clock,
    HttpsSource,
    Unauthenticated,
    VerifiedWorkload,
    VerifierUnavailable,
    parse_subject,
    precheck,
)

log = logging.getLogger(__name__)

REVIEW_CACHE_ENTRIES = 4096
_POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
_POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"


class TokenReviewVerifier:
    """Ask the API server; verdicts are cached briefly (never past the token's expiry)."""

    def __init__(
        self,
        http: HttpsSource,
        api_server: str,
        *,
        cache_seconds: float = REVIEW_CACHE_SECONDS,
        clock: Clock = time.time,
    ) -> None:
        self._http = http
        self._url = api_server.rstrip("/") + "/apis/authentication.k8s.io/v1/tokenreviews"
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: OrderedDict[str, tuple[VerifiedWorkload, float]] = OrderedDict()

    async def verify(self, token: str, audience: str) -> VerifiedWorkload:
        precheck(token)
        # The cache is keyed by a digest: the token itself is not kept in memory longer.
        key = hashlib.sha256(f"{audience}\0{token}".encode()).hexdigest()
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and now < cached[1]:
            return cached[0]
        workload = await self._review(token, audience)
        until = now + self._cache_seconds
        if workload.expires_at is not None:
            until = min(until, workload.expires_at)
        self._cache[key] = (workload, until)
        while len(self._cache) > REVIEW_CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return workload

    async def _review(self, token: str, audience: str) -> VerifiedWorkload:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        status, doc = await self._http.request("POST", self._url, body)
        if status not in (200, 201) or not isinstance(doc, dict):
            # Our own credentials or permissions (system:auth-delegator) are wrong.
            log.warning("TokenReview refused", extra={"status": status})
            raise VerifierUnavailable(f"the API server refused the TokenReview (HTTP {status})")
        result = doc.get("status") or {}
        if not result.get("authenticated"):
            raise Unauthenticated("token was not accepted by the API server")
        if audience not in (result.get("audiences") or []):
            raise Unauthenticated(f"token is not meant for audience {audience}")
        user = result.get("user") or {}
        namespace, service_account = parse_subject(user.get("username"))
        extra = user.get("extra") or {}
        return VerifiedWorkload(
            namespace=namespace,
            service_account=service_account,
            pod_name=_first(extra.get(_POD_NAME_EXTRA)),
            pod_uid=_first(extra.get(_POD_UID_EXTRA)),
            expires_at=unverified_expiry(token),
        )

    async def close(self) -> None:
        await self._http.close()


def _first(values: object) -> str | None:
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]
    return None


def unverified_expiry(token: str) -> float | None:
    """The ``exp`` of a token the API server has just verified, unchecked: it only bounds
    how long a verdict is cached."""
    import jwt  # with its cryptography, only in a process that verifies tokens

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
