"""The memory service application: the base app plus the stores, executor and routes.

Every resource is owned by a ``cleanup_ctx`` generator, registered in start order, so
shutdown runs in reverse: the sweeper stops, the executor drains its queued folds and
extractions (within ``KAOS_MEMORY_DRAIN_TIMEOUT``) while the stores and the model client
they need are still open; then the stores close, and last the local data dir's lock is
released. Readiness checks the relational store and the vector store (so it follows
PostgreSQL in external mode, and comes back by itself when the database does); a model
outage never makes the service unready.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web
from kaos_core.http import READINESS_KEY, REGISTRY_KEY, create_base_app

from kaos_memory.consolidation import ConsolidationPolicy, Consolidator
from kaos_memory.datadir import exclusive_data_dir
from kaos_memory.erasure import Eraser, ErasurePolicy
from kaos_memory.executor import BackgroundExecutor, RetryPolicy
from kaos_memory.keys import (
    CONVERSATION_KEY,
    EXECUTOR_KEY,
    LONGTERM_KEY,
    METRICS_KEY,
    SERVICE_KEY,
    SETTINGS_KEY,
)
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.routes import add_routes
from kaos_memory.service import MemoryService
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import ConversationStore
from kaos_memory.storage.longterm import Mem0LongTermStore
from kaos_memory.storage.sql.store import SqlConversationStore
from kaos_memory.summarizer import Summarizer
from kaos_memory.sweeper import Sweeper

log = logging.getLogger(__name__)

SERVICE_NAME = "kaos-memory"


def conversation_store(settings: MemorySettings) -> ConversationStore:
    if settings.storage == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        return SqlConversationStore(SqliteDialect(settings.sqlite_path))
    from kaos_memory.storage.sql.postgres import PostgresDialect

    assert settings.dsn is not None
    return SqlConversationStore(PostgresDialect(settings.dsn, pool_size=settings.pg_pool_size))


def create_app(settings: MemorySettings) -> web.Application:
    app = create_base_app(SERVICE_NAME, max_body_bytes=settings.max_body_bytes)
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = MemoryMetrics.create(app[REGISTRY_KEY])
    if settings.storage == "local":
        app.cleanup_ctx.append(_data_dir_ctx)
    app.cleanup_ctx.append(_conversation_ctx)
    app.cleanup_ctx.append(_longterm_ctx)
    app.cleanup_ctx.append(_service_ctx)
    add_routes(app)
    return app


async def _data_dir_ctx(app: web.Application) -> AsyncIterator[None]:
    with exclusive_data_dir(app[SETTINGS_KEY].data_dir):
        yield


async def _conversation_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY]
    store = conversation_store(settings)
    await store.start()
    if settings.storage == "local":
        # The data dir lock proves no other process works on this store: leases a
        # previous (crashed) process left are void, and its pending work resumes now.
        await store.release_all_leases()
    app[CONVERSATION_KEY] = store
    app[READINESS_KEY].add("conversation_store", store.ping)
    try:
        yield
    finally:
        await store.close()


async def _longterm_ctx(app: web.Application) -> AsyncIterator[None]:
    store = Mem0LongTermStore(app[SETTINGS_KEY])
    try:
        await store.start()
        app[LONGTERM_KEY] = store
        app[READINESS_KEY].add("vector_store", store.ping)
        yield
    finally:
        await store.close()


async def _service_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY]
    metrics = app[METRICS_KEY]
    summarizer = Summarizer(
        settings.model_base_url,
        settings.summarization_model,
        settings.api_key,
        settings.model_timeout,
    )
    await summarizer.start()
    executor = BackgroundExecutor(
        workers=settings.executor_workers,
        queue_size=settings.executor_queue_size,
        retry=RetryPolicy(
            retries=settings.executor_retries,
            backoff=settings.executor_backoff,
            backoff_max=settings.executor_backoff_max,
        ),
        metrics=metrics,
    )
    executor.start()
    app[EXECUTOR_KEY] = executor
    consolidator = Consolidator(
        group=settings.group,
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        summarizer=summarizer,
        executor=executor,
        metrics=metrics,
        policy=ConsolidationPolicy(
            fold=MemoryService.fold_policy(settings),
            digest_retention=settings.digest_retention,
            lease_ttl=settings.lease_ttl,
            max_attempts=settings.extraction_max_attempts,
            sweep_interval=settings.sweep_interval,
        ),
    )
    log.info("replica", extra={"replica": consolidator.replica})
    eraser = Eraser(
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        policy=ErasurePolicy(
            lease_ttl=settings.lease_ttl,
            fence_timeout=settings.lease_ttl + 2 * settings.model_timeout,
            reclaim_inline=settings.storage == "local",
        ),
        replica=consolidator.replica,
    )
    sweeper = Sweeper(
        conversation=app[CONVERSATION_KEY],
        consolidator=consolidator,
        executor=executor,
        metrics=metrics,
        interval=settings.sweep_interval,
        idle_flush_seconds=settings.idle_flush_seconds,
        eraser=eraser,
    )
    app[SERVICE_KEY] = MemoryService(
        settings,
        conversation=app[CONVERSATION_KEY],
        longterm=app[LONGTERM_KEY],
        consolidator=consolidator,
        eraser=eraser,
        metrics=metrics,
    )
    sweeper.start()
    try:
        yield
    finally:
        await sweeper.stop()
        await eraser.close()
        drained = await executor.drain(settings.drain_timeout)
        log.info("background work drained", extra={"complete": drained})
        await summarizer.close()
