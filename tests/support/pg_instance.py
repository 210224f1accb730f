"""A private PostgreSQL server for one test, which the test may stop and restart.

The shared cluster of ``hack/postgres`` serves every other test, so a test that takes the
database away (an outage, a restart under load) gets its own: ``initdb`` into a temporary
directory, on a free loopback port, with the same PostgreSQL build (and so the same
pgvector extension). As root, the server runs as the ``postgres`` OS user, because
``initdb`` and ``postgres`` refuse to run as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.postgres import connect
from tests.support.procs import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_owner(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@dataclass
class PgInstance:
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def dsn(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _ctl(self, *args: str, timeout: float = 60) -> None:
        argv = _as_owner([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", *args])
        done = subprocess.run(
            argv, cwd="/", capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)}: {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1"
            f" -c unix_socket_directories={self.root / 'run'} -c fsync=off"
        )
        self._ctl("-o", options, "-l", str(self.root / "log" / "postgres.log"), "start")

    def stop(self) -> None:
        # fast: disconnects clients at once, as a crash or failover would look to them.
        self._ctl("-m", "fast", "stop")

    def create_database(self, name: str) -> str:
        with connect(self.admin_dsn) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = self.dsn(name)
        with connect(dsn) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return dsn

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError):  # not running
            self._ctl("-m", "immediate", "stop", timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


def make_instance() -> PgInstance:
    """Initialise (not start) a private server in a directory its OS user owns."""
    if not (PG_BIN / "initdb").exists():
        raise RuntimeError(f"{PG_BIN}/initdb is missing: run hack/postgres install")
    # Under /tmp rather than pytest's tmp dir: root's pytest dirs are 0700, which the
    # postgres OS user cannot enter.
    root = Path(tempfile.mkdtemp(prefix="kaos-pg-"))
    for sub in ("run", "log"):
        (root / sub).mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        for sub in ("run", "log"):
            shutil.chown(root / sub, "postgres", "postgres")
    argv = _as_owner(
        [str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust"]
    )
    done = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"initdb: {done.stdout}{done.stderr}")
    return PgInstance(root=root, port=free_port())
