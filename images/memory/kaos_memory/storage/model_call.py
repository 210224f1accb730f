"""One call of the memory service to its summarisation model, as telemetry sees it: a
GenAI ``chat`` client span (the error's class only on failure, never its text, which may
quote turns), the token usage and finish reason the model reported, and one observation
of the GenAI token and duration histograms. The digest (``kaos_memory.summarizer``) and
the extraction (``storage.mem0.llm``) calls both go through it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kaos_core.telemetry import conventions as otel
from kaos_core.telemetry.genai_metrics import GenAiMetrics, TokenCounts
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer

ANSWER_VERDICT = "kaos.memory.answer.verdict"
ANSWER_REASON = "kaos.memory.answer.reason"
FINISH_REASONS = "gen_ai.response.finish_reasons"


@dataclass
class ModelCall:
    """What the caller learns of the call, set inside the block; recorded at its end."""

    span: Span
    usage: TokenCounts | None = None
    finish: str | None = None


@contextmanager
def model_call(tracer: Tracer, model: str, metrics: GenAiMetrics | None) -> Iterator[ModelCall]:
    attributes = {otel.OPERATION: "chat", otel.REQUEST_MODEL: model}
    with tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,  # the class only, set below: the text may quote turns
        set_status_on_exception=False,
    ) as span:
        call = ModelCall(span)
        started = time.perf_counter()
        try:
            yield call
        except Exception as exc:
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            span.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            if metrics is not None:
                metrics.record("", model, time.perf_counter() - started, call.usage)
        if call.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", call.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", call.usage.output_tokens)
        if call.finish is not None:
            span.set_attribute(FINISH_REASONS, (call.finish,))
