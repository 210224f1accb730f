"""Mem0's configuration: the ``Memory.from_config`` dict, each model role with its own
endpoint and key, over a vector backend; and the ``Memory`` built from it with what KAOS
puts around Mem0's stores and model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.crypto.keyring import Keyring
from kaos_memory.settings import ModelSettings
from kaos_memory.storage.mem0 import quarantine, sealed
from kaos_memory.storage.mem0.backend import VectorBackend
from kaos_memory.storage.mem0.llm import CheckedLlm

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


def build_memory(
    mem0_dir: Path,
    backend: VectorBackend,
    models: ModelSettings,
    keyring: Keyring | None,
    metrics: GenAiMetrics | None,
) -> Any:
    """Mem0's ``Memory`` over ``backend`` (blocking): its stores sealed under ``keyring``
    when given, screened, its model calls bounded and judged."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(mem0_dir)
    mem0_dir.mkdir(parents=True, exist_ok=True)
    # Not at the top: Mem0 reads both variables when first imported.
    from mem0 import Memory

    memory = Memory.from_config(mem0_config(backend, models))
    backend.build(memory)
    if keyring is not None:
        sealed.install(memory, keyring)
    # Outermost: screening sees the text before it is sealed.
    quarantine.install(memory)
    # Bounded model calls: Mem0 builds its OpenAI clients with the library defaults
    # (10 min timeout, 2 retries); the service's executor owns retries instead.
    memory.llm.client = memory.llm.client.with_options(timeout=models.timeout, max_retries=0)
    memory.embedding_model.client = memory.embedding_model.client.with_options(
        timeout=models.embed_timeout, max_retries=0
    )
    # Mem0 turns an extraction answer it cannot parse into "no facts"; KAOS judges each
    # answer first (``llm``).
    memory.llm = CheckedLlm(
        memory.llm,
        model=models.summarization_model,
        retries=models.answer_retries,
        metrics=metrics,
        system_prompt=models.extraction_system_prompt,
    )
    return memory
