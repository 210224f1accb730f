"""The summarisation model, called for digest versions: an OpenAI-compatible chat endpoint.

Only background fold work calls it; a request never waits on it. Each call is a GenAI
``chat`` client span (model, reported token usage) and, once the app hands it the
service's ``GenAiMetrics``, one observation of the token and duration histograms.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from kaos_core.telemetry import conventions as otel
from kaos_core.telemetry import tracer
from kaos_core.telemetry.genai_metrics import GenAiMetrics, TokenCounts
from opentelemetry.trace import SpanKind, StatusCode

from kaos_memory.compaction import digest_messages
from kaos_memory.storage.base import TurnRow

_TRACER = tracer(__name__)


class SummarizerError(Exception):
    """The model did not give a usable digest (transport error, non-2xx, empty answer)."""


class Summarizer:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        *,
        system_prompt: str | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.system_prompt = system_prompt
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._metrics: GenAiMetrics | None = None

    def measure_with(self, metrics: GenAiMetrics) -> None:
        """Record each call's duration and token usage in ``metrics`` (the app's)."""
        self._metrics = metrics

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=self.timeout, headers=self.headers)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def digest(self, previous: str | None, turns: Sequence[TurnRow]) -> str:
        attributes = {otel.OPERATION: "chat", otel.REQUEST_MODEL: self.model}
        with _TRACER.start_as_current_span(
            f"chat {self.model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,  # the class only, set below: the text may quote turns
            set_status_on_exception=False,
        ) as span:
            started = time.perf_counter()
            usage: TokenCounts | None = None
            try:
                text, usage = await self._digest(previous, turns)
            except Exception as exc:
                span.set_status(StatusCode.ERROR, type(exc).__name__)
                span.set_attribute("error.type", type(exc).__name__)
                raise
            finally:
                if self._metrics is not None:
                    self._metrics.record("", self.model, time.perf_counter() - started, usage)
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            return text

    async def _digest(
        self, previous: str | None, turns: Sequence[TurnRow]
    ) -> tuple[str, TokenCounts | None]:
        if self._session is None:
            raise RuntimeError("summarizer is not started")
        body = {
            "model": self.model,
            "messages": digest_messages(previous, turns, self.system_prompt),
            "temperature": 0,
        }
        try:
            async with self._session.post(self.url, json=body) as resp:
                if resp.status >= 300:
                    raise SummarizerError(f"summarisation model answered HTTP {resp.status}")
                doc: Any = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SummarizerError(f"summarisation model: {type(exc).__name__}: {exc}") from exc
        try:
            text = doc["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError("summarisation model gave no message content") from exc
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError("summarisation model gave an empty digest")
        return text.strip(), _usage(doc)


def _usage(doc: Any) -> TokenCounts | None:
    """The usage the model reported, if it did (OpenAI's ``usage`` object)."""
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return TokenCounts(input_tokens=prompt, output_tokens=completion)
