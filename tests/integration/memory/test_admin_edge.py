"""Admin calls at a secured memory service that cannot review them: without its store's
namespace and name (and so without a SubjectAccessReview to ask) an admin call is refused
403 ``admin_not_configured`` before anything is read; a malformed ``Authorization`` is
401 with the RFC 6750 challenge. The API server is never dialled for either."""

from __future__ import annotations

from tests.fixtures.memory import MakeMemory
from tests.support.memory_http import call


async def test_an_unconfigured_store_refuses_admin_calls(memory_factory: MakeMemory) -> None:
    # Nothing listens at the issuer or the API server: neither may be needed here.
    server = memory_factory(
        "local",
        auth_mode="jwks",
        auth_issuer="https://127.0.0.1:9",
        auth_api_server="https://127.0.0.1:9",
    )
    status, doc, hdrs = await call(
        server.url, "/v1/list", {"level": "store"}, hdrs={"Authorization": "Bearer abc"}
    )
    assert status == 403 and doc["error"]["code"] == "admin_not_configured", doc
    assert "KAOS_MEMORY_STORE_NAMESPACE" in doc["error"]["message"]
    status, doc, hdrs = await call(
        server.url, "/v1/forget", {"level": "store"}, hdrs={"Authorization": "Basic eDp5"}
    )
    assert status == 401 and doc["error"]["code"] == "invalid_request", doc
    assert hdrs.getall("WWW-Authenticate") == [
        'Bearer realm="kaos.dev/memory", error="invalid_request"'
    ]
    status, doc, _ = await call(
        server.url, "/v1/audit", {}, hdrs={"Authorization": "Bearer a", "X-Principal": "b"}
    )
    assert status == 403 and doc["error"]["code"] == "admin_not_configured"
    assert server.db.relational("SELECT COUNT(*) FROM kaos_mem_audit") == [(0,)]
