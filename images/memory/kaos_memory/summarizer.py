"""The summarisation model, called for digest versions: an OpenAI-compatible chat endpoint.

Only background fold work calls it; a request never waits on it. Each call is a GenAI
``chat`` client span (model, reported token usage, finish reason) and, once the app hands
it the service's ``GenAiMetrics``, one observation of the token and duration histograms.

An answer is refused as ``UnusableDigest`` when it is empty, cut off at the model's token
limit (``finish_reason: length``: the narrative's end is missing) or longer than the
digest budget (a model repeating itself); the caller decides whether to ask again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import aiohttp
from kaos_core.telemetry import tracer
from kaos_core.telemetry.genai_metrics import GenAiMetrics, TokenCounts
from kaos_core.tracing import client_session
from kaos_core.wire import AUTHORIZATION_HEADER

from kaos_memory.compaction import count_tokens, digest_messages
from kaos_memory.storage.base import TurnRow
from kaos_memory.storage.model_call import ANSWER_REASON, ANSWER_VERDICT, model_call

_TRACER = tracer(__name__)


DigestReason = Literal["empty", "cut_off", "over_budget"]


class SummarizerError(Exception):
    """The model did not give a digest (transport error, non-2xx, no message)."""


class UnusableDigest(SummarizerError):
    """The model answered, but not with a digest to keep; ``reason`` says why."""

    def __init__(self, reason: DigestReason) -> None:
        super().__init__(f"summarisation model gave an unusable digest ({reason})")
        self.reason: DigestReason = reason


class Summarizer:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        *,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.system_prompt = system_prompt
        # The longest digest kept, counted as the window counts (``compaction``).
        self.max_tokens = max_tokens
        self.headers = {AUTHORIZATION_HEADER: f"Bearer {api_key}"} if api_key else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._metrics: GenAiMetrics | None = None

    def measure_with(self, metrics: GenAiMetrics) -> None:
        """Record each call's duration and token usage in ``metrics`` (the app's)."""
        self._metrics = metrics

    async def start(self) -> None:
        self._session = client_session(timeout=self.timeout, headers=self.headers)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def digest(self, previous: str | None, turns: Sequence[TurnRow]) -> str:
        with model_call(_TRACER, self.model, self._metrics) as call:
            text, call.usage, call.finish = await self._digest(previous, turns)
            reason = self._unusable(text, call.finish)
            call.span.set_attribute(ANSWER_VERDICT, "unusable" if reason else "digest")
            if reason is not None:
                call.span.set_attribute(ANSWER_REASON, reason)
        # Raised once the span is closed: an unusable answer is the model's, not a failed call.
        if reason is not None:
            raise UnusableDigest(reason)
        return text

    def _unusable(self, text: str, finish: str | None) -> DigestReason | None:
        if finish == "length":
            return "cut_off"
        if not text:
            return "empty"
        if self.max_tokens is not None and count_tokens(text) > self.max_tokens:
            return "over_budget"
        return None

    async def _digest(
        self, previous: str | None, turns: Sequence[TurnRow]
    ) -> tuple[str, TokenCounts | None, str | None]:
        if self._session is None:
            raise RuntimeError("summarizer is not started")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": digest_messages(previous, turns, self.system_prompt),
            "temperature": 0,
        }
        if self.max_tokens is not None:
            # The model stops where the answer would be refused anyway: a small model that
            # rambles holds a shared model for seconds, not for its whole context (and past
            # the call's timeout, where its answer is lost all the same).
            body["max_tokens"] = self.max_tokens
        try:
            async with self._session.post(self.url, json=body) as resp:
                if resp.status >= 300:
                    raise SummarizerError(f"summarisation model answered HTTP {resp.status}")
                doc: Any = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SummarizerError(f"summarisation model: {type(exc).__name__}: {exc}") from exc
        try:
            choice = doc["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError("summarisation model gave no message content") from exc
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        text = text.strip() if isinstance(text, str) else ""
        return text, _usage(doc), finish if isinstance(finish, str) else None


def _usage(doc: Any) -> TokenCounts | None:
    """The usage the model reported, if it did (OpenAI's ``usage`` object)."""
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return TokenCounts(input_tokens=prompt, output_tokens=completion)
