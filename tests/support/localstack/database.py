"""The external store's database: a fresh one with pgvector on the project's PostgreSQL."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg

from tests.support.localstack.errors import StackError
from tests.support.postgres import (
    admin_dsn_from_env,
    create_database,
    drop_database,
    is_loopback,
    pg_query,
    server_error,
    start_local_server,
)


@dataclass
class Database:
    """A fresh database with pgvector on the project's PostgreSQL (``hack/postgres``)."""

    admin_dsn: str
    name: str
    dsn: str

    @classmethod
    def create(cls) -> Database:
        admin = admin_dsn_from_env()
        error = server_error(admin)
        if error is not None and is_loopback(admin):
            error = start_local_server() or server_error(admin)
        if error is not None:
            raise StackError(
                f"PostgreSQL with pgvector is not reachable ({error.splitlines()[0]}).\n"
                "The external MemoryStore needs it: run `make services` first (or "
                '`hack/postgres install && hack/postgres start && eval "$(hack/postgres env)"`).'
            )
        name = f"kaos_run_{uuid.uuid4().hex[:8]}"
        dsn = create_database(admin, name)
        try:
            pg_query(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            drop_database(admin, name)
            raise StackError(
                f"pgvector is missing on {admin}: {exc}. `make services` builds it."
            ) from exc
        return cls(admin_dsn=admin, name=name, dsn=dsn)

    def drop(self) -> None:
        drop_database(self.admin_dsn, self.name)
