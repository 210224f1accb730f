"""``kaos_core.telemetry``: off and free without an endpoint, the SDK with one and the
aiohttp tracing the app factory and the client-session factory wire in, spans checked in
a real Jaeger.

Each case runs in a fresh interpreter: installing the SDK sets process-wide state (the
tracer provider) that must not leak into other tests, and "nothing imported" can only be
seen from a clean ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime

import pytest
from kaos_core.settings import SettingsError
from kaos_core.telemetry import TelemetrySettings, current_traceparent, link_to, links

from tests.support.jaeger import CLIENT, SERVER, Jaeger, Span, eventually
from tests.support.procs import REPO_ROOT


def _run(script: str, env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**base, **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


OFF_SCRIPT = """
import sys, json, tempfile
from kaos_core.telemetry import TelemetrySettings, setup_telemetry, enabled
import kaos_memory.app, kaos_agent.app, kaos_operator.app, kaos_devmodel.app
import kaos_agent.mcp_runtime.server
from kaos_agent.app import AgentDeps, create_app as agent_app
from kaos_agent.settings import AgentSettings
from kaos_memory.app import create_app as memory_app
from kaos_memory.settings import load_memory_settings
from pydantic_ai.models.test import TestModel

from kaos_core.tracing import server_middleware

assert setup_telemetry("kaos-agent", TelemetrySettings.from_env()) is None and not enabled()
app = agent_app(AgentSettings.from_env({"MODEL_API_URL": "http://127.0.0.1:9", "MODEL_NAME": "m"}),
                deps=AgentDeps(model=TestModel()))
assert server_middleware not in app.middlewares  # nothing traced, nothing wired in
memory_app(load_memory_settings({"KAOS_MEMORY_STORAGE": "local",
                                 "KAOS_MEMORY_DATA_DIR": tempfile.mkdtemp()}))
loaded = sorted(m for m in sys.modules
                if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter",
                                 "opentelemetry.instrumentation")))
print(json.dumps(loaded))
"""


def test_without_an_endpoint_no_sdk_exporter_or_instrumentation_is_imported() -> None:
    assert json.loads(_run(OFF_SCRIPT, {})) == []


def test_disabled_wins_over_an_endpoint() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}
    assert not TelemetrySettings.from_env(env).enabled
    assert TelemetrySettings.from_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1"}).enabled


def test_a_bad_variable_is_a_settings_error_naming_it() -> None:
    with pytest.raises(SettingsError, match="OTEL_TRACES_SAMPLER_ARG"):
        TelemetrySettings.from_env({"OTEL_TRACES_SAMPLER_ARG": "1.5"})


def test_no_span_no_traceparent_and_bad_ones_link_nothing() -> None:
    assert current_traceparent() is None
    assert link_to(None) is None
    assert link_to("00-nothex-0000000000000000-01") is None
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    link = link_to(tp)
    assert link is not None and format(link.context.span_id, "016x") == "b7ad6b7169203331"
    assert len(links([tp, tp, None, "garbage"])) == 1


ON_SCRIPT = """
import asyncio, sys
from aiohttp import web
from kaos_core.telemetry import TelemetrySettings, current_traceparent, links
from kaos_core.telemetry import setup_telemetry, tracer
from kaos_core.http import create_base_app
from kaos_core.tracing import client_session
from kaos_core.http.limits import HttpLimits

settings = TelemetrySettings.from_env()
telemetry = setup_telemetry("probe-service", settings, instance="probe-1")
assert telemetry is not None

async def main() -> str:
    inner = create_base_app("inner", limits=HttpLimits(), telemetry=settings)
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"traceparent": request.headers.get("traceparent")})
    inner.router.add_get("/hello", hello)
    runner = web.AppRunner(inner)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    async with client_session() as http:
        await (await http.get(f"http://127.0.0.1:{port}/healthz")).read()
        with tracer("probe").start_as_current_span("outer"):
            stored = current_traceparent()
            async with http.get(f"http://127.0.0.1:{port}/hello") as resp:
                await resp.json()
    with tracer("probe").start_as_current_span("later", links=links([stored])):
        pass
    await runner.cleanup()
    return stored

stored = asyncio.run(main())
telemetry.shutdown()
print(stored)
"""


def test_spans_reach_jaeger_with_resource_propagation_and_links(jaeger: Jaeger) -> None:
    since = datetime.now(UTC)
    marker = uuid.uuid4().hex[:8]
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_endpoint,
        "OTEL_RESOURCE_ATTRIBUTES": f"k8s.namespace.name=ns-{marker},kaos.resource.kind=Agent",
        "OTEL_SERVICE_NAME": f"probe-{marker}",
    }
    stored = _run(ON_SCRIPT, env)
    trace_id, outer_id = stored.split("-")[1:3]

    def whole_trace() -> list[Span] | None:
        spans = jaeger.query.trace(trace_id)
        return spans if len(spans) >= 3 else None

    spans = eventually(whole_trace, "the outer span, the client and the server span")
    by_name = {s.name: s for s in spans}
    outer = by_name["outer"]
    assert outer.span_id == outer_id
    assert outer.service == f"probe-{marker}"
    assert outer.resource["k8s.namespace.name"] == f"ns-{marker}"
    assert outer.resource["kaos.resource.kind"] == "Agent"
    assert outer.resource["service.instance.id"] == "probe-1"
    client = next(s for s in spans if s.kind == CLIENT)
    server = next(s for s in spans if s.kind == SERVER)
    assert client.parent_id == outer.span_id
    assert server.parent_id == client.span_id  # W3C context crossed the HTTP hop
    assert server.name == "GET /hello" and server.attr("http.route") == "/hello"
    assert server.attr("http.response.status_code") == 200
    assert client.attr("http.response.status_code") == 200
    assert client.attr("url.full").endswith("/hello")

    # The probe request is not traced; the later span links back to the stored context.
    every = jaeger.query.spans(f"probe-{marker}", since=since)
    assert not [s for s in every if s.kind == SERVER and s.attr("url.path") == "/healthz"]
    later = next(s for s in every if s.name == "later")
    assert later.trace_id != trace_id
    assert later.links == ((trace_id, outer_id),)
