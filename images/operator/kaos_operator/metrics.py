"""The operator's Prometheus metrics, registered on the app's own registry."""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core.metrics import LATENCY_BUCKETS
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kaos_operator.kube import ApiMetrics


@dataclass(frozen=True)
class OperatorMetrics:
    reconciles: Counter
    errors: Counter
    latency: Histogram
    queue_depth: Gauge
    leader: Gauge
    api: ApiMetrics

    @classmethod
    def create(cls, registry: CollectorRegistry) -> OperatorMetrics:
        return cls(
            reconciles=Counter(
                "kaos_operator_reconciles",
                "Reconciles run, by kind and result (ok, gone, permanent, invalid, error).",
                ["kind", "result"],
                registry=registry,
            ),
            errors=Counter(
                "kaos_operator_reconcile_errors",
                "Reconciles that failed and were requeued with backoff, by kind.",
                ["kind"],
                registry=registry,
            ),
            latency=Histogram(
                "kaos_operator_reconcile_duration_seconds",
                "Time spent in one reconcile, by kind.",
                ["kind"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            queue_depth=Gauge(
                "kaos_operator_queue_depth",
                "Keys waiting in the work queue.",
                registry=registry,
            ),
            leader=Gauge(
                "kaos_operator_leader",
                "1 while this process holds the leader lease (and so reconciles).",
                registry=registry,
            ),
            api=ApiMetrics.create(registry),
        )
