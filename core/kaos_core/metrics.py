"""Prometheus metrics owned by one application, never module globals.

Every service builds its own ``CollectorRegistry`` so that two apps in one process (as
in tests) do not collide on metric names.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

# Latency buckets from 1 ms to 30 s: memory calls are milliseconds, agent runs seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@dataclass(frozen=True)
class HttpMetrics:
    requests: Counter
    latency: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry, namespace: str) -> HttpMetrics:
        return cls(
            requests=Counter(
                "http_requests",
                "HTTP requests served, by route and status.",
                ["method", "route", "status"],
                namespace=namespace,
                registry=registry,
            ),
            latency=Histogram(
                "http_request_duration_seconds",
                "HTTP request latency, by route and status.",
                ["method", "route", "status"],
                namespace=namespace,
                registry=registry,
                buckets=LATENCY_BUCKETS,
            ),
        )
