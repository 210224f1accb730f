"""The GenAI client histograms of the conventions, as Prometheus on a service's registry.

``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` (dots become
underscores; the duration gets Prometheus' ``_seconds``), by agent, operation, model and
token type, recorded per model request from the usage the model reported. Prometheus only:
no OpenTelemetry metrics SDK, so they are there whether tracing is on or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram

# The conventions' advisory bucket boundaries.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
_LABELS = ["gen_ai_agent_name", "gen_ai_operation_name", "gen_ai_request_model"]


class Usage(Protocol):
    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


@dataclass(frozen=True)
class TokenCounts:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class GenAiMetrics:
    token_usage: Histogram
    duration: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry) -> GenAiMetrics:
        return cls(
            token_usage=Histogram(
                "gen_ai_client_token_usage",
                "Tokens used per model request, by agent, model and token type (input, output).",
                [*_LABELS, "gen_ai_token_type"],
                registry=registry,
                buckets=TOKEN_BUCKETS,
            ),
            duration=Histogram(
                "gen_ai_client_operation_duration_seconds",
                "Duration of model requests, by agent and model.",
                _LABELS,
                registry=registry,
                buckets=DURATION_BUCKETS,
            ),
        )

    def record(
        self, agent: str, model: str, seconds: float, usage: Usage | None, operation: str = "chat"
    ) -> None:
        """One model request: its duration, and its tokens when the model reported them."""
        labels = {
            "gen_ai_agent_name": agent,
            "gen_ai_operation_name": operation,
            "gen_ai_request_model": model,
        }
        self.duration.labels(**labels).observe(seconds)
        if usage is None:
            return
        self.token_usage.labels(**labels, gen_ai_token_type="input").observe(usage.input_tokens)
        self.token_usage.labels(**labels, gen_ai_token_type="output").observe(usage.output_tokens)
