"""Toolsets the agent loop sees: MCP servers, wrapped so a tool failure never ends a run.

``GuardedToolset`` is the one place where tool failures are turned into answers the
model reads (pydantic-ai's ``ToolFailed``): an exception from a tool, an MCP server that
is down at the start of a run or that dies mid-call. The run goes on and the model can
adapt; the HTTP request that started it does not fail. It also counts tool calls, and
records each in the audit trail (``kaos_agent.audit``) with its outcome and duration.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Self, cast
from urllib.parse import urlsplit

from kaos_core.auth.tokenfile import TokenFile
from kaos_core.endpoints import Endpoint
from kaos_core.http.failures import describe_failure
from kaos_core.wire import AGENT_TOKEN_HEADER
from pydantic_ai import RunContext
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    ToolFailed,
    UsageLimitExceeded,
)
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from kaos_agent.audit.record import Auditor
from kaos_agent.context import RunDeps
from kaos_agent.metrics import AgentMetrics
from kaos_agent.settings import ToolSettings

if TYPE_CHECKING:
    import httpx2
    from pydantic_ai.mcp import MCPToolset

# The MCP transport's own timeouts (the SDK's defaults): to connect, and between two reads
# of a response stream.
MCP_CONNECT_SECONDS = 30.0
MCP_STREAM_READ_SECONDS = 300.0

log = logging.getLogger(__name__)

# Exceptions that are pydantic-ai control flow, not tool failures.
_CONTROL_FLOW = (ModelRetry, ToolFailed, CallDeferred, ApprovalRequired, UsageLimitExceeded)


@dataclass
class GuardedToolset(WrapperToolset[RunDeps]):
    """Wraps a toolset so its failures reach the model as tool results, never as crashes."""

    label_text: str = "tools"
    metrics: AgentMetrics | None = None
    # Where each call is recorded; None: not recorded (a toolset that records its own).
    audit: Auditor | None = None
    _available: bool = field(default=True, repr=False)
    _entered: bool = field(default=False, repr=False)

    @property
    def label(self) -> str:
        return self.label_text

    async def for_run(self, ctx: RunContext[RunDeps]) -> AbstractToolset[RunDeps]:
        # A fresh wrapper per run: availability is a property of this run's connection,
        # and the wrapper instance is shared by concurrent runs.
        wrapped = await self.wrapped.for_run(ctx)
        return replace(self, wrapped=wrapped, _available=True, _entered=False)

    async def __aenter__(self) -> Self:
        try:
            await self.wrapped.__aenter__()
        except Exception:  # a dead tool server degrades the run, it does not end it
            log.warning(
                "tool server unavailable", extra={"toolset": self.label_text}, exc_info=True
            )
            self._available = False
        else:
            self._entered = True
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        if not self._entered:
            return None
        self._entered = False
        try:
            return await self.wrapped.__aexit__(*args)
        except Exception:  # noqa: BLE001  (closing a broken session must not fail the run)
            log.warning("closing tool server failed", extra={"toolset": self.label_text})
            return None

    async def get_tools(self, ctx: RunContext[RunDeps]) -> dict[str, ToolsetTool[RunDeps]]:
        if not self._available:
            return {}
        try:
            return await self.wrapped.get_tools(ctx)
        except Exception:  # same: the run goes on without this server's tools
            log.warning("listing tools failed", extra={"toolset": self.label_text}, exc_info=True)
            self._available = False
            return {}

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[RunDeps],
        tool: ToolsetTool[RunDeps],
    ) -> Any:
        outcome = "error"
        started = self.audit.start() if self.audit is not None else None
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
            outcome = "ok"
            return result
        except ToolFailed:
            outcome = "failed"
            raise
        except ModelRetry:
            outcome = "retry"
            raise
        except _CONTROL_FLOW:
            outcome = "deferred"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as exc:  # the model sees the failure and adapts
            log.warning("tool call failed", extra={"tool": name}, exc_info=True)
            raise ToolFailed(tool_failure(name, exc)) from exc
        finally:
            if self.metrics is not None:
                self.metrics.tool_calls.labels(name, outcome).inc()
            if self.audit is not None and started is not None:
                await self.audit.call("tool", name, tool_args, ctx.deps, started, outcome)


# Exceptions of the transports a tool call goes through: their text names addresses and
# library internals, not anything the model can act on.
_TRANSPORT_MODULES = ("httpx", "httpcore", "aiohttp", "anyio", "mcp")


def tool_failure(name: str, exc: Exception) -> str:
    """What the model is told of a failed tool call: the tool's own message (it helps the
    model adapt), or fixed words for a transport failure; never the exception's class."""
    transport = isinstance(exc, OSError | TimeoutError) or type(exc).__module__.startswith(
        _TRANSPORT_MODULES
    )
    if transport:
        return f"tool {name} {describe_failure(exc)}"
    text = str(exc).strip()
    return f"tool {name} failed: {text}" if text else f"tool {name} failed"


def mcp_url(endpoint: Endpoint) -> str:
    """The streamable-HTTP URL of an MCP server: ``/mcp`` is added to a bare base URL."""
    path = urlsplit(endpoint.url).path
    return endpoint.url if path not in ("", "/") else endpoint.url.rstrip("/") + "/mcp"


def mcp_toolset(toolset: object) -> MCPToolset[RunDeps] | None:
    """``toolset`` when it is an MCP server's toolset, else ``None``.

    The MCP client (pydantic-ai's, on the ``mcp`` and ``fastmcp`` libraries) is imported
    only by an agent that has MCP servers: it is a large share of an idle agent's memory,
    and when it was never imported nothing can be one of its toolsets."""
    module = sys.modules.get("pydantic_ai.mcp")
    if module is None or not isinstance(toolset, module.MCPToolset):
        return None
    return cast("MCPToolset[RunDeps]", toolset)


def mcp_http_client(settings: ToolSettings) -> httpx2.AsyncClient:
    """The one HTTP client every MCP session of the agent borrows.

    Left to itself, the MCP client builds a new HTTP client, with a new TLS context (CA
    bundle loaded from disk), for the session of every run: that cost more CPU than the
    rest of a turn. pydantic-ai lends a caller's client to each session and never closes
    it; its timeouts are the MCP transport's own (a response stream may stay open long
    after the session's own request timeout)."""
    import httpx2

    read = max(MCP_STREAM_READ_SECONDS, settings.timeout_seconds)
    auth = None if settings.token_file is None else token_auth(TokenFile(settings.token_file))
    return httpx2.AsyncClient(timeout=httpx2.Timeout(MCP_CONNECT_SECONDS, read=read), auth=auth)


def token_auth(token: TokenFile) -> httpx2.Auth:
    """Every MCP request carries the agent's token of audience ``kaos.dev/mcp`` as
    ``X-Agent-Token``, read on each request (kubelet rotates it). While the file is missing
    the request goes without one, and the server's 401 fails that tool server's calls (the
    run goes on without its tools, ``GuardedToolset``)."""
    import httpx2

    class TokenAuth(httpx2.Auth):
        def auth_flow(
            self, request: httpx2.Request
        ) -> Generator[httpx2.Request, httpx2.Response, None]:
            # A missing file is logged by ``TokenFile`` once, not on every request.
            value = token.read()
            if value is not None:
                request.headers[AGENT_TOKEN_HEADER] = value
            yield request

    return TokenAuth()


def mcp_toolsets(
    settings: ToolSettings,
    metrics: AgentMetrics,
    http: httpx2.AsyncClient,
    *,
    audit: Auditor | None = None,
) -> list[GuardedToolset]:
    """One guarded MCP toolset per configured server, each on ``http``, its calls recorded
    in ``audit``."""
    if not settings.servers:
        return []
    from pydantic_ai.mcp import MCPToolset

    timeout = settings.timeout_seconds
    out: list[GuardedToolset] = []
    for server in settings.servers:
        toolset: MCPToolset[RunDeps] = MCPToolset(
            mcp_url(server),
            id=f"mcp-{server.tool_name}",
            tool_error_behavior="failed",
            init_timeout=timeout,
            read_timeout=timeout,
            http_client=http,
        )
        out.append(
            GuardedToolset(toolset, label_text=f"mcp:{server.name}", metrics=metrics, audit=audit)
        )
    return out
