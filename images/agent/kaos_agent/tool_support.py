"""Models that cannot call tools: the request is answered again without them.

A small model served by Ollama (SmolLM2-135M) refuses any request that carries tools with
HTTP 400 ``<model> does not support tools``. ``ToolRefusalFallback`` wraps the loop's
model: on that refusal it sends the same request again without tools, so the turn is
answered, and ``ToolSupport`` remembers it for the process (one warning in the log, a
metric), so later requests carry no tools at all. With ``MODEL_TOOLS=off`` no request
carries tools from the start.

Only that refusal counts: an HTTP 400 whose error message says the model does not support
tools. Any other error stays the error it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from kaos_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

# Ollama's words (server/images.go: "<name> does not support" + "tools").
_REFUSAL = re.compile(r"\bdoes not support tools\b")


def refuses_tools(exc: BaseException) -> bool:
    """Whether ``exc`` is a model's refusal of a request because it carried tools."""
    if not isinstance(exc, ModelHTTPError) or exc.status_code != 400:
        return False
    return _REFUSAL.search(_error_message(exc.body)) is not None


def _error_message(body: object) -> str:
    # OpenAI's shape ({"message": ...}, the SDK's body is the inner error object) or
    # Ollama's own ({"error": "..."}), or a plain text body.
    if isinstance(body, dict):
        for key in ("message", "error"):
            value = body.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, dict):
                return _error_message(value)
        return ""
    return body if isinstance(body, str) else ""


class ToolSupport:
    """Whether the model is offered tools; off for good once it refused them."""

    def __init__(self, metrics: AgentMetrics, *, enabled: bool = True) -> None:
        self._metrics = metrics
        self._enabled = enabled
        metrics.model_tools.set(1 if enabled else 0)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def refused(self, model: str) -> None:
        """The model refused a request for its tools: count it, and offer none from now on."""
        self._metrics.model_tools_refused.inc()
        if not self._enabled:
            return
        self._enabled = False
        self._metrics.model_tools.set(0)
        log.warning(
            "the model does not support tools; answering without tools from now on",
            extra={"model": model},
        )


def without_tools(params: ModelRequestParameters) -> ModelRequestParameters:
    return replace(params, function_tools=[], native_tools=[])


def _carries_tools(params: ModelRequestParameters) -> bool:
    return bool(params.function_tools or params.native_tools)


class ToolRefusalFallback(WrapperModel):
    """The loop's model, answering without tools when the model cannot take them."""

    def __init__(self, wrapped: Model, support: ToolSupport) -> None:
        super().__init__(wrapped)
        self._support = support

    def _params(self, params: ModelRequestParameters) -> ModelRequestParameters:
        return params if self._support.enabled else without_tools(params)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        params = self._params(model_request_parameters)
        try:
            return await super().request(messages, model_settings, params)
        except ModelHTTPError as exc:
            if not (_carries_tools(params) and refuses_tools(exc)):
                raise
            self._support.refused(self.model_name)
        return await super().request(messages, model_settings, without_tools(params))

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        params = self._params(model_request_parameters)
        async with AsyncExitStack() as stack:
            # The refusal comes as the request's answer, before the stream opens.
            try:
                stream = await stack.enter_async_context(
                    super().request_stream(messages, model_settings, params, run_context)
                )
            except ModelHTTPError as exc:
                if not (_carries_tools(params) and refuses_tools(exc)):
                    raise
                self._support.refused(self.model_name)
                stream = await stack.enter_async_context(
                    super().request_stream(
                        messages, model_settings, without_tools(params), run_context
                    )
                )
            yield stream
