"""What encryption at rest costs a memory call: the same requests to three memory services
side by side, two storing text in the clear (the second shows the noise between two
identical services) and one sealing every text under per-principal keys with a Secret KEK.

All three run on the same development model and the same kind of store (local mode; with
PostgreSQL also external mode, each service on its own database); requests rotate between
them so all see the same machine noise. Operations as in ``auth_bench``: a one-turn write,
a session-level recall (the window path every agent turn takes) and an agent-level
long-term recall. The target: sealed p50 at most 1.05x the clear one.

Run alone (``python hack/bench/encryption_bench.py``) or as part of ``hack/bench/memory``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from auth_bench import IDENTITY, measure  # noqa: E402
from benchlib import devmodel, memory_service, require_postgres  # noqa: E402
from kaos_memory.crypto.kek import new_kek_version  # noqa: E402

from tests.support.postgres import (  # noqa: E402
    create_database,
    drop_database,
    pg_query,
    unique_name,
)
from tests.support.procs import ServiceProcess  # noqa: E402

SIDES = ("off", "off2", "on")


def _kek(root: Path) -> Path:
    kek = root / "kek"
    kek.mkdir()
    (kek / "v1").write_text(new_kek_version())
    (kek / "current").write_text("v1")
    return kek


def run(
    model_url: str, dims: int, ops: int, modes: tuple[str, ...], admin_dsn: str | None
) -> list[dict[str, Any]]:
    """Clear (twice) and sealed, per mode; one row per mode and operation."""
    rows: list[dict[str, Any]] = []
    for mode in modes:
        root = Path(tempfile.mkdtemp(prefix=f"kaos-bench-encryption-{mode}-"))
        kek = _kek(root)
        started: list[ServiceProcess] = []
        databases: list[str] = []
        try:
            for side in SIDES:
                env = {
                    "KAOS_MEMORY_STORAGE": mode,
                    "KAOS_MEMORY_DATA_DIR": str(root / side),
                    "KAOS_MEMORY_MODEL_BASE_URL": model_url,
                    "KAOS_MEMORY_EMBEDDING_DIMS": str(dims),
                    "KAOS_MEMORY_ENCRYPTION": "on" if side == "on" else "off",
                    "KAOS_MEMORY_ENCRYPTION_KEK_DIR": str(kek) if side == "on" else "",
                }
                if mode == "external":
                    assert admin_dsn is not None
                    name = unique_name("kaos_bench_")
                    databases.append(name)
                    dsn = create_database(admin_dsn, name)
                    pg_query(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
                    env["KAOS_MEMORY_DSN"] = dsn
                started.append(memory_service(side, env, root))
            hdrs = {"X-Principal": "alice", "X-Session-Id": "bench-session"}
            hdrs["X-Agent-Identity"] = IDENTITY
            services = {svc.name.removeprefix("memory-"): (svc, hdrs) for svc in started}
            rows += [{"mode": mode, **row} for row in asyncio.run(measure(services, ops))]
        finally:
            for svc in reversed(started):
                svc.stop(timeout=30)
            for name in databases:
                assert admin_dsn is not None
                drop_database(admin_dsn, name)
            shutil.rmtree(root, ignore_errors=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'mode':<9}{'operation':<27}{'off p50':>9}{'off p99':>9}{'off2 p50':>10}"
        f"{'noise':>8}{'on p50':>9}{'on p99':>9}{'on / off':>10}"
    )
    print("encryption at rest: the same calls with texts in the clear (twice) and sealed")
    print(head)
    print("-" * len(head))
    for r in rows:
        off = (r["off_p50"] + r["off2_p50"]) / 2
        noise = abs(r["off2_p50"] - r["off_p50"]) / off * 100
        print(
            f"{r['mode']:<9}{r['op']:<27}{r['off_p50']:>9.2f}{r['off_p99']:>9.2f}"
            f"{r['off2_p50']:>10.2f}{noise:>7.1f}%{r['on_p50']:>9.2f}{r['on_p99']:>9.2f}"
            f"{r['on_p50'] / off:>9.3f}x"
        )
    print(
        "(latencies in ms; noise = |off - off2| / their mean, two identical services storing"
        " text in the clear; on / off = sealed p50 / mean clear p50, target <= 1.05)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="requests per operation and side")
    parser.add_argument("--dims", type=int, default=64, help="embedding dimension")
    parser.add_argument("--modes", default="local,external")
    args = parser.parse_args()
    modes = tuple(m for m in args.modes.split(",") if m)
    admin_dsn = require_postgres("external mode") if "external" in modes else None
    with devmodel(args.dims) as model:
        print_table(run(f"{model.url}/v1", args.dims, args.ops, modes, admin_dsn))


if __name__ == "__main__":
    main()
