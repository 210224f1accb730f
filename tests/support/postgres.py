"""Helpers for tests that use the project's PostgreSQL (with pgvector) from ``hack/postgres``.

Each test gets its own database on one shared server: creating a database from a template
takes milliseconds, and dropping it afterwards leaves nothing behind for the next test.
Only the standard library and psycopg's synchronous API are used, so these helpers work in
sync tests, in async tests (for setup and assertions) and in session-scoped fixtures alike.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.abc import Params
from psycopg.conninfo import conninfo_to_dict, make_conninfo

REPO_ROOT = Path(__file__).resolve().parents[2]
HACK_SCRIPT = REPO_ROOT / "hack" / "postgres"

DSN_ENV = "KAOS_TEST_PG_DSN"
DEFAULT_PORT = 54329
DEFAULT_ADMIN_DSN = f"postgresql://postgres@127.0.0.1:{DEFAULT_PORT}/postgres"
# Names of the databases these helpers create: tests own them, nothing else may use the prefix.
TEST_DB_PREFIX = "kaos_test_"
TEMPLATE_DB_PREFIX = "kaos_tmpl_"
# A server that does not answer within this many seconds is treated as absent.
CONNECT_TIMEOUT_S = 3


def admin_dsn_from_env() -> str:
    """The DSN of a superuser connection to the test server (``KAOS_TEST_PG_DSN`` or default)."""
    return os.environ.get(DSN_ENV) or DEFAULT_ADMIN_DSN


def dsn_for_database(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at database ``dbname``, in the same form (URL or key=value) as given.

    URLs are kept as URLs because some consumers (SQLAlchemy, Mem0's pgvector config)
    accept only that form.
    """
    if dsn.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(dsn)
        return urlunsplit(parts._replace(path="/" + dbname))
    return make_conninfo(dsn, dbname=dbname)


def is_loopback(dsn: str) -> bool:
    """True when ``dsn`` names a server on this machine (so ``hack/postgres`` can start it)."""
    host = conninfo_to_dict(dsn).get("host") or "localhost"
    return str(host) in {"127.0.0.1", "localhost", "::1"} or str(host).startswith("/")


def connect(dsn: str, *, autocommit: bool = True) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection that fails fast instead of hanging when the server is absent.

    Autocommit by default: CREATE DATABASE cannot run inside a transaction, and a test's
    setup statements should be visible to the code under test without a separate commit.
    """
    return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)


def server_error(dsn: str) -> str | None:
    """None when the server at ``dsn`` accepts a connection, else why it did not."""
    try:
        with connect(dsn) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip() or type(exc).__name__
    return None


def pg_query(dsn: str, query: str, params: Params | None = None) -> list[tuple[Any, ...]]:
    """Run one statement (autocommit) and return its rows; ``[]`` when it returns none.

    Without ``params`` the text is sent as is, so several ``;``-separated statements work and
    ``%`` needs no escaping; with ``params`` use ``%s``/``%(name)s`` placeholders.
    """
    with connect(dsn) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def unique_name(prefix: str = TEST_DB_PREFIX) -> str:
    """A database name that no other test, worker or run uses at the same time."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def create_database(admin_dsn: str, name: str, *, template: str = "template0") -> str:
    """Create database ``name`` as a copy of ``template`` and return a DSN to it."""
    with connect(admin_dsn) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return dsn_for_database(admin_dsn, name)


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop ``name`` even if connections (a pool the test forgot to close) still use it."""
    with connect(admin_dsn) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def create_vector_template(admin_dsn: str) -> str:
    """Create a template database that already has the ``vector`` extension; return its name.

    Copying it is as fast as copying template0, and saves each test the CREATE EXTENSION.
    The caller drops it (``drop_database``) when done.
    """
    name = unique_name(TEMPLATE_DB_PREFIX)
    dsn = create_database(admin_dsn, name)
    try:
        pg_query(dsn, "CREATE EXTENSION vector")
    except BaseException:
        drop_database(admin_dsn, name)
        raise
    # The connection above is closed, so the template has no sessions: a copy would refuse
    # to start while anyone is connected to its source.
    return name


def start_local_server(timeout: float = 120.0) -> str | None:
    """Run ``hack/postgres start``; None on success, else the reason it could not."""
    if not HACK_SCRIPT.exists():
        return f"{HACK_SCRIPT} is missing"
    try:
        done = subprocess.run(
            [str(HACK_SCRIPT), "start"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"hack/postgres start: {exc}"
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        return f"hack/postgres start exited {done.returncode}:\n{tail}"
    return None


def generic_plan(
    conn: psycopg.Connection[Any],
    query: sql.Composable,
    params: list[Any],
    *,
    analyze: bool = False,
) -> list[str]:
    """The plan of ``query`` as a prepared statement under its generic plan: what a pooled
    connection runs once psycopg has prepared it (from its fifth execution on, the
    parameters' values unseen; an ``EXPLAIN`` with bound values would show a custom plan).
    ``analyze`` runs it (``EXPLAIN (ANALYZE, COSTS OFF)``, with the execution time)."""
    text = query.as_string(conn)
    for n in range(1, len(params) + 1):
        text = text.replace("%s", f"${n}", 1)
    conn.execute(f"PREPARE kaos_plan_probe AS {text}")
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        # Literal arguments: EXECUTE's own parameters would have no type to infer.
        args = sql.SQL(", ").join(sql.Literal(str(p) if isinstance(p, list) else p) for p in params)
        explain = "EXPLAIN (ANALYZE, COSTS OFF)" if analyze else "EXPLAIN"
        rows = conn.execute(sql.SQL(explain + " EXECUTE kaos_plan_probe({})").format(args))
        return [r[0] for r in rows.fetchall()]
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE kaos_plan_probe")


def mem0_pgvector(dsn: str, table: str, dims: int) -> Any:
    """Mem0's own pgvector store on ``table`` of ``dsn``, as KAOS configures it (an HNSW
    index, no DiskANN): the table Mem0 creates is the one KAOS's queries must serve."""
    from mem0.vector_stores.pgvector import PGVector

    return PGVector(
        dbname=None,
        collection_name=table,
        embedding_model_dims=dims,
        user=None,
        password=None,
        host=None,
        port=None,
        diskann=False,
        hnsw=True,
        connection_string=dsn,
    )


def insert_facts(
    dsn: str, table: str, facts: list[tuple[str, list[float], dict[str, Any]]]
) -> None:
    """Rows ``(id, vector, payload)`` into a Mem0 pgvector ``table``, as Mem0 stores facts
    (what another replica, or Mem0 itself, would have written)."""
    import json

    with connect(dsn) as conn, conn.cursor() as cur:
        cur.executemany(
            sql.SQL("INSERT INTO {} (id, vector, payload) VALUES (%s, %s::vector, %s)").format(
                sql.Identifier(table)
            ),
            [(i, str(v), json.dumps(p)) for i, v, p in facts],
        )
