"""Verified agent identity on the memory service, against the test cluster's real issuer.

The real ``kaos-memory`` process runs in ``jwks`` mode (keys from the API server's
``/openid/v1/jwks``, fetched with the service's own token) and in ``tokenreview`` mode
(the API server reviews each token, the service's ServiceAccount bound to
``system:auth-delegator``). Tokens are minted by TokenRequest (``kubectl create token``)
for ServiceAccounts made here; the forgeries that need chosen claims are signed with the
cluster's own service-account key. A callers file lists one ServiceAccount as an agent.
Every refusal is checked for its status, JSON error and challenge, and for having
written nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core import wire
from kaos_core.auth import names
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient

from tests.fixtures.memory import MemoryServer, start_memory
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.jwt_craft import b64url_decode, hs256_with_public_key, sign, tampered, unsigned
from tests.support.procs import ServiceProcess, free_port
from tests.support.rawhttp import Answer, exchange

pytestmark = pytest.mark.cluster

MODES = ("jwks", "tokenreview")
AGENT_SA = "agent-a"
MEMORY_SA = "kaos-memory"


@dataclass
class World:
    cluster: Cluster
    ns: str
    other_ns: str
    tmp: Path
    sa_key: RSAPrivateKey | None

    @property
    def identity(self) -> str:
        return f"kaos://agent/{self.ns}/{AGENT_SA}"

    def mint(self, sa: str, *, ns: str | None = None, audience: str = names.MEMORY_AUDIENCE) -> str:
        args = ["create", "token", sa, "-n", ns or self.ns, "--duration", "10m"]
        if audience:
            args += ["--audience", audience]
        return self.cluster.kubectl(*args).stdout.strip()

    def claims_of(self, token: str) -> dict[str, Any]:
        claims = json.loads(b64url_decode(token.split(".")[1]))
        assert isinstance(claims, dict)
        return claims

    def resign(self, token: str, **changes: Any) -> str:
        """A real token's claims, changed, signed with the cluster's own key."""
        if self.sa_key is None:
            pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its signing key is not here")
        claims = self.claims_of(token)
        claims.update(changes)
        return sign(claims, self.sa_key)


@pytest.fixture(scope="module")
def world(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    suffix = uuid.uuid4().hex[:6]
    ns, other = f"mem-auth-{suffix}", f"mem-auth-other-{suffix}"
    key_file = None if k8s_cluster.workdir is None else k8s_cluster.workdir / "pki" / "sa.key"
    sa_key = None
    if key_file is not None:
        loaded = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        assert isinstance(loaded, RSAPrivateKey)
        sa_key = loaded
    for name in (ns, other):
        k8s_cluster.kubectl("create", "namespace", name)
    try:
        for sa in (AGENT_SA, "stranger", MEMORY_SA):
            k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
        k8s_cluster.kubectl("create", "serviceaccount", AGENT_SA, "-n", other)
        k8s_cluster.kubectl(
            "create", "clusterrolebinding", f"{ns}-auth-delegator",
            "--clusterrole=system:auth-delegator", f"--serviceaccount={ns}:{MEMORY_SA}",
        )  # fmt: skip
        yield World(k8s_cluster, ns, other, tmp_path_factory.mktemp("mem-auth"), sa_key)
    finally:
        k8s_cluster.kubectl("delete", "clusterrolebinding", f"{ns}-auth-delegator", check=False)
        for name in (ns, other):
            k8s_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _ca_file(world: World) -> Path:
    if world.cluster.workdir is not None:
        return world.cluster.workdir / "pki" / "ca.crt"
    raw = world.cluster.kubectl(
        "config", "view", "--raw", "--minify", "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ).stdout  # fmt: skip
    import base64

    path = world.tmp / "ca.crt"
    path.write_bytes(base64.b64decode(raw))
    return path


@pytest.fixture(scope="module", params=MODES)
def server(
    request: pytest.FixtureRequest, world: World, devmodel_server: ServiceProcess
) -> Iterator[MemoryServer]:
    mode = str(request.param)
    root = world.tmp / mode
    root.mkdir()
    # The service's own token (the API server's audience), as its pod would have it.
    own_token = root / "own-token"
    own_token.write_text(world.mint(MEMORY_SA, audience=""))
    callers = root / "callers.json"
    entry = {"identity": world.identity, "namespace": world.ns, "serviceAccount": AGENT_SA}
    callers.write_text(json.dumps({"callers": [entry]}))
    server = start_memory(
        backend="local",
        root=root,
        dsn=None,
        model_base_url=f"{devmodel_server.url}/v1",
        overrides={
            "auth_mode": mode,
            "auth_issuer": SERVICE_ACCOUNT_ISSUER,
            "auth_api_server": world.cluster.server,
            "auth_ca_file": _ca_file(world),
            "auth_token_file": own_token,
            "callers_file": callers,
        },
    )
    try:
        yield server
    finally:
        server.proc.kill()


def _mode(server: MemoryServer) -> str:
    return server.env["KAOS_MEMORY_AUTH_MODE"]


def _turn_count(server: MemoryServer) -> int:
    return len(server.db.turns()) + len(server.db.attribution())


async def _write(server: MemoryServer, headers: list[tuple[str, bytes]]) -> Answer:
    body = json.dumps({"turns": [{"role": "user", "content": "a secret"}]}).encode()
    base = [
        ("Content-Type", b"application/json"),
        ("X-Session-Id", uuid.uuid4().hex.encode()),
        ("X-Principal", b"alice"),
    ]
    return await exchange(server.url, "POST", "/v1/write", base + headers, body)


async def _refused(
    server: MemoryServer, headers: list[tuple[str, bytes]], status: int, code: str, message: str
) -> Answer:
    before = _turn_count(server)
    answer = await _write(server, headers)
    assert answer.status == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    assert message in error["message"], error
    if status == 401:
        challenge = answer.headers.get("www-authenticate", "")
        assert 'realm="kaos.dev/memory"' in challenge and f'error="{code}"' in challenge
    assert _turn_count(server) == before, "a refused request wrote something"
    return answer


def _token(value: str) -> list[tuple[str, bytes]]:
    return [(wire.AGENT_TOKEN_HEADER, value.encode())]


def _agent(world: World, identity: str | None = None) -> list[tuple[str, bytes]]:
    return [("X-Agent-Identity", (identity or world.identity).encode())]


# --------------------------------------------------------------------- the valid caller


async def test_a_bound_agent_writes_and_recalls(server: MemoryServer, world: World) -> None:
    token_file = world.tmp / f"agent-token-{_mode(server)}"
    token_file.write_text(world.mint(AGENT_SA))
    session = uuid.uuid4().hex
    # Without X-Agent-Identity: the identity is the token's, from the callers file.
    async with MemoryServiceClient(server.url, token_file=token_file, failure_mode="strict") as c:
        written = await c.write([("user", "my colour is teal")], session_id=session, principal="al")
        assert written.accepted == 1
        recalled = await c.recall("session", "colour", session_id=session, principal="al")
    assert [t.content for t in recalled.short_term.window] == ["my colour is teal"]
    rows = [r for r in server.db.turns() if r["content"] == "my colour is teal"]
    assert [r["agent"] for r in rows] == [world.identity]


async def test_a_token_re_signed_unchanged_is_accepted(server: MemoryServer, world: World) -> None:
    """The control for the forgeries below: the cluster's key and the minted claims verify."""
    token = world.resign(world.mint(AGENT_SA))
    answer = await _write(server, _token(token) + _agent(world))
    assert answer.status == 200, answer.text


# --------------------------------------------------------------------- 401: no identity


async def test_no_token_is_401_with_or_without_the_identity_header(
    server: MemoryServer, world: World
) -> None:
    await _refused(server, _agent(world), 401, "missing_token", "X-Agent-Token is required")
    # An admin call (no agent at all) needs a verified identity too.
    await _refused(server, [], 401, "missing_token", "admin access")


async def test_a_token_given_twice_is_401(server: MemoryServer, world: World) -> None:
    token = world.mint(AGENT_SA)
    await _refused(server, _token(token) * 2, 401, "invalid_token", "more than once")


# --------------------------------------------------------------------- 401: bad tokens


def _expect(server: MemoryServer, jwks_message: str) -> str:
    # The API server says only that it refused; the offline verifier says why.
    return jwks_message if _mode(server) == "jwks" else "not accepted by the API server"


async def test_an_expired_token_is_401(server: MemoryServer, world: World) -> None:
    now = int(time.time())
    token = world.resign(world.mint(AGENT_SA), iat=now - 1200, nbf=now - 1200, exp=now - 600)
    await _refused(server, _token(token), 401, "invalid_token", _expect(server, "expired"))


async def test_a_token_not_yet_valid_is_401(server: MemoryServer, world: World) -> None:
    now = int(time.time())
    token = world.resign(world.mint(AGENT_SA), nbf=now + 600, exp=now + 1200)
    await _refused(server, _token(token), 401, "invalid_token", _expect(server, "not valid yet"))


async def test_a_token_of_another_issuer_is_401(server: MemoryServer, world: World) -> None:
    token = world.resign(world.mint(AGENT_SA), iss="https://issuer.example")
    await _refused(server, _token(token), 401, "invalid_token", _expect(server, "another issuer"))


@pytest.mark.parametrize("audience", [names.AGENT_AUDIENCE, ""], ids=["agent", "api-server"])
async def test_a_token_for_another_audience_is_401(
    server: MemoryServer, world: World, audience: str
) -> None:
    token = world.mint(AGENT_SA, audience=audience)
    message = "audience kaos.dev/memory"
    await _refused(server, _token(token), 401, "invalid_token", _expect(server, message))


async def test_forged_tokens_are_401(server: MemoryServer, world: World) -> None:
    token = world.mint(AGENT_SA)
    if world.sa_key is None:
        pytest.skip("needs the cluster's signing key")
    forgeries = {
        "alg-none": (unsigned(token), "algorithm"),
        "tampered": (
            tampered(token, sub=f"system:serviceaccount:{world.ns}:stranger"),
            "signature",
        ),
        "hs256-public-key": (
            hs256_with_public_key(world.claims_of(token), world.sa_key),
            "algorithm",
        ),
    }
    for name, (forged, message) in forgeries.items():
        answer = await _refused(
            server, _token(forged), 401, "invalid_token", _expect(server, message)
        )
        assert answer.status == 401, name


async def test_an_oversized_token_is_refused_before_parsing(
    server: MemoryServer, world: World
) -> None:
    # 64 KiB fits the header limit (KAOS_HTTP_MAX_HEADER_BYTES, 72 KiB): the verifier
    # refuses it by its size (16 KiB cap in kaos_core.auth.verify) before any parsing.
    before = _turn_count(server)
    await _refused(server, _token("a" * 65536), 401, "invalid_token", "larger than")
    await _refused(server, _token("e30." + "a" * 20000 + ".x"), 401, "invalid_token", "larger")
    assert _turn_count(server) == before


# --------------------------------------------------------------------- 403: not this store's


async def test_a_service_account_not_in_the_callers_file_is_403(
    server: MemoryServer, world: World
) -> None:
    token = world.mint("stranger")
    await _refused(server, _token(token), 403, "caller_not_allowed", f"{world.ns}/stranger")


async def test_another_namespaces_agent_is_403(server: MemoryServer, world: World) -> None:
    token = world.mint(AGENT_SA, ns=world.other_ns)
    other = f"kaos://agent/{world.other_ns}/{AGENT_SA}"
    await _refused(
        server, _token(token) + _agent(world, other), 403, "caller_not_allowed", world.other_ns
    )


async def test_a_differing_identity_header_is_403(server: MemoryServer, world: World) -> None:
    token = world.mint(AGENT_SA)
    claimed = _agent(world, f"kaos://agent/{world.ns}/someone-else")
    await _refused(server, _token(token) + claimed, 403, "identity_mismatch", world.identity)


# --------------------------------------------------------------------- rotation


async def test_a_rotated_token_file_never_fails_a_request(
    server: MemoryServer, world: World
) -> None:
    token_file = world.tmp / f"rotating-{_mode(server)}"
    token_file.write_text(world.mint(AGENT_SA))
    session = uuid.uuid4().hex
    rotations = 3
    done = asyncio.Event()
    written = 0

    async def rotate() -> None:
        for i in range(rotations):
            fresh = await asyncio.to_thread(world.mint, AGENT_SA)
            staged = token_file.with_name(f"{token_file.name}.{i}")
            staged.write_text(fresh)
            os.replace(staged, token_file)  # kubelet's swap is atomic too
        done.set()

    async with MemoryServiceClient(server.url, token_file=token_file, failure_mode="strict") as c:
        rotator = asyncio.create_task(rotate())
        # Writes run until every rotation landed, and a few beyond it.
        while not done.is_set() or written < 3 * rotations:
            try:
                answer = await c.write([("user", f"turn {written}")], session_id=session)
            except MemoryRequestRejected as exc:  # pragma: no cover - the failure being tested
                raise AssertionError(f"request {written} refused: {exc}") from exc
            assert answer.accepted == 1 and not answer.degraded
            written += 1
        await rotator
    rows = [r for r in server.db.turns() if r["agent"] == world.identity]
    assert len([r for r in rows if str(r["content"]).startswith("turn ")]) >= written


async def test_an_unreachable_issuer_is_503_and_the_service_stays_ready(
    world: World, devmodel_server: ServiceProcess
) -> None:
    root = world.tmp / "unreachable"
    root.mkdir()
    closed = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    server = start_memory(
        backend="local",
        root=root,
        dsn=None,
        model_base_url=f"{devmodel_server.url}/v1",
        overrides={"auth_mode": "jwks", "auth_issuer": SERVICE_ACCOUNT_ISSUER,
                   "auth_api_server": closed, "callers_file": root / "callers.json"},
    )  # fmt: skip
    try:
        assert (await exchange(server.url, "GET", "/readyz", [])).status == 200
        await _refused(server, _token(world.mint(AGENT_SA)), 503, "auth_unavailable", closed)
    finally:
        server.proc.kill()
