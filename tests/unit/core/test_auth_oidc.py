"""End users' OIDC tokens (``kaos_core.auth.oidc``), with keys made here: every claim, the
forgeries, a service-account token offered as a user's, key rotation, the bearer header
and its RFC 6750 challenge. The real provider (Ory Hydra) is in tests/e2e/user_identity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core.auth.config import UserAuthSettings
from kaos_core.auth.oidc import UserVerifier, bearer_challenge, bearer_token
from kaos_core.auth.verify import KEY_REFETCH_INTERVAL, JwksVerifier, Unauthenticated
from kaos_core.errors import BadRequest

from tests.support.jwt_craft import hs256_with_public_key, jwks, sa_claims, sign, tampered, unsigned

ISSUER = "https://idp.example.test/realms/kaos"
AUDIENCE = "kaos"
NOW = 1_900_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Keys:
    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self.fetches = 0

    async def __call__(self) -> Mapping[str, Any]:
        self.fetches += 1
        return self.doc


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def claims(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": [AUDIENCE, "account"],
        "sub": "alice",
        "email": "alice@example.test",
        "iat": int(NOW),
        "nbf": int(NOW),
        "exp": int(NOW) + 300,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def verifier(
    keys: Keys, clock: Clock, claim: str = "sub", authorized_party: str | None = None
) -> UserVerifier:
    settings = UserAuthSettings(
        issuer=ISSUER, audience=AUDIENCE, principal_claim=claim, authorized_party=authorized_party
    )
    jwks_verifier = JwksVerifier(ISSUER, source=keys, clock=clock)
    return UserVerifier(settings, keys=jwks_verifier, clock=clock)


async def test_the_principal_is_the_configured_claim(key: RSAPrivateKey) -> None:
    token = sign(claims(), key)
    user = await verifier(Keys(jwks(key)), Clock()).verify(token)
    assert (user.principal, user.expires_at, user.token) == ("alice", NOW + 300, token)
    assert token not in repr(user)
    by_email = await verifier(Keys(jwks(key)), Clock(), claim="email").verify(token)
    assert by_email.principal == "alice@example.test"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"iss": "https://evil.example.test"}, "another issuer"),
        ({"aud": "other-app"}, "audience kaos"),
        ({"aud": None}, "audience kaos"),
        ({"exp": int(NOW) - 31, "iat": int(NOW) - 600, "nbf": int(NOW) - 600}, "expired"),
        ({"nbf": int(NOW) + 31}, "not valid yet"),
        ({"iat": None}, "no 'iat'"),
        ({"sub": None}, "no string 'sub'"),
        ({"sub": 42}, "no string 'sub'"),
        ({"sub": "*"}, "not a usable principal"),
        ({"sub": "a\u200bb"}, "not a usable principal"),
        ({"sub": "system:serviceaccount:team-a:billing"}, "service-account token"),
        # An agent's own identity is the principal of its self-subjected runs: a user who
        # could claim it would be the agent, its memory included.
        ({"sub": "kaos://agent/team-a/coordinator"}, "reserved for agents"),
        ({"sub": " KAOS://agent/team-a/coordinator"}, "reserved for agents"),
        ({"sub": "kaos:anything"}, "reserved for agents"),
        ({"sub": "system:admin"}, "reserved for agents"),
        ({"sub": "System:Masters"}, "reserved for agents"),
    ],
)
async def test_claims_are_checked(
    key: RSAPrivateKey, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(Unauthenticated, match=message):
        await verifier(Keys(jwks(key)), Clock()).verify(sign(claims(**changes), key))


async def test_forgeries_and_service_account_tokens_are_refused(
    key: RSAPrivateKey, other_key: RSAPrivateKey
) -> None:
    v = verifier(Keys(jwks(key)), Clock())
    real = sign(claims(), key)
    forged = {
        "alg none": (unsigned(real), "algorithm"),
        "HS256 with the public key": (hs256_with_public_key(claims(), key), "algorithm"),
        "tampered": (tampered(real, sub="bob"), "signature"),
        "another key": (sign(claims(), other_key), "unknown key"),
        # A Kubernetes projected token of the same issuer, audience and lifetime.
        "service account": (
            sign(sa_claims("team-a", "billing", now=NOW, audience=AUDIENCE, issuer=ISSUER), key),
            "service-account token",
        ),
    }
    for name, (token, message) in forged.items():
        with pytest.raises(Unauthenticated, match=message):
            await v.verify(token)
        assert name


async def test_a_key_rotated_at_the_provider_is_followed(
    key: RSAPrivateKey, other_key: RSAPrivateKey
) -> None:
    keys, clock = Keys(jwks(key)), Clock()
    v = verifier(keys, clock)
    assert (await v.verify(sign(claims(), key))).principal == "alice"
    keys.doc = jwks(other_key)
    clock.now += KEY_REFETCH_INTERVAL
    assert (await v.verify(sign(claims(sub="bob"), other_key))).principal == "bob"
    assert keys.fetches == 2
    # The retired key no longer verifies anything.
    with pytest.raises(Unauthenticated, match="unknown key"):
        await v.verify(sign(claims(), key))


def test_the_bearer_header_and_its_challenge() -> None:
    assert bearer_token(None) is None
    assert bearer_token("Bearer  abc.def.ghi ") == "abc.def.ghi"
    assert bearer_token("bearer abc") == "abc"
    for bad in ("Basic dXNlcjpwdw==", "abc.def.ghi", "Bearer", "Bearer   "):
        with pytest.raises(BadRequest) as err:
            bearer_token(bad)
        assert err.value.code == "invalid_request"
    assert bearer_challenge("kaos.dev/agent") == 'Bearer realm="kaos.dev/agent"'
    assert bearer_challenge("r", "invalid_token", 'say "no"') == (
        'Bearer realm="r", error="invalid_token", error_description="say \'no\'"'
    )


@pytest.mark.parametrize(
    ("changes", "accepted"),
    [
        ({"azp": "kaos-console"}, True),
        # An RFC 9068 access token names its client in client_id.
        ({"client_id": "kaos-console"}, True),
        ({"azp": "another-app"}, False),
        ({"azp": "another-app", "client_id": "kaos-console"}, False),
        ({}, False),
    ],
    ids=["azp", "client-id", "other-azp", "azp-wins", "none"],
)
async def test_the_authorized_party_is_checked_when_configured(
    key: RSAPrivateKey, changes: dict[str, Any], accepted: bool
) -> None:
    token = sign(claims(**changes), key)
    v = verifier(Keys(jwks(key)), Clock(), authorized_party="kaos-console")
    if accepted:
        assert (await v.verify(token)).principal == "alice"
    else:
        with pytest.raises(Unauthenticated, match="another client"):
            await v.verify(token)
    # Without the setting, any client of the issuer is accepted.
    assert (await verifier(Keys(jwks(key)), Clock()).verify(token)).principal == "alice"
