"""A service served by ``run_service`` freezes what its start built out of the cyclic
collector before it takes requests: a full collection then walks only what requests
made, and no request waits behind a walk of every object since import."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

from tests.support.procs import free_port, start_service

SERVED = """
import gc, sys
from aiohttp import web
from kaos_core.http import create_base_app, run_service
from kaos_core.http.limits import HttpLimits
from kaos_core.telemetry import TelemetrySettings

app = create_base_app("probe", limits=HttpLimits(), telemetry=TelemetrySettings.from_env())
made = {}

async def start(app):
    made["at_start"] = [object()]  # a container: tracked by the collector
    yield

app.cleanup_ctx.append(start)

async def probe(request):
    per_request = [object()]
    tracked = {id(o) for o in gc.get_objects()}
    return web.json_response({
        "frozen": gc.get_freeze_count(),
        "start_tracked": id(made["at_start"]) in tracked,
        "request_tracked": id(per_request) in tracked,
    })

app.router.add_get("/probe", probe)
run_service(app, "127.0.0.1", int(sys.argv[1]))
"""


def test_what_the_start_built_is_frozen_and_what_requests_make_is_collected(
    tmp_path: Path,
) -> None:
    port = free_port()
    served = start_service(
        "served", [sys.executable, "-c", SERVED, str(port)], port=port, log_dir=tmp_path
    )
    try:
        with urllib.request.urlopen(f"{served.url}/probe", timeout=10) as resp:
            seen = json.load(resp)
    finally:
        assert served.stop() == 0
    assert seen["frozen"] > 1000  # the imported modules' objects, and the start's
    assert seen["start_tracked"] is False
    assert seen["request_tracked"] is True
