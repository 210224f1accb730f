"""A control client for a running ``kaos-devmodel``: what the ``devmodel`` fixture gives.

Sync methods (standard library only) work anywhere, including session fixtures and sync
tests that drive Mem0; the ``a``-prefixed methods are the same calls for async tests.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import aiohttp


class DevModelControlError(RuntimeError):
    """The devmodel refused a control call (the message has its status and body)."""


@dataclass(frozen=True)
class DevModel:
    url: str  # root, e.g. http://127.0.0.1:PORT
    embedding_dims: int = 64
    timeout: float = 10.0

    @property
    def base_url(self) -> str:
        """What OpenAI clients take as ``base_url``."""
        return f"{self.url}/v1"

    # -- sync ------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise DevModelControlError(f"{method} {path}: HTTP {exc.code}: {detail}") from None

    def set_script(self, rules: list[dict[str, Any]]) -> dict[str, Any]:
        """Replace the scripted rules (see ``kaos_devmodel.script``)."""
        result: dict[str, Any] = self._call("POST", "/control/script", {"rules": rules})
        return result

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        """Replace the faults: delay, error_rate, status, hang, routes."""
        result: dict[str, Any] = self._call("POST", "/control/faults", faults)
        return result

    def reset(self) -> None:
        """Script and faults as at start, counters and recorded requests cleared."""
        self._call("POST", "/control/reset", {})

    def stats(self) -> dict[str, int]:
        result: dict[str, int] = self._call("GET", "/control/stats")
        return result

    def requests(self) -> list[dict[str, Any]]:
        """The last chat requests: kind, model, stream, tools, messages (role, content)."""
        result: list[dict[str, Any]] = self._call("GET", "/control/requests")["requests"]
        return result

    def embedding_requests(self) -> list[dict[str, Any]]:
        """The last embedding requests: received_at, authorization_sha256, model, input."""
        result: list[dict[str, Any]] = self._call("GET", "/control/embeddings")["requests"]
        return result

    # -- async -----------------------------------------------------------------

    async def _acall(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(method, f"{self.url}{path}", json=body) as resp,
        ):
            if resp.status >= 400:
                detail = await resp.text()
                raise DevModelControlError(f"{method} {path}: HTTP {resp.status}: {detail}")
            return await resp.json()

    async def aset_script(self, rules: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = await self._acall("POST", "/control/script", {"rules": rules})
        return result

    async def aset_faults(self, **faults: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self._acall("POST", "/control/faults", faults)
        return result

    async def areset(self) -> None:
        await self._acall("POST", "/control/reset", {})

    async def astats(self) -> dict[str, int]:
        result: dict[str, int] = await self._acall("GET", "/control/stats")
        return result

    async def arequests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self._acall("GET", "/control/requests"))["requests"]
        return result

    async def aembedding_requests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self._acall("GET", "/control/embeddings"))["requests"]
        return result
