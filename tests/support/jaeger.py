"""A real trace backend for the telemetry tests: Jaeger v2 all-in-one on loopback.

The binary is the one ``hack/jaeger-build`` builds and caches (``make services`` runs it).
``Jaeger.start`` writes a configuration with every listener on a free loopback port
(OTLP/HTTP in; the query API, its gRPC twin and the health check out), in-memory storage
and no telemetry of its own, then waits for the health check. ``JaegerQuery`` reads
what it stored through the query API (``/api/v3``, OTLP JSON), as spans with their
resource, attributes, parent and links.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from tests.support.procs import REPO_ROOT, ServiceProcess, free_port, start_service

T = TypeVar("T")

BUILD_SCRIPT = REPO_ROOT / "hack" / "jaeger-build"
# OTLP span kinds.
INTERNAL, SERVER, CLIENT = 1, 2, 3


class JaegerMissing(RuntimeError):
    """The cached binary is not there: ``hack/jaeger-build`` (``make services``) builds it."""


def jaeger_binary() -> Path:
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(dict(line.split("=", 1) for line in out.splitlines() if "=" in line)["KAOS_JAEGER"])
    if not path.is_file():
        raise JaegerMissing(f"{path} is missing: run hack/jaeger-build (or make services)")
    return path


def _config(otlp: int, query: int, query_grpc: int, health: int) -> dict[str, Any]:
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            # No listener of its own beyond the ones below (its metrics would take :8888).
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"127.0.0.1:{health}"}},
            "jaeger_query": {
                "storage": {"traces": "memory"},
                "http": {"endpoint": f"127.0.0.1:{query}"},
                "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"},
            },
            "jaeger_storage": {"backends": {"memory": {"memory": {"max_traces": 100000}}}},
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{otlp}"}}}},
        "processors": {"batch": {"timeout": "100ms"}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memory"}},
    }


@dataclass
class Jaeger:
    proc: ServiceProcess
    otlp_port: int
    query_port: int

    @property
    def otlp_endpoint(self) -> str:
        """What ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set to (OTLP/HTTP)."""
        return f"http://127.0.0.1:{self.otlp_port}"

    @property
    def query(self) -> JaegerQuery:
        return JaegerQuery(f"http://127.0.0.1:{self.query_port}")

    @classmethod
    def start(cls, work_dir: Path) -> Jaeger:
        binary = jaeger_binary()
        otlp, query, query_grpc, health = (free_port() for _ in range(4))
        work_dir.mkdir(parents=True, exist_ok=True)
        config = work_dir / "jaeger.json"  # YAML is a superset of JSON
        config.write_text(json.dumps(_config(otlp, query, query_grpc, health), indent=1))
        proc = start_service(
            "jaeger",
            [str(binary), "--config", str(config)],
            port=health,
            log_dir=work_dir,
            ready_path="/status",
            timeout=60,
        )
        return cls(proc=proc, otlp_port=otlp, query_port=query)

    def stop(self) -> None:
        self.proc.stop(timeout=15)


# --- reading what it stored ---------------------------------------------------------------


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return None


def _attrs(items: Iterable[dict[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _value(a.get("value", {})) for a in items or ()}


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    service: str
    resource: dict[str, Any]
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...] = field(default=())

    def attr(self, key: str) -> Any:
        return self.attributes.get(key)


def spans_of(doc: dict[str, Any]) -> list[Span]:
    out: list[Span] = []
    for rs in doc.get("result", {}).get("resourceSpans", []):
        resource = _attrs(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                out.append(
                    Span(
                        trace_id=s["traceId"],
                        span_id=s["spanId"],
                        parent_id=s.get("parentSpanId", ""),
                        name=s["name"],
                        kind=int(s.get("kind", 0)),
                        service=str(resource.get("service.name", "")),
                        resource=resource,
                        attributes=_attrs(s.get("attributes")),
                        links=tuple((lk["traceId"], lk["spanId"]) for lk in s.get("links", [])),
                    )
                )
    return out


@dataclass(frozen=True)
class JaegerQuery:
    url: str

    def _get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
                doc: dict[str, Any] = json.loads(resp.read())
                return doc
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {}
            raise

    def services(self) -> list[str]:
        return list(self._get("/api/v3/services").get("services", []))

    def trace(self, trace_id: str) -> list[Span]:
        return spans_of(self._get(f"/api/v3/traces/{trace_id}"))

    def spans(self, service: str, *, since: datetime, name: str | None = None) -> list[Span]:
        """Every stored span of the traces ``service`` took part in since ``since``."""
        params = {
            "query.service_name": service,
            "query.start_time_min": since.astimezone(UTC).isoformat(),
            "query.start_time_max": (datetime.now(UTC) + timedelta(minutes=1)).isoformat(),
            "query.num_traces": "1000",
        }
        if name is not None:
            params["query.operation_name"] = name
        return spans_of(self._get("/api/v3/traces", params))


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns something (spans arrive in batches), or fail."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.2)  # polling interval of a deadline wait, not a synchronisation
