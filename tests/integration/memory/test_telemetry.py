"""The memory service's telemetry parts: the write's trace context kept with the fold row
on both backends (so any replica links back to it), and the content opt-in of the
memory spans' attributes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kaos_core.memory.contract import (
    Fact,
    ForgetResponse,
    Forgotten,
    LongTerm,
    RecallRequest,
    RecallResponse,
)
from kaos_core.telemetry import TelemetrySettings, links, setup_telemetry
from kaos_memory import telemetry
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import FoldPolicy, NewTurn
from kaos_memory.storage.sql.dialect import Dialect
from kaos_memory.storage.sql.store import SqlConversationStore
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tests.support.clock import FakeClock

POLICY = FoldPolicy(trigger_tokens=30, target_tokens=10, max_events=100)
WHO = Attribution(group="g", session="s1", principal="alice", agent="kaos://agent/a/b")
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _dialect(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Dialect:
    if kind == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        return SqliteDialect(tmp_path / "conversation.sqlite3")
    from kaos_memory.storage.sql.postgres import PostgresDialect

    return PostgresDialect(request.getfixturevalue("pg_dsn"), pool_size=2)


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def stores(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[SqlConversationStore, SqlConversationStore]]:
    """Two stores on one database: the replica that writes and the one that works."""
    clock = FakeClock()
    writer = SqlConversationStore(_dialect(backend, tmp_path, request), clock=clock)
    await writer.start()
    worker = SqlConversationStore(_dialect(backend, tmp_path, request), clock=clock)
    await worker.start()
    try:
        yield writer, worker
    finally:
        await worker.close()
        await writer.close()


async def test_the_fold_row_keeps_the_writes_trace_context_for_any_replica(
    stores: tuple[SqlConversationStore, SqlConversationStore],
) -> None:
    writer, worker = stores
    turns = [NewTurn("user", f"turn {i}", 10) for i in range(3)]
    await writer.append(WHO, turns, True, POLICY)  # no span: nothing to keep
    write_span = NonRecordingSpan(SpanContext(TRACE_ID, SPAN_ID, False, TraceFlags(1)))
    with trace.use_span(write_span):
        crossed = await writer.append(WHO, turns[:1], True, POLICY)
    assert crossed.fold_id is not None

    digest = await worker.pending_digest_folds(WHO.key)
    extraction = await worker.next_extraction(WHO.key)
    assert [f.trace_context for f in digest] == [TRACEPARENT]
    assert extraction is not None and extraction.trace_context == TRACEPARENT
    link = links([f.trace_context for f in digest])[0]
    assert (link.context.trace_id, link.context.span_id) == (TRACE_ID, SPAN_ID)


async def test_a_fold_recorded_without_a_trace_links_nothing(
    stores: tuple[SqlConversationStore, SqlConversationStore],
) -> None:
    writer, worker = stores
    await writer.append(WHO, [NewTurn("user", f"t {i}", 10) for i in range(4)], True, POLICY)
    folds = await worker.pending_digest_folds(WHO.key)
    assert folds and all(f.trace_context is None for f in folds)
    assert links([f.trace_context for f in folds]) == []


@pytest.fixture
def recorded() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    setup_telemetry("test", TelemetrySettings())  # content capture back to its default, off


def _search(tracer: trace.Tracer, exporter: InMemorySpanExporter, capture: bool) -> ReadableSpan:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"} if capture else {}
    assert setup_telemetry("test", TelemetrySettings.from_env(env)) is None  # only the settings
    req = RecallRequest(level="session", query="where do I live")
    fact = Fact(id="f1", text="I live in Lisbon.", created_at="2026-01-01T00:00:00Z")
    resp = RecallResponse(long_term=LongTerm(facts=[fact]))
    exporter.clear()
    with tracer.start_as_current_span("search_memory g") as span:
        telemetry.recorded_search(span, req, resp)
    (done,) = exporter.get_finished_spans()
    return done


def test_query_and_records_only_under_the_content_opt_in(
    recorded: tuple[trace.Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    plain = _search(tracer, exporter, capture=False)
    assert plain.attributes is not None
    assert plain.attributes["kaos.memory.result.count"] == 1
    assert "gen_ai.memory.query.text" not in plain.attributes
    assert "gen_ai.memory.records" not in plain.attributes
    assert "Lisbon" not in str(dict(plain.attributes))

    opted = _search(tracer, exporter, capture=True)
    assert opted.attributes is not None
    assert opted.attributes["gen_ai.memory.query.text"] == "where do I live"
    assert "I live in Lisbon." in str(opted.attributes["gen_ai.memory.records"])


def test_forget_counts_are_attributes(
    recorded: tuple[trace.Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    resp = ForgetResponse(forgotten=Forgotten(short_term=4, medium_term=1, long_term=2))
    with tracer.start_as_current_span("delete_memory g") as span:
        telemetry.recorded_forget(span, resp)
    (done,) = exporter.get_finished_spans()
    assert done.attributes is not None
    assert dict(done.attributes) == {
        "kaos.memory.deleted.turns": 4,
        "kaos.memory.deleted.digests": 1,
        "kaos.memory.deleted.facts": 2,
        "kaos.memory.degraded": False,
    }
