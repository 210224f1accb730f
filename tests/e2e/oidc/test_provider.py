"""The OIDC test provider itself (``oidc_provider``: Ory Hydra and the fixture's login and
consent app) does what the user-identity tests rely on: it publishes its discovery document
and keys over TLS under the fixture's CA, gives alice and bob distinct, audience-bound
tokens that verify offline against its JWKS, refuses users it does not know, and signs with
a new key after a rotation."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from tests.support.oidc import (
    ACCESS_TOKEN_KEYS,
    ID_TOKEN_KEYS,
    LoginRefused,
    Provider,
    hydra_binary,
)

AUDIENCE = "kaos-oidc-test"


def fetch_json(url: str, context: ssl.SSLContext) -> Any:
    import json

    with urllib.request.urlopen(url, context=context, timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def verify_access(provider: Provider, token: str, audience: str = AUDIENCE) -> dict[str, Any]:
    """Verify as a resource server would: key by ``kid`` from the JWKS fetched over TLS."""
    keys = jwt.PyJWKClient(provider.jwks_url, ssl_context=provider.ssl_context())
    claims: dict[str, Any] = jwt.decode(
        token,
        keys.get_signing_key_from_jwt(token).key,
        algorithms=["RS256"],
        audience=audience,
        issuer=provider.issuer,
        options={"require": ["iss", "sub", "aud", "exp", "iat"]},
    )
    return claims


def kid(token: str) -> str:
    return str(jwt.get_unverified_header(token)["kid"])


def test_discovery_and_keys_are_served_over_tls_under_the_fixture_ca(
    oidc_provider: Provider,
) -> None:
    trusting = oidc_provider.ssl_context()
    discovery = fetch_json(oidc_provider.discovery_url, trusting)
    assert discovery["issuer"] == oidc_provider.issuer
    assert oidc_provider.issuer.startswith("https://127.0.0.1:")
    assert discovery["jwks_uri"] == oidc_provider.jwks_url
    assert discovery["jwks_uri"].startswith(oidc_provider.issuer + "/")
    assert "authorization_code" in discovery["grant_types_supported"]
    keys = fetch_json(oidc_provider.jwks_url, trusting)["keys"]
    assert keys, "the JWKS publishes no key"
    assert all(k["kty"] == "RSA" and k["use"] == "sig" and "d" not in k for k in keys)
    # The certificate chains to the fixture's CA only: the system's trust store refuses it.
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(oidc_provider.discovery_url, timeout=10)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_alice_and_bob_get_distinct_tokens_for_the_requested_audience(
    oidc_provider: Provider,
) -> None:
    alice = oidc_provider.token("alice", audience=AUDIENCE)
    bob = oidc_provider.token("bob", audience=AUDIENCE)
    alice_claims = verify_access(oidc_provider, alice.access_token)
    bob_claims = verify_access(oidc_provider, bob.access_token)
    assert (alice_claims["sub"], bob_claims["sub"]) == ("alice", "bob")
    assert alice_claims["aud"] == bob_claims["aud"] == [AUDIENCE]
    assert abs(alice.expires - alice_claims["exp"]) < 5
    # The ID tokens name the same users, for the OAuth2 client that ran the flow.
    for tokens, user, claims in ((alice, "alice", alice_claims), (bob, "bob", bob_claims)):
        id_claims = jwt.decode(
            tokens.id_token,
            jwt.PyJWKClient(oidc_provider.jwks_url, ssl_context=oidc_provider.ssl_context())
            .get_signing_key_from_jwt(tokens.id_token)
            .key,
            algorithms=["RS256"],
            audience=claims["client_id"],
            issuer=oidc_provider.issuer,
        )
        assert id_claims["sub"] == user


def test_a_token_is_bound_to_its_audience_only(oidc_provider: Provider) -> None:
    other = oidc_provider.token("alice", audience="some-other-service")
    assert verify_access(oidc_provider, other.access_token, "some-other-service")["sub"] == "alice"
    with pytest.raises(jwt.InvalidAudienceError):
        verify_access(oidc_provider, other.access_token, AUDIENCE)


def test_a_short_lifetime_is_what_the_token_says(oidc_provider: Provider) -> None:
    tokens = oidc_provider.token("bob", audience=AUDIENCE, lifetime=120)
    claims = verify_access(oidc_provider, tokens.access_token)
    # Not the default hour: at most 120 s past the exchange (``iat``, whole seconds).
    assert claims["exp"] - claims["iat"] <= 121
    assert claims["exp"] >= time.time()


@pytest.mark.parametrize("user", ["mallory", "", "Alice"])
def test_the_login_app_refuses_an_unknown_user(oidc_provider: Provider, user: str) -> None:
    with pytest.raises(LoginRefused) as refused:
        oidc_provider.token(user, audience=AUDIENCE)
    # Hydra hands the login app's own refusal back to the client.
    assert (refused.value.error, refused.value.description) == ("access_denied", "unknown user")


def test_after_a_rotation_new_tokens_carry_a_new_key_the_jwks_publishes(
    oidc_provider: Provider,
) -> None:
    before = oidc_provider.token("alice", audience=AUDIENCE)
    new = oidc_provider.rotate_keys()
    after = oidc_provider.token("alice", audience=AUDIENCE)
    assert kid(after.access_token) == new[ACCESS_TOKEN_KEYS] != kid(before.access_token)
    assert kid(after.id_token) == new[ID_TOKEN_KEYS] != kid(before.id_token)
    published = {k["kid"] for k in oidc_provider.jwks()["keys"]}
    assert {kid(after.access_token), kid(after.id_token)} <= published
    # Without retiring, the old key stays published: both tokens verify.
    assert verify_access(oidc_provider, before.access_token)["sub"] == "alice"
    assert verify_access(oidc_provider, after.access_token)["sub"] == "alice"


@pytest.fixture
def own_provider(tmp_path: Path) -> Iterator[Provider]:
    """A provider of this test's own: retiring keys would void the session's tokens."""
    provider = Provider(tmp_path / "oidc", hydra_binary()).start()
    try:
        yield provider
    finally:
        provider.stop()


def test_retiring_old_keys_removes_the_old_kid_from_the_jwks(own_provider: Provider) -> None:
    before = own_provider.token("bob", audience=AUDIENCE)
    new = own_provider.rotate_keys(retire_old=True)
    after = own_provider.token("bob", audience=AUDIENCE)
    keys = own_provider.jwks()["keys"]
    published = {k["kid"] for k in keys}
    assert published == {new[ACCESS_TOKEN_KEYS], new[ID_TOKEN_KEYS]}
    assert not any("d" in k or "p" in k for k in keys), "a private key part is published"
    assert kid(before.access_token) not in published
    assert verify_access(own_provider, after.access_token)["sub"] == "bob"
    with pytest.raises(jwt.PyJWKClientError):
        verify_access(own_provider, before.access_token)
    assert time.time() < before.expires  # refused for its key, not for its age
