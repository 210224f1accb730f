"""An agent's own HTTP surface as a client sees it: chat completions and the agent card.

The agent serves an OpenAI-compatible ``/v1/chat/completions`` (one answer, or the
answer's pieces as server-sent events) and its A2A card; the card's skills name its
tools. When the agent cannot be reached, its tools are read from the Agent's spec
instead, as the operator will give them to it. Failures are ``AgentError``: transport
failures ``AgentUnreachable``, HTTP refusals ``AgentRefused``, an error event in the
middle of a streamed answer ``AnswerBrokeOff``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from kaos_core.http.failures import describe_failure
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

CARD_PATH = "/.well-known/agent-card.json"
COMPLETIONS_PATH = "/v1/chat/completions"


class AgentError(Exception):
    """The agent could not give an answer; ``message`` says why in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AgentUnreachable(AgentError):
    """No answer: the connection failed, timed out or carried something unreadable;
    ``cause`` says which in plain words (never the client library's text, which names a
    local port the user may never have chosen)."""

    def __init__(self, url: str, cause: Exception) -> None:
        self.cause = describe_failure(cause)
        super().__init__(f"agent at {url} failed: {self.cause}")


class AgentRefused(AgentError):
    """The agent answered with an HTTP error; ``payload`` is its body (JSON if it was)."""

    def __init__(self, status: int, payload: Any) -> None:
        self.status = status
        self.payload = payload
        error = payload.get("error") if isinstance(payload, dict) else None
        self.error_message = str(error.get("message") or "") if isinstance(error, dict) else ""
        super().__init__(
            f"agent answered {status}{': ' + self.error_message if self.error_message else ''}"
        )


class AnswerBrokeOff(AgentError):
    """The agent sent an error event in the middle of a streamed answer."""


def headers_for(session: str | None, principal: str | None, token: str | None) -> dict[str, str]:
    headers = {SESSION_HEADER: session} if session else {}
    if principal:
        headers[PRINCIPAL_HEADER] = principal
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def completion_request(model: str, message: str, *, stream: bool) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": message}], "stream": stream}


async def refusal(resp: aiohttp.ClientResponse) -> AgentRefused:
    text = await resp.text()
    try:
        payload: Any = json.loads(text)
    except ValueError:
        payload = text
    return AgentRefused(resp.status, payload)


async def chat(
    url: str,
    model: str,
    message: str,
    *,
    session: str,
    principal: str | None,
    request_timeout: float,
    token: str | None = None,
) -> dict[str, Any]:
    """One non-streaming chat completion; the parsed response document."""
    url = url.rstrip("/")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=request_timeout)) as http,
            http.post(
                url + COMPLETIONS_PATH,
                json=completion_request(model, message, stream=False),
                headers=headers_for(session, principal, token),
            ) as resp,
        ):
            if resp.status >= 400:
                raise await refusal(resp)
            payload: Any = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise AgentUnreachable(url, exc) from exc
    if not isinstance(payload, dict):
        raise AgentError(f"agent at {url} answered no JSON object")
    return payload


async def stream_chat(
    http: aiohttp.ClientSession,
    url: str,
    model: str,
    message: str,
    headers: dict[str, str],
    *,
    request_timeout: aiohttp.ClientTimeout | None = None,
) -> AsyncIterator[str]:
    """The answer's text pieces as the agent streams them (server-sent events)."""
    try:
        async with http.post(
            url + COMPLETIONS_PATH,
            json=completion_request(model, message, stream=True),
            headers=headers,
            timeout=request_timeout or http.timeout,
        ) as resp:
            if resp.status >= 400:
                raise await refusal(resp)
            async for piece in completion_pieces(resp.content):
                yield piece
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise AgentUnreachable(url, exc) from exc


async def completion_pieces(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The text pieces of a chat-completions event stream, up to ``[DONE]``; an error
    event raises ``AnswerBrokeOff`` with the agent's message."""
    async for raw in content:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if "error" in event:
            raise AnswerBrokeOff(str((event.get("error") or {}).get("message") or "failed"))
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                yield piece


async def fetch_card(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], *, request_timeout: float
) -> dict[str, Any]:
    """The agent's A2A card."""
    try:
        async with http.get(
            url + CARD_PATH, headers=headers, timeout=aiohttp.ClientTimeout(total=request_timeout)
        ) as resp:
            if resp.status >= 400:
                raise await refusal(resp)
            card: dict[str, Any] = await resp.json()
            return card
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise AgentUnreachable(url, exc) from exc


def tools_from_card(card: dict[str, Any]) -> list[dict[str, str]]:
    """The tools the running agent advertises: its card's skills but chat."""
    rows = []
    for skill in card.get("skills") or []:
        tags = skill.get("tags") or []
        if "chat" in tags:
            continue
        source = next((t for t in tags if t.startswith(("mcp:", "peer:"))), tags[0] if tags else "")
        rows.append(
            {
                "name": str(skill.get("name")),
                "source": source,
                "description": str(skill.get("description") or ""),
            }
        )
    return rows


_MEMORY_TOOLS = {
    "search_memory": "Search long-term memory for facts relevant to a query.",
    "save_memory": "Save a fact to long-term memory so later conversations can recall it.",
}


def tools_from_spec(obj: dict[str, Any]) -> list[dict[str, str]]:
    """The tools an Agent's spec gives it, for when the agent cannot be asked."""
    s = obj.get("spec") or {}
    rows = [
        {
            "name": "(tools of the server)",
            "source": f"mcp:{server}",
            "description": "listed by the agent once it runs",
        }
        for server in s.get("mcpServers") or []
    ]
    for peer in (s.get("agentNetwork") or {}).get("access") or []:
        rows.append(
            {
                "name": f"delegate_to_{peer.replace('-', '_')}",
                "source": f"peer:{peer}",
                "description": f"Delegates tasks to the agent {peer}.",
            }
        )
    memory = (s.get("config") or {}).get("memory") or {}
    # A mode (all, read, write, none); a boolean in objects stored by earlier versions.
    offered = memory.get("tools")
    names = {
        True: ("search_memory", "save_memory"),
        "all": ("search_memory", "save_memory"),
        "read": ("search_memory",),
        "write": ("save_memory",),
    }.get(offered, ())
    for tool in names:
        rows.append({"name": tool, "source": "memory", "description": _MEMORY_TOOLS[tool]})
    return rows
