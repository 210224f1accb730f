"""``POST /v1/export`` and ``POST /v1/import``: an administrator's, never an agent's.

Under verified identity the admin gate (``kaos_memory.admin``) has admitted the caller by a
SubjectAccessReview before a handler runs (``get`` on ``memorystores/data`` to export,
``create`` to import); an agent's call is refused 403 here, on either posture, before the
body is read. Each export and import is audited (``storage.audit``): its record is written
``started`` (the actor, the scope) before the first record moves, and a transfer that
cannot be recorded is refused 500 ``strict_failure``; at the end the record says how it
ended (``complete``; ``incomplete``: an export's stream broke off; ``failed``) and the
records moved (never content), and one log record on the ``kaos_memory.audit`` logger says
the same.

An export streams (chunked) as the stores' pages are read. An import is read into a spool
file while every line is checked, so a malformed line is refused with its number and
nothing written; then it is written. ``?source=mem0`` takes Mem0's ``get_all`` answer
instead, with the attribution mapping as query parameters (``principal``, ``agent``,
``session``, ``default_session``: ``portable.mem0``).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator, Iterable
from typing import IO

from aiohttp import web
from kaos_core.errors import (
    BadRequest,
    Forbidden,
    PayloadTooLarge,
    StrictFailure,
    UnsupportedMediaType,
)
from kaos_core.http.body import (
    check_content_encoding,
    decode_json,
    json_response,
    parse_model,
    read_json_object,
)
from kaos_core.memory.portable import Embedding, ExportRequest, FactRecord, ImportResponse
from kaos_core.wire import Identity, parse_identity

from kaos_memory.audit import actor_of, transfer_ended
from kaos_memory.clock import iso
from kaos_memory.keys import AUTH_KEY, CONVERSATION_KEY, DEPS_KEY, LONGTERM_KEY, SETTINGS_KEY
from kaos_memory.portable.exporter import Exported, export_lines
from kaos_memory.portable.importer import (
    InvalidLine,
    Plan,
    Record,
    Writer,
    check_lines,
    spooled_records,
)
from kaos_memory.portable.mem0 import Mem0Mapping, fact_records
from kaos_memory.storage.audit import Moved, Transfer, TransferOutcome
from kaos_memory.storage.errors import StorageError

audit_log = logging.getLogger("kaos_memory.audit")
log = logging.getLogger(__name__)

CHUNK = 64 * 1024
# An import's body; a Mem0 dump is one JSON document, parsed whole.
MAX_IMPORT_BYTES = 8 * 1024**3
MAX_MEM0_BYTES = 256 * 1024**2
NDJSON = "application/x-ndjson"
IMPORT_TYPES = (NDJSON, "application/jsonl", "application/json", "text/plain")


async def _admin(request: web.Request) -> Identity:
    auth = request.app.get(AUTH_KEY)
    identity = parse_identity(request.headers) if auth is None else await auth.identify(request)
    if identity.agent is not None:
        raise Forbidden(
            "export and import are administrative: not available to agents",
            code="portable_forbidden",
        )
    return identity


def _check_scope(scope: ExportRequest) -> None:
    wanted = {"store": (False, False), "user": (True, False), "agent": (False, True)}
    principal, agent = wanted[scope.level]
    if (scope.principal is not None) != principal or (scope.agent is not None) != agent:
        raise BadRequest(
            "level store names nobody, user names a principal, agent names an agent",
            code="invalid_scope",
        )


async def export(request: web.Request) -> web.StreamResponse:
    identity = await _admin(request)
    scope = parse_model(ExportRequest, await read_json_object(request))
    _check_scope(scope)
    app = request.app
    settings = app[SETTINGS_KEY]
    transfer = Transfer(
        action="export",
        actor=actor_of(request, identity, verified=AUTH_KEY in app),
        level=scope.level,
        principal=scope.principal,
        agent=scope.agent,
    )
    audit_id = await _started(request, transfer)
    counts = Exported()
    outcome: TransferOutcome = "failed"
    try:
        lines = export_lines(
            conversation=app[CONVERSATION_KEY],
            longterm=app[LONGTERM_KEY],
            group=settings.backend.group,
            scope=scope,
            embedding=Embedding(
                model=settings.models.embedding_model, dims=settings.models.embedding_dims
            ),
            exported_at=iso(app[DEPS_KEY].clock()),
            counts=counts,
        )
        # The header and the first record before the answer starts: a store that fails
        # at once is a clean 500, not a stream broken off.
        head = await _head(lines)
        response = web.StreamResponse(headers={"Content-Type": NDJSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        outcome = "incomplete"
        try:
            for line in head:
                await response.write(line)
            async for line in lines:
                await response.write(line)
            await response.write_eof()
            outcome = "complete"
        except Exception:
            # The answer has begun: the connection is dropped without the stream's last
            # chunk, which a client sees as a broken transfer, never as a complete file
            # (an error answer written now would land inside the stream).
            log.warning("export failed", exc_info=True)
            if request.transport is not None:
                request.transport.abort()
            raise
    finally:
        moved = Moved(turns=counts.turns, digests=counts.digests, facts=counts.facts)
        await _ended(request, audit_id, transfer, outcome, moved)
    return response


async def _head(lines: AsyncIterator[bytes]) -> list[bytes]:
    head: list[bytes] = []
    try:
        async for line in lines:
            head.append(line)
            if len(head) == 2:
                break
    except StorageError as exc:
        raise StrictFailure("the store could not be read") from exc
    return head


async def import_(request: web.Request) -> web.Response:
    identity = await _admin(request)
    check_content_encoding(request.headers.get("Content-Encoding"))
    if request.content_type not in IMPORT_TYPES:
        raise UnsupportedMediaType(
            f"send the file as {NDJSON} (JSON Lines), or a Mem0 dump as application/json"
        )
    source = request.query.get("source", "kaos")
    if source not in ("kaos", "mem0"):
        raise BadRequest("source is kaos (the default) or mem0", code="invalid_query")
    mapping = None
    if source == "mem0":
        mapping = Mem0Mapping.parse({k: v for k, v in request.query.items() if k != "source"})
    app = request.app
    settings = app[SETTINGS_KEY]
    # An import's scope is the store: its file says whose records it holds.
    transfer = Transfer(
        action="import",
        actor=actor_of(request, identity, verified=AUTH_KEY in app),
        level="store",
        source=source,
    )
    audit_id = await _started(request, transfer)
    writer = Writer(app[CONVERSATION_KEY], app[LONGTERM_KEY], settings.backend.group)
    outcome: TransferOutcome = "failed"
    try:
        response = await _import(request, writer, mapping)
        outcome = "complete"
    finally:
        done = writer.done
        moved = Moved(
            turns=done.turns, digests=done.digests, facts=done.facts, skipped=done.skipped
        )
        await _ended(request, audit_id, transfer, outcome, moved)
    return response


async def _import(
    request: web.Request, writer: Writer, mapping: Mem0Mapping | None
) -> web.Response:
    """Check the whole body, then write it (``writer.done`` counts what was written)."""
    settings = request.app[SETTINGS_KEY]
    facts_allowed = settings.tiers.long_term_enabled
    with tempfile.TemporaryFile() as spool:
        if mapping is not None:
            plan, facts = await _mem0_records(request, spool, mapping, facts_allowed)
            records: Iterable[Record] = facts
        else:
            chunks = _chunks(request, MAX_IMPORT_BYTES)
            plan = await check_lines(chunks, spool, facts_allowed=facts_allowed)
            records = spooled_records(spool)
        reembedded = plan.header is None or (
            plan.header.embedding.model != settings.models.embedding_model
            or plan.header.embedding.dims != settings.models.embedding_dims
        )
        try:
            await writer.check_owners(plan)
            for record in records:
                await writer.add(record)
            done = await writer.finish()
        except StorageError as exc:
            raise StrictFailure(
                "the store failed during the import; what was written stays, and importing"
                " the file again completes it (records already stored are skipped)"
            ) from exc
    return json_response(
        ImportResponse(
            turns=done.turns,
            digests=done.digests,
            facts=done.facts,
            skipped=done.skipped,
            reembedded=reembedded,
        )
    )


async def _chunks(request: web.Request, limit: int) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in request.content.iter_chunked(CHUNK):
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"an import is at most {limit} bytes")
        yield chunk


async def _mem0_records(
    request: web.Request, spool: IO[bytes], mapping: Mem0Mapping, facts_allowed: bool
) -> tuple[Plan, list[FactRecord]]:
    """A Mem0 dump's facts, every one checked (it has no header: every fact is
    embedded by this store's embedder)."""
    async for chunk in _chunks(request, MAX_MEM0_BYTES):
        spool.write(chunk)
    spool.seek(0)
    records = list(fact_records(decode_json(spool.read()), mapping))
    if records and not facts_allowed:
        raise InvalidLine(1, "this store has no long-term tier for facts", unit="result")
    return Plan(records=len(records), facts=len(records)), records


async def _started(request: web.Request, transfer: Transfer) -> int:
    """Record the transfer before any record moves: one that cannot be recorded is
    refused, so no export or import goes unaudited."""
    try:
        return await request.app[CONVERSATION_KEY].record_transfer(
            request.app[SETTINGS_KEY].backend.group, transfer
        )
    except StorageError as exc:
        log.error("recording the %s in the audit failed", transfer.action, exc_info=True)
        raise StrictFailure(
            f"the audit could not be written: nothing was {transfer.action}ed"
        ) from exc


async def _ended(
    request: web.Request,
    audit_id: int,
    transfer: Transfer,
    outcome: TransferOutcome,
    moved: Moved,
) -> None:
    """Record how the transfer ended (on its audit record, and as a log line)."""
    store = request.app[SETTINGS_KEY].backend.group
    await transfer_ended(request.app[CONVERSATION_KEY], store, audit_id, transfer, outcome, moved)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/export", export)
    app.router.add_post("/v1/import", import_)
