"""Spans of the memory operations, on the GenAI memory conventions.

One span per request, around the service call: ``search_memory`` (recall and list),
``update_memory`` (write) and ``delete_memory`` (forget), each named ``<operation>
<store>`` with ``gen_ai.operation.name``, ``gen_ai.memory.store.id`` (the store's
collection) and the scope level; what the operation touched (facts found, turns
accepted, rows forgotten per tier) is set from the answer. The query text and the
records found are content: they are set only under the opt-in
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``). With tracing off the tracer is
the API's no-op one.

Background work links back: the write's span context is stored with the fold row it
records (``current_traceparent``), and the digest and extraction spans of whichever
replica works the fold carry a span link to it (``fold_span``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from kaos_core import telemetry
from kaos_core.memory.contract import (
    ForgetResponse,
    ListRequest,
    RecallRequest,
    RecallResponse,
    WriteRequest,
    WriteResponse,
)
from kaos_core.telemetry import capture_content, links, tracer
from kaos_core.telemetry import conventions as otel
from kaos_core.wire import Identity
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, StatusCode

from kaos_memory.storage.base import Fold

_TRACER = tracer("kaos_memory")


def _start(operation: str, store: str, level: str, identity: Identity) -> dict[str, object]:
    attributes: dict[str, object] = {
        otel.OPERATION: operation,
        otel.MEMORY_STORE_ID: store,
        otel.MEMORY_SCOPE_LEVEL: level,
    }
    if identity.session is not None:
        attributes[otel.CONVERSATION_ID] = identity.session
    return attributes


@contextmanager
def _span(
    name: str, attributes: dict[str, object], linked: list[Link] | None = None
) -> Iterator[Span]:
    with _TRACER.start_as_current_span(
        name,
        kind=SpanKind.INTERNAL,
        attributes=attributes,  # type: ignore[arg-type]
        links=linked,
        # An exception's text may quote content or a store's address: its class only.
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except Exception as exc:
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            span.set_attribute("error.type", type(exc).__name__)
            raise


@contextmanager
def memory_span(operation: str, store: str, level: str, identity: Identity) -> Iterator[Span]:
    if not telemetry.enabled():
        # The API's no-op span still sets and resets the context on every request.
        yield INVALID_SPAN
        return
    with _span(f"{operation} {store}", _start(operation, store, level, identity)) as span:
        yield span


def recorded_search(span: Span, req: RecallRequest | ListRequest, resp: RecallResponse) -> None:
    if not span.is_recording():
        return
    facts = resp.long_term.facts
    span.set_attribute(otel.MEMORY_RESULT_COUNT, len(facts))
    span.set_attribute(otel.MEMORY_DEGRADED, resp.degraded)
    if capture_content():
        if isinstance(req, RecallRequest):
            span.set_attribute(otel.MEMORY_QUERY_TEXT, req.query)
        span.set_attribute(
            otel.MEMORY_RECORDS,
            json.dumps([{"id": f.id, "content": f.text} for f in facts], ensure_ascii=False),
        )


def recorded_write(span: Span, req: WriteRequest, resp: WriteResponse) -> None:
    if not span.is_recording():
        return
    span.set_attribute(otel.MEMORY_TURNS, resp.accepted)
    span.set_attribute("kaos.memory.scheduled", resp.scheduled)
    span.set_attribute(otel.MEMORY_DEGRADED, resp.degraded)
    if capture_content():
        span.set_attribute(
            otel.MEMORY_RECORDS,
            json.dumps([t.model_dump() for t in req.turns], ensure_ascii=False),
        )


def recorded_forget(span: Span, resp: ForgetResponse) -> None:
    if not span.is_recording():
        return
    gone = resp.forgotten
    span.set_attribute(otel.MEMORY_DELETED_TURNS, gone.short_term)
    span.set_attribute("kaos.memory.deleted.digests", gone.medium_term)
    span.set_attribute(otel.MEMORY_DELETED_FACTS, gone.long_term)
    span.set_attribute(otel.MEMORY_DEGRADED, resp.degraded)


@contextmanager
def fold_span(step: str, store: str, replica: str, folds: list[Fold]) -> Iterator[Span]:
    """A background step (``digest``, ``extract``) over ``folds``, linked to the writes
    that recorded them, whichever process that was."""
    attributes: dict[str, object] = {
        otel.MEMORY_STORE_ID: store,
        otel.MEMORY_REPLICA: replica,
        otel.MEMORY_FOLDS: len(folds),
    }
    if len(folds) == 1:
        attributes[otel.MEMORY_FOLD_ID] = folds[0].id
    if folds:
        attributes[otel.MEMORY_SESSION] = folds[0].session
    with _span(
        f"memory.{step} {store}", attributes, links([f.trace_context for f in folds])
    ) as span:
        yield span
