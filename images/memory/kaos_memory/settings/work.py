"""Background work: the executor that runs folds, and the consolidation replicas share."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting


class ExecutorSettings(SettingsGroup):
    """One replica's background jobs, their retries, and how long shutdown waits for them."""

    title: ClassVar[str] = "Background work and shutdown"

    workers: int = setting(
        "concurrent background jobs (folds with their digest and extraction)",
        env="EXECUTOR_WORKERS",
        default=2,
        ge=1,
        le=64,
    )
    queue_size: int = setting(
        "queued jobs; when full a write still succeeds, answers `degraded: true`, and the"
        " fold waits in the outbox for the next sweep",
        env="EXECUTOR_QUEUE_SIZE",
        default=256,
        ge=1,
    )
    retries: int = setting(
        "retries of a failed digest or extraction step",
        env="EXECUTOR_RETRIES",
        default=3,
        ge=0,
        le=20,
    )
    backoff: float = setting(
        "first retry delay in seconds, doubled per retry",
        env="EXECUTOR_BACKOFF",
        default=0.5,
        ge=0,
    )
    backoff_max: float = setting(
        "cap of the retry delay", env="EXECUTOR_BACKOFF_MAX", default=10.0, ge=0
    )
    drain_timeout: float = setting(
        "seconds SIGTERM waits for queued and running background jobs before exit (keep"
        " below the pod's termination grace period)",
        default=25.0,
        ge=0,
    )


class ConsolidationSettings(SettingsGroup):
    """How replicas share the fold work of sessions: leases, sweeps, the idle flush."""

    title: ClassVar[str] = "Consolidation across replicas"

    lease_ttl: float = setting(
        "seconds a replica's lease on a session's digest or extraction work lasts without"
        " renewal (the holder renews it every third of that); a replica that dies leaves its"
        " sessions to others after this",
        default=60.0,
        ge=1.0,
    )
    sweep_interval: float = setting(
        "seconds between one replica's sweeps of the outbox (fold work nobody holds: left by"
        " a dead replica, or backing off after failures) and of idle sessions (±20% jitter)",
        default=10.0,
        gt=0,
    )
    idle_flush_seconds: float = setting(
        "a session nobody wrote to for this long has its remaining window folded into the"
        " digest and extracted to long-term memory, so short conversations reach it too;"
        " `0` turns the idle flush off",
        default=900.0,
        ge=0,
    )
    extraction_max_attempts: int = setting(
        "attempts at one evicted batch's extraction before it is recorded as `failed`"
        " (between jobs a failing batch backs off, doubling from the sweep interval up to 15"
        " minutes, so this is hours of continuous failure)",
        default=200,
        ge=1,
        le=100_000,
    )
    extraction_concurrency: int = setting(
        "extractions (Mem0 calls) one replica runs at once across sessions (one session's"
        " extractions always run one at a time, in order)",
        default=2,
        ge=1,
        le=64,
    )
