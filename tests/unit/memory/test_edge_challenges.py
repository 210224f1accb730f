"""The memory service's edge answers through the one error middleware: every refusal is
the JSON error shape, a 401 carries its ``WWW-Authenticate`` challenges (the agent's
scheme, and the admin's ``Bearer`` when neither credential was sent), and the principal
under verified user identity is the forwarded token's. Driven in process over HTTP with a
fake service-account verifier and real user tokens signed with a test key."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core.auth.callers import CallersFile
from kaos_core.auth.config import UserAuthSettings
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import JwksVerifier, Unauthenticated, VerifiedWorkload
from kaos_core.http import create_base_app
from kaos_core.http.limits import HttpLimits
from kaos_core.telemetry.settings import TelemetrySettings
from kaos_memory.admin import AdminGate
from kaos_memory.auth import MemoryAuth
from kaos_memory.settings import AdminSettings

from tests.support.jwt_craft import jwks, sign

ISSUER = "https://idp.example.test"
AGENT = "kaos://agent/ns/a"
AGENT_CHALLENGE = 'KaosAgentToken realm="kaos.dev/memory", header="X-Agent-Token", error="{}"'
ADMIN_CHALLENGE = 'Bearer realm="kaos.dev/memory", error="{}"'


class FakeVerifier:
    """Accepts ``good-<sa>`` as ServiceAccount ``<sa>`` of namespace ``ns``."""

    async def verify(self, token: str, audience: str) -> VerifiedWorkload:
        if not token.startswith("good-"):
            raise Unauthenticated("bad token")
        return VerifiedWorkload("ns", token.removeprefix("good-"))

    async def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def user_token(key: RSAPrivateKey, sub: str = "alice", **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": "kaos", "sub": sub, "iat": now, "exp": now + 300}
    claims.update(changes)
    return sign(claims, key)


@pytest.fixture
async def client(tmp_path: Path, key: RSAPrivateKey) -> AsyncIterator[TestClient[Any, Any]]:
    callers = tmp_path / "callers.json"
    entry = {"identity": AGENT, "namespace": "ns", "serviceAccount": "a"}
    callers.write_text(json.dumps({"callers": [entry]}))
    auth = MemoryAuth(FakeVerifier(), CallersFile(callers))
    doc = jwks(key)

    async def source() -> Mapping[str, Any]:
        return doc

    settings = UserAuthSettings(issuer=ISSUER, audience="kaos")
    auth.users = UserVerifier(settings, keys=JwksVerifier(ISSUER, source=source))
    # No store or API server: admin calls are refused, their credential checked first.
    auth.admin = AdminGate(None, AdminSettings(None, None, None, None, None))

    async def identify(request: web.Request) -> web.Response:
        identity = await auth.identify(request)
        return web.json_response({"agent": identity.agent, "principal": identity.principal})

    app = create_base_app(
        "memory-edge-test",
        limits=HttpLimits.from_env({}),
        telemetry=TelemetrySettings.from_env({}),
    )
    app.router.add_post("/v1/list", identify)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client
    await auth.close()


async def _post(
    client: TestClient[Any, Any], headers: Mapping[str, str]
) -> tuple[int, dict[str, Any], list[str]]:
    async with client.post("/v1/list", headers=dict(headers)) as resp:
        return resp.status, await resp.json(), resp.headers.getall("WWW-Authenticate", [])


async def test_neither_credential_offers_both_schemes(client: TestClient[Any, Any]) -> None:
    status, doc, challenges = await _post(client, {})
    assert (status, doc["error"]["code"]) == (401, "missing_token")
    assert doc["request_id"]
    assert challenges == [
        AGENT_CHALLENGE.format("missing_token"),
        ADMIN_CHALLENGE.format("missing_token"),
    ]


async def test_a_refused_agent_token_carries_the_agents_scheme(
    client: TestClient[Any, Any],
) -> None:
    status, doc, challenges = await _post(client, {"X-Agent-Token": "forged"})
    assert (status, doc["error"]["code"]) == (401, "invalid_token")
    assert challenges == [AGENT_CHALLENGE.format("invalid_token")]


async def test_a_refused_admin_credential_carries_the_bearer_scheme(
    client: TestClient[Any, Any],
) -> None:
    status, doc, challenges = await _post(client, {"Authorization": "Basic eDp5"})
    assert (status, doc["error"]["code"]) == (401, "invalid_request")
    assert challenges == [ADMIN_CHALLENGE.format("invalid_request")]
    status, doc, challenges = await _post(client, {"Authorization": "Bearer abc"})
    assert (status, doc["error"]["code"]) == (403, "admin_not_configured")
    assert challenges == []


async def test_the_principal_is_the_forwarded_users(
    client: TestClient[Any, Any], key: RSAPrivateKey
) -> None:
    agent = {"X-Agent-Token": "good-a"}
    alice = user_token(key)
    status, doc, _ = await _post(client, {**agent, "X-User-Token": alice})
    assert (status, doc) == (200, {"agent": AGENT, "principal": "alice"})
    status, doc, _ = await _post(client, {**agent, "X-User-Token": alice, "X-Principal": "alice"})
    assert (status, doc["principal"]) == (200, "alice")
    # Without a forwarded token only the agent itself may be the principal.
    status, doc, _ = await _post(client, agent)
    assert (status, doc["principal"]) == (200, AGENT)


async def test_principal_refusals(client: TestClient[Any, Any], key: RSAPrivateKey) -> None:
    agent = {"X-Agent-Token": "good-a"}
    status, doc, challenges = await _post(client, {**agent, "X-Principal": "bob"})
    assert (status, doc["error"]["code"], challenges) == (403, "principal_not_proven", [])
    mismatch = {**agent, "X-User-Token": user_token(key), "X-Principal": "bob"}
    status, doc, challenges = await _post(client, mismatch)
    assert (status, doc["error"]["code"], challenges) == (403, "principal_mismatch", [])
    expired = {**agent, "X-User-Token": user_token(key, exp=1, iat=0)}
    status, doc, challenges = await _post(client, expired)
    assert (status, doc["error"]["code"]) == (401, "invalid_token")
    assert doc["error"]["message"].startswith("user token refused:")
    assert challenges == [AGENT_CHALLENGE.format("invalid_token")]
