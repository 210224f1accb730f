"""The conversational tables, their schema version and the migrations between versions.

Tables (every name prefixed ``kaos_mem_`` so they sit beside Mem0's pgvector table):

- ``turns``: one row per turn, keyed by the conversation key (``scope.conversation_key``:
  the group, the session's principal when it has one, the session id), with its
  attribution and ``folded_by`` (the fold that evicted it; NULL while in the window).
- ``digests``: append-only digest versions per key; older versions pruned past retention.
- ``folds``: one row per evicted batch (first/last seq, digest version, digest and
  extraction status, the recording write's trace context), so each evicted turn is
  covered by exactly one fold: the outbox.
- ``attribution``: the erasure/attribution index, one row per (key, principal, agent).
- ``sessions``: one row per session with its last write, for the idle-session flush.
- ``leases``: who works on a session's digests or extractions, until when.
- ``erasures``: the tombstones, one per erasure (scope, time, when it became final), and
  ``erased_keys``: the sessions a pending erasure reached (no fold work runs on them).
- ``audit``: one record per erasure (who, when, the scope, rows erased per tier; never
  content), written with its tombstone (``storage.audit``), and its signed receipt; and
  one per export or import (who, when, the scope, records moved, how it ended).
- ``receipt_keys``: the receipt signing key of each store group without a key Secret.
- ``write_rates``: each agent's writes per calendar minute (the write-rate quota).
- ``keys``: one wrapped data key per owner of the group (``crypto.keyring``); a
  principal's forget deletes its row with the tombstone (crypto-shredding). Turns carry
  ``rid``, the record id a sealed turn's associated data names.
- ``rekeys``: the sessions still to move to their principal's key (``rekey``).
- ``schema``: one row, the version the tables are at.

``MIGRATIONS`` is ordered; migration ``n`` takes the tables from version ``n - 1`` to
``n``. ``migrate`` runs at start, in one transaction under the dialect's schema lock, and
applies the ones a database has not had yet. To change the tables, append a migration:
never edit one that has shipped. Version 1 is written with ``IF NOT EXISTS``, so a
database created before the version row existed migrates to 1 without change.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_memory.storage.sql.dialect import ColumnTypes, Tx

# The outbox predicate; the partial index ``kaos_mem_folds_outbox`` has the same one.
OUTBOX = "(digest_status = 'pending' OR extraction_status = 'pending')"


@dataclass(frozen=True)
class Migration:
    version: int
    # One schema for both dialects: ``{identity}``, ``{bigint}``, ``{boolean}`` and
    # ``{double}`` are replaced by the dialect's column types.
    statements: tuple[str, ...]

    def ddl(self, types: ColumnTypes) -> list[str]:
        marks = {
            "{identity}": types.identity,
            "{bigint}": types.bigint,
            "{boolean}": types.boolean,
            "{double}": types.double,
        }
        out = []
        for stmt in self.statements:
            for mark, sql_type in marks.items():
                stmt = stmt.replace(mark, sql_type)
            out.append(stmt)
        return out


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS kaos_mem_turns (
                seq {identity},
                key TEXT NOT NULL,
                role TEXT NOT NULL,
                content TEXT NOT NULL,
                tokens INTEGER NOT NULL,
                at TEXT NOT NULL,
                principal TEXT,
                agent TEXT,
                infer {boolean} NOT NULL,
                folded_by {bigint}
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_turns_window"
            " ON kaos_mem_turns (key, folded_by, seq)",
            "CREATE INDEX IF NOT EXISTS kaos_mem_turns_fold ON kaos_mem_turns (folded_by)",
            """CREATE TABLE IF NOT EXISTS kaos_mem_digests (
                key TEXT NOT NULL,
                version INTEGER NOT NULL,
                summary TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (key, version)
            )""",
            """CREATE TABLE IF NOT EXISTS kaos_mem_folds (
                id {identity},
                key TEXT NOT NULL,
                session TEXT NOT NULL,
                first_seq {bigint} NOT NULL,
                last_seq {bigint} NOT NULL,
                turns INTEGER NOT NULL,
                tokens INTEGER NOT NULL,
                digest_version INTEGER,
                digest_status TEXT NOT NULL,
                extraction_status TEXT NOT NULL,
                extraction_attempts INTEGER NOT NULL,
                failures INTEGER NOT NULL,
                retry_at {double},
                created_at TEXT NOT NULL,
                extracted_at TEXT
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_folds_key ON kaos_mem_folds (key, digest_status)",
            "CREATE INDEX IF NOT EXISTS kaos_mem_folds_outbox"
            f" ON kaos_mem_folds (id) WHERE {OUTBOX}",
            """CREATE TABLE IF NOT EXISTS kaos_mem_attribution (
                key TEXT NOT NULL,
                grp TEXT NOT NULL,
                session TEXT NOT NULL,
                principal TEXT NOT NULL,
                agent TEXT NOT NULL,
                PRIMARY KEY (key, principal, agent)
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_attr_principal"
            " ON kaos_mem_attribution (grp, principal)",
            "CREATE INDEX IF NOT EXISTS kaos_mem_attr_agent ON kaos_mem_attribution (grp, agent)",
            """CREATE TABLE IF NOT EXISTS kaos_mem_sessions (
                key TEXT PRIMARY KEY,
                grp TEXT NOT NULL,
                session TEXT NOT NULL,
                last_at TEXT NOT NULL,
                flushed {boolean} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_sessions_idle"
            " ON kaos_mem_sessions (flushed, last_at)",
            """CREATE TABLE IF NOT EXISTS kaos_mem_leases (
                key TEXT NOT NULL,
                kind TEXT NOT NULL,
                owner TEXT NOT NULL,
                expires {double} NOT NULL,
                PRIMARY KEY (key, kind)
            )""",
        ),
    ),
    Migration(
        2,
        (
            # Tombstones: one row per erasure (its scope and time; ``done_at`` NULL while
            # the erasure is not final), and the sessions it reached while it is pending.
            """CREATE TABLE IF NOT EXISTS kaos_mem_erasures (
                id {identity},
                grp TEXT NOT NULL,
                level TEXT NOT NULL,
                session TEXT,
                principal TEXT,
                agent TEXT,
                erased_at {double} NOT NULL,
                done_at {double}
            )""",
            """CREATE TABLE IF NOT EXISTS kaos_mem_erased_keys (
                erasure_id {bigint} NOT NULL,
                key TEXT NOT NULL,
                session TEXT NOT NULL,
                PRIMARY KEY (erasure_id, key)
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_erased_keys_key ON kaos_mem_erased_keys (key)",
        ),
    ),
    Migration(
        3,
        (
            # The W3C traceparent of the write that recorded the fold: the digest and
            # extraction spans of whichever replica works it link back to that write.
            "ALTER TABLE kaos_mem_folds ADD COLUMN trace_context TEXT",
        ),
    ),
    Migration(
        4,
        (
            # The erasure audit (``storage.audit``): one row per erasure, written with its
            # tombstone; who (``actor``, and whether it was verified), when, the scope and
            # the rows erased per tier. Never any content.
            """CREATE TABLE IF NOT EXISTS kaos_mem_audit (
                id {identity},
                erasure_id {bigint} NOT NULL,
                grp TEXT NOT NULL,
                at {double} NOT NULL,
                actor_kind TEXT NOT NULL,
                actor TEXT,
                verified {boolean} NOT NULL,
                level TEXT NOT NULL,
                principal TEXT,
                agent TEXT,
                session TEXT,
                short_term INTEGER NOT NULL,
                medium_term INTEGER NOT NULL,
                long_term INTEGER NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS kaos_mem_audit_erasure ON kaos_mem_audit (erasure_id)",
            "CREATE INDEX IF NOT EXISTS kaos_mem_audit_grp ON kaos_mem_audit (grp, id)",
        ),
    ),
    Migration(
        5,
        (
            # Erasure receipts (``kaos_memory.receipts``): the signed receipt a forget
            # answered with, on its audit record; and the store's signing key where no
            # Secret gives one, generated once so every replica signs with the same key.
            "ALTER TABLE kaos_mem_audit ADD COLUMN receipt TEXT",
            """CREATE TABLE IF NOT EXISTS kaos_mem_receipt_keys (
                grp TEXT PRIMARY KEY,
                private_key TEXT NOT NULL,
                created_at {double} NOT NULL
            )""",
        ),
    ),
    Migration(
        6,
        (
            # Quotas (``kaos_memory.quota``): each agent's writes in one calendar minute,
            # counted in the write's transaction; past minutes are pruned by the sweeper.
            """CREATE TABLE IF NOT EXISTS kaos_mem_write_rates (
                grp TEXT NOT NULL,
                agent TEXT NOT NULL,
                minute {bigint} NOT NULL,
                writes INTEGER NOT NULL,
                PRIMARY KEY (grp, agent, minute)
            )""",
            # Retention (``kaos_memory.retention``): a group's sessions by their last write.
            "CREATE INDEX IF NOT EXISTS kaos_mem_sessions_age ON kaos_mem_sessions (grp, last_at)",
        ),
    ),
    Migration(
        7,
        (
            # Per-owner data keys, wrapped by the key-encryption key (``crypto``): never a
            # key in the clear. ``id`` is the key id a sealed text names.
            """CREATE TABLE IF NOT EXISTS kaos_mem_keys (
                id TEXT PRIMARY KEY,
                grp TEXT NOT NULL,
                owner TEXT NOT NULL,
                kek_id TEXT NOT NULL,
                wrapped TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            "CREATE UNIQUE INDEX IF NOT EXISTS kaos_mem_keys_owner ON kaos_mem_keys (grp, owner)",
            # A turn's record id, bound into its sealed content (NULL: written in the clear).
            "ALTER TABLE kaos_mem_turns ADD COLUMN rid TEXT",
        ),
    ),
    Migration(
        8,
        (
            # A principal's sessions get keys of their own (``scope.conversation_key``):
            # the shared-form keys a principal wrote to, each moved at start by ``rekey``
            # (sealed texts name their key, so the move is Python's, not SQL's).
            "CREATE TABLE IF NOT EXISTS kaos_mem_rekeys (old_key TEXT PRIMARY KEY)",
            "INSERT INTO kaos_mem_rekeys (old_key) SELECT DISTINCT key FROM kaos_mem_attribution"
            " WHERE principal <> '' AND key = 'kaos_group:' || grp || '|run:' || session",
        ),
    ),
    Migration(
        9,
        (
            # Exports and imports join the audit (``storage.audit``): ``action`` says which
            # a row records (every row before this migration is a forget's), ``outcome``
            # how a transfer ended (NULL for forgets, whose tombstone says that), its
            # records already held, and an import's ``source`` format. A transfer's
            # ``erasure_id`` is 0, an id no erasure has (they start at 1), and its turns,
            # digests and facts moved go in the per-tier columns.
            "ALTER TABLE kaos_mem_audit ADD COLUMN action TEXT NOT NULL DEFAULT 'forget'",
            "ALTER TABLE kaos_mem_audit ADD COLUMN outcome TEXT",
            "ALTER TABLE kaos_mem_audit ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE kaos_mem_audit ADD COLUMN source TEXT",
        ),
    ),
    Migration(
        10,
        (
            # A turn an agent saved on purpose (``save_memory``) records that origin, which
            # its facts' provenance gives out (``saved``, or ``tool`` when the run had read
            # a tool's output first); NULL for a conversation turn, whose role says who.
            "ALTER TABLE kaos_mem_turns ADD COLUMN source TEXT",
        ),
    ),
    Migration(
        11,
        (
            # Every write that says when its turns were said looks for a later erasure of
            # its conversation (``erasure.erased_since``): the group's tombstones by time.
            "CREATE INDEX IF NOT EXISTS kaos_mem_erasures_at ON kaos_mem_erasures (grp, erased_at)",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version


def version(tx: Tx) -> int:
    """The version the tables are at (0: none yet, or created before versions existed)."""
    tx.execute("CREATE TABLE IF NOT EXISTS kaos_mem_schema (version INTEGER NOT NULL)")
    row = tx.one("SELECT MAX(version) FROM kaos_mem_schema")
    return 0 if row is None or row[0] is None else int(row[0])


def migrate(tx: Tx, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Bring the tables to the last of ``migrations``; the version they are at after."""
    tx.dialect.lock_schema(tx.cur)
    current = version(tx)
    for migration in migrations:
        if migration.version <= current:
            continue
        for stmt in migration.ddl(tx.dialect.types):
            tx.execute(stmt)
        current = migration.version
    tx.execute("DELETE FROM kaos_mem_schema")
    tx.execute("INSERT INTO kaos_mem_schema (version) VALUES (%s)", (current,))
    return current
