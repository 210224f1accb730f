"""Just enough of an HTTPS client for start-up: health probes and the admin's requests."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.request
from collections.abc import Mapping
from typing import Any

from tests.support.cluster.errors import StartupFailed
from tests.support.cluster.pki import _Pki


def _insecure_context() -> ssl.SSLContext:
    # Only for the health endpoints of the controller-manager and the scheduler, which
    # serve a self-signed certificate.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _http_get_ok(url: str, context: ssl.SSLContext | None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:
        return bool(resp.status == 200)


class _ApiClient:
    """Just enough of the API for startup: GET, POST, as the admin user."""

    def __init__(self, server: str, pki: _Pki) -> None:
        self.host, port = server.removeprefix("https://").rsplit(":", 1)
        self.port = int(port)
        self.ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        self.ctx.load_cert_chain(str(pki.crt("admin")), str(pki.key("admin")))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=5)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, raw.decode(errors="replace")

    def ok(self, path: str) -> bool:
        return self.request("GET", path)[0] == 200

    def create(self, path: str, obj: Mapping[str, Any]) -> None:
        status, body = self.request("POST", path, obj)
        if status not in (200, 201, 409):
            raise StartupFailed(f"POST {path} answered {status}: {body}")

    def node_ready(self, name: str) -> bool:
        status, node = self.request("GET", f"/api/v1/nodes/{name}")
        if status != 200:
            return False
        conditions = node.get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
