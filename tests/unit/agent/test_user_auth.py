"""Verified user identity at the agent's edge, without a provider: the settings, what
``UserAuth.identify`` decides for end users and delegations, the RFC 6750 challenge, the
run context it yields and the headers a delegation forwards. The real provider (Ory
Hydra), real processes and real tokens are in tests/e2e/user_identity."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_agent.auth import UserAuth
from kaos_agent.context import Verified, run_context
from kaos_agent.delegation import delegation_headers
from kaos_agent.settings import AgentSettings
from kaos_core import wire
from kaos_core.auth.callers import Caller
from kaos_core.auth.config import UserAuthSettings
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import Forbidden, JwksVerifier, Unauthenticated
from kaos_core.errors import BadRequest
from kaos_core.settings import SettingsError
from multidict import CIMultiDict

from tests.support.jwt_craft import jwks, sign

ISSUER = "https://idp.example.test"
OWN = "kaos://agent/ns/researcher"
CALLER = Caller(
    identity="kaos://agent/ns/coordinator", namespace="ns", serviceAccount="coordinator"
)
BASE = {
    "MODEL_API_URL": "http://model:8000",
    "MODEL_NAME": "m",
    "AGENT_AUTH_MODE": "jwks",
    "AGENT_AUTH_ISSUER": "https://k8s.test",
}


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(key: RSAPrivateKey, sub: str = "alice", **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": "kaos", "sub": sub, "iat": now, "exp": now + 300}
    claims.update(changes)
    return sign(claims, key)


@pytest.fixture
def users(key: RSAPrivateKey) -> UserAuth:
    doc = jwks(key)

    async def source() -> Mapping[str, Any]:
        return doc

    settings = UserAuthSettings(issuer=ISSUER, audience="kaos")
    return UserAuth(UserVerifier(settings, keys=JwksVerifier(ISSUER, source=source)), OWN)


def test_user_identity_settings() -> None:
    assert AgentSettings.from_env(BASE).user_auth is None
    on = AgentSettings.from_env(
        {**BASE, "AGENT_USER_ISSUER": ISSUER, "AGENT_USER_AUDIENCE": "kaos-gw"}
    ).user_auth
    assert on == UserAuthSettings(issuer=ISSUER, audience="kaos-gw", principal_claim="sub")
    refused = {
        "AGENT_USER_AUDIENCE": {"AGENT_USER_ISSUER": ISSUER},
        "must be an https": {"AGENT_USER_ISSUER": "http://idp", "AGENT_USER_AUDIENCE": "a"},
        "AGENT_AUTH_MODE": {
            "AGENT_AUTH_MODE": "off",
            "AGENT_USER_ISSUER": ISSUER,
            "AGENT_USER_AUDIENCE": "a",
        },
    }
    for message, extra in refused.items():
        with pytest.raises(SettingsError, match=message):
            AgentSettings.from_env({**BASE, **extra})


async def test_an_end_user_is_the_principal_of_their_token(
    users: UserAuth, key: RSAPrivateKey
) -> None:
    alice = token(key)
    verified = await users.identify({"Authorization": f"Bearer {alice}"}, None)
    assert (verified.principal, verified.user_token, verified.caller) == ("alice", alice, None)
    assert alice not in repr(verified)
    deps = run_context({}, request_id="r", verified=verified)
    assert (deps.principal, deps.user_token) == ("alice", alice)
    assert alice not in repr(deps)


async def test_an_end_user_without_a_token_gets_a_bearer_challenge(
    users: UserAuth, key: RSAPrivateKey
) -> None:
    with pytest.raises(Unauthenticated) as missing:
        await users.identify({}, None)
    assert missing.value.code == "missing_user_token"
    assert missing.value.headers == [("WWW-Authenticate", 'Bearer realm="kaos.dev/agent"')]

    with pytest.raises(Unauthenticated) as expired:
        await users.identify({"Authorization": f"Bearer {token(key, exp=1, iat=0)}"}, None)
    assert expired.value.status == 401
    [(name, www)] = expired.value.headers
    assert name == "WWW-Authenticate"
    assert www.startswith('Bearer realm="kaos.dev/agent", error="invalid_token"')
    assert "expired" in www

    with pytest.raises(BadRequest) as basic:
        await users.identify({"Authorization": "Basic YWxpY2U6cHc="}, None)
    assert basic.value.code == "invalid_request"


async def test_x_principal_is_refused_from_end_users(users: UserAuth, key: RSAPrivateKey) -> None:
    headers = {"Authorization": f"Bearer {token(key)}", "X-Principal": "bob"}
    with pytest.raises(BadRequest) as err:
        await users.identify(headers, None)
    assert (err.value.status, err.value.code) == (400, "principal_header_refused")


async def test_a_delegation_carries_the_user_or_self_subjects(
    users: UserAuth, key: RSAPrivateKey
) -> None:
    alice = token(key)
    forwarded = await users.identify({wire.USER_TOKEN_HEADER: alice}, CALLER)
    assert (forwarded.principal, forwarded.caller) == ("alice", CALLER)
    # The caller's principal header must agree with the token it forwards...
    agreeing = {wire.USER_TOKEN_HEADER: alice, "X-Principal": "alice"}
    assert (await users.identify(agreeing, CALLER)).principal == "alice"
    with pytest.raises(Forbidden) as mismatch:
        await users.identify({wire.USER_TOKEN_HEADER: alice, "X-Principal": "bob"}, CALLER)
    assert mismatch.value.code == "principal_mismatch"
    # ...and without a token the run acts for this agent, whatever the header says.
    alone = await users.identify({"X-Principal": "bob"}, CALLER)
    assert (alone.principal, alone.user_token) == (OWN, None)
    with pytest.raises(Unauthenticated, match="expired") as refused:
        await users.identify({wire.USER_TOKEN_HEADER: token(key, exp=1, iat=0)}, CALLER)
    [(name, www)] = refused.value.headers
    assert (name, www.split(",")[0]) == ("WWW-Authenticate", 'Bearer realm="kaos.dev/agent"')
    twice = CIMultiDict([(wire.USER_TOKEN_HEADER, alice), (wire.USER_TOKEN_HEADER, alice)])
    with pytest.raises(Unauthenticated, match="more than once"):
        await users.identify(twice, CALLER)


def test_a_delegation_forwards_the_users_token() -> None:
    deps = run_context({}, request_id="r1")
    assert wire.USER_TOKEN_HEADER not in delegation_headers(deps, 1)
    verified = Verified(derived=True, principal="alice", user_token="t.o.k")
    headers = delegation_headers(run_context({}, request_id="r1", verified=verified), 1)
    assert headers[wire.USER_TOKEN_HEADER] == "t.o.k"
    assert headers["X-Principal"] == "alice"
