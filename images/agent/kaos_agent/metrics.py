"""Prometheus metrics of the agent loop, registered on the app's own registry."""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core.metrics import LATENCY_BUCKETS
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_NS = "kaos_agent"


@dataclass(frozen=True)
class AgentMetrics:
    runs: Counter
    steps: Counter
    tool_calls: Counter
    delegations: Counter
    memory_degraded: Counter
    memory_refused: Counter
    run_latency: Histogram
    model_tools_refused: Counter
    model_tools: Gauge
    runs_in_flight: Gauge
    tasks_working: Gauge
    memory_writes_pending: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry) -> AgentMetrics:
        return cls(
            runs=Counter(
                "runs",
                "Agent runs, by entry point and outcome.",
                ["entry", "outcome"],
                namespace=_NS,
                registry=registry,
            ),
            steps=Counter(
                "steps",
                "Model requests made by agent runs (reasoning steps).",
                namespace=_NS,
                registry=registry,
            ),
            tool_calls=Counter(
                "tool_calls",
                "Tool calls, by tool and outcome.",
                ["tool", "outcome"],
                namespace=_NS,
                registry=registry,
            ),
            delegations=Counter(
                "delegations",
                "Delegations to peer agents, by peer, transport and outcome.",
                ["peer", "transport", "outcome"],
                namespace=_NS,
                registry=registry,
            ),
            memory_degraded=Counter(
                "memory_degraded",
                "Memory operations that degraded (store unavailable or refused), by operation.",
                ["operation"],
                namespace=_NS,
                registry=registry,
            ),
            memory_refused=Counter(
                "memory_tool_refused",
                "Memory tool calls refused before reaching the store (scope or argument).",
                ["tool"],
                namespace=_NS,
                registry=registry,
            ),
            run_latency=Histogram(
                "run_duration_seconds",
                "Wall time of agent runs, by entry point.",
                ["entry"],
                namespace=_NS,
                registry=registry,
                buckets=LATENCY_BUCKETS,
            ),
            model_tools_refused=Counter(
                "model_tools_refused",
                "Model requests the model refused because they offered tools; each was sent"
                " again without them.",
                namespace=_NS,
                registry=registry,
            ),
            model_tools=Gauge(
                "model_tools",
                "1 while tools are offered to the model; 0 when they are off (MODEL_TOOLS=off,"
                " or the model refused them).",
                namespace=_NS,
                registry=registry,
            ),
            runs_in_flight=Gauge(
                "runs_in_flight",
                "Agent runs going on in this replica now, by entry point.",
                ["entry"],
                namespace=_NS,
                registry=registry,
            ),
            tasks_working=Gauge(
                "a2a_tasks_working",
                "A2A tasks this replica is running now (blocking and background).",
                namespace=_NS,
                registry=registry,
            ),
            memory_writes_pending=Gauge(
                "memory_writes_pending",
                "Writes of answered turns the memory service has not answered yet (sent"
                " after the answer under failureMode soft).",
                namespace=_NS,
                registry=registry,
            ),
        )
