"""The service-account token verifier's own logic, with keys made here: signature and
algorithm checks, every claim, the key cache and its bounded refetch, and the token file
a client re-reads when kubelet rotates it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core.auth.config import VerifierSettings
from kaos_core.auth.gate import build_verifier, jwks_url
from kaos_core.auth.tokenfile import TokenFile
from kaos_core.auth.verify import (
    FAILED_FETCH_RETRY,
    FETCH_TIMEOUT,
    KEY_REFETCH_INTERVAL,
    MAX_TOKEN_BYTES,
    JwksVerifier,
    Unauthenticated,
    VerifierUnavailable,
)

from tests.support.jwt_craft import (
    ISSUER,
    hs256_with_public_key,
    jwks,
    sa_claims,
    sign,
    tampered,
    unsigned,
)

AUDIENCE = "kaos.dev/memory"
NOW = 1_900_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class KeySource:
    """The issuer's key set as a test controls it; counts the fetches."""

    def __init__(self, doc: Mapping[str, Any] | None) -> None:
        self.doc = doc
        self.fetches = 0

    async def __call__(self) -> Mapping[str, Any]:
        self.fetches += 1
        if self.doc is None:
            raise VerifierUnavailable("issuer down")
        return self.doc


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def verifier(source: KeySource, clock: Clock, leeway: float = 30.0) -> JwksVerifier:
    return JwksVerifier(ISSUER, source=source, clock=clock, leeway=leeway)


async def test_a_valid_token_names_its_workload_and_pod(key: RSAPrivateKey) -> None:
    token = sign(sa_claims("team-a", "agent-x", now=NOW), key)

    workload = await verifier(KeySource(jwks(key)), Clock()).verify(token, AUDIENCE)

    assert (workload.namespace, workload.service_account) == ("team-a", "agent-x")
    assert (workload.pod_name, workload.pod_uid) == ("agent-pod-0", "0000-pod")
    assert workload.username == "system:serviceaccount:team-a:agent-x"
    assert workload.expires_at == NOW + 600


def _claims(**changes: Any) -> dict[str, Any]:
    claims = sa_claims("team-a", "agent-x", now=NOW)
    claims.update(changes)
    return claims


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (_claims(exp=int(NOW) - 31, iat=int(NOW) - 600, nbf=int(NOW) - 600), "expired"),
        (_claims(nbf=int(NOW) + 31), "not valid yet"),
        (_claims(iat=int(NOW) + 31), "issued in the future"),
        (_claims(iss="https://evil.example"), "another issuer"),
        (_claims(aud=["kaos.dev/agent"]), "audience kaos.dev/memory"),
        (_claims(aud="kaos.dev/memoryx"), "audience kaos.dev/memory"),
        (_claims(sub="system:serviceaccount:team-b:agent-x"), "disagree"),
        (_claims(sub="admin"), "not a service account"),
        ({k: v for k, v in _claims().items() if k != "exp"}, "no 'exp'"),
        ({k: v for k, v in _claims().items() if k != "kubernetes.io"}, "kubernetes.io"),
        (_claims(exp="tomorrow"), "not a number"),
    ],
    ids=[
        "expired",
        "not-yet-valid",
        "iat-future",
        "issuer",
        "agent-audience",
        "audience-prefix",
        "sub-mismatch",
        "not-sa",
        "no-exp",
        "no-k8s",
        "exp-string",
    ],
)
async def test_claims_are_checked(key: RSAPrivateKey, claims: dict[str, Any], message: str) -> None:
    with pytest.raises(Unauthenticated, match=message) as err:
        await verifier(KeySource(jwks(key)), Clock()).verify(sign(claims, key), AUDIENCE)
    assert err.value.status == 401


async def test_leeway_tolerates_small_skew_only(key: RSAPrivateKey) -> None:
    token = sign(_claims(exp=int(NOW) - 10, iat=int(NOW) - 600, nbf=int(NOW) - 600), key)
    assert await verifier(KeySource(jwks(key)), Clock(), leeway=30).verify(token, AUDIENCE)
    with pytest.raises(Unauthenticated, match="expired"):
        await verifier(KeySource(jwks(key)), Clock(), leeway=0).verify(token, AUDIENCE)


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (lambda k, o: unsigned(sign(_claims(), k)), "algorithm"),
        (lambda k, o: hs256_with_public_key(_claims(), k), "algorithm"),
        (lambda k, o: tampered(sign(_claims(), k), sub="system:serviceaccount:x:y"), "signature"),
        (lambda k, o: sign(_claims(), o, kid=jwks(k)["keys"][0]["kid"]), "signature"),
        (lambda k, o: "x" * (MAX_TOKEN_BYTES + 1), "larger than"),
        (lambda k, o: "not-a-jwt", "not a JWT"),
        (lambda k, o: "e30.e30.", "algorithm"),
    ],
    ids=["alg-none", "hs256-public-key", "tampered", "wrong-key", "huge", "garbage", "no-alg"],
)
async def test_forgeries_are_refused(
    key: RSAPrivateKey, other_key: RSAPrivateKey, forge: Any, message: str
) -> None:
    with pytest.raises(Unauthenticated, match=message):
        await verifier(KeySource(jwks(key)), Clock()).verify(forge(key, other_key), AUDIENCE)


async def test_unknown_key_ids_refetch_at_a_bounded_rate(
    key: RSAPrivateKey, other_key: RSAPrivateKey
) -> None:
    source, clock = KeySource(jwks(key)), Clock()
    v = verifier(source, clock)
    await v.verify(sign(_claims(), key), AUDIENCE)
    assert source.fetches == 1

    # The issuer rotated to a new key; the first token signed with it triggers a fetch...
    source.doc = jwks(other_key)
    clock.now += KEY_REFETCH_INTERVAL
    rotated = sign(_claims(), other_key)
    assert await v.verify(rotated, AUDIENCE)
    assert source.fetches == 2
    # ...but made-up key ids within the interval do not.
    for i in range(20):
        with pytest.raises(Unauthenticated, match="unknown key"):
            await v.verify(sign(_claims(), other_key, kid=f"made-up-{i}"), AUDIENCE)
    assert source.fetches == 2
    clock.now += KEY_REFETCH_INTERVAL
    with pytest.raises(Unauthenticated, match="unknown key"):
        await v.verify(sign(_claims(), other_key, kid="made-up"), AUDIENCE)
    assert source.fetches == 3


async def test_a_remembered_token_is_still_checked_on_every_call(
    key: RSAPrivateKey, other_key: RSAPrivateKey
) -> None:
    source, clock = KeySource(jwks(key)), Clock()
    v = verifier(source, clock)
    token = sign(_claims(), key)
    assert await v.verify(token, AUDIENCE)
    assert await v.verify(token, AUDIENCE)  # remembered: no new fetch, same answer
    assert source.fetches == 1

    # The audience is checked per call: the same bytes offered to another audience fail.
    with pytest.raises(Unauthenticated, match="audience"):
        await v.verify(token, "kaos.dev/agent")
    # So is the expiry: remembered signatures do not extend a token's life.
    clock.now += 600 + 31
    with pytest.raises(Unauthenticated, match="expired"):
        await v.verify(token, AUDIENCE)
    clock.now -= 600 + 31

    # A key the issuer no longer publishes voids what it verified.
    source.doc = jwks(other_key)
    clock.now += KEY_REFETCH_INTERVAL
    assert await v.verify(sign(_claims(), other_key), AUDIENCE)  # fetches the new key set
    with pytest.raises(Unauthenticated, match="unknown key"):
        await v.verify(token, AUDIENCE)


async def test_an_unreachable_issuer_is_unavailable_then_recovers(key: RSAPrivateKey) -> None:
    source, clock = KeySource(None), Clock()
    v = verifier(source, clock)
    token = sign(_claims(), key)
    with pytest.raises(VerifierUnavailable) as err:
        await v.verify(token, AUDIENCE)
    assert err.value.status == 503
    with pytest.raises(VerifierUnavailable):
        await v.verify(token, AUDIENCE)
    assert source.fetches == 1  # not retried within FAILED_FETCH_RETRY

    source.doc = jwks(key)
    clock.now += FAILED_FETCH_RETRY
    assert await v.verify(token, AUDIENCE)
    assert source.fetches == 2


class HangingSource:
    """An issuer whose key endpoint hangs for the whole fetch timeout, then fails: the
    hang passes on the injected clock; ``gate`` holds every fetch until the test lets go."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.fetches = 0
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def __call__(self) -> Mapping[str, Any]:
        self.fetches += 1
        self.entered.set()
        await self.gate.wait()
        self.clock.now += FETCH_TIMEOUT
        raise VerifierUnavailable("timed out")


async def test_a_cold_cache_waits_for_one_fetch_not_one_each(key: RSAPrivateKey) -> None:
    clock = Clock()
    source = HangingSource(clock)
    v = JwksVerifier(ISSUER, source=source, clock=clock)
    token = sign(_claims(), key)
    callers = [asyncio.create_task(v.verify(token, AUDIENCE)) for _ in range(4)]
    await source.entered.wait()
    source.gate.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)

    # All four waited for the one fetch and were answered together, 503.
    assert [type(o) for o in outcomes] == [VerifierUnavailable] * 4
    assert source.fetches == 1
    # The retry time counts from the failure, not from the start of the hung fetch: the
    # next caller is answered at once instead of waiting for a fetch of its own.
    with pytest.raises(VerifierUnavailable):
        await v.verify(token, AUDIENCE)
    assert source.fetches == 1
    clock.now += FAILED_FETCH_RETRY
    with pytest.raises(VerifierUnavailable):
        await v.verify(token, AUDIENCE)
    assert source.fetches == 2


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"keys": "garbage"},
        {"keys": []},
        {"keys": [1, "x", None, {"kty": "oct", "k": "c2VjcmV0"}, {"kty": "RSA", "n": "?"}]},
    ],
    ids=["empty", "keys-not-a-list", "no-keys", "unusable-keys"],
)
async def test_a_malformed_key_set_keeps_the_cached_keys(
    key: RSAPrivateKey, answer: dict[str, Any]
) -> None:
    source, clock = KeySource(jwks(key)), Clock()
    v = verifier(source, clock)
    assert await v.verify(sign(_claims(), key), AUDIENCE)

    # Anyone can force a refetch with an unknown key id; the issuer answers 200 with junk.
    source.doc = answer
    clock.now += KEY_REFETCH_INTERVAL
    with pytest.raises(VerifierUnavailable, match="no usable signing key"):
        await v.verify(sign(_claims(), key, kid="made-up"), AUDIENCE)
    assert source.fetches == 2
    # Every valid token still verifies: a fresh one (not remembered) against the cached key.
    fresh = sign(_claims(jti="another"), key)
    assert (await v.verify(fresh, AUDIENCE)).service_account == "agent-x"


def test_factory_and_key_location() -> None:
    assert build_verifier(VerifierSettings(mode="off")) is None
    with pytest.raises(ValueError, match="issuer"):
        build_verifier(VerifierSettings(mode="jwks"))
    with pytest.raises(ValueError, match="API server"):
        build_verifier(VerifierSettings(mode="tokenreview"))
    api = "https://kubernetes.default.svc"
    assert jwks_url(VerifierSettings(mode="jwks", issuer=ISSUER)) is None
    assert (
        jwks_url(VerifierSettings(mode="jwks", issuer=ISSUER, api_server=api))
        == f"{api}/openid/v1/jwks"
    )
    assert (
        jwks_url(
            VerifierSettings(mode="jwks", issuer=ISSUER, api_server=api, jwks_url="https://k/j")
        )
        == "https://k/j"
    )


def test_token_file_follows_rotation(tmp_path: Path) -> None:
    path = tmp_path / "token"
    tokens = TokenFile(path)
    assert tokens.read() is None
    path.write_text("first\n")
    assert tokens.read() == "first"
    # kubelet's atomic swap: a new file renamed over the old one.
    fresh = tmp_path / "token.new"
    fresh.write_text("second")
    os.replace(fresh, path)
    assert tokens.read() == "second"
    path.unlink()
    assert tokens.read() is None
