"""A run that is one model request: the agent offers the model no tools.

pydantic-ai's agent graph plans a run as nodes run by tasks (prepare, request, call tools,
end) with capability hooks around each; for a loop with tools that machinery is the loop.
An agent with no tools (no MCP servers, no peers, no memory tools) has no loop: its run is
one request, and the graph's set-up was most of what its turn cost beyond the model
(docs/benchmarks.md, "agent runtime"). ``OneRequest`` sends that request to the same
model chain (tool refusal fallback, metrics, the Chat Completions client) with the
messages the graph would send (the agent's instructions and the recalled facts joined as
pydantic-ai joins them, the history, the prompt), and takes a plain text answer as the
graph takes it (the text parts, concatenated).

Anything else a model may answer (a tool call it was not offered, no text) is the
graph's to handle, with its retries: the run is handed to ``Agent.run`` unchanged. A run
under tracing goes through the graph too, whose spans are the GenAI conventions'. A
streamed answer is read from the model's chunks while it is plain text
(``kaos_agent.text_stream``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.settings import ModelSettings

from kaos_agent.text_stream import (
    TextStream,
    chunk_client,
    open_text_stream,
    plain_event,
    prepared,
    text_delta,
)


@dataclass(frozen=True)
class OneRequest:
    """How a tool-less agent's run is sent: its model, instructions and settings."""

    model: Model
    instructions: str
    settings: ModelSettings | None

    def request(
        self, prompt: str, history: Sequence[ModelMessage], facts: str | None, session: str
    ) -> Request:
        """The run's request: ``history`` and the message carrying ``prompt``, with the
        agent's instructions and the recalled facts as the graph sends them (one part
        each, so one system message each)."""
        parts = [InstructionPart(text) for text in (self.instructions, facts) if text]
        message = ModelRequest(
            parts=[UserPromptPart(prompt)],
            instructions=InstructionPart.join(parts),
            timestamp=datetime.now(UTC),
            conversation_id=session,
        )
        params = ModelRequestParameters(
            output_mode="text", allow_text_output=True, instruction_parts=parts or None
        )
        return Request([*history, message], params)

    async def answer(self, request: Request, deadline: float | None) -> ModelResponse | None:
        """The model's response when it is a plain text answer, else ``None``.

        Raises ``TimeoutError`` past ``deadline`` seconds."""
        async with asyncio.timeout(deadline):
            response = await self.model.request(request.messages, self.settings, request.params)
        return response if text_answer(response) is not None else None

    @asynccontextmanager
    async def stream(self, request: Request) -> AsyncIterator[TextStream]:
        """The answer's text as it streams: read from the chunks when the model is KAOS's
        own client (``kaos_agent.text_stream``), else from pydantic-ai's events."""
        found = chunk_client(self.model)
        ready = None if found is None else prepared(found[0], self.settings, request.params)
        if found is not None and ready is not None:
            client, record = found
            async with open_text_stream(client, request.messages, *ready, record) as text:
                yield text
            return
        async with self.model.request_stream(
            request.messages, self.settings, request.params
        ) as response:
            text = TextStream(_event_text(response, lambda: text))
            yield text


@dataclass(frozen=True)
class Request:
    """One run's request to the model."""

    messages: list[ModelMessage]
    params: ModelRequestParameters

    @property
    def prompt_message(self) -> ModelMessage:
        return self.messages[-1]


def text_answer(response: ModelResponse) -> str | None:
    """The answer's text, as the graph takes a text output: its text parts concatenated
    (thinking set aside); ``None`` for anything the graph must handle."""
    text = ""
    for part in response.parts:
        if isinstance(part, TextPart):
            text += part.content
        elif not isinstance(part, ThinkingPart):
            return None
    return text or None


async def _event_text(
    response: StreamedResponse, text: Callable[[], TextStream]
) -> AsyncIterator[str]:
    """The text deltas of pydantic-ai's stream events; the answer once they end, when
    every event was a plain text answer's."""
    async for event in response:
        if not plain_event(event):
            return
        delta = text_delta(event)
        if delta:
            yield delta
    text().response = response.get()
