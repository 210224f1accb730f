"""Verified callers at the MCP runtime's edge (``MCP_AUTH_MODE``), as the memory service has.

With a mode other than ``off`` every request to the MCP path must carry the calling
agent's projected service-account token (``X-Agent-Token``, audience ``kaos.dev/mcp``).
``CallerCheck`` is a pure ASGI middleware in front of the body guard and the SDK: it reads
only the headers, so a refused request is answered before its body is read, before any
JSON is parsed and before any tool runs.

- no token, a token given twice, or one that fails verification (another audience, another
  issuer, expired, forged): 401 with a ``KaosAgentToken`` challenge;
- a valid token of a ServiceAccount that is not an Agent listing this MCPServer in
  ``mcpServers`` (the callers file the operator keeps current): 403;
- an ``X-Agent-Identity`` header naming another agent than the token's: 403;
- the lister (``MCP_AUTH_LISTER``, the operator's ServiceAccount): admitted for listing only;
  the body guard refuses any other method of its requests with 403 (``listing_only``), so
  the operator can fill ``status.availableTools`` and call nothing.

A refusal is a JSON-RPC error object (``id`` null) whose ``data.code`` names it, with the
HTTP status of the refusal. ``/healthz``, ``/readyz`` and ``/metrics`` stay open (probes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kaos_core.auth import names
from kaos_core.auth.callers import Caller, CallersFile
from kaos_core.auth.config import CallerAuthSettings
from kaos_core.auth.gate import CallerGate, build_verifier, one_token, presented_tokens
from kaos_core.auth.verify import Forbidden, TokenVerifier, Unauthenticated
from kaos_core.errors import KaosError
from kaos_core.wire import AGENT_TOKEN_HEADER, parse_identity
from multidict import CIMultiDict
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kaos_agent.mcp_runtime.guard import refuse

log = logging.getLogger(__name__)

AUDIENCE = names.MCP_AUDIENCE
# Set in the request's scope for the lister's requests: the body guard admits only
# ``LISTING_METHODS`` (and notifications) for them.
LISTING_ONLY = "kaos.mcp.listing_only"
LISTING_METHODS = frozenset({"initialize", "tools/list", "ping"})


class McpGate(CallerGate):
    """The token verifier, callers file and lister of one MCP server."""

    audience = AUDIENCE
    not_listed = "an agent that lists this MCP server in mcpServers"

    def __init__(
        self,
        verifier: TokenVerifier,
        callers: CallersFile,
        lister: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(verifier, callers)
        self.lister = lister

    @classmethod
    def build(cls, settings: CallerAuthSettings, lister: tuple[str, str] | None) -> McpGate | None:
        """The gate the settings ask for; ``None`` when verification is off."""
        verifier = build_verifier(settings)
        if verifier is None:
            return None
        return cls(verifier, CallersFile(settings.callers_file), lister)

    async def admit_request(self, headers: Mapping[str, str]) -> Caller | None:
        """The listed calling agent, or ``None`` for the lister (listing only).

        Raises ``Unauthenticated`` (401, with the gate's challenge), ``Forbidden`` (403),
        ``VerifierUnavailable`` (503) or ``BadRequest`` (an unusable identity header)."""
        tokens = presented_tokens(headers)
        if not tokens:
            raise self.challenged(
                Unauthenticated(
                    f"{AGENT_TOKEN_HEADER} is required: this MCP server verifies who calls it"
                    f" (an agent's projected token of audience {AUDIENCE})",
                    code="missing_token",
                )
            )
        try:
            workload = await self.verifier.verify(one_token(tokens), self.audience)
        except Unauthenticated as exc:
            raise self.challenged(exc) from None
        if self.lister == (workload.namespace, workload.service_account):
            return None
        caller = self.listed(workload)
        self.check_claim(caller, parse_identity(headers).agent)
        return caller


def check_listing(scope: Scope, doc: object) -> None:
    """A lister's message must be a listing method or a notification (403 otherwise);
    an agent's may be anything MCP allows."""
    if not scope.get(LISTING_ONLY):
        return
    method = doc.get("method") if isinstance(doc, dict) else None
    if method is None or not isinstance(method, str):
        return  # a client's response to the server: nothing runs
    if method in LISTING_METHODS or method.startswith("notifications/"):
        return
    raise Forbidden(f"this caller may list the server's tools, not {method}", code="listing_only")


def _headers(scope: Scope) -> CIMultiDict[str]:
    """The request's headers, repeats kept (a token given twice is refused, not merged)."""
    return CIMultiDict(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]
    )


# The probes' paths, open to anyone (kubelet presents no token). Every other path is checked,
# the MCP path and any path the server may come to answer alike: deny by default.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class CallerCheck:
    """Admit requests to any path but the probes' only for callers the gate admits; close
    the gate when the server shuts down."""

    def __init__(self, app: ASGIApp, /, *, gate: McpGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._closing(receive), send)
            return
        if scope["type"] == "websocket":
            # Never served (MCP does not use them); refused rather than let past the check.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            caller = await self.gate.admit_request(_headers(scope))
        except KaosError as exc:
            log.info("refused an MCP caller", extra={"code": exc.code, "status": exc.status})
            await refuse(send, exc)
            return
        if caller is None:
            scope = {**scope, LISTING_ONLY: True}
        await self.app(scope, receive, send)

    def _closing(self, receive: Receive) -> Receive:
        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                await self.gate.close()
            return message

        return wrapped
