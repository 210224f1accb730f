"""What a ModelAPI's models can do, read from its backend once its Deployment is available.

The operator reports it in the ModelAPI's ``status.modelCapabilities`` (served model name
-> capability strings), so an Agent's reconciler can tell that an agent with tools is bound
to a model that takes none before any call fails. The strings are the backend's own:

- Hosted (Ollama): ``POST /api/show`` per served model answers ``capabilities`` as
  Ollama names them (``completion``, ``tools``, ``embedding``, ``vision``, ``thinking``...).
- Proxy (LiteLLM): ``GET /model/info`` lists each deployment with LiteLLM's
  ``model_info``; where ``supports_function_calling`` is a bool the model gets
  ``completion`` (``embedding`` when LiteLLM's ``mode`` says so) and ``tools`` when true.
  A model LiteLLM knows nothing about is left out: an absent key means unknown.

Read like an MCP server's tools (``kaos_operator.tools``): one short-lived session within
the same timeout, a bounded body, the caller reporting the error's class.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from kaos_core.crds.common import LIST_MAX, NAME_MAX
from kaos_core.crds.modelapi import ModelAPIMode
from kaos_core.tracing import client_session

from kaos_operator.tools import LIST_TIMEOUT, MAX_BODY

# (base URL of the ModelAPI's Service, mode, served models) -> name -> capabilities.
CapabilityReader = Callable[[str, ModelAPIMode, Sequence[str]], Awaitable[dict[str, list[str]]]]

READ_TIMEOUT = LIST_TIMEOUT
# What the status schema holds per model (a capability is a short word).
MAX_CAPABILITIES = 32


class CapabilityError(Exception):
    """The backend answered, but not with what its API says (the message says what)."""


async def _json(resp: aiohttp.ClientResponse, what: str) -> Any:
    if resp.status != 200:
        raise CapabilityError(f"{what}: HTTP {resp.status}")
    body = bytearray()
    async for chunk in resp.content.iter_any():
        body += chunk
        if len(body) > MAX_BODY:
            raise CapabilityError(f"{what}: answer larger than {MAX_BODY} bytes")
    return json.loads(body)


def _words(values: Any) -> list[str]:
    if not isinstance(values, list):
        raise CapabilityError("capabilities is not a list")
    words = [v for v in values if isinstance(v, str) and 0 < len(v) <= NAME_MAX]
    return list(dict.fromkeys(words))[:MAX_CAPABILITIES]


def ollama_capabilities(answer: Any) -> list[str]:
    """The capabilities in Ollama's /api/show answer."""
    if not isinstance(answer, dict) or "capabilities" not in answer:
        raise CapabilityError("/api/show: no capabilities in the answer")
    return _words(answer["capabilities"])


def litellm_capabilities(answer: Any) -> dict[str, list[str]]:
    """Model name -> capabilities from LiteLLM's /model/info answer (known ones only)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise CapabilityError("/model/info: no data list in the answer")
    out: dict[str, list[str]] = {}
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("model_name"), str):
            continue
        info = entry.get("model_info") or {}
        tools = info.get("supports_function_calling") if isinstance(info, dict) else None
        if not isinstance(tools, bool):
            continue  # LiteLLM does not know the model: unknown, not "no tools"
        kind = "embedding" if info.get("mode") == "embedding" else "completion"
        caps = [kind, *(["tools"] if tools else [])]
        # Deployments of one name (load balancing) may differ: the name offers any of them.
        name = entry["model_name"]
        out[name] = list(dict.fromkeys([*out.get(name, []), *caps]))
        if len(out) >= LIST_MAX:
            break
    return out


async def read_capabilities(
    base_url: str, mode: ModelAPIMode, models: Sequence[str]
) -> dict[str, list[str]]:
    """The capabilities of the models served at ``base_url``, within ``READ_TIMEOUT``.

    Raises ``CapabilityError``, ``aiohttp.ClientError``, ``ValueError`` (a body that is
    not JSON) or ``TimeoutError``; the caller reports the class.
    """
    url = base_url.rstrip("/")
    async with asyncio.timeout(READ_TIMEOUT), client_session() as http:
        if mode == "Proxy":
            async with http.get(f"{url}/model/info") as resp:
                return litellm_capabilities(await _json(resp, "/model/info"))
        out = {}
        for model in models[:LIST_MAX]:
            async with http.post(f"{url}/api/show", json={"model": model}) as resp:
                out[model] = ollama_capabilities(await _json(resp, "/api/show"))
        return out
