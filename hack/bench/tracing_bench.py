"""What tracing costs a memory call: the same requests to three memory services side by
side, two with tracing off (the second shows the noise between two identical services)
and one with tracing on at sampling 1.0, exporting every span to a running Jaeger v2
(``hack/jaeger-build``; the same binary the telemetry tests run).

All three run on the same development model and the same kind of store (local mode), each
with its own data directory; requests rotate between them so all see the same machine
noise. Operations as in ``auth_bench``: a one-turn write, a session-level recall (the
window path every agent turn takes) and an agent-level long-term recall.

Run alone (``python hack/bench/tracing_bench.py``) or as part of ``hack/bench/memory``.
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

from auth_bench import IDENTITY, measure, start_memory  # noqa: E402
from benchlib import devmodel  # noqa: E402

from tests.support.jaeger import Jaeger  # noqa: E402
from tests.support.procs import ServiceProcess  # noqa: E402


def run(model_url: str, dims: int, ops: int) -> list[dict[str, Any]]:
    """Tracing off (twice) and on; one row per operation."""
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-tracing-"))
    jaeger = Jaeger.start(root / "jaeger")
    started: list[ServiceProcess] = []
    try:
        on_env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_endpoint,
            "OTEL_SERVICE_NAME": "kaos-memory-bench",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1.0",
        }
        for name, env in (("off", {}), ("off2", {}), ("on", on_env)):
            started.append(start_memory(name, root, model_url, dims, env))
        hdrs = {"X-Principal": "alice", "X-Session-Id": "bench-session"}
        hdrs["X-Agent-Identity"] = IDENTITY
        services = {svc.name.removeprefix("memory-"): (svc, hdrs) for svc in started}
        return asyncio.run(measure(services, ops))
    finally:
        for svc in reversed(started):
            svc.stop(timeout=30)
        jaeger.stop()
        shutil.rmtree(root, ignore_errors=True)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'operation':<27}{'off p50':>9}{'off2 p50':>10}{'noise':>8}"
        f"{'on p50':>9}{'on p99':>9}{'on vs off':>11}"
    )
    print("tracing: the same calls with tracing off (twice) and on (sampling 1.0, to Jaeger)")
    print(head)
    print("-" * len(head))
    for r in rows:
        off = (r["off_p50"] + r["off2_p50"]) / 2
        noise = abs(r["off2_p50"] - r["off_p50"]) / off * 100
        print(
            f"{r['op']:<27}{r['off_p50']:>9.2f}{r['off2_p50']:>10.2f}{noise:>7.1f}%"
            f"{r['on_p50']:>9.2f}{r['on_p99']:>9.2f}{(r['on_p50'] / off - 1) * 100:>+10.1f}%"
        )
    print(
        "(latencies in ms; noise = |off - off2| / their mean, two identical untraced services;"
        " on vs off = on p50 / mean off p50 - 1)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="requests per operation and side")
    parser.add_argument("--dims", type=int, default=64, help="embedding dimension")
    args = parser.parse_args()
    with devmodel(args.dims) as model:
        print_table(run(f"{model.url}/v1", args.dims, args.ops))


if __name__ == "__main__":
    main()
