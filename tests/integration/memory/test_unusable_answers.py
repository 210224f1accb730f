"""A real small model answers badly: prose instead of JSON, nothing, or text cut off at its
token limit. Each such answer is counted and recorded on the step's span, asked again a
bounded number of times, and then the step ends without losing anything: an extraction is
recorded ``unusable`` (its turns stay in the database and in the digest, later folds go
on), a digest keeps the previous version and leaves its folds pending.

The consolidation parts run in the test process on real stores (SQLite + embedded Chroma,
or PostgreSQL + pgvector) with Mem0; the development model spoils its answers on demand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kaos_core.telemetry.genai_metrics import GenAiMetrics
from kaos_devmodel.faults import NOT_JSON
from kaos_memory import summarizer as summarizer_module
from kaos_memory import telemetry
from kaos_memory.consolidation import ConsolidationPolicy, Consolidator
from kaos_memory.deps import MemoryDeps, default_deps
from kaos_memory.executor import BackgroundExecutor, RetryPolicy
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import FoldPolicy, NewTurn
from kaos_memory.storage.mem0 import llm as mem0llm
from kaos_memory.storage.mem0.terms import FOLD_KEY
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from tests.support.clock import FakeClock
from tests.support.devmodel import DevModel
from tests.support.memory import MemoryDb, consolidation_stores

WHO = Attribution(group="answers", session="s1", principal="alice", agent="kaos://agent/t/a")
FOLD_ALL = FoldPolicy(trigger_tokens=1, target_tokens=0, max_events=10_000)
RETRIES = 2


@dataclass
class Parts:
    deps: MemoryDeps
    db: MemoryDb
    registry: CollectorRegistry
    metrics: MemoryMetrics
    spans: InMemorySpanExporter

    def sample(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def folds(self) -> list[dict[str, Any]]:
        return sorted(self.db.folds(), key=lambda f: int(f["id"]))


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The spans of the extraction, digest and model calls (the modules' tracers pointed
    at a provider of the test's own, so the process-wide one is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for module in (mem0llm, summarizer_module, telemetry):
        monkeypatch.setattr(module, "_TRACER", provider.get_tracer(module.__name__))
    yield exporter


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
async def parts(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    devmodel: DevModel,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Parts]:
    settings, db = consolidation_stores(
        request,
        monkeypatch,
        tmp_path / "data",
        devmodel.base_url,
        "kaos_answers",
        answer_retries=RETRIES,
        digest_max_tokens=64,
    )
    deps = default_deps(settings, FakeClock())
    registry = CollectorRegistry()
    deps.longterm.measure_with(GenAiMetrics.create(registry))
    try:
        await deps.conversation.start()
        await deps.longterm.start()
        await deps.summarizer.start()
        yield Parts(deps, db, registry, MemoryMetrics.create(registry), spans)
    finally:
        await deps.summarizer.close()
        await deps.longterm.close()
        await deps.conversation.close()


async def requests_about(devmodel: DevModel, kind: str, text: str) -> int:
    """The model requests of ``kind`` about ``text``: this test's own, whatever else the
    session's development model serves (a service of another test may still be folding)."""
    return sum(
        1
        for r in await devmodel.arequests()
        if r.get("kind") == kind and any(text in str(m.get("content")) for m in r["messages"])
    )


async def consolidate(parts: Parts, turns: list[NewTurn]) -> None:
    """Write ``turns`` and run the session's consolidation job to its end."""
    await parts.deps.conversation.append(WHO, turns, True, FOLD_ALL)
    executor = BackgroundExecutor(
        workers=1,
        queue_size=8,
        retry=RetryPolicy(retries=0, backoff=0.01, backoff_max=0.01),
        metrics=parts.metrics,
    )
    executor.start()
    consolidator = Consolidator(
        group=WHO.group,
        conversation=parts.deps.conversation,
        longterm=parts.deps.longterm,
        summarizer=parts.deps.summarizer,
        executor=executor,
        metrics=parts.metrics,
        policy=ConsolidationPolicy(
            fold=FOLD_ALL,
            digest_retention=5,
            lease_ttl=30,
            max_attempts=5,
            sweep_interval=1,
            answer_retries=RETRIES,
        ),
        clock=parts.deps.clock,
    )
    assert consolidator.schedule(WHO.key, WHO.session, cause="outbox")
    assert await executor.drain(120), "the consolidation job did not finish"


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def model_calls(exporter: InMemorySpanExporter, step: ReadableSpan) -> list[ReadableSpan]:
    """The ``chat`` spans of the model calls made within ``step``."""
    return [
        s
        for s in named(exporter, "chat ")
        if s.parent is not None and s.parent.span_id == step.context.span_id
    ]


async def test_unusable_extraction_answers_are_retried_then_recorded_and_nothing_is_lost(
    parts: Parts, devmodel: DevModel
) -> None:
    await devmodel.aset_faults(answer="not_json", routes=["extraction"])
    await consolidate(
        parts,
        [NewTurn("user", "I keep bees on my roof", 8), NewTurn("assistant", "Lovely.", 3)],
    )

    [fold] = parts.folds()
    assert fold["extraction_status"] == "unusable" and fold["extraction_attempts"] == 1
    assert fold["digest_status"] == "done", "the digest does not depend on the extraction"
    # The turns stay: rows of the conversation store, and sentences of the digest.
    turns = [t for t in parts.db.turns() if t["folded_by"] == fold["id"]]
    assert [t["content"] for t in turns] == ["I keep bees on my roof", "Lovely."]
    [digest] = parts.db.digests()
    assert "User said: I keep bees on my roof." in digest["summary"]
    assert not [p for p in parts.db.vector_payloads() if p.get(FOLD_KEY) == str(fold["id"])]

    asked = 1 + RETRIES
    assert await requests_about(devmodel, "extraction", "I keep bees on my roof") == asked
    unusable = {"step": "extraction", "reason": "not_json"}
    assert parts.sample("kaos_memory_unusable_answers_total", **unusable) == asked
    assert parts.sample("kaos_memory_extractions_total", outcome="unusable") == 1
    assert parts.sample("kaos_memory_extractions_total", outcome="failed") == 0
    assert parts.sample("kaos_memory_degraded_total", reason="extraction_unusable") == 1
    # Every call's tokens, as the model reported them.
    tokens = {
        "gen_ai_agent_name": "",
        "gen_ai_operation_name": "chat",
        "gen_ai_request_model": "dev-summarizer",
        "gen_ai_token_type": "output",
    }
    assert parts.sample("gen_ai_client_token_usage_count", **tokens) == asked
    assert parts.sample("gen_ai_client_token_usage_sum", **tokens) == asked * len(NOT_JSON.split())

    [extract] = named(parts.spans, "memory.extract")
    assert extract.attributes is not None
    assert extract.attributes["kaos.memory.extraction.status"] == "unusable"
    assert extract.attributes["kaos.memory.extraction.unusable_answers"] == asked
    reasons = [e.attributes for e in extract.events if e.name == "kaos.memory.unusable_answer"]
    assert reasons == [{"kaos.memory.answer.reason": "not_json"}] * asked
    calls = model_calls(parts.spans, extract)
    assert len(calls) == asked
    for call in calls:
        assert call.name == "chat dev-summarizer" and call.attributes is not None
        assert call.attributes["kaos.memory.answer.verdict"] == "unusable"
        assert call.attributes["gen_ai.usage.output_tokens"] == len(NOT_JSON.split())
    # Reasons and counts only: the answer's text is on no span.
    for span in parts.spans.get_finished_spans():
        values = [*(span.attributes or {}).values()]
        values += [v for e in span.events for v in (e.attributes or {}).values()]
        assert not any(NOT_JSON in str(v) for v in values), span.name

    # The session's next fold goes on, with a model that answers well again.
    await devmodel.aset_faults()
    await consolidate(parts, [NewTurn("user", "My cat is called Miso", 8)])
    first, second = parts.folds()
    assert first["extraction_status"] == "unusable"
    assert second["extraction_status"] == "done"
    facts = [p["data"] for p in parts.db.vector_payloads()]
    assert facts == ["My cat is called Miso"]


@pytest.mark.parametrize("mode", ["cut_off", "empty"])
async def test_a_retry_that_gets_a_usable_answer_extracts(
    parts: Parts, devmodel: DevModel, mode: str
) -> None:
    await devmodel.aset_faults(answer=mode, answer_times=1, routes=["extraction"])
    await consolidate(parts, [NewTurn("user", "I grow tomatoes on my balcony", 10)])

    [fold] = parts.folds()
    assert fold["extraction_status"] == "done"
    assert [p["data"] for p in parts.db.vector_payloads()] == ["I grow tomatoes on my balcony"]
    assert await requests_about(devmodel, "extraction", "I grow tomatoes on my balcony") == 2
    unusable = {"step": "extraction", "reason": mode}
    assert parts.sample("kaos_memory_unusable_answers_total", **unusable) == 1
    assert parts.sample("kaos_memory_extractions_total", outcome="done") == 1
    [extract] = named(parts.spans, "memory.extract")
    assert extract.attributes is not None
    assert extract.attributes["kaos.memory.extraction.status"] == "done"
    verdicts = [
        (s.attributes or {}).get("kaos.memory.answer.verdict")
        for s in model_calls(parts.spans, extract)
    ]
    assert verdicts == ["unusable", "facts"]


async def test_a_valid_answer_without_facts_is_not_unusable(
    parts: Parts, devmodel: DevModel
) -> None:
    # Only an assistant turn: the model's answer is {"memory": []}.
    await consolidate(parts, [NewTurn("assistant", "Hello, how can I help?", 8)])
    [fold] = parts.folds()
    assert fold["extraction_status"] == "done"
    assert parts.db.vector_payloads() == []
    assert await requests_about(devmodel, "extraction", "Hello, how can I help?") == 1
    assert parts.sample("kaos_memory_extractions_total", outcome="done") == 1
    assert parts.sample("kaos_memory_extractions_total", outcome="unusable") == 0
    [extract] = named(parts.spans, "memory.extract")
    [call] = model_calls(parts.spans, extract)
    assert (call.attributes or {}).get("kaos.memory.answer.verdict") == "no_facts"


@pytest.mark.parametrize(
    ("mode", "reason"), [("empty", "empty"), ("cut_off", "cut_off"), ("verbose", "over_budget")]
)
async def test_an_unusable_digest_keeps_the_previous_version_and_its_folds_pending(
    parts: Parts, devmodel: DevModel, mode: str, reason: str
) -> None:
    await consolidate(parts, [NewTurn("user", "I keep bees", 5)])
    [first] = parts.db.digests()

    await devmodel.aset_faults(answer=mode, routes=["digest"])
    await consolidate(parts, [NewTurn("user", "The bees are Italian", 6)])

    assert parts.db.digests() == [first], "the previous version stays the latest"
    _, pending = parts.folds()
    assert pending["digest_status"] == "pending"
    backoff = parts.db.relational("SELECT failures, retry_at FROM kaos_mem_folds ORDER BY id")
    assert backoff[1][0] == 1 and backoff[1][1] is not None, "backing off in the outbox"
    assert pending["extraction_status"] == "done", "the extraction does not wait for it"
    asked = 1 + RETRIES
    assert await requests_about(devmodel, "digest", "The bees are Italian") == asked
    unusable = {"step": "digest", "reason": reason}
    assert parts.sample("kaos_memory_unusable_answers_total", **unusable) == asked
    assert parts.sample("kaos_memory_folds_total", outcome="failed") == 1
    digest_spans = named(parts.spans, "memory.digest")
    assert (digest_spans[-1].attributes or {}).get("error.type") == "DigestUnusable"
    events = [e for e in digest_spans[-1].events if e.name == "kaos.memory.unusable_answer"]
    assert len(events) == asked

    # A later job, with a model that answers well, digests the pending turns.
    await devmodel.aset_faults()
    await consolidate(parts, [])
    latest = max(parts.db.digests(), key=lambda d: int(d["version"]))
    assert latest["version"] == 2
    assert "User said: The bees are Italian." in latest["summary"]
    assert all(f["digest_status"] == "done" for f in parts.folds())
