"""The summarisation model, called for digest versions: an OpenAI-compatible chat endpoint.

Only background fold work calls it; a request never waits on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiohttp

from kaos_memory.compaction import digest_messages
from kaos_memory.storage.base import TurnRow


class SummarizerError(Exception):
    """The model did not give a usable digest (transport error, non-2xx, empty answer)."""


class Summarizer:
    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=self.timeout, headers=self.headers)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def digest(self, previous: str | None, turns: Sequence[TurnRow]) -> str:
        if self._session is None:
            raise RuntimeError("summarizer is not started")
        body = {
            "model": self.model,
            "messages": digest_messages(previous, turns),
            "temperature": 0,
        }
        try:
            async with self._session.post(self.url, json=body) as resp:
                if resp.status >= 300:
                    raise SummarizerError(f"summarisation model answered HTTP {resp.status}")
                doc: Any = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SummarizerError(f"summarisation model: {type(exc).__name__}: {exc}") from exc
        try:
            text = doc["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise SummarizerError("summarisation model gave no message content") from exc
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError("summarisation model gave an empty digest")
        return text.strip()
