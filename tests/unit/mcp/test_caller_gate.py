"""The MCP runtime's caller gate in process: who is admitted, the lister's limits, and the
settings that configure it (the real verifiers against a real issuer:
``tests/e2e/cluster/test_mcp_caller_tokens.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kaos_agent.mcp_runtime.auth import LISTING_ONLY, CallerCheck, McpGate, check_listing
from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_core.auth.callers import CallersFile
from kaos_core.auth.verify import Forbidden, Unauthenticated, VerifiedWorkload
from kaos_core.settings import SettingsError
from multidict import CIMultiDict
from starlette.types import Message, Receive, Scope, Send


class Verifier:
    """Tokens named ``<namespace>/<serviceaccount>`` for ``audience``; anything else 401."""

    def __init__(self) -> None:
        self.audiences: list[str] = []

    async def verify(self, token: str, audience: str) -> VerifiedWorkload:
        self.audiences.append(audience)
        namespace, _, sa = token.partition("/")
        if not sa:
            raise Unauthenticated("token is not a JWT")
        return VerifiedWorkload(namespace=namespace, service_account=sa)

    async def close(self) -> None:
        return None


@pytest.fixture
def gate(tmp_path: Path) -> McpGate:
    callers = tmp_path / "callers.json"
    doc = {"callers": [{"identity": "kaos://agent/ns/a", "namespace": "ns", "serviceAccount": "a"}]}
    callers.write_text(json.dumps(doc))
    return McpGate(Verifier(), CallersFile(callers), lister=("kaos-system", "kaos-operator"))


def headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)


async def test_a_listed_agent_is_admitted_for_the_mcp_audience(gate: McpGate) -> None:
    caller = await gate.admit_request(headers(("X-Agent-Token", "ns/a")))
    assert caller is not None and caller.identity == "kaos://agent/ns/a"
    assert gate.verifier.audiences == ["kaos.dev/mcp"]  # type: ignore[attr-defined]


async def test_the_lister_is_admitted_as_none(gate: McpGate) -> None:
    assert await gate.admit_request(headers(("X-Agent-Token", "kaos-system/kaos-operator"))) is None


@pytest.mark.parametrize(
    ("sent", "status", "code"),
    [
        ((), 401, "missing_token"),
        ((("X-Agent-Token", "garbage"),), 401, "invalid_token"),
        ((("X-Agent-Token", "ns/a"), ("X-Agent-Token", "ns/a")), 401, "invalid_token"),
        ((("X-Agent-Token", "ns/b"),), 403, "caller_not_allowed"),
        # The lister's name in another namespace is nobody.
        ((("X-Agent-Token", "ns/kaos-operator"),), 403, "caller_not_allowed"),
        (
            (("X-Agent-Token", "ns/a"), ("X-Agent-Identity", "kaos://agent/ns/b")),
            403,
            "identity_mismatch",
        ),
    ],
)
async def test_refusals(
    gate: McpGate, sent: tuple[tuple[str, str], ...], status: int, code: str
) -> None:
    with pytest.raises((Unauthenticated, Forbidden)) as info:
        await gate.admit_request(headers(*sent))
    assert (info.value.status, info.value.code) == (status, code)
    challenges = [v for k, v in info.value.headers if k == "WWW-Authenticate"]
    if status == 401:
        assert challenges == [
            f'KaosAgentToken realm="kaos.dev/mcp", header="X-Agent-Token", error="{code}"'
        ]
    else:
        assert challenges == []


@pytest.mark.parametrize(
    "method", ["initialize", "tools/list", "ping", "notifications/initialized", None]
)
def test_the_lister_may_list(method: str | None) -> None:
    doc = {"jsonrpc": "2.0", "id": 1, **({"method": method} if method else {"result": {}})}
    check_listing({LISTING_ONLY: True}, doc)


@pytest.mark.parametrize("method", ["tools/call", "resources/read", "prompts/get", "completion"])
def test_the_lister_may_call_nothing(method: str) -> None:
    with pytest.raises(Forbidden) as info:
        check_listing({LISTING_ONLY: True}, {"jsonrpc": "2.0", "id": 1, "method": method})
    assert info.value.code == "listing_only"
    # An agent's request is not the lister's.
    check_listing({}, {"jsonrpc": "2.0", "id": 1, "method": method})


def test_settings_build_the_gate_and_refuse_a_lister_without_verification() -> None:
    settings = McpSettings.from_env(
        {
            "MCP_AUTH_MODE": "jwks",
            "MCP_AUTH_ISSUER": "https://kubernetes.default.svc.cluster.local",
            "MCP_AUTH_LISTER": "kaos-system/kaos-operator",
        }
    )
    gate = McpGate.build(settings.callers.settings(), settings.listing.service_account())
    assert gate is not None and gate.lister == ("kaos-system", "kaos-operator")
    assert McpGate.build(McpSettings.from_env({}).callers.settings(), None) is None
    with pytest.raises(SettingsError, match="MCP_AUTH_LISTER needs MCP_AUTH_MODE"):
        McpSettings.from_env({"MCP_AUTH_LISTER": "kaos-system/kaos-operator"})
    with pytest.raises(SettingsError, match="MCP_AUTH_LISTER"):
        McpSettings.from_env({"MCP_AUTH_MODE": "jwks", "MCP_AUTH_LISTER": "not an account"})


@pytest.mark.parametrize(
    ("path", "admitted"),
    [
        ("/healthz", True),
        ("/readyz", True),
        ("/metrics", True),
        ("/mcp", False),
        ("/mcp/", False),
        ("/mcp/anything", False),
        ("/MCP", False),
        ("/another", False),
    ],
)
async def test_every_path_but_the_probes_is_checked(
    gate: McpGate, path: str, admitted: bool
) -> None:
    reached: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["path"])

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope: Scope = {"type": "http", "path": path, "method": "POST", "headers": []}
    await CallerCheck(app, gate=gate)(scope, receive, send)

    assert reached == ([path] if admitted else [])
    if not admitted:
        assert sent[0]["status"] == 401


async def test_a_websocket_is_refused(gate: McpGate) -> None:
    reached: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["path"])

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    await CallerCheck(app, gate=gate)({"type": "websocket", "path": "/mcp"}, receive, send)
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008}]
