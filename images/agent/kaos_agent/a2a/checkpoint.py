"""An A2A run's checkpoints: each completed step written to its task's row, and the history
another replica resumes the run from when the first one died.

The recorder is a pydantic-ai capability added to the run (``AgentRuntime.run``): after
each model response (``after_node_run`` of a model request) it saves the run's messages,
and after each tool call (``after_tool_execute``) the messages plus the results finished
so far, as a trailing request marked ``interrupted`` (pydantic-ai's own shape for tool
returns collected when a run stops). A save is awaited before the run goes on, so a tool
result is stored before the model sees it. A save refused because another replica claimed
the task (``LeaseLost``) stops this run; a store that cannot be reached is logged and the
run goes on (a resume then reports that step's calls as interrupted: never re-run).

A checkpoint is JSON: the messages (``ModelMessagesTypeAdapter``: the memory's window the
run was given, then its own) and the recalled facts it ran with. ``resume_history``
closes each tool call without a result as ``INTERRUPTED``, so the model, not the runtime,
decides whether to call it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kaos_core.errors import KaosError
from pydantic import BaseModel, ValidationError
from pydantic_ai import ModelRequestNode, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.tools import DeferredToolResults, ToolDefinition
from pydantic_core import PydanticSerializationError

from kaos_agent.context import RunDeps
from kaos_agent.runner import ResumePoint, StepRecorder

log = logging.getLogger(__name__)

INTERRUPTED = (
    "This tool call was interrupted: the agent's replica stopped while it ran, so it may or "
    "may not have taken effect. It was not run again; check before repeating it."
)

# Writes a checkpoint to the task's row; False: another replica holds the task now.
Save = Callable[[bytes], Awaitable[bool]]


class LeaseLost(KaosError):
    """Another replica claimed this run's task (this one's lease lapsed): the run stops."""

    status = 409
    code = "lease_lost"

    def __init__(self) -> None:
        super().__init__("another replica took over this task")


class _Saved(BaseModel):
    messages: list[Any]
    facts: str | None = None


def encode(messages: list[ModelMessage], *, facts: str | None) -> bytes:
    dumped = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    return _Saved(messages=dumped, facts=facts).model_dump_json().encode()


def decode(data: bytes, *, approvals: DeferredToolResults | None = None) -> ResumePoint:
    """The resume point of a checkpoint; ``ValueError`` for one that cannot be read. With
    ``approvals`` (a paused run's decisions) the calls without a result are the ones
    decided, and stay open for the run to answer them."""
    try:
        saved = _Saved.model_validate_json(data)
        messages = ModelMessagesTypeAdapter.validate_python(saved.messages)
    except ValidationError as exc:
        raise ValueError("unreadable checkpoint") from exc
    if approvals is not None:
        return ResumePoint(messages, facts=saved.facts, approvals=approvals)
    return ResumePoint(resume_history(messages), facts=saved.facts)


def resume_history(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` ready to resume: the last response's calls without a result answered
    ``INTERRUPTED`` in a (complete) request after it."""
    if not messages:
        return messages
    last = messages[-1]
    done: list[Any] = []
    if isinstance(last, ModelRequest):
        if last.state != "interrupted":
            return messages
        done, messages = list(last.parts), messages[:-1]
    response = messages[-1] if messages else None
    if not isinstance(response, ModelResponse) or not response.tool_calls:
        return messages
    answered = {p.tool_call_id for p in done if isinstance(p, ToolReturnPart)}
    interrupted = [
        ToolReturnPart(
            tool_name=call.tool_name,
            content=INTERRUPTED,
            tool_call_id=call.tool_call_id,
            tool_kind=call.tool_kind,
            outcome="interrupted",
        )
        for call in response.tool_calls
        if call.tool_call_id not in answered
    ]
    return [*messages, ModelRequest(parts=[*done, *interrupted])]


class Recorder(StepRecorder):
    """Saves one run's steps (see the module's docstring); one instance per run."""

    def __init__(self, save: Save, resume: ResumePoint | None = None) -> None:
        self._save = save
        self.resume = resume
        self.facts = resume.facts if resume is not None else None
        self._results: dict[str, ToolReturnPart] = {}
        self._lock = asyncio.Lock()

    def begin(self, facts: str | None) -> None:
        """A fresh run, with the recalled ``facts``."""
        self.facts = facts

    async def after_node_run(self, ctx: RunContext[RunDeps], *, node: Any, result: Any) -> Any:
        last = ctx.messages[-1] if ctx.messages else None
        if isinstance(node, ModelRequestNode) and isinstance(last, ModelResponse):
            self._results.clear()  # a new response: its calls have no result yet
            await self._write(list(ctx.messages))
        return result

    async def after_tool_execute(
        self,
        ctx: RunContext[RunDeps],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        result: Any,
    ) -> Any:
        value, metadata = (
            (result.return_value, result.metadata)
            if isinstance(result, ToolReturn)
            else (result, None)
        )
        self._results[call.tool_call_id] = ToolReturnPart(
            tool_name=call.tool_name,
            content=value,
            tool_call_id=call.tool_call_id,
            metadata=metadata,
            tool_kind=call.tool_kind,
        )
        done = ModelRequest(parts=list(self._results.values()), state="interrupted")
        await self._write([*ctx.messages, done])
        return result

    async def _write(self, messages: list[ModelMessage]) -> None:
        async with self._lock:
            try:
                data = encode(messages, facts=self.facts)
            except (PydanticSerializationError, ValueError, TypeError):
                # A result JSON cannot hold: a resume reports that call as interrupted.
                log.warning("a run step could not be checkpointed")
                return
            try:
                held = await self._save(data)
            except KaosError:
                log.warning("a run step could not be checkpointed: the task store failed")
                return
            if not held:
                raise LeaseLost()
