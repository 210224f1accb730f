"""Whether a delivery comes from the holder of its trigger's secret, and recently.

One scheme: GitHub's header and digest (``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256
keyed by the secret), computed over the timestamp bound in front of the body:
``HMAC(secret, "<X-KAOS-Timestamp>." + body)``. GitHub's own form (the body alone) is not
accepted: without the timestamp inside the digest, a captured delivery could be replayed
once its id is forgotten. The timestamp (unix seconds) must be within ``MAX_SKEW_SECONDS``
of this replica's clock, either way. The digest is compared in constant time.

A delivery is named by ``X-KAOS-Delivery`` (or GitHub's ``X-GitHub-Delivery``): the id the
replay check records (``kaos_agent.triggers.deliveries``), with the signature's digest, so
a signed delivery sent again under another id is refused too.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from kaos_core.errors import BadRequest, KaosError, TooManyRequests
from multidict import MultiMapping

SIGNATURE_HEADER = "X-Hub-Signature-256"
TIMESTAMP_HEADER = "X-KAOS-Timestamp"
DELIVERY_HEADERS = ("X-KAOS-Delivery", "X-GitHub-Delivery")
MAX_SKEW_SECONDS = 300
_PREFIX = "sha256="
_HEX = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_DELIVERY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_CHALLENGE = ("WWW-Authenticate", 'HMAC-SHA256 realm="kaos-trigger"')


class UnknownTrigger(KaosError):
    status = 404
    code = "unknown_trigger"

    def __init__(self) -> None:
        super().__init__("no such trigger")


class InvalidSignature(KaosError):
    status = 401
    code = "invalid_signature"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers=[_CHALLENGE])


class StaleTimestamp(KaosError):
    status = 401
    code = "stale_timestamp"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers=[_CHALLENGE])


class BadDelivery(BadRequest):
    code = "bad_delivery_id"


class ReplayedDelivery(KaosError):
    status = 409
    code = "replayed_delivery"

    def __init__(self) -> None:
        super().__init__("this delivery was already received")


class TriggerRateLimited(TooManyRequests):
    code = "rate_limited"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            "this trigger is at its deliveries per minute",
            headers=[("Retry-After", str(retry_after))],
        )


@dataclass(frozen=True)
class Signed:
    """What a verified delivery proved: when it was signed, and the digest."""

    timestamp: int
    digest: str


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body`` signed at ``timestamp``."""
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def _single(headers: MultiMapping[str], name: str) -> str | None:
    """The header's value when it is given exactly once."""
    values = headers.getall(name, [])
    return values[0] if len(values) == 1 else None


def verify(
    secret: bytes,
    headers: MultiMapping[str],
    body: bytes,
    *,
    now: float,
) -> Signed:
    """The delivery's proof, or ``InvalidSignature`` / ``StaleTimestamp``."""
    given = _single(headers, SIGNATURE_HEADER)
    if given is None or not given.startswith(_PREFIX) or not _HEX.fullmatch(given[7:]):
        raise InvalidSignature(f"{SIGNATURE_HEADER} must be once 'sha256=<64 hex digits>'")
    raw_time = _single(headers, TIMESTAMP_HEADER)
    if raw_time is None or not _TIMESTAMP.fullmatch(raw_time):
        raise StaleTimestamp(f"{TIMESTAMP_HEADER} must be once, in unix seconds")
    expected = sign(secret, raw_time, body)
    if not hmac.compare_digest(expected.encode("ascii"), given.encode("ascii")):
        raise InvalidSignature("the signature does not match")
    # Only a signed timestamp is worth judging: an unsigned caller learns nothing of it.
    if abs(now - int(raw_time)) > MAX_SKEW_SECONDS:
        raise StaleTimestamp(f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_SECONDS} seconds from now")
    return Signed(timestamp=int(raw_time), digest=given[7:])


def delivery_id(headers: MultiMapping[str]) -> str:
    """The delivery's id (``X-KAOS-Delivery``, else ``X-GitHub-Delivery``)."""
    for name in DELIVERY_HEADERS:
        value = _single(headers, name)
        if value is not None:
            if not _DELIVERY.fullmatch(value):
                raise BadDelivery(f"{name} must be 1 to 128 of A-Z, a-z, 0-9, '.', '_', ':', '-'")
            return value
    names = " or ".join(DELIVERY_HEADERS)
    raise BadDelivery(f"{names} is required, once")
