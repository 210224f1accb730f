"""Talking to the agents, and what the development model answers in the conversation of
``make run`` and the tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    session: str | None
    body: dict[str, Any]


async def chat(
    http: aiohttp.ClientSession,
    agent_url: str,
    text: str,
    *,
    session: str | None = None,
    principal: str | None = None,
    user_token: str | None = None,
    timeout: float = 120.0,  # noqa: ASYNC109  (one request's budget, passed to aiohttp)
) -> Reply:
    """One user message to an agent's ``/v1/chat/completions`` (no client history); with
    ``user_token`` the user is that token's (``Authorization: Bearer``), not a header."""
    headers: dict[str, str] = {}
    if session is not None:
        headers[SESSION_HEADER] = session
    if user_token is not None:
        headers["Authorization"] = f"Bearer {user_token}"
    elif principal is not None:
        headers[PRINCIPAL_HEADER] = principal
    body = {"model": "agent", "messages": [{"role": "user", "content": text}]}
    async with http.post(
        f"{agent_url}/v1/chat/completions",
        json=body,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as resp:
        doc: dict[str, Any] = await resp.json(content_type=None)
        answer = ""
        if resp.status == 200:
            answer = str(doc["choices"][0]["message"]["content"] or "")
        return Reply(resp.status, answer, resp.headers.get(SESSION_HEADER), doc)


# --- the scripted model -------------------------------------------------------------------

# What the development model answers in the conversation of ``make run`` and the tests
# (rules of ``kaos_devmodel.script``; anything else is echoed).
DELEGATED_MESSAGE = "Please shout: hello from Lisbon"
WORD_COUNT_TEXT = "memory is augmentation never a hard dependency"
# A long answer (about 1,500 tokens by the store's estimate): three of them push a
# session's window past the sample store's 4,096-token budget, so it folds.
STORY = " ".join(
    f"In part {i} the yellow tram climbs past the tiled houses to the castle while the "
    "river glitters far below."
    for i in range(1, 61)
)
SCRIPT: list[dict[str, Any]] = [
    {
        "match": r"^Ask the researcher",
        "tool_call": {
            "name": "delegate_to_researcher",
            "arguments": {"message": DELEGATED_MESSAGE},
        },
    },
    {
        "match": r"^Please shout: ",
        "tool_call": {"name": "shout", "arguments": {"text": "hello from Lisbon"}},
    },
    {"after_tool": "shout", "reply": "shout returned {result}"},
    {"after_tool": "delegate_to_researcher", "reply": "The researcher answered: {result}"},
    {
        "match": r"^How many words",
        "tool_call": {"name": "word_count", "arguments": {"text": WORD_COUNT_TEXT}},
    },
    {"after_tool": "word_count", "reply": "word_count returned {result}"},
    {"match": r"^Tell me the long story", "reply": STORY},
    {
        "match": r"^Where do I live",
        "tool_call": {"name": "search_memory", "arguments": {"query": "where do I live"}},
    },
    {"after_tool": "search_memory", "reply": "From long-term memory:\n{result}"},
]


def model_request(requests: list[dict[str, Any]], prompt: str) -> dict[str, Any] | None:
    """The newest model request the devmodel recorded whose last user message is ``prompt``."""
    for req in reversed(requests):
        users = [m for m in req["messages"] if m["role"] == "user"]
        if users and users[-1]["content"] == prompt:
            found: dict[str, Any] = req
            return found
    return None
