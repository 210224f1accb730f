"""``kaos-devmodel``: a deterministic, OpenAI-compatible model server for development.

Local runs, demos and tests point at it as a user points at LiteLLM, Ollama or OpenAI:
chat completions (plain and streamed, with scripted tool calls), embeddings from a hashed
bag of words, answers to Mem0's extraction prompt and the KAOS digest prompt, and latency
and fault injection for reliability tests. It depends on the core's dependencies only.

The server and its settings are imported on first use, so that ``kaos-devmodel --help``
(which imports this package before its entry module) loads neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaos_devmodel.app import create_app
    from kaos_devmodel.settings import DevModelSettings

__all__ = ["DevModelSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from kaos_devmodel.app import create_app

        return create_app
    if name == "DevModelSettings":
        from kaos_devmodel.settings import DevModelSettings

        return DevModelSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
