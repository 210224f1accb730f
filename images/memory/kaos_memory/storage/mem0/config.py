"""Mem0's configuration: the ``Memory.from_config`` dict, each model role with its own
endpoint and key, over a vector backend."""

from __future__ import annotations

from typing import Any

from kaos_memory.settings import ModelSettings
from kaos_memory.storage.mem0.backend import VectorBackend

# The longest extraction answer asked of the model. Mem0 asks for up to 2,000 tokens. A
# fold's facts take a few hundred; a small model that rambles (or pads its JSON with
# whitespace) would hold the model past the call's timeout, for an answer refused anyway.
EXTRACTION_MAX_TOKENS = 1024


def mem0_config(backend: VectorBackend, models: ModelSettings) -> dict[str, Any]:
    """The ``Memory.from_config`` dict over ``backend``."""
    config: dict[str, Any] = {
        **backend.mem0_config(),
        "llm": {
            "provider": "openai",
            "config": {
                "model": models.summarization_model,
                "api_key": models.summarization_api_key or "unused",
                "openai_base_url": models.summarization_base_url,
                "max_tokens": EXTRACTION_MAX_TOKENS,
            },
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": models.embedding_model,
                "api_key": models.embedding_api_key or "unused",
                "openai_base_url": models.embedding_base_url,
                "embedding_dims": models.embedding_dims,
            },
        },
    }
    if models.extraction_prompt is not None:
        config["custom_instructions"] = models.extraction_prompt
    return config
