"""Delegation to peer agents: ``delegate_to_<name>`` tools over A2A, with a chat fallback.

A call first speaks A2A JSON-RPC ``SendMessage`` (protocol 1.0) to the peer's root URL.
When the peer has no A2A endpoint (404/405/501, a non-JSON answer or "method not found")
the same message goes to its OpenAI-compatible ``/v1/chat/completions``. Both carry the
caller's principal, session and the next delegation depth as headers (A2A also in the
message metadata); a call that would exceed ``MAX_DELEGATION_DEPTH`` is refused before
any request, so two agents that list each other cannot loop forever.

With a peer token file (``AGENT_PEER_TOKEN_FILE``, the pod's projected token of audience
``kaos.dev/agent``) both transports also carry it as ``X-Agent-Token``, read through
``TokenFile`` on every call because kubelet rotates it; a configured file that is missing
or empty fails the delegation before any request (the peer would refuse it anyway).

Each delegation is a client span ``invoke_agent <peer>`` (GenAI conventions: the remote
agent's invocation) whose W3C trace context goes out in the headers of either transport,
so the peer's server span, and its whole run, sit under it in one trace.

Each delegation is recorded in the audit trail (``kaos_agent.audit``) as kind
``delegation`` under the peer's name: ``ok``, ``failed`` (refused before any request: bad
arguments, the depth limit), ``error`` (the peer unavailable or refusing) or ``cancelled``.

The call goes through the agent's traced aiohttp session rather than a2a-sdk's client (which
the CLI uses): that client runs on httpx, outside ``kaos_core.tracing.client_session``, and
opens spans of its own that record exception text; and it raises on an HTTP error status
before reading the body, so a peer's refusal (401, 403 or 503 with a JSON-RPC error object)
would lose its code and message, and telling a peer without A2A apart would mean reading
its answer again by hand.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from kaos_core.auth.names import AGENT_PEER_TOKEN_FILE
from kaos_core.auth.tokenfile import TokenFile
from kaos_core.endpoints import Endpoint
from kaos_core.http.failures import describe_failure
from kaos_core.http.jsonrpc import METHOD_NOT_FOUND
from kaos_core.telemetry import conventions as otel
from kaos_core.telemetry import tracer
from kaos_core.wire import (
    A2A_VERSION_HEADER,
    AGENT_TOKEN_HEADER,
    DELEGATION_DEPTH_HEADER,
    PRINCIPAL_HEADER,
    REQUEST_ID_HEADER,
    SESSION_HEADER,
    USER_TOKEN_HEADER,
)
from opentelemetry.propagate import inject
from opentelemetry.trace import SpanKind, StatusCode
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from kaos_agent.audit.record import Auditor
from kaos_agent.context import RunDeps
from kaos_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

A2A_VERSION = "1.0"
# Key of the KAOS block in A2A message metadata.
KAOS_METADATA_KEY = "kaos"


class PeerUnavailable(Exception):
    """The peer could not be reached or answered with an error."""


class NoA2A(Exception):
    """The peer does not speak A2A JSON-RPC: fall back to chat completions."""


def delegation_headers(deps: RunDeps, depth: int) -> dict[str, str]:
    headers = {SESSION_HEADER: deps.session_id, DELEGATION_DEPTH_HEADER: str(depth)}
    if deps.principal is not None:
        headers[PRINCIPAL_HEADER] = deps.principal
    if deps.user_token is not None:
        # Verified user identity: the peer verifies the user itself, as the memory does.
        headers[USER_TOKEN_HEADER] = deps.user_token
    if deps.request_id is not None:
        headers[REQUEST_ID_HEADER] = deps.request_id
    return headers


def _task_text(result: dict[str, Any]) -> str:
    """The answer text of a SendMessage result (a task or a message)."""
    if "message" in result:
        return _parts_text(result["message"].get("parts", []))
    task = result.get("task")
    if not isinstance(task, dict):
        raise PeerUnavailable("SendMessage answered neither a task nor a message")
    state = task.get("status", {}).get("state", "")
    texts = [_parts_text(a.get("parts", [])) for a in task.get("artifacts", [])]
    text = "\n".join(t for t in texts if t)
    if not text:
        text = _parts_text(task.get("status", {}).get("message", {}).get("parts", []))
    if state in ("TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED"):
        raise PeerUnavailable(f"peer task ended in {state}: {text}")
    return text


def _parts_text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str))


_TRACER = tracer(__name__)


class PeerClient:
    """Sends one message to one peer agent and returns its answer text."""

    def __init__(
        self, http: aiohttp.ClientSession, *, timeout: float, token_file: Path | None = None
    ) -> None:
        self._http = http
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._token = None if token_file is None else TokenFile(token_file)

    async def ask(self, peer: Endpoint, message: str, deps: RunDeps, depth: int) -> tuple[str, str]:
        """Answer text and the transport used (``a2a`` or ``chat``)."""
        attributes = {
            otel.OPERATION: "invoke_agent",
            otel.AGENT_NAME: peer.name,
            otel.CONVERSATION_ID: deps.session_id,
            "server.address": peer.url,
        }
        with _TRACER.start_as_current_span(
            f"invoke_agent {peer.name}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            # A peer's failure text may quote the conversation: the class only.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                answer, transport = await self._ask(peer, message, deps, depth)
            except Exception as exc:
                span.set_status(StatusCode.ERROR, type(exc).__name__)
                span.set_attribute("error.type", type(exc).__name__)
                raise
            span.set_attribute(otel.DELEGATION_TRANSPORT, transport)
            return answer, transport

    async def _ask(
        self, peer: Endpoint, message: str, deps: RunDeps, depth: int
    ) -> tuple[str, str]:
        headers = delegation_headers(deps, depth)
        # The span's context, for the peer (with tracing on, the client span of the request
        # replaces it with its own, a child of this one: kaos_core.tracing).
        inject(headers)
        if self._token is not None:
            token = self._token.read()
            if token is None:
                raise PeerUnavailable(
                    f"no token to present ({AGENT_PEER_TOKEN_FILE} is missing or empty)"
                )
            headers[AGENT_TOKEN_HEADER] = token
        try:
            return await self._a2a(peer, message, deps, depth, headers), "a2a"
        except NoA2A as exc:
            log.info("peer has no A2A, falling back", extra={"peer": peer.name, "why": str(exc)})
        return await self._chat(peer, message, headers), "chat"

    async def _a2a(
        self, peer: Endpoint, message: str, deps: RunDeps, depth: int, headers: dict[str, str]
    ) -> str:
        body = {
            "jsonrpc": "2.0",
            "id": uuid.uuid4().hex,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": [{"text": message}],
                    "contextId": deps.session_id,
                    "metadata": {KAOS_METADATA_KEY: {"delegationDepth": depth}},
                },
                "configuration": {"acceptedOutputModes": ["text/plain"]},
            },
        }
        try:
            async with self._http.post(
                peer.url + "/",
                json=body,
                headers={**headers, A2A_VERSION_HEADER: A2A_VERSION},
                timeout=self._timeout,
            ) as resp:
                if resp.status in (404, 405, 501):
                    raise NoA2A(f"HTTP {resp.status}")
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("delegation over A2A failed", extra={"peer": peer.name}, exc_info=True)
            raise PeerUnavailable(describe_failure(exc)) from exc
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            raise NoA2A("answer is not JSON") from None
        if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0":
            raise NoA2A("answer is not JSON-RPC")
        if "error" in doc:
            err = doc["error"] or {}
            if err.get("code") == METHOD_NOT_FOUND:
                raise NoA2A("SendMessage not found")
            raise PeerUnavailable(f"A2A error {err.get('code')}: {err.get('message')}")
        result = doc.get("result")
        if not isinstance(result, dict):
            raise PeerUnavailable("A2A answer without a result")
        return _task_text(result)

    async def _chat(self, peer: Endpoint, message: str, headers: dict[str, str]) -> str:
        body = {"model": peer.name, "messages": [{"role": "user", "content": message}]}
        try:
            async with self._http.post(
                peer.url + "/v1/chat/completions",
                json=body,
                headers=headers,
                timeout=self._timeout,
            ) as resp:
                if resp.status >= 400:
                    raise PeerUnavailable(f"chat completions answered HTTP {resp.status}")
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("delegation over chat failed", extra={"peer": peer.name}, exc_info=True)
            raise PeerUnavailable(describe_failure(exc)) from exc
        try:
            content = doc["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise PeerUnavailable("chat completions answer has no message") from None
        return str(content or "")


def delegation_toolset(
    peers: tuple[Endpoint, ...],
    client: PeerClient,
    *,
    max_depth: int,
    metrics: AgentMetrics,
    audit: Auditor | None = None,
) -> FunctionToolset[RunDeps]:
    """One ``delegate_to_<name>(message)`` tool per peer, each delegation recorded in
    ``audit``."""
    tools: list[Tool[RunDeps]] = []
    for peer in peers:
        tools.append(
            _delegate_tool(peer, client, max_depth=max_depth, metrics=metrics, audit=audit)
        )
    return FunctionToolset(tools, id="delegation")


def _delegate_tool(
    peer: Endpoint,
    client: PeerClient,
    *,
    max_depth: int,
    metrics: AgentMetrics,
    audit: Auditor | None = None,
) -> Tool[RunDeps]:
    async def delegate(ctx: RunContext[RunDeps], **args: Any) -> str:
        if audit is None:
            return await ask(ctx, args)
        started, outcome = audit.start(), "error"
        try:
            answer = await ask(ctx, args)
            outcome = "ok"
            return answer
        except ToolFailed as exc:
            outcome = "error" if isinstance(exc.__cause__, PeerUnavailable) else "failed"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            await audit.call("delegation", peer.name, args, ctx.deps, started, outcome)

    async def ask(ctx: RunContext[RunDeps], args: dict[str, Any]) -> str:
        message = args.get("message")
        extra = sorted(set(args) - {"message"})
        if extra:
            raise ToolFailed(f"unexpected arguments: {', '.join(extra)}; only 'message' is taken")
        if not isinstance(message, str) or not message.strip():
            raise ToolFailed("'message' must be a non-empty string")
        depth = ctx.deps.depth + 1
        if depth > max_depth:
            metrics.delegations.labels(peer.name, "none", "depth_exceeded").inc()
            raise ToolFailed(
                f"delegation depth limit ({max_depth}) reached; answer without delegating"
            )
        try:
            answer, transport = await client.ask(peer, message, ctx.deps, depth)
        except PeerUnavailable as exc:
            metrics.delegations.labels(peer.name, "none", "error").inc()
            raise ToolFailed(f"agent {peer.name} is unavailable: {exc}") from exc
        metrics.delegations.labels(peer.name, transport, "ok").inc()
        return answer

    schema = {
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "description": f"The task or question for agent {peer.name}.",
            }
        },
        "required": ["message"],
        "additionalProperties": False,
    }
    return Tool.from_schema(
        delegate,
        name=f"delegate_to_{peer.tool_name}",
        description=f"Delegate a task to the agent '{peer.name}' and return its answer.",
        json_schema=schema,
        takes_ctx=True,
    )
