"""Verified agent identity on the agent's side, without a cluster: the settings, the
decision ``AgentAuth.check`` makes for each kind of request, and the token ``PeerClient``
presents. The real issuer, real processes and real tokens are in
``tests/e2e/cluster/test_agent_peer_tokens.py``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_agent.auth import AgentAuth, claims_delegation
from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClient, PeerUnavailable
from kaos_agent.settings import AgentSettings
from kaos_core import wire
from kaos_core.auth import names
from kaos_core.auth.callers import CallersFile
from kaos_core.auth.verify import Forbidden, Unauthenticated, VerifiedWorkload
from kaos_core.endpoints import Endpoint
from kaos_core.errors import BadRequest
from kaos_core.settings import SettingsError
from multidict import CIMultiDict

from tests.support.procs import console_script

BASE = {"MODEL_API_URL": "http://model:8000", "MODEL_NAME": "m"}
IDENTITY_A = "kaos://agent/ns/a"


# --------------------------------------------------------------------- settings


def test_auth_is_off_by_default_and_viewed_as_one_concern() -> None:
    s = AgentSettings.from_env(BASE)
    assert s.auth.mode == "off"
    assert s.auth.callers_file == Path(names.CALLERS_PATH)
    assert s.delegation.token_file is None
    on = AgentSettings.from_env(
        {
            **BASE,
            "AGENT_AUTH_MODE": "jwks",
            "AGENT_AUTH_ISSUER": "https://issuer.test",
            "AGENT_CALLERS_FILE": "/tmp/c.json",
            "AGENT_PEER_TOKEN_FILE": "/tmp/t",
        }
    )
    assert (on.auth.mode, on.auth.issuer) == ("jwks", "https://issuer.test")
    assert on.auth.callers_file == Path("/tmp/c.json")
    assert on.delegation.token_file == Path("/tmp/t")


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"AGENT_AUTH_MODE": "jwks"}, "AGENT_AUTH_MODE=jwks needs AGENT_AUTH_ISSUER"),
        (
            {"AGENT_AUTH_MODE": "tokenreview"},
            "AGENT_AUTH_MODE=tokenreview needs AGENT_AUTH_API_SERVER",
        ),
        (
            {"AGENT_AUTH_MODE": "jwks", "AGENT_AUTH_ISSUER": "http://issuer"},
            "AGENT_AUTH_ISSUER must be an https:// URL",
        ),
        ({"AGENT_AUTH_JWKS_URL": "http://k/jwks"}, "AGENT_AUTH_JWKS_URL must be an https://"),
        ({"AGENT_AUTH_MODE": "maybe"}, "AGENT_AUTH_MODE"),
    ],
)
def test_auth_contradictions_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        AgentSettings.from_env({**BASE, **env})
    assert fragment in str(info.value)


def test_a_contradiction_exits_2_with_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAOS_", "AGENT_"))}
    env.update(BASE, AGENT_AUTH_MODE="jwks")
    done = subprocess.run(
        [console_script("kaos-agent")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "AGENT_AUTH_ISSUER" in lines[0], done.stderr[-2000:]


# --------------------------------------------------------------------- the decision


class FakeVerifier:
    """Accepts ``good-<sa>`` as ServiceAccount ``<sa>`` of namespace ``ns``."""

    def __init__(self) -> None:
        self.audiences: list[str] = []

    async def verify(self, token: str, audience: str) -> VerifiedWorkload:
        self.audiences.append(audience)
        if not token.startswith("good-"):
            raise Unauthenticated("bad token")
        return VerifiedWorkload("ns", token.removeprefix("good-"))

    async def close(self) -> None:
        pass


@pytest.fixture
def auth(tmp_path: Path) -> AgentAuth:
    callers = tmp_path / "callers.json"
    entry = {"identity": IDENTITY_A, "namespace": "ns", "serviceAccount": "a"}
    callers.write_text(json.dumps({"callers": [entry]}))
    return AgentAuth(FakeVerifier(), CallersFile(callers))


def headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)


@pytest.mark.parametrize(
    ("pairs", "body_depth", "claim"),
    [
        ((), None, False),
        ((("X-KAOS-Delegation-Depth", "0"),), None, False),
        ((("X-KAOS-Delegation-Depth", "1"),), None, True),
        ((("x-agent-identity", IDENTITY_A),), None, True),
        ((), 2, True),
        ((), 2.0, True),
        ((), 0, False),
        # Not an integer: left to the request's own parser (400), not a claim.
        ((("X-KAOS-Delegation-Depth", "lots"),), None, False),
    ],
)
def test_what_counts_as_a_delegation_claim(
    pairs: tuple[tuple[str, str], ...], body_depth: object, claim: bool
) -> None:
    assert claims_delegation(headers(*pairs), body_depth) is claim


async def test_an_end_users_call_passes_unverified(auth: AgentAuth) -> None:
    assert await auth.check(headers(("X-Principal", "alice"))) is None
    assert isinstance(auth.verifier, FakeVerifier) and auth.verifier.audiences == []


CHALLENGE = 'KaosAgentToken realm="kaos.dev/agent", header="X-Agent-Token", error="{}"'


async def test_a_claim_without_a_token_is_401(auth: AgentAuth) -> None:
    with pytest.raises(Unauthenticated) as info:
        await auth.check(headers(("X-Agent-Identity", IDENTITY_A)))
    assert info.value.code == "missing_token"
    assert info.value.headers == [("WWW-Authenticate", CHALLENGE.format("missing_token"))]
    with pytest.raises(Unauthenticated):
        await auth.check(headers(), body_depth=1)


async def test_a_listed_caller_is_verified_for_the_agent_audience(auth: AgentAuth) -> None:
    caller = await auth.check(headers((wire.AGENT_TOKEN_HEADER, "good-a")))
    assert caller is not None and caller.identity == IDENTITY_A
    same = headers((wire.AGENT_TOKEN_HEADER, "good-a"), ("X-Agent-Identity", IDENTITY_A))
    assert await auth.check(same) == caller
    assert isinstance(auth.verifier, FakeVerifier)
    assert set(auth.verifier.audiences) == {names.AGENT_AUDIENCE}


async def test_refusals_and_only_a_401_carries_a_challenge(auth: AgentAuth) -> None:
    with pytest.raises(Unauthenticated) as refused:
        await auth.check(headers((wire.AGENT_TOKEN_HEADER, "forged")))
    assert refused.value.headers == [("WWW-Authenticate", CHALLENGE.format("invalid_token"))]
    with pytest.raises(Unauthenticated, match="more than once") as refused:
        twice = headers((wire.AGENT_TOKEN_HEADER, "good-a"), (wire.AGENT_TOKEN_HEADER, "x"))
        await auth.check(twice)
    assert refused.value.headers == [("WWW-Authenticate", CHALLENGE.format("invalid_token"))]
    with pytest.raises(Forbidden) as info:
        await auth.check(headers((wire.AGENT_TOKEN_HEADER, "good-b")))
    assert info.value.status == 403 and "ns/b" in info.value.message
    assert info.value.headers == []
    mismatch = headers(
        (wire.AGENT_TOKEN_HEADER, "good-a"), ("X-Agent-Identity", "kaos://agent/ns/b")
    )
    with pytest.raises(Forbidden) as info:
        await auth.check(mismatch)
    assert info.value.code == "identity_mismatch"
    with pytest.raises(BadRequest):
        await auth.check(headers((wire.AGENT_TOKEN_HEADER, "good-a"), ("X-Agent-Identity", "?")))


# --------------------------------------------------------------------- the token presented


@pytest.fixture
async def peer() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A peer that records each request's headers; A2A answers a message."""
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        result = {"message": {"parts": [{"text": "ok"}]}}
        return web.json_response({"jsonrpc": "2.0", "id": "1", "result": result})

    async def no_a2a(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(status=404)

    async def chat(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"choices": [{"message": {"content": "chat ok"}}]})

    app = web.Application()
    app.router.add_post("/a2a/", handle)
    app.router.add_post("/plain/", no_a2a)
    app.router.add_post("/plain/v1/chat/completions", chat)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), seen
    finally:
        await server.close()


async def test_the_peer_token_is_sent_on_both_transports_and_re_read(
    peer: tuple[str, list[dict[str, str]]], tmp_path: Path
) -> None:
    url, seen = peer
    token = tmp_path / "token"
    token.write_text("first\n")
    deps = RunDeps(session_id="s-1")
    async with aiohttp.ClientSession() as http:
        client = PeerClient(http, timeout=5, token_file=token)
        assert await client.ask(Endpoint("b", url + "/a2a"), "hi", deps, 1) == ("ok", "a2a")
        staged = tmp_path / "token.new"
        staged.write_text("second")
        os.replace(staged, token)  # kubelet's rotation
        answer = await client.ask(Endpoint("b", url + "/plain"), "hi", deps, 1)
        assert answer == ("chat ok", "chat")
    assert [h.get(wire.AGENT_TOKEN_HEADER) for h in seen] == ["first", "second", "second"]


async def test_without_a_token_file_no_token_is_sent_and_a_missing_one_fails_first(
    peer: tuple[str, list[dict[str, str]]], tmp_path: Path
) -> None:
    url, seen = peer
    deps = RunDeps(session_id="s-1")
    async with aiohttp.ClientSession() as http:
        await PeerClient(http, timeout=5).ask(Endpoint("b", url + "/a2a"), "hi", deps, 1)
        assert wire.AGENT_TOKEN_HEADER not in seen[-1]
        missing = PeerClient(http, timeout=5, token_file=tmp_path / "absent")
        with pytest.raises(PeerUnavailable, match=names.AGENT_PEER_TOKEN_FILE):
            await missing.ask(Endpoint("b", url + "/a2a"), "hi", deps, 1)
    assert len(seen) == 1
