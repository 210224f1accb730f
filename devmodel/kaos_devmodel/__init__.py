"""``kaos-devmodel``: a deterministic, OpenAI-compatible model server for development.

Local runs, demos and tests point at it as a user points at LiteLLM, Ollama or OpenAI:
chat completions (plain and streamed, with scripted tool calls), embeddings from a hashed
bag of words, answers to Mem0's extraction prompt and the KAOS digest prompt, and latency
and fault injection for reliability tests. It depends on the core's dependencies only.
"""

from kaos_devmodel.app import create_app
from kaos_devmodel.settings import DevModelSettings

__all__ = ["DevModelSettings", "create_app"]
