"""A delivery's proof: the timestamped HMAC under GitHub's header, in a 300 s window, and
its id; and the in-process delivery log's replay check and rate (the SQL logs are the
integration tests')."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from kaos_agent.triggers.deliveries import Admission, Delivery, MemoryDeliveryLog
from kaos_agent.triggers.signature import (
    BadDelivery,
    InvalidSignature,
    StaleTimestamp,
    delivery_id,
    sign,
    verify,
)
from multidict import CIMultiDict

SECRET = b"k"
BODY = b'{"a":1}'
NOW = 1_800_000_000.0


def headers(**given: str) -> CIMultiDict[str]:
    return CIMultiDict({k.replace("_", "-"): v for k, v in given.items()})


def test_the_digest_is_hmac_sha256_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET, b"1800000000." + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, "1800000000", BODY) == "sha256=" + expected


def test_a_signed_delivery_in_the_window_is_verified() -> None:
    for skew in (-300, 0, 300):
        stamp = str(int(NOW) + skew)
        proof = verify(
            SECRET,
            headers(X_Hub_Signature_256=sign(SECRET, stamp, BODY), X_KAOS_Timestamp=stamp),
            BODY,
            now=NOW,
        )
        assert proof.timestamp == int(stamp)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({}, InvalidSignature),
        ({"X_Hub_Signature_256": "sha1=abc", "X_KAOS_Timestamp": "1800000000"}, InvalidSignature),
        ({"X_Hub_Signature_256": "sha256=" + "0" * 64, "X_KAOS_Timestamp": "1800000000"},
         InvalidSignature),
        ({"X_Hub_Signature_256": sign(SECRET, "1800000000", BODY)}, StaleTimestamp),
        ({"X_Hub_Signature_256": sign(SECRET, "1e9", BODY), "X_KAOS_Timestamp": "1e9"},
         StaleTimestamp),
        ({"X_Hub_Signature_256": sign(SECRET, "1799999699", BODY),
          "X_KAOS_Timestamp": "1799999699"}, StaleTimestamp),
        ({"X_Hub_Signature_256": sign(SECRET, "1800000301", BODY),
          "X_KAOS_Timestamp": "1800000301"}, StaleTimestamp),
        # GitHub's own form (the body alone) is not accepted.
        ({"X_Hub_Signature_256": "sha256=" + hmac.new(SECRET, BODY, "sha256").hexdigest(),
          "X_KAOS_Timestamp": "1800000000"}, InvalidSignature),
    ],
)  # fmt: skip
def test_bad_proofs_are_refused(given: dict[str, str], error: type[Exception]) -> None:
    with pytest.raises(error):
        verify(SECRET, headers(**given), BODY, now=NOW)


def test_a_repeated_signature_header_is_refused() -> None:
    value = sign(SECRET, "1800000000", BODY)
    given = CIMultiDict([("X-Hub-Signature-256", value), ("X-Hub-Signature-256", value)])
    given["X-KAOS-Timestamp"] = "1800000000"
    with pytest.raises(InvalidSignature):
        verify(SECRET, given, BODY, now=NOW)


def test_the_delivery_id_comes_from_kaos_or_github_header() -> None:
    assert delivery_id(headers(X_KAOS_Delivery="a-1", X_GitHub_Delivery="b")) == "a-1"
    assert delivery_id(headers(X_GitHub_Delivery="72d3162e-cc78-11e3")) == "72d3162e-cc78-11e3"
    for bad in ({}, {"X_KAOS_Delivery": "has space"}, {"X_KAOS_Delivery": "x" * 129}):
        with pytest.raises(BadDelivery):
            delivery_id(headers(**bad))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


async def test_the_memory_log_refuses_replays_and_keeps_the_rate() -> None:
    clock = Clock()
    log = MemoryDeliveryLog(clock=clock)

    def d(n: int, digest: str | None = None) -> Delivery:
        return Delivery("t", f"d-{n}", digest or f"g-{n}")

    assert await log.admit(d(1), max_per_minute=2) == Admission(admitted=True)
    assert await log.admit(d(1), max_per_minute=2) == Admission(replayed=True)
    assert await log.admit(d(9, "g-1"), max_per_minute=2) == Admission(replayed=True)
    clock.now += 20
    assert await log.admit(d(2), max_per_minute=2) == Admission(admitted=True)
    assert await log.admit(d(3), max_per_minute=2) == Admission(retry_after=40)
    # Another trigger has its own count.
    assert (await log.admit(Delivery("u", "d-3", "g-3"), max_per_minute=2)).admitted
    clock.now += 41
    assert await log.admit(d(3), max_per_minute=2) == Admission(admitted=True)
    await log.forget(d(3))
    assert await log.admit(d(3), max_per_minute=5) == Admission(admitted=True)
    clock.now += 601
    assert await log.admit(d(1), max_per_minute=2) == Admission(admitted=True)
