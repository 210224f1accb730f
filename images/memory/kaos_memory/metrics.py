"""Prometheus metrics of the memory service, registered on the app's own registry.

Per-endpoint request counts and latency histograms come from the shared middleware
(``kaos_memory_http_*``); this module adds the executor, the tiers' background work and
degradation, all under the ``kaos_memory`` namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core.metrics import LATENCY_BUCKETS
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

NAMESPACE = "kaos_memory"
# Folds and extractions wait on a model: seconds to minutes.
WORK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass(frozen=True)
class MemoryMetrics:
    queue_depth: Gauge
    in_flight: Gauge
    jobs: Counter
    job_failures: Counter
    job_retries: Counter
    job_duration: Histogram
    folds: Counter
    fold_duration: Histogram
    extractions: Counter
    extraction_duration: Histogram
    unusable_answers: Counter
    retired_facts: Counter
    writes_erased: Counter
    degraded: Counter
    tier_latency: Histogram
    outbox_depth: Gauge
    held_principals: Gauge
    vector_loads: Gauge
    sweeps: Counter
    scheduled: Counter
    lease_lost: Counter
    records_expired: Counter
    quota_rejections: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> MemoryMetrics:
        def counter(name: str, doc: str, labels: list[str]) -> Counter:
            return Counter(name, doc, labels, namespace=NAMESPACE, registry=registry)

        def histogram(
            name: str, doc: str, labels: list[str], buckets: tuple[float, ...]
        ) -> Histogram:
            return Histogram(
                name, doc, labels, namespace=NAMESPACE, registry=registry, buckets=buckets
            )

        return cls(
            queue_depth=Gauge(
                "executor_queue_depth",
                "Background jobs waiting in the queue.",
                namespace=NAMESPACE,
                registry=registry,
            ),
            in_flight=Gauge(
                "executor_in_flight",
                "Background jobs running now.",
                namespace=NAMESPACE,
                registry=registry,
            ),
            jobs=counter("executor_jobs", "Background jobs that succeeded, by kind.", ["kind"]),
            job_failures=counter(
                "executor_failures",
                "Background jobs that failed after their retries, by kind.",
                ["kind"],
            ),
            job_retries=counter(
                "executor_retries", "Retries of failed background jobs, by kind.", ["kind"]
            ),
            job_duration=histogram(
                "executor_job_duration_seconds",
                "Duration of successful background jobs, by kind.",
                ["kind"],
                WORK_BUCKETS,
            ),
            folds=counter(
                "folds", "Digest folds, by outcome (done, failed, skipped).", ["outcome"]
            ),
            fold_duration=histogram(
                "fold_duration_seconds",
                "Duration of digest generation for a fold.",
                [],
                WORK_BUCKETS,
            ),
            extractions=counter(
                "extractions",
                "Long-term extractions of evicted turns, by outcome (done, unusable, failed,"
                " erased).",
                ["outcome"],
            ),
            extraction_duration=histogram(
                "extraction_duration_seconds",
                "Duration of one Mem0 extraction of an evicted batch.",
                [],
                WORK_BUCKETS,
            ),
            unusable_answers=counter(
                "unusable_answers",
                "Answers of the summarisation model refused as unusable, by step (extraction,"
                " supersession, digest) and reason (empty, not_json, not_memory_json,"
                " not_retire_json, cut_off, over_budget).",
                ["step", "reason"],
            ),
            retired_facts=counter(
                "retired_facts",
                "Long-term facts retired because a newer fact replaced them (supersession).",
                [],
            ),
            writes_erased=counter(
                "writes_erased",
                "Writes dropped because their conversation was erased after their turns were"
                " said (a late write cannot outlive a forget).",
                [],
            ),
            degraded=counter(
                "degraded",
                "Answers or background work marked degraded, by reason.",
                ["reason"],
            ),
            tier_latency=histogram(
                "tier_duration_seconds",
                "Latency of one tier operation on the request path, by tier and operation.",
                ["tier", "op"],
                LATENCY_BUCKETS,
            ),
            outbox_depth=Gauge(
                "outbox_depth",
                "Folds whose digest or extraction is pending, in the whole store (this "
                "replica's last sweep).",
                namespace=NAMESPACE,
                registry=registry,
            ),
            held_principals=Gauge(
                "held_principals",
                "Principals whose facts this replica holds for their searches "
                "(KAOS_MEMORY_VECTOR_CACHE_MB).",
                namespace=NAMESPACE,
                registry=registry,
            ),
            vector_loads=Gauge(
                "vector_loads",
                "Principals whose facts are being loaded or wait to be.",
                namespace=NAMESPACE,
                registry=registry,
            ),
            sweeps=counter("sweeps", "Outbox and idle-session sweeps of this replica.", []),
            scheduled=counter(
                "consolidations_scheduled",
                "Session consolidation jobs queued, by cause (write, outbox, idle).",
                ["cause"],
            ),
            lease_lost=counter(
                "leases_lost",
                "Work abandoned because its session lease passed to another replica, by kind.",
                ["kind"],
            ),
            records_expired=counter(
                "records_expired",
                "Records this store's retention erased, by tier (short_term: turns,"
                " medium_term: digest versions, long_term: facts).",
                ["tier"],
            ),
            quota_rejections=counter(
                "quota_rejections",
                "Writes this store refused over a quota, by kind (facts, turns, bytes,"
                " write_rate).",
                ["kind"],
            ),
        )
