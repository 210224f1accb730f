"""The agent's GenAI telemetry: pydantic-ai's own spans, and token metrics on ``/metrics``.

Spans: when tracing is on (``kaos_core.telemetry``), the agent is built with pydantic-ai's
``InstrumentationSettings``, which emit the GenAI conventions' ``invoke_agent`` (with
``gen_ai.agent.name`` and ``gen_ai.conversation.id``, the run's session), ``chat`` per
model request and ``execute_tool`` per tool call; prompts and tool arguments only under
the content opt-in. Off, the agent is built without instrumentation: nothing wraps it.

Metrics: ``MeteredModel`` wraps the loop's model, whether tracing is on or not, and
records each request's duration and the token usage the model reported in the
conventions' two histograms (``kaos_core.telemetry.genai_metrics``), as Prometheus on
the app's registry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

from kaos_core import telemetry
from kaos_core.telemetry.genai_metrics import GenAiMetrics
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage


class MeteredModel(WrapperModel):
    """The loop's model, with each request's duration and reported usage recorded."""

    def __init__(self, wrapped: Model, metrics: GenAiMetrics, agent: str) -> None:
        super().__init__(wrapped)
        self._metrics = metrics
        self._agent = agent

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        started = time.perf_counter()
        try:
            response = await super().request(messages, model_settings, model_request_parameters)
        except Exception:
            self._metrics.record(self._agent, self.model_name, time.perf_counter() - started, None)
            raise
        self._metrics.record(
            self._agent, self.model_name, time.perf_counter() - started, response.usage
        )
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        started = time.perf_counter()
        usage: RequestUsage | None = None
        try:
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as stream:
                yield stream
                usage = stream.usage
        finally:
            self.record(time.perf_counter() - started, usage)

    def record(self, seconds: float, usage: RequestUsage | None) -> None:
        """One request of the wrapped model, sent around this wrapper
        (``kaos_agent.text_stream``) or through it."""
        self._metrics.record(self._agent, self.model_name, seconds, usage)


def instrumentation() -> InstrumentationSettings | None:
    """pydantic-ai's GenAI instrumentation when tracing is on, else ``None`` (none at all)."""
    if not telemetry.enabled():
        return None
    return InstrumentationSettings(include_content=telemetry.capture_content())
