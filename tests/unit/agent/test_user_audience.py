"""A per-agent user audience at the agent's edge (``AGENT_USER_AUDIENCE`` a template): a
user's token sent to an agent must be meant for that agent, a token a verified agent
forwards for some agent; a literal audience behaves as one audience for all. The real
provider, processes and A2A are in tests/e2e/user_identity/test_agent_audience.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_agent.auth import EdgeAuth, UserAuth, own_audience
from kaos_agent.settings import AgentSettings
from kaos_core import wire
from kaos_core.auth.access import KubernetesAccess
from kaos_core.auth.callers import Caller
from kaos_core.auth.config import UserAudience, UserAuthSettings
from kaos_core.auth.invoke import ClaimMapping, InvokeAccess
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import Forbidden, HttpsSource, JwksVerifier, Unauthenticated
from kaos_core.settings import SettingsError

from tests.support.jwt_craft import jwks, sign

ISSUER = "https://idp.example.test"
PER_AGENT = "kaos.dev/agent/{namespace}/{name}"
RESEARCHER = "kaos://agent/ns/researcher"
CALLER = Caller(
    identity="kaos://agent/ns/coordinator", namespace="ns", serviceAccount="coordinator"
)
FOR_COORDINATOR = "kaos.dev/agent/ns/coordinator"
FOR_RESEARCHER = "kaos.dev/agent/ns/researcher"
BASE = {
    "MODEL_API_URL": "http://model:8000",
    "MODEL_NAME": "m",
    "AGENT_AUTH_MODE": "jwks",
    "AGENT_AUTH_ISSUER": "https://k8s.test",
    "AGENT_USER_ISSUER": ISSUER,
}


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(key: RSAPrivateKey, aud: Any, sub: str = "alice") -> str:
    now = int(time.time())
    return sign({"iss": ISSUER, "aud": aud, "sub": sub, "iat": now, "exp": now + 300}, key)


def user_auth(
    key: RSAPrivateKey,
    audience: str,
    identity: str | None = RESEARCHER,
    access: InvokeAccess | None = None,
) -> UserAuth:
    doc = jwks(key)

    async def source() -> Mapping[str, Any]:
        return doc

    settings = UserAuthSettings(issuer=ISSUER, audience=audience)
    verifier = UserVerifier(settings, keys=JwksVerifier(ISSUER, source=source))
    return UserAuth(verifier, identity, access)


@pytest.fixture
async def rbac() -> AsyncIterator[tuple[list[str], InvokeAccess]]:
    """The researcher's question to RBAC, answered by an API server that allows alice and
    records whom it was asked about."""
    asked: list[str] = []

    async def review(request: web.Request) -> web.Response:
        body = await request.json()
        asked.append(body["spec"]["user"])
        verdict = {"allowed": body["spec"]["user"] == "oidc:alice"}
        return web.json_response({**body, "status": verdict}, status=201)

    app = web.Application()
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    async with TestServer(app, host="127.0.0.1") as server:
        kube = KubernetesAccess(
            HttpsSource(ca_file=None, token_file=None), str(server.make_url("")).rstrip("/")
        )
        access = InvokeAccess(
            kube, ClaimMapping(username_prefix="oidc:"), namespace="ns", name="researcher"
        )
        try:
            yield asked, access
        finally:
            await access.close()


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


async def test_a_token_for_another_agent_is_refused_when_sent_directly(
    key: RSAPrivateKey,
) -> None:
    researcher = EdgeAuth(None, user_auth(key, PER_AGENT))
    assert researcher.users is not None and researcher.users.own_audience == FOR_RESEARCHER
    mine = await researcher.check(bearer(token(key, FOR_RESEARCHER)))
    assert (mine.principal, mine.caller) == ("alice", None)
    # Alice's token for the coordinator, replayed at the researcher by whoever holds it.
    for_coordinator = token(key, FOR_COORDINATOR)
    with pytest.raises(Unauthenticated) as refused:
        await researcher.check(bearer(for_coordinator))
    assert (refused.value.status, refused.value.code) == (401, "invalid_token")
    assert refused.value.message == (
        f"user token refused: token is not meant for audience {FOR_RESEARCHER}"
    )
    [(name, www)] = refused.value.headers
    assert name == "WWW-Authenticate"
    assert www.startswith('Bearer realm="kaos.dev/agent", error="invalid_token"')
    assert for_coordinator not in www
    # Neither is the one shared audience any more, nor a token listing no agent's.
    for aud in ("kaos", ["account"], "kaos.dev/agent/other-ns/researcher"):
        with pytest.raises(Unauthenticated, match="not meant for audience"):
            await researcher.check(bearer(token(key, aud)))
    # A token meant for several agents, this one among them, is meant for this one too.
    both = await researcher.check(bearer(token(key, [FOR_COORDINATOR, FOR_RESEARCHER])))
    assert both.principal == "alice"


async def test_a_verified_delegation_carries_a_token_meant_for_any_agent(
    key: RSAPrivateKey,
) -> None:
    users = user_auth(key, PER_AGENT)
    # The coordinator vouches for the user it acts for; the token was meant for it.
    delegated = await users.identify({wire.USER_TOKEN_HEADER: token(key, FOR_COORDINATOR)}, CALLER)
    assert (delegated.principal, delegated.caller) == ("alice", CALLER)
    # ...but a token meant for no agent is refused however it arrives.
    for aud in ("kaos", "kaos.dev/memory", ["account"]):
        with pytest.raises(Unauthenticated, match="not meant for audience") as refused:
            await users.identify({wire.USER_TOKEN_HEADER: token(key, aud)}, CALLER)
        assert refused.value.code == "invalid_token"
    # Without a verified caller, a forwarded-token header is not a way round the check.
    with pytest.raises(Unauthenticated) as missing:
        await users.identify({wire.USER_TOKEN_HEADER: token(key, FOR_COORDINATOR)}, None)
    assert missing.value.code == "missing_user_token"


async def test_the_callee_still_asks_rbac_about_the_user_a_delegation_carries(
    key: RSAPrivateKey, rbac: tuple[list[str], InvokeAccess]
) -> None:
    asked, access = rbac
    users = user_auth(key, PER_AGENT, access=access)
    for_coordinator = {wire.USER_TOKEN_HEADER: token(key, FOR_COORDINATOR)}
    assert (await users.identify(for_coordinator, CALLER)).principal == "alice"
    bob = {wire.USER_TOKEN_HEADER: token(key, FOR_COORDINATOR, sub="bob")}
    with pytest.raises(Forbidden) as refused:
        await users.identify(bob, CALLER)
    assert (refused.value.status, refused.value.code) == (403, "agent_not_granted")
    assert asked == ["oidc:alice", "oidc:bob"]


async def test_a_literal_audience_is_one_audience_for_every_agent(key: RSAPrivateKey) -> None:
    users = user_auth(key, "kaos")
    assert users.own_audience == "kaos"
    assert (await users.identify(bearer(token(key, "kaos")), None)).principal == "alice"
    delegated = await users.identify({wire.USER_TOKEN_HEADER: token(key, "kaos")}, CALLER)
    assert delegated.principal == "alice"
    for headers, caller in (
        (bearer(token(key, FOR_RESEARCHER)), None),
        ({wire.USER_TOKEN_HEADER: token(key, FOR_COORDINATOR)}, CALLER),
    ):
        with pytest.raises(Unauthenticated, match="not meant for audience kaos"):
            await users.identify(headers, caller)


def test_the_own_audience_is_rendered_from_the_identity() -> None:
    assert own_audience(UserAudience(PER_AGENT), RESEARCHER) == FOR_RESEARCHER
    assert own_audience(UserAudience("kaos"), None) == "kaos"
    with pytest.raises(ValueError, match="needs the agent's identity"):
        own_audience(UserAudience(PER_AGENT), None)


def test_a_per_agent_audience_is_checked_at_load() -> None:
    named = {**BASE, "AGENT_IDENTITY": RESEARCHER}
    loaded = AgentSettings.from_env({**named, "AGENT_USER_AUDIENCE": PER_AGENT})
    assert loaded.user_auth == UserAuthSettings(issuer=ISSUER, audience=PER_AGENT)
    refused = {
        "a per-agent AGENT_USER_AUDIENCE needs AGENT_IDENTITY": {
            **BASE,
            "AGENT_USER_AUDIENCE": PER_AGENT,
        },
        r"AGENT_USER_AUDIENCE: audience template 'kaos.dev/\{nmae\}' has a placeholder other"
        r" than \{namespace\}, \{name\}": {**named, "AGENT_USER_AUDIENCE": "kaos.dev/{nmae}"},
        "AGENT_USER_AUDIENCE: .* unmatched brace": {**named, "AGENT_USER_AUDIENCE": "kaos/{name"},
    }
    for message, env in refused.items():
        with pytest.raises(SettingsError, match=message):
            AgentSettings.from_env(env)
