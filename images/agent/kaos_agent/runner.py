"""One agent run, whatever started it: memory recall, the pydantic-ai loop, memory flush.

Every entry point (chat completions, A2A, the autonomous loop) goes through
``AgentRuntime``, so memory rules, step limits, metrics and error mapping are the same
for all of them. History precedence: the memory's window for the session when there is
one, otherwise the earlier messages the caller sent (an OpenAI client's own history).
A run given a ``StepRecorder`` (A2A) has its steps checkpointed; one given a recorder with
a ``ResumePoint`` continues a run another replica started: no recall (its window and facts
are in the checkpoint) and one memory write at its end, of the whole run's turns.
An agent that offers the model no tools sends its run as one model request
(``kaos_agent.one_request``) and hands the graph only an answer that is not plain text.
With approval gates (``kaos_agent.approvals``) a run may end waiting for a decision
(``RunOutcome.paused``): A2A keeps it as a paused task; elsewhere ``on_pause`` does, and
the answer names that task. A ``ResumePoint`` with ``approvals`` continues it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kaos_core.errors import KaosError
from kaos_core.memory.contract import Turn
from pydantic_ai import Agent, AgentRunResultEvent, capture_run_messages
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    AgentRunError,
    ModelAPIError,
    RunTimedOut,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
)
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.usage import UsageLimits

from kaos_agent.context import RunDeps
from kaos_agent.memory.base import Memory, MemoryWriteFailed
from kaos_agent.memory.turns import turns_from_messages
from kaos_agent.metrics import AgentMetrics
from kaos_agent.one_request import OneRequest, text_answer
from kaos_agent.run_messages import count_steps, new_messages, shorter
from kaos_agent.run_texts import (
    OUT_OF_TIME,
    step_limit_text,
    time_budget_text,
    token_budget_text,
    tool_budget_text,
)
from kaos_agent.settings import RunBudget
from kaos_agent.text_stream import text_delta

log = logging.getLogger(__name__)


MODEL_FAILED = "the model could not answer"


class ModelUnavailable(KaosError):
    status = 502
    code = "model_unavailable"


class MemoryStrictFailure(KaosError):
    """The answer exists but its memory write failed under ``failureMode: strict``."""

    status = 500
    code = "memory_write_failed"


@dataclass(frozen=True)
class TokenUsage:
    """The tokens the model reported over one run's model requests, summed."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def of(cls, messages: Sequence[ModelMessage]) -> TokenUsage:
        """The usage the model's answers among ``messages`` reported."""
        answers = [m.usage for m in messages if isinstance(m, ModelResponse)]
        return cls(
            input_tokens=sum(u.input_tokens for u in answers),
            output_tokens=sum(u.output_tokens for u in answers),
        )


@dataclass
class StreamState:
    """What a stream leaves behind once its last delta is out."""

    finish_reason: str = "stop"
    usage: TokenUsage = field(default_factory=TokenUsage)


@dataclass(frozen=True)
class Paused:
    """A run waiting for approval of the calls in ``requests`` (``kaos_agent.approvals``):
    its messages so far (the last one makes the calls) and the recalled facts it ran with."""

    requests: DeferredToolRequests
    messages: list[ModelMessage]
    facts: str | None = None


# What a run that paused outside A2A (chat completions) answers: the paused run is kept as
# an A2A task, which the text names.
OnPause = Callable[[str, RunDeps, Paused], Awaitable[str]]


@dataclass
class RunOutcome:
    text: str
    # "stop" for a final answer, "length" when the step limit or a budget (tool calls,
    # wall time) ended the run.
    finish_reason: str
    steps: int
    memory_degraded: bool = False
    turns: list[Turn] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    # Set when the run waits for approval ("input_required"; an answer only outside A2A).
    paused: Paused | None = None


@dataclass(frozen=True)
class ResumePoint:
    """Where a checkpointed run resumes: its history (the window it was given, then its own
    messages) and the recalled facts it ran with."""

    history: list[ModelMessage]
    facts: str | None = None
    # The decisions a paused run resumes with (its history ends with the calls).
    approvals: DeferredToolResults | None = None


class StepRecorder(AbstractCapability[RunDeps]):
    """A capability that checkpoints one run's steps (``kaos_agent.a2a.checkpoint``)."""

    resume: ResumePoint | None = None

    def begin(self, facts: str | None) -> None:
        """A fresh run, with the recalled ``facts``."""


class Accounting(Protocol):
    """What a run may spend and what it spent (``kaos_agent.usage``): asked before a run
    starts, told when it ends."""

    async def admit(self, deps: RunDeps) -> int | None:
        """The tokens this run may use (``None``: no limit). Raises a 429 ``KaosError``
        when a budget has nothing left, before any model call."""

    async def record(self, deps: RunDeps, entry: str, usage: TokenUsage) -> None:
        """The tokens a finished run used (never raises)."""


class AgentRuntime:
    def __init__(
        self,
        agent: Agent[RunDeps, str],
        memory: Memory,
        metrics: AgentMetrics,
        *,
        max_steps: int,
        budget: RunBudget | None = None,
        one_request: OneRequest | None = None,
        accounting: Accounting | None = None,
        gated: bool = False,
    ) -> None:
        self.agent = agent
        self.memory = memory
        self.metrics = metrics
        self.max_steps = max_steps
        self.budget = budget or RunBudget()
        # Set when a run is one model request (the agent offers no tools, nothing traces).
        self.one_request = one_request
        self.accounting = accounting
        # With approval gates a run may end waiting for a decision instead of answering.
        self._output: Any = [str, DeferredToolRequests] if gated else None
        self.on_pause: OnPause | None = None

    def _limits(self, steps_cap: int, tokens: int | None = None) -> UsageLimits:
        return UsageLimits(
            request_limit=steps_cap,
            tool_calls_limit=self.budget.max_tool_calls,
            total_tokens_limit=tokens,
        )

    async def _admit(self, deps: RunDeps) -> int | None:
        return None if self.accounting is None else await self.accounting.admit(deps)

    async def _record(self, deps: RunDeps, entry: str, usage: TokenUsage) -> None:
        if self.accounting is not None:
            await self.accounting.record(deps, entry, usage)

    def _stopped(
        self,
        exc: UsageLimitExceeded | TimeoutError,
        steps_cap: int,
        deadline: float | None,
        tokens: int | None = None,
    ) -> tuple[str, str]:
        """The outcome label and the final answer of a run a limit ended."""
        budget = self.budget
        if isinstance(exc, UsageLimitExceeded):
            # pydantic-ai names the limit it enforced in the message.
            if budget.max_tool_calls is not None and "tool_calls_limit" in str(exc):
                return "tool_budget", tool_budget_text(budget.max_tool_calls)
            if tokens is not None and "tokens_limit" in str(exc):
                return "token_budget", token_budget_text(tokens)
            return "step_limit", step_limit_text(steps_cap)
        if budget.max_wall_seconds is not None and deadline == budget.max_wall_seconds:
            return "time_budget", time_budget_text(budget.max_wall_seconds)
        return "timeout", OUT_OF_TIME

    async def _prepare(
        self, prompt: str, deps: RunDeps, client_history: Sequence[ModelMessage]
    ) -> tuple[list[ModelMessage], str | None, bool]:
        recalled = await self.memory.recall(deps, prompt)
        history = recalled.history or list(client_history)
        return history, recalled.facts_block, recalled.degraded

    async def run(
        self,
        prompt: str,
        deps: RunDeps,
        *,
        entry: str,
        client_history: Sequence[ModelMessage] = (),
        max_steps: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (pydantic-ai's own run deadline)
        recorder: StepRecorder | None = None,
    ) -> RunOutcome:
        started = time.perf_counter()
        steps_cap = max_steps or self.max_steps
        tokens = await self._admit(deps)
        resume = recorder.resume if recorder is not None else None
        if resume is not None:
            history, facts, degraded = resume.history, resume.facts, False
        else:
            history, facts, degraded = await self._prepare(prompt, deps, client_history)
            if recorder is not None:
                recorder.begin(facts)
        outcome = "ok"
        deadline = shorter(timeout, self.budget.max_wall_seconds)
        if self.one_request is not None and resume is None:
            try:
                once = await self._once(prompt, deps, history, facts, deadline)
            except TimeoutError as exc:
                outcome, text = self._stopped(exc, steps_cap, deadline)
                once = RunOutcome(text, "length", steps=1, memory_degraded=degraded)
                once.turns = [Turn(role="user", content=prompt)]
            except (ModelAPIError, UnexpectedModelBehavior) as exc:
                raise self._model_failed(entry, started, exc) from exc
            if once is not None:
                once.memory_degraded = degraded
                if tokens is not None and once.usage.total_tokens > tokens:
                    outcome = "token_budget"
                    once.text, once.finish_reason = token_budget_text(tokens), "length"
                if once.finish_reason == "length":
                    once.turns.append(Turn(role="assistant", content=once.text))
                self._finish(entry, outcome, started, once.steps)
                await self._record(deps, entry, once.usage)
                await self._remember(deps, once.turns)
                return once
        with capture_run_messages() as captured:
            try:
                result = await self.agent.run(
                    prompt if resume is None else None,
                    deps=deps,
                    message_history=history or None,
                    instructions=facts,
                    conversation_id=deps.session_id,
                    usage_limits=self._limits(steps_cap, tokens),
                    timeout=deadline,
                    capabilities=[recorder] if recorder is not None else None,
                    output_type=self._output,
                    deferred_tool_results=resume.approvals if resume is not None else None,
                )
            except (UsageLimitExceeded, RunTimedOut) as exc:
                outcome, text = self._stopped(exc, steps_cap, deadline, tokens)
                new = new_messages(captured, prompt)
                run = RunOutcome(text, "length", steps=count_steps(new), memory_degraded=degraded)
            except (ModelAPIError, UnexpectedModelBehavior) as exc:
                raise self._model_failed(entry, started, exc) from exc
            except AgentRunError as exc:
                self._finish(entry, "error", started, 0)
                log.error("agent run failed", exc_info=True)
                raise ModelUnavailable("the agent run failed") from exc
            else:
                if isinstance(result.output, DeferredToolRequests):
                    paused = Paused(result.output, result.all_messages(), facts)
                    steps = result.usage.requests
                    return await self._paused(prompt, deps, entry, started, steps, paused, recorder)
                # A resumed run's own messages began on the replica that started it.
                new = (
                    result.new_messages()
                    if resume is None
                    else new_messages(result.all_messages(), prompt)
                )
                run = RunOutcome(
                    result.output,
                    "stop",
                    steps=result.usage.requests,
                    memory_degraded=degraded,
                )
        run.turns = turns_from_messages(new)
        run.usage = TokenUsage.of(new)
        if run.finish_reason == "length":
            run.turns.append(Turn(role="assistant", content=run.text))
        self._finish(entry, outcome, started, run.steps)
        await self._record(deps, entry, run.usage)
        await self._remember(deps, run.turns)
        return run

    async def _paused(
        self,
        prompt: str,
        deps: RunDeps,
        entry: str,
        started: float,
        steps: int,
        paused: Paused,
        recorder: StepRecorder | None,
    ) -> RunOutcome:
        """A run that waits for approval: nothing remembered or accounted yet (its end does
        that, for the whole run); outside A2A its answer says where it waits."""
        self._finish(entry, "paused", started, steps)
        text = ""
        if recorder is None and self.on_pause is not None:
            text = await self.on_pause(prompt, deps, paused)
        return RunOutcome(text, "stop" if text else "input_required", steps, paused=paused)

    async def _once(
        self,
        prompt: str,
        deps: RunDeps,
        history: list[ModelMessage],
        facts: str | None,
        deadline: float | None,
    ) -> RunOutcome | None:
        """The run as one model request; ``None`` when the answer is the graph's to handle."""
        assert self.one_request is not None
        request = self.one_request.request(prompt, history, facts, deps.session_id)
        response = await self.one_request.answer(request, deadline)
        if response is None:
            return None
        new = [request.prompt_message, response]
        run = RunOutcome(text_answer(response) or "", "stop", steps=1)
        run.turns = turns_from_messages(new)
        run.usage = TokenUsage.of(new)
        return run

    async def stream(
        self,
        prompt: str,
        deps: RunDeps,
        *,
        entry: str,
        client_history: Sequence[ModelMessage] = (),
        state: StreamState | None = None,
    ) -> AsyncGenerator[str, None]:
        """Text deltas of the answer as the model produces them; memory is written at the end.

        A failure after the first delta cannot change the HTTP status any more; it ends the
        stream with an explanatory text instead. ``state`` receives the finish reason.
        """
        state = state if state is not None else StreamState()
        started = time.perf_counter()
        tokens = await self._admit(deps)
        history, facts, _ = await self._prepare(prompt, deps, client_history)
        outcome = "ok"
        steps = 0
        final_text: list[str] = []
        new: list[ModelMessage] = []
        stopped_text = ""
        deadline = self.budget.max_wall_seconds
        if self.one_request is not None and deadline is None and tokens is None:
            # (A wall budget is the graph's to keep: a deadline cannot span this
            # generator's yields.)
            request = self.one_request.request(prompt, history, facts, deps.session_id)
            answer: ModelResponse | None = None
            try:
                async with self.one_request.stream(request) as text:
                    async for delta in text:
                        final_text.append(delta)
                        yield delta
                    answer = text.response
            except (ModelAPIError, UnexpectedModelBehavior) as exc:
                failed = self._model_failed(entry, started, exc)
                if not final_text:
                    raise failed from exc
                yield "\n\n[the model failed before finishing this answer]"
                return
            if answer is not None and text_answer(answer) is None:
                answer = None  # not plain text: the graph's to handle
            if answer is None and final_text:
                # Text went out: that is the answer, whatever followed it.
                answer = ModelResponse(parts=[TextPart("".join(final_text))])
            if answer is not None:
                state.usage = TokenUsage.of([answer])
                self._finish(entry, outcome, started, 1)
                await self._record(deps, entry, state.usage)
                await self._remember(deps, turns_from_messages([request.prompt_message, answer]))
                return
        async with self.agent.run_stream_events(
            prompt,
            deps=deps,
            message_history=history or None,
            instructions=facts,
            conversation_id=deps.session_id,
            usage_limits=self._limits(self.max_steps, tokens),
            timeout=deadline,
            output_type=self._output,
        ) as events:
            paused: Paused | None = None
            try:
                async for event in events:
                    if isinstance(event, AgentRunResultEvent) and isinstance(
                        event.result.output, DeferredToolRequests
                    ):
                        messages = event.result.all_messages()
                        paused = Paused(event.result.output, messages, facts)
                    delta = text_delta(event)
                    if delta:
                        final_text.append(delta)
                        yield delta
            except (UsageLimitExceeded, RunTimedOut) as exc:
                outcome, stopped_text = self._stopped(exc, self.max_steps, deadline, tokens)
                state.finish_reason = "length"
                note = "\n\n" + stopped_text
                final_text.append(note)
                yield note
            except (ModelAPIError, UnexpectedModelBehavior, AgentRunError) as exc:
                failed = self._model_failed(entry, started, exc)
                if not final_text:
                    raise failed from exc
                yield "\n\n[the model failed before finishing this answer]"
                return
            if paused is not None:
                steps = sum(1 for m in paused.messages if isinstance(m, ModelResponse))
                held = await self._paused(prompt, deps, entry, started, steps, paused, None)
                yield ("\n\n" if final_text else "") + held.text
                return
            try:
                new = events.new_messages()
                steps = events.usage.requests
            except AgentRunError:
                new = []
            state.usage = TokenUsage.of(new)
        turns = turns_from_messages(new) if new else [Turn(role="user", content=prompt)]
        if stopped_text:
            turns.append(Turn(role="assistant", content=stopped_text))
        self._finish(entry, outcome, started, steps)
        await self._record(deps, entry, state.usage)
        await self._remember(deps, turns)

    async def _remember(self, deps: RunDeps, turns: list[Turn]) -> None:
        try:
            await self.memory.remember(deps, turns)
        except MemoryWriteFailed as exc:
            log.warning("memory write failed under failureMode strict", extra={"error": str(exc)})
            raise MemoryStrictFailure(
                "the answer was produced but could not be written to memory (failureMode strict)"
            ) from exc

    def _model_failed(self, entry: str, started: float, exc: Exception) -> ModelUnavailable:
        """The run ended on the model's failure: counted, logged, and the error to raise."""
        self._finish(entry, "model_error", started, 0)
        log.warning("model failed", extra={"error": str(exc)})
        return ModelUnavailable(MODEL_FAILED)

    def _finish(self, entry: str, outcome: str, started: float, steps: int) -> None:
        self.metrics.runs.labels(entry, outcome).inc()
        self.metrics.steps.inc(steps)
        self.metrics.run_latency.labels(entry).observe(time.perf_counter() - started)
