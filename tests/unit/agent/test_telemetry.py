"""The agent's GenAI telemetry: pydantic-ai's spans with the session as conversation id
(when an instrumentation is given), none at all when tracing is off, and the token and
duration histograms of every model request on the app's registry."""

from __future__ import annotations

from kaos_agent.context import RunDeps
from kaos_agent.loop import build_agent
from kaos_agent.memory.base import NoMemory
from kaos_agent.metrics import AgentMetrics
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import DelegationSettings, ModelSettings
from kaos_agent.telemetry import MeteredModel, instrumentation
from kaos_core.telemetry.genai_metrics import GenAiMetrics
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

MODEL = ModelSettings(
    base_url="http://127.0.0.1:9", name="m", api_key="-", timeout_seconds=5, max_steps=5
)
NO_PEERS = DelegationSettings(peers=(), max_depth=2, timeout_seconds=5)


def runtime(
    registry: CollectorRegistry, instrument: InstrumentationSettings | None
) -> AgentRuntime:
    model = MeteredModel(
        TestModel(custom_output_text="hello there"), GenAiMetrics.create(registry), "a1"
    )
    agent = build_agent(
        name="a1",
        instructions="Be brief.",
        model=model,
        model_settings=MODEL,
        delegation=NO_PEERS,
        toolsets=[],
        instrument=instrument,
    )
    return AgentRuntime(agent, NoMemory(), AgentMetrics.create(registry), max_steps=5)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, {"gen_ai_agent_name": "a1", **labels})
    return 0.0 if value is None else value


async def test_a_run_is_invoke_agent_with_the_session_as_conversation_id() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt = runtime(CollectorRegistry(), InstrumentationSettings(tracer_provider=provider))
    await rt.run("hi", RunDeps(session_id="s-42"), entry="chat")

    spans = exporter.get_finished_spans()
    ops = {str((s.attributes or {}).get("gen_ai.operation.name")): s for s in spans}
    run = ops["invoke_agent"].attributes or {}
    assert run["gen_ai.agent.name"] == "a1"
    assert run["gen_ai.conversation.id"] == "s-42"
    assert ops["chat"].attributes is not None
    assert ops["chat"].attributes["gen_ai.request.model"] == "test"


async def test_off_no_instrumentation_and_still_token_metrics() -> None:
    assert instrumentation() is None  # setup_telemetry installed nothing in this process
    registry = CollectorRegistry()
    rt = runtime(registry, None)
    capabilities = getattr(rt.agent.root_capability, "capabilities", [])
    assert not [c for c in capabilities if isinstance(c, Instrumentation)]
    result = await rt.agent.run("hi", deps=RunDeps(session_id="s-1"))
    assert result.output == "hello there"
    labels = {"gen_ai_operation_name": "chat", "gen_ai_request_model": "test"}
    count = "gen_ai_client_token_usage_count"
    total = "gen_ai_client_token_usage_sum"
    assert sample(registry, count, **labels, gen_ai_token_type="input") == 1
    assert sample(registry, count, **labels, gen_ai_token_type="output") == 1
    # Exactly the usage the model reported for the request.
    assert sample(registry, total, **labels, gen_ai_token_type="input") == result.usage.input_tokens
    assert sample(registry, total, **labels, gen_ai_token_type="output") == (
        result.usage.output_tokens
    )
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert sample(registry, "gen_ai_client_operation_duration_seconds_count", **labels) == 1


async def test_spans_metrics_and_the_runs_usage_agree() -> None:
    """The usage a chat completion answers (the run's), the spans' and the histograms' are
    the same figures: what the model reported, summed over the run's requests."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    rt = runtime(registry, InstrumentationSettings(tracer_provider=provider))
    outcome = await rt.run("hi there", RunDeps(session_id="s-7"), entry="chat")

    assert outcome.usage.input_tokens > 0 and outcome.usage.output_tokens > 0
    spans = exporter.get_finished_spans()
    run = next(
        s.attributes or {}
        for s in spans
        if (s.attributes or {}).get("gen_ai.operation.name") == "invoke_agent"
    )
    chats = [
        s.attributes or {}
        for s in spans
        if (s.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]
    assert run["gen_ai.aggregated_usage.input_tokens"] == outcome.usage.input_tokens
    assert run["gen_ai.aggregated_usage.output_tokens"] == outcome.usage.output_tokens
    assert (
        sum(int(str(c["gen_ai.usage.input_tokens"])) for c in chats) == outcome.usage.input_tokens
    )
    labels = {"gen_ai_operation_name": "chat", "gen_ai_request_model": "test"}
    total = "gen_ai_client_token_usage_sum"
    assert (
        sample(registry, total, **labels, gen_ai_token_type="input") == outcome.usage.input_tokens
    )
    assert (
        sample(registry, total, **labels, gen_ai_token_type="output") == outcome.usage.output_tokens
    )
