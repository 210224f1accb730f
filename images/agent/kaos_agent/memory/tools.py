"""``search_memory`` and ``save_memory``: memory tools whose scope the model cannot widen.

The ``level`` parameter's schema lists only the levels this agent is entitled to (up to
its maximum read scope), and the call checks again: a level outside that set, or any
argument beyond the declared ones (``principal``, ``agent_id``, ``session_id`` …), is
refused with a tool failure the model reads, and nothing reaches the memory service.
Principal, session and agent identity always come from the run context.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kaos_core.memory.client import MemoryClientError, MemoryRequestRejected
from kaos_core.memory.contract import Level, Turn, WriteOrigin
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from kaos_agent.context import RunDeps
from kaos_agent.memory.base import MemoryWriteFailed
from kaos_agent.memory.remote import RemoteMemory, origin, quoted
from kaos_agent.settings import MemoryTools

MAX_QUERY = 4096
MAX_SAVE = 8192


def save_origin(messages: list[ModelMessage]) -> WriteOrigin:
    """``tool`` once the run's context holds any tool's output (memory's own search
    included: what it returns may itself be a tool's or the assistant's), else ``saved``.
    A model that read a web page or an e-mail may be saving the page's words, not the
    user's, so such a fact keeps the lowest trust."""
    for message in messages:
        if isinstance(message, ModelRequest) and any(
            isinstance(p, ToolReturnPart) and p.tool_name != "save_memory" for p in message.parts
        ):
            return "tool"
    return "saved"


def _check_args(ctx_tool: str, args: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(args) - allowed)
    if extra:
        raise ToolFailed(
            f"{ctx_tool} does not take {', '.join(extra)}; identity and scope come from the "
            "conversation, not from tool arguments"
        )


def memory_toolset(
    memory: RemoteMemory, entitled: tuple[Level, ...], offered: MemoryTools = "all"
) -> FunctionToolset[RunDeps]:
    """The memory tools ``offered`` names: ``all``, ``read`` (search only), ``write``
    (save only); a tool not offered is not in the toolset, so the model cannot call it."""
    metrics = memory.metrics

    def refuse(tool: str, message: str) -> ToolFailed:
        metrics.memory_refused.labels(tool).inc()
        return ToolFailed(message)

    async def search_memory(ctx: RunContext[RunDeps], **args: Any) -> str:
        try:
            _check_args("search_memory", args, {"query", "level", "as_of"})
        except ToolFailed as exc:
            raise refuse("search_memory", exc.message) from None
        query = args.get("query")
        level = args.get("level", entitled[-1])
        as_of = args.get("as_of")
        if as_of is not None and not _world_time(as_of):
            raise refuse(
                "search_memory",
                "'as_of' must be an ISO 8601 time with its UTC offset, e.g. 2026-03-01T00:00:00Z",
            )
        if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY:
            raise refuse(
                "search_memory", f"'query' must be a non-empty string of at most {MAX_QUERY}"
            )
        if level not in entitled:
            raise refuse(
                "search_memory",
                f"level {level!r} is not allowed; choose one of: {', '.join(entitled)}",
            )
        if level == "user" and ctx.deps.principal is None:
            raise refuse(
                "search_memory", "level 'user' needs a signed-in user; use a narrower level"
            )
        if level == "agent" and memory.client.agent_identity is None:
            raise refuse("search_memory", "level 'agent' is unavailable; use 'session'")
        try:
            response = await memory.client.recall(
                level,
                query,
                session_id=ctx.deps.session_id,
                principal=ctx.deps.principal,
                top_k=memory.top_k,
                include=["long_term"],
                request_id=ctx.deps.request_id,
                user_token=ctx.deps.user_token,
                as_of=as_of,
            )
        except MemoryClientError as exc:
            metrics.memory_degraded.labels("search").inc()
            raise ToolFailed(f"memory search failed: {exc}") from exc
        if response.degraded:
            metrics.memory_degraded.labels("search").inc()
            return "Memory is temporarily unavailable; no results."
        facts = [f for f in response.long_term.facts if f.text.strip()]
        if not facts:
            return "No matching memories."
        # Every fact, with where it came from: the model judges what to believe.
        return "\n".join(f"- {quoted(f.text)} ({origin(f)})" for f in facts)

    async def save_memory(ctx: RunContext[RunDeps], **args: Any) -> str:
        try:
            _check_args("save_memory", args, {"content"})
        except ToolFailed as exc:
            raise refuse("save_memory", exc.message) from None
        content = args.get("content")
        if not isinstance(content, str) or not content.strip() or len(content) > MAX_SAVE:
            raise refuse(
                "save_memory", f"'content' must be a non-empty string of at most {MAX_SAVE}"
            )
        try:
            # The agent's own note, not the user's words: replayed in the window as the
            # assistant's, and its fact's provenance says saved (or tool).
            await memory.remember(
                ctx.deps,
                [Turn(role="assistant", content=content)],
                origin=save_origin(ctx.messages),
            )
        except (MemoryWriteFailed, MemoryRequestRejected) as exc:
            raise ToolFailed(f"saving to memory failed: {exc}") from exc
        return "Saved."

    search_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "level": {
                "type": "string",
                "enum": list(entitled),
                "description": (
                    "How widely to search: "
                    + ", ".join(_LEVEL_HELP[lvl] for lvl in entitled)
                    + f". Default {entitled[-1]}."
                ),
            },
            "as_of": {
                "type": "string",
                "description": (
                    "Search what was true at this time (ISO 8601 with its offset, e.g."
                    " 2026-03-01T00:00:00Z) instead of now; facts a later one replaced are"
                    " found only this way."
                ),
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    save_schema = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The fact to remember, in one sentence."}
        },
        "required": ["content"],
        "additionalProperties": False,
    }
    tools: list[Tool[RunDeps]] = []
    if offered in ("all", "read"):
        tools.append(
            Tool.from_schema(
                search_memory,
                name="search_memory",
                description="Search long-term memory for facts relevant to a query.",
                json_schema=search_schema,
                takes_ctx=True,
            )
        )
    if offered in ("all", "write"):
        tools.append(
            Tool.from_schema(
                save_memory,
                name="save_memory",
                description="Save a fact to long-term memory so later conversations can recall it.",
                json_schema=save_schema,
                takes_ctx=True,
            )
        )
    return FunctionToolset(tools, id="memory")


def _world_time(value: object) -> bool:
    """Whether ``value`` is an ISO 8601 time with its offset (what the service takes)."""
    if not isinstance(value, str) or len(value) > 64:
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


_LEVEL_HELP: dict[str, str] = {
    "session": "'session' (this conversation)",
    "agent": "'agent' (what this agent learned with this user)",
    "user": "'user' (everything this user shared with any agent)",
}
