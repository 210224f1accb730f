"""The two queries KAOS runs itself on Mem0's pgvector table (external mode), and the
indexes that serve them.

Mem0 stores a fact as ``(id uuid, vector, payload jsonb)`` and filters with
``payload->>%s = %s``: the key is a bind parameter, so no expression index can serve
the filter, and once psycopg prepares the statement (from its fifth run) PostgreSQL's
generic plan cannot even see which key it is. Here the keys are SQL literals (KAOS's own
constants; only the values are parameters), and the tenant keys have expression indexes.

Search is exact over the scope's rows: the filter's rows are read through the indexes (a
principal through ``user_id``, an agent of a principal through ``(agent_id, user_id)``),
and the ``limit`` nearest of them are kept by a top-N sort. The distance is computed in a
subquery the planner may not flatten, so Mem0's HNSW index can never serve the
``ORDER BY``: a plain HNSW scan returns at most ``hnsw.ef_search`` (40) candidates before
the filter applies, so a principal holding a small share of the facts can get none (it
happened on a large store: once an index gave the planner the group's statistics, it
chose the HNSW scan and returned nothing; before, only its misestimate of the group
filter kept it on the tenant index). The exact search's cost follows the principal's
facts, not the store. pgvector's iterative HNSW scans (0.8) are slower still, because
every candidate is checked against the filter in the table, many for each hit when the
principal's share is small. The figures: docs/benchmarks.md, "Measured figures behind the
design". A covering index cannot help either: PostgreSQL 15 plans no index-only scan on
an expression index over ``payload``, and a 1536-dimensional vector exceeds a btree row.

A new store's table is hash-partitioned by principal (``create_table``): a principal's
rows then lie together in one partition a fraction of the store's size, which every query
naming a principal reads alone (PostgreSQL prunes the others, at plan time or, for a
prepared statement, when it runs). The exact search above then reads the principal's
rows from a few pages instead of one page per row all over the table.

Past a thousand facts a principal's search is cheaper in the service than here
(``cache``: its vectors held, checked on every search against the principal's version,
which ``ensure_versions`` keeps with triggers); this module gives it its queries.

Listing orders by ``(created_at, id)`` and continues after the cursor, with a ``LIMIT``:
an index on ``(kaos_group, user_id, created_at, id)`` gives a principal's facts in that
order, so a page reads its own rows only (the group in the key also gives the planner
the group's statistics, so it knows a principal's row count and prefers the ordered
scan to reading every row of the principal and sorting them). Other scopes read their rows
through the tenant indexes and sort them in the database (a top-N sort), instead of
fetching the whole scope into Python for every page.
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
from psycopg import sql

from kaos_memory.storage.mem0.terms import (
    GROUP_KEY,
    TENANT_KEYS,
    WILDCARD,
    Filters,
    Hit,
    Position,
    Row,
)


def _where(filters: Filters) -> tuple[sql.Composable, list[Any]]:
    conditions: list[sql.Composable] = []
    params: list[Any] = []
    for key, value in filters.items():
        if value == WILDCARD:
            conditions.append(sql.SQL("payload ? {}").format(sql.Literal(key)))
        else:
            conditions.append(sql.SQL("payload->>{} = %s").format(sql.Literal(key)))
            params.append(value)
    if not conditions:
        return sql.SQL("TRUE"), params
    return sql.SQL(" AND ").join(conditions), params


# coalesce and "C": the order and its index compare plain bytes, as Python does.
_ORDER_KEYS = [
    sql.SQL("coalesce(payload->>'created_at', '') COLLATE \"C\""),
    sql.SQL('id::text COLLATE "C"'),
]
_ORDER = sql.SQL(", ").join(_ORDER_KEYS)


def _key(key: str) -> sql.Composable:
    return sql.SQL("(payload->>{})").format(sql.Literal(key))


def _indexes(table: str) -> list[tuple[str, sql.Composable]]:
    """Name and key columns of each index KAOS adds to ``table``.

    Every KAOS filter names the group, so each tenant index ends with it: the index then
    finds exactly the scope's rows, where an index on the tenant key alone left the group
    to a filter on every row it found (reading ``payload->>'kaos_group'`` out of each
    row's JSON, a large share of a principal's search; the figures: docs/benchmarks.md,
    "Measured figures behind the design").
    """
    group = _key(GROUP_KEY)
    indexes: list[tuple[str, sql.Composable]] = [
        (f"{table}_kaos_{key}_group_idx", sql.SQL("{}, {}").format(_key(key), group))
        for key in TENANT_KEYS
    ]
    # An agent's facts of one principal (agent-level scopes filter both): read directly
    # instead of intersecting a principal's rows with every principal's rows of the agent.
    indexes.append(
        (
            f"{table}_kaos_agent_user_group_idx",
            sql.SQL("{}, {}, {}").format(_key("agent_id"), _key("user_id"), group),
        )
    )
    # A principal's facts in listing order (every KAOS filter names the group).
    indexes.append(
        (
            f"{table}_kaos_user_order_idx",
            sql.SQL(", ").join(
                [
                    _key(GROUP_KEY),
                    _key("user_id"),
                    *(sql.SQL("({})").format(k) for k in _ORDER_KEYS),
                ]
            ),
        )
    )
    return indexes


# Hash partitions of a new table (the principal's key): enough that a principal shares
# its partition with few others at a hundred principals, few enough that the queries
# that cannot be pruned (Mem0's own, by id or by a bound key) stay cheap.
PARTITIONS = 64


def create_table(pool: Any, table: str, dims: int, partitions: int = PARTITIONS) -> bool:
    """Mem0's table (``id uuid, vector, payload jsonb``), hash-partitioned by the principal
    (``payload->>'user_id'``), unless a table of that name exists: True if created here.

    A principal's search, listing and erasure name the principal, so PostgreSQL reads one
    partition: the principal's rows lie together in a table a fraction of the store's
    size instead of scattered over all of it, so its search reads fewer pages (the
    figures: docs/benchmarks.md, "Measured figures behind the design"). Mem0
    creates the same columns with ``CREATE TABLE IF NOT EXISTS``, so its ``create_col``
    (the caller's next step) only adds its indexes, which PostgreSQL builds on every
    partition. A partitioned table cannot have a primary
    key the partition key is not part of, so ``id`` has a plain index (Mem0 never relies
    on the key's uniqueness: its ids are fresh UUIDs, and it inserts without ``ON
    CONFLICT``). An existing table keeps its layout: moving a store's rows is an
    operator's decision, not a start-up side effect.
    """
    with pool.connection() as conn:
        found = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", [sql.Identifier(table).as_string(conn)]
        ).fetchone()
        if found is None or found[0]:
            return False
        name = sql.Identifier(table)
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE {} (id uuid NOT NULL, vector vector({}), payload jsonb)"
                        " PARTITION BY HASH ((payload->>'user_id'))"
                    ).format(name, sql.Literal(dims))
                )
                for remainder in range(partitions):
                    conn.execute(
                        sql.SQL(
                            "CREATE TABLE {} PARTITION OF {}"
                            " FOR VALUES WITH (MODULUS {}, REMAINDER {})"
                        ).format(
                            sql.Identifier(f"{table}_p{remainder}"),
                            name,
                            sql.Literal(partitions),
                            sql.Literal(remainder),
                        )
                    )
                conn.execute(
                    sql.SQL("CREATE INDEX {} ON {} (id)").format(
                        sql.Identifier(f"{table}_id_idx"), name
                    )
                )
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            # Another replica created it first.
            return False
    return True


def create_partitioned(store: Any, dims: int, partitions: int = PARTITIONS) -> bool:
    """``create_table`` for Mem0's pgvector ``store``, then Mem0's own indexes on it (its
    first use would not add them: it creates them only with a table it creates itself).
    True if created here; an existing table is left alone."""
    if not create_table(store.connection_pool, store.collection_name, dims, partitions):
        return False
    store.create_col()
    return True


def _superseded(table: str) -> list[str]:
    """Indexes earlier versions added, which a current index replaces (without the group)."""
    return [f"{table}_kaos_{key}_idx" for key in TENANT_KEYS] + [f"{table}_kaos_agent_user_idx"]


def ensure_indexes(pool: Any, table: str) -> None:
    """The indexes of ``_indexes`` on ``table`` (idempotent), and the superseded ones gone.

    Each in its own transaction: two replicas starting at once may both try to create
    one, and the loser's error (a duplicate name) means the index exists. A superseded
    index is dropped only once its replacement exists, so no search is left without one.
    """
    with pool.connection() as conn:
        for name, columns in _indexes(table):
            statement = sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(name), sql.Identifier(table), columns
            )
            try:
                with conn.transaction():
                    conn.execute(statement)
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                pass
        for name in _superseded(table):
            with conn.transaction():
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))


def search_query(
    table: str, vector: Any, filters: Filters, limit: int
) -> tuple[sql.SQL, list[Any]]:
    """The statement and parameters of a tenant-filtered search (also what the benchmark
    explains): rows ``(id, cosine distance, payload)``, nearest first.
    ``vector``: a list of floats, or a numpy float32 array on a connection with pgvector's
    adapter (sent binary).

    ``OFFSET 0`` keeps the subquery from being flattened, which is what keeps the HNSW
    index away from the ``ORDER BY`` (see the module docstring): the nearest rows are
    chosen among all the filter's rows. Without a tenant key (a whole group) that would
    mean every row of the group, so there the planner may still use the HNSW index
    (approximate, as Mem0's own search: at most ``hnsw.ef_search`` rows).
    """
    shape = tuple((key, value == WILDCARD) for key, value in filters.items())
    params = [v for v in filters.values() if v != WILDCARD]
    return sql.SQL(_search_text(table, shape)), [vector, *params, limit]


@functools.lru_cache(maxsize=256)
def _search_text(table: str, shape: tuple[tuple[str, bool], ...]) -> str:
    """``search_query``'s text for a table and a filter shape (its keys, and which are
    wildcards), composed once: composing it on every recall showed in the event loop's
    profile under concurrent recalls (the figures: docs/benchmarks.md, "Measured figures
    behind the design")."""
    where, _ = _where({key: WILDCARD if wild else "" for key, wild in shape})
    if any(key in TENANT_KEYS and not wild for key, wild in shape):
        query = sql.SQL(
            "SELECT id, distance, payload FROM (SELECT id, vector <=> %s::vector AS distance,"
            " payload FROM {} WHERE {} OFFSET 0) AS scope ORDER BY distance LIMIT %s"
        )
    else:
        query = sql.SQL(
            "SELECT id, vector <=> %s::vector AS distance, payload FROM {} WHERE {}"
            " ORDER BY distance LIMIT %s"
        )
    return query.format(sql.Identifier(table), where).as_string(None)


def hits(rows: list[Any]) -> list[Hit]:
    """The rows of ``search_query`` as ``(id, 1 - cosine distance, payload)``."""
    return [(str(r[0]), max(0.0, 1.0 - float(r[1])), r[2]) for r in rows]


def page_query(
    table: str, filters: Filters, limit: int, after: Position | None
) -> tuple[sql.Composed, list[Any]]:
    """The statement and parameters of ``page`` (also what the tests explain)."""
    where, params = _where(filters)
    if after is not None:
        where = sql.SQL("{} AND ({}) > (%s, %s)").format(where, _ORDER)
        params += [after[0], after[1]]
    query = sql.SQL("SELECT id, payload FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
        sql.Identifier(table), where, _ORDER
    )
    return query, [*params, limit]


def page(pool: Any, table: str, filters: Filters, limit: int, after: Position | None) -> list[Row]:
    """Up to ``limit`` facts inside ``filters`` in ``(created_at, id)`` order, after ``after``."""
    query, params = page_query(table, filters, limit, after)
    with pool.connection() as conn:
        rows = conn.execute(query, params).fetchall()
    return [(str(r[0]), r[1]) for r in rows]


def count(pool: Any, table: str, filters: Filters) -> int:
    """How many facts are inside ``filters``, through the same indexes as ``page``."""
    where, params = _where(filters)
    query = sql.SQL("SELECT COUNT(*) FROM {} WHERE {}").format(sql.Identifier(table), where)
    with pool.connection() as conn:
        row = conn.execute(query, params).fetchone()
    return int(row[0])


def delete(pool: Any, table: str, facts: list[Row]) -> int:
    """Delete ``facts`` (id and payload), one statement per principal: naming the principal
    lets a partitioned table read one partition, where Mem0's delete by id alone probes
    every partition's id index (planned anew each time), far dearer than on one table (the
    figures: docs/benchmarks.md, "Measured figures behind the design"). A fact given
    without its payload is deleted by id alone. Rows already gone are skipped; returns how
    many went."""
    by_principal: dict[str | None, list[str]] = {}
    for fact_id, payload in facts:
        principal = None if payload is None else payload.get("user_id")
        by_principal.setdefault(principal if isinstance(principal, str) else None, []).append(
            fact_id
        )
    name = sql.Identifier(table)
    deleted = 0
    with pool.connection() as conn:
        for principal, ids in by_principal.items():
            if principal is None:
                # A fact without a principal (or a malformed one): by id alone.
                statement = sql.SQL("DELETE FROM {} WHERE id = ANY(%s::uuid[])").format(name)
                params: list[Any] = [ids]
            else:
                statement = sql.SQL(
                    "DELETE FROM {} WHERE payload->>'user_id' = %s AND id = ANY(%s::uuid[])"
                ).format(name)
                params = [principal, ids]
            deleted += conn.execute(statement, params).rowcount
    return deleted


# --- a principal's version (what ``cache`` keeps a principal's vectors against) ---------


def versions_table(table: str) -> str:
    return f"{table}_kaos_versions"


def ensure_versions(pool: Any, table: str) -> None:
    """A version per principal of ``table``, bumped by triggers on every statement that
    inserts, updates or deletes any of the principal's facts, whoever runs it (this
    replica, another, Mem0, an operator's SQL): ``(group, principal) -> version``.

    Versions come from one sequence, so a version is never given twice, even after its
    row is deleted; no row means no change since the triggers exist (version 0). The
    triggers are statement-level with transition tables: one upsert per principal a
    statement touched, not one per row (an erasure of 10k facts bumps once). A TRUNCATE
    forgets every version (its rows are gone; the next insert gives a fresh one).
    Idempotent; replicas starting at once serialise on an advisory lock.
    """
    versions = sql.Identifier(versions_table(table))
    seq = sql.Identifier(f"{table}_kaos_version_seq")
    bump = sql.Identifier(f"{table}_kaos_bump")
    forget = sql.Identifier(f"{table}_kaos_forget")
    name = sql.Identifier(table)
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [table])
        conn.execute(sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}").format(seq))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (kaos_group text NOT NULL, principal text NOT"
                " NULL, version bigint NOT NULL, PRIMARY KEY (kaos_group, principal))"
            ).format(versions)
        )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {bump}() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN"
                " INSERT INTO {versions} AS v (kaos_group, principal, version)"
                " SELECT g, p, nextval({seq_name}) FROM (SELECT DISTINCT"
                " coalesce(payload->>'kaos_group', '') AS g,"
                " coalesce(payload->>'user_id', '') AS p FROM changed) AS touched"
                " ON CONFLICT (kaos_group, principal) DO UPDATE SET version = EXCLUDED.version;"
                " RETURN NULL;"
                " END $$"
            ).format(
                bump=bump,
                versions=versions,
                seq_name=sql.Literal(seq.as_string(conn)),
            )
        )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN DELETE FROM {}; RETURN NULL; END $$"
            ).format(forget, versions)
        )
        for suffix, event, transition in (
            ("ins", "INSERT", "NEW TABLE"),
            ("del", "DELETE", "OLD TABLE"),
            ("upd_old", "UPDATE", "OLD TABLE"),
            ("upd_new", "UPDATE", "NEW TABLE"),
        ):
            conn.execute(
                sql.SQL(
                    "CREATE OR REPLACE TRIGGER {} AFTER {} ON {} REFERENCING {} AS changed"
                    " FOR EACH STATEMENT EXECUTE FUNCTION {}()"
                ).format(
                    sql.Identifier(f"{table}_kaos_version_{suffix}"),
                    sql.SQL(event),
                    name,
                    sql.SQL(transition),
                    bump,
                )
            )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE TRIGGER {} AFTER TRUNCATE ON {}"
                " FOR EACH STATEMENT EXECUTE FUNCTION {}()"
            ).format(sql.Identifier(f"{table}_kaos_version_truncate"), name, forget)
        )


def version_query(table: str) -> sql.Composed:
    """A principal's version (parameters: group, principal); no row is version 0."""
    return sql.SQL("SELECT version FROM {} WHERE kaos_group = %s AND principal = %s").format(
        sql.Identifier(versions_table(table))
    )


def vectors_query(table: str) -> sql.Composed:
    """A principal's facts as ``(count, ids, vectors)`` (parameters: group, principal): the
    ids as one bytea of 16-byte uuids and the vectors as one bytea of pgvector's binary
    form (a 4-byte header, then big-endian float4s), both in id order: one row, however
    many facts, and nothing parsed per fact."""
    return sql.SQL(
        "SELECT count(*), string_agg(uuid_send(id), ''::bytea ORDER BY id),"
        " string_agg(vector_send(vector), ''::bytea ORDER BY id)"
        " FROM {} WHERE payload->>'kaos_group' = %s AND payload->>'user_id' = %s"
    ).format(sql.Identifier(table))


def payloads_query(table: str) -> sql.Composed:
    """The payloads of the given ids among a principal's facts (parameters: group,
    principal, ids): the principal and the group are the same filter the search applies,
    so no id can bring in another principal's fact."""
    return sql.SQL(
        "SELECT id, payload FROM {} WHERE payload->>'kaos_group' = %s"
        " AND payload->>'user_id' = %s AND id = ANY(%s::uuid[])"
    ).format(sql.Identifier(table))
