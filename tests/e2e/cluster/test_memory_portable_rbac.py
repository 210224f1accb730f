"""Export and import at a secured memory service, authorised by the test cluster's real API
server: the chart's reader role may export (``get`` on ``memorystores/data``) but not
import; the admin role may import (``create``); a user bound to nothing and an agent may do
neither, and a refused import writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from kaos_core.wire import AGENT_TOKEN_HEADER

from tests.fixtures.helm import Helm
from tests.fixtures.memory import MemoryServer
from tests.support.cluster import Cluster
from tests.support.memory_admin import (
    ADMIN,
    AGENTS,
    READER,
    STORE,
    UNBOUND,
    AdminWorld,
    admin_world,
    agent_token_file,
    remember,
    start_secured_memory,
)
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminWorld]:
    with admin_world(k8s_cluster, helm, tmp_path_factory.mktemp("mem-portable")) as w:
        yield w


@pytest.fixture(scope="module")
def remembered(world: AdminWorld, devmodel_server: ServiceProcess) -> Iterator[MemoryServer]:
    server = start_secured_memory(world, f"{devmodel_server.url}/v1", world.tmp / "memory")
    try:
        lines = {
            "alice": ("I grow tomatoes", "My balcony faces south"),
            "bob": ("I collect stamps", "My dog is called Quasimodo"),
        }
        remember(server, world, lines)
        yield server
    finally:
        server.proc.kill()


async def _post(
    server: MemoryServer, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + path, data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.read()


def _bearer(world: AdminWorld, sa: str, content_type: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.mint(sa)}", "Content-Type": content_type}


def _rows(server: MemoryServer) -> Any:
    return [server.db.turns(), server.db.digests(), len(server.db.vector_payloads())]


async def test_the_reader_exports_and_only_the_admin_imports(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    scope = json.dumps({"level": "user", "principal": "bob"}).encode()
    status, body = await _post(
        remembered, "/v1/export", scope, _bearer(world, READER, "application/json")
    )
    assert status == 200, body
    assert b"stamps" in body and b"alice" not in body and b"tomatoes" not in body

    before = _rows(remembered)
    ndjson = "application/x-ndjson"
    status, answer = await _post(remembered, "/v1/import", body, _bearer(world, READER, ndjson))
    assert status == 403, answer
    error = json.loads(answer)["error"]
    assert error["code"] == "admin_forbidden"
    assert (
        f'create memorystores.kaos.tools/data "{STORE}" in namespace "{world.ns}"'
        in (error["message"])
    )
    assert _rows(remembered) == before

    status, answer = await _post(remembered, "/v1/import", body, _bearer(world, ADMIN, ndjson))
    assert status == 200, answer
    assert json.loads(answer)["skipped"] == len(body.splitlines()) - 1
    assert _rows(remembered) == before


async def test_an_unbound_user_and_an_agent_may_not_export(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    scope = json.dumps({"level": "store"}).encode()
    status, answer = await _post(
        remembered, "/v1/export", scope, _bearer(world, UNBOUND, "application/json")
    )
    assert status == 403 and json.loads(answer)["error"]["code"] == "admin_forbidden", answer
    token = agent_token_file(world, AGENTS[0]).read_text().strip()
    headers = {AGENT_TOKEN_HEADER: token, "Content-Type": "application/json"}
    status, answer = await _post(remembered, "/v1/export", scope, headers)
    assert status == 403 and json.loads(answer)["error"]["code"] == "portable_forbidden", answer
