"""The memory service application: the base app plus the stores, executor and routes.

``create_app(settings, deps=...)`` builds the graph from ``MemoryDeps`` (the stores, the
digest model client and the clock; ``default_deps`` picks them from the settings), so a
test hands in its own parts instead of copying the wiring. Every resource is owned by a
``cleanup_ctx`` generator, registered in start order and closed in a ``finally``, so
shutdown runs in reverse and only for what started: the sweeper stops, the executor
drains its queued folds and extractions (within ``KAOS_MEMORY_DRAIN_TIMEOUT``) while the
stores and the model client they need are still open; then the model client and the
stores close, and last the local data dir's lock is released. Readiness checks the
conversation store and the vector store (so it follows PostgreSQL in external mode, and
comes back by itself when the database does); a model outage never makes the service
unready, and neither does the service-account issuer under verified agent identity
(``kaos_memory.auth``: its keys are fetched on first use). Each component is handed
only its group of the settings.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web
from kaos_core.auth.oidc import UserVerifier
from kaos_core.http import READINESS_KEY, REGISTRY_KEY, create_base_app
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.admin import AdminGate
from kaos_memory.auth import MemoryAuth
from kaos_memory.compaction import fold_policy
from kaos_memory.consolidation import ConsolidationPolicy, Consolidator
from kaos_memory.datadir import exclusive_data_dir
from kaos_memory.deps import MemoryDeps, conversation_store, default_deps
from kaos_memory.erasure import Eraser, ErasurePolicy
from kaos_memory.executor import BackgroundExecutor, RetryPolicy
from kaos_memory.keys import (
    AUTH_KEY,
    CONVERSATION_KEY,
    DEPS_KEY,
    EXECUTOR_KEY,
    GENAI_METRICS_KEY,
    LONGTERM_KEY,
    METRICS_KEY,
    SERVICE_KEY,
    SETTINGS_KEY,
    SWEEPER_KEY,
)
from kaos_memory.limit import concurrency_limit
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.quota import QuotaGate, quota_policy
from kaos_memory.receipts import RECEIPTS_KEY, add_receipt_routes, load_signer, store_label
from kaos_memory.retention import Retention, retention_policy
from kaos_memory.routes import add_routes
from kaos_memory.service import MemoryService
from kaos_memory.settings import MemorySettings
from kaos_memory.sweeper import Sweeper

log = logging.getLogger(__name__)

SERVICE_NAME = "kaos-memory"

__all__ = ["SERVICE_NAME", "MemoryDeps", "conversation_store", "create_app", "default_deps"]


def create_app(settings: MemorySettings, *, deps: MemoryDeps | None = None) -> web.Application:
    app = create_base_app(
        SERVICE_NAME,
        limits=settings.limits,
        telemetry=settings.telemetry,
        max_body_bytes=settings.http.max_body_bytes,
    )
    app[SETTINGS_KEY] = settings
    app[DEPS_KEY] = deps if deps is not None else default_deps(settings)
    app[METRICS_KEY] = MemoryMetrics.create(app[REGISTRY_KEY])
    # The GenAI token and duration histograms of the digest and extraction calls.
    app[GENAI_METRICS_KEY] = GenAiMetrics.create(app[REGISTRY_KEY])
    if settings.http.max_concurrent_requests:
        # Inside the error middleware, so a refusal carries the request id like any error.
        app.middlewares.append(concurrency_limit(settings.http.max_concurrent_requests))
    if settings.backend.mode == "local":
        app.cleanup_ctx.append(_data_dir_ctx)
    app.cleanup_ctx.append(_conversation_ctx)
    app.cleanup_ctx.append(_receipts_ctx)
    app.cleanup_ctx.append(_longterm_ctx)
    app.cleanup_ctx.append(_summarizer_ctx)
    app.cleanup_ctx.append(_executor_ctx)
    app.cleanup_ctx.append(_service_ctx)
    auth = MemoryAuth.from_settings(settings.auth)
    if auth is not None and settings.user_auth is not None:
        auth.users = UserVerifier.from_settings(settings.user_auth)
    if auth is not None:
        # Admin calls are checked by Kubernetes RBAC (``kaos_memory.admin``).
        auth.admin = AdminGate.from_settings(settings.admin)
        app[AUTH_KEY] = auth
        app.cleanup_ctx.append(_auth_ctx)
    add_routes(app)
    add_receipt_routes(app)
    return app


async def _auth_ctx(app: web.Application) -> AsyncIterator[None]:
    # Nothing is dialled here: the issuer's keys are fetched on the first request, so
    # readiness never waits for the issuer (an unreachable one is a 503 per request).
    log.info("verified agent identity", extra={"mode": app[SETTINGS_KEY].auth.mode})
    try:
        yield
    finally:
        await app[AUTH_KEY].close()


async def _data_dir_ctx(app: web.Application) -> AsyncIterator[None]:
    with exclusive_data_dir(app[SETTINGS_KEY].backend.data_dir):
        yield


async def _conversation_ctx(app: web.Application) -> AsyncIterator[None]:
    store = app[DEPS_KEY].conversation
    try:
        await store.start()
        if app[SETTINGS_KEY].backend.mode == "local":
            # The data dir lock proves no other process works on this store: leases a
            # previous (crashed) process left are void, and its pending work resumes now.
            await store.release_all_leases()
        app[CONVERSATION_KEY] = store
        app[READINESS_KEY].add("conversation_store", store.ping)
        yield
    finally:
        await store.close()


async def _receipts_ctx(app: web.Application) -> AsyncIterator[None]:
    # The signing key, read (or generated once and kept) before any forget can be served.
    settings = app[SETTINGS_KEY]
    app[RECEIPTS_KEY] = await load_signer(
        settings.receipts,
        app[CONVERSATION_KEY],
        group=settings.backend.group,
        store=store_label(
            settings.admin_access.store_namespace,
            settings.admin_access.store_name,
            settings.backend.group,
        ),
        clock=app[DEPS_KEY].clock,
    )
    yield


async def _longterm_ctx(app: web.Application) -> AsyncIterator[None]:
    store = app[DEPS_KEY].longterm
    store.measure_with(app[GENAI_METRICS_KEY])
    try:
        await store.start()
        app[LONGTERM_KEY] = store
        metrics = app[METRICS_KEY]
        metrics.held_principals.set_function(lambda: store.held_principals()[0])
        metrics.vector_loads.set_function(lambda: store.held_principals()[1])
        app[READINESS_KEY].add("vector_store", store.ping)
        yield
    finally:
        await store.close()


async def _summarizer_ctx(app: web.Application) -> AsyncIterator[None]:
    summarizer = app[DEPS_KEY].summarizer
    summarizer.measure_with(app[GENAI_METRICS_KEY])
    try:
        await summarizer.start()
        yield
    finally:
        await summarizer.close()


async def _executor_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY].executor
    executor = BackgroundExecutor(
        workers=settings.workers,
        queue_size=settings.queue_size,
        retry=RetryPolicy(
            retries=settings.retries, backoff=settings.backoff, backoff_max=settings.backoff_max
        ),
        metrics=app[METRICS_KEY],
    )
    executor.start()
    app[EXECUTOR_KEY] = executor
    try:
        yield
    finally:
        drained = await executor.drain(settings.drain_timeout)
        log.info("background work drained", extra={"complete": drained})


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY]
    deps = app[DEPS_KEY]
    metrics = app[METRICS_KEY]
    tiers, consolidation = settings.tiers, settings.consolidation
    consolidator = Consolidator(
        group=settings.backend.group,
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        summarizer=deps.summarizer,
        executor=app[EXECUTOR_KEY],
        metrics=metrics,
        policy=ConsolidationPolicy(
            fold=fold_policy(tiers),
            digest_retention=tiers.digest_retention,
            lease_ttl=consolidation.lease_ttl,
            max_attempts=consolidation.extraction_max_attempts,
            sweep_interval=consolidation.sweep_interval,
            extraction_concurrency=consolidation.extraction_concurrency,
            answer_retries=settings.models.answer_retries,
        ),
        clock=deps.clock,
    )
    log.info("replica", extra={"replica": consolidator.replica})
    eraser = Eraser(
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        policy=ErasurePolicy(
            lease_ttl=consolidation.lease_ttl,
            fence_timeout=consolidation.lease_ttl + 2 * settings.models.timeout,
            reclaim_inline=settings.backend.mode == "local",
        ),
        replica=consolidator.replica,
        keyring=deps.keyring,
    )
    kept, quotas = retention_policy(settings.retention), quota_policy(settings.quotas)
    retention = None
    if kept.enabled:
        retention = Retention(
            group=settings.backend.group,
            policy=kept,
            conversation=app[CONVERSATION_KEY],
            longterm=app[LONGTERM_KEY],
            eraser=eraser,
            metrics=metrics,
            clock=deps.clock,
        )
    quota = None
    if quotas.enabled:
        quota = QuotaGate(
            group=settings.backend.group, policy=quotas, longterm=app[LONGTERM_KEY], metrics=metrics
        )
    sweeper = Sweeper(
        conversation=app[CONVERSATION_KEY],
        consolidator=consolidator,
        executor=app[EXECUTOR_KEY],
        metrics=metrics,
        interval=consolidation.sweep_interval,
        idle_flush_seconds=consolidation.idle_flush_seconds,
        eraser=eraser,
        clock=deps.clock,
        retention=retention,
        prune_write_rates=quotas.writes_per_minute is not None,
    )
    app[SWEEPER_KEY] = sweeper
    app[SERVICE_KEY] = MemoryService(
        group=settings.backend.group,
        tiers=tiers,
        posture=settings.posture,
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        consolidator=consolidator,
        eraser=eraser,
        metrics=metrics,
        receipts=app[RECEIPTS_KEY],
        quota=quota,
    )
    try:
        sweeper.start()
        yield
    finally:
        await sweeper.stop()
        await eraser.close()
