"""Who may read an agent's token usage (``GET /v1/usage``, ``kaos_agent.usage.http``):
under verified user identity with RBAC, whoever RBAC allows ``get`` on ``agents/usage`` of
this Agent reads every user's rows and nobody else any (invoking it is not enough);
without RBAC a verified user reads only their own rows; without a token, 401; with no
verified identity at all (development), anyone."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_agent.auth import EdgeAuth, UserAuth
from kaos_agent.usage.http import reader
from kaos_core.auth.access import KubernetesAccess
from kaos_core.auth.config import UserAuthSettings
from kaos_core.auth.invoke import ClaimMapping, InvokeAccess
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import HttpsSource, JwksVerifier, Unauthenticated
from kaos_core.errors import Forbidden

from tests.support.jwt_craft import jwks, sign

ISSUER = "https://idp.example.test"
AUDIENCE = "kaos"
# (user, verb, subresource) the API server allows.
GRANTS = {("oidc:alice", "create", "invoke"), ("oidc:carol", "get", "usage")}


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def bearer(key: RSAPrivateKey, sub: str) -> dict[str, str]:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300}
    return {"Authorization": f"Bearer {sign(claims, key)}"}


def users(key: RSAPrivateKey, access: InvokeAccess | None) -> EdgeAuth:
    doc = jwks(key)

    async def source() -> Mapping[str, Any]:
        return doc

    verifier = UserVerifier(
        UserAuthSettings(issuer=ISSUER, audience=AUDIENCE),
        keys=JwksVerifier(ISSUER, source=source),
    )
    return EdgeAuth(None, UserAuth(verifier, "kaos://agent/ns/billing", access))


@pytest.fixture
async def access() -> AsyncIterator[InvokeAccess]:
    async def review(request: web.Request) -> web.Response:
        body = await request.json()
        spec = body["spec"]
        attrs = spec["resourceAttributes"]
        allowed = (spec["user"], attrs["verb"], attrs.get("subresource", "")) in GRANTS
        return web.json_response({**body, "status": {"allowed": allowed}}, status=201)

    app = web.Application()
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    async with TestServer(app, host="127.0.0.1") as server:
        kube = KubernetesAccess(
            HttpsSource(ca_file=None, token_file=None), str(server.make_url("")).rstrip("/")
        )
        made = InvokeAccess(
            kube, ClaimMapping(username_prefix="oidc:"), namespace="ns", name="billing"
        )
        try:
            yield made
        finally:
            await made.close()


async def test_with_rbac_only_a_granted_reader_reads(
    key: RSAPrivateKey, access: InvokeAccess
) -> None:
    auth = users(key, access)
    assert await reader(auth, bearer(key, "carol"), None) is None  # every user's rows
    assert await reader(auth, bearer(key, "carol"), "alice") == "alice"
    # Alice may invoke the agent, not read its usage; bob may do neither.
    for who in ("alice", "bob"):
        with pytest.raises(Forbidden) as refused:
            await reader(auth, bearer(key, who), who)
        assert refused.value.code == "agent_not_granted"
        assert "get agents.kaos.tools/usage" in refused.value.message
    with pytest.raises(Unauthenticated) as missing:
        await reader(auth, {}, None)
    assert missing.value.status == 401
    assert missing.value.headers[0][0] == "WWW-Authenticate"


async def test_without_rbac_a_user_reads_their_own_rows_only(key: RSAPrivateKey) -> None:
    auth = users(key, None)
    assert await reader(auth, bearer(key, "bob"), None) == "bob"
    assert await reader(auth, bearer(key, "bob"), "bob") == "bob"
    with pytest.raises(Forbidden) as refused:
        await reader(auth, bearer(key, "bob"), "alice")
    assert refused.value.code == "usage_not_granted"


async def test_without_verified_identity_anyone_reads() -> None:
    assert await reader(None, {}, None) is None
    assert await reader(None, {}, "alice") == "alice"
