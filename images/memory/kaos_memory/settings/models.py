"""The models the memory service calls: summarisation (the digest and Mem0's extraction)
and embedding (the vector index), each role on its own endpoint if need be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from kaos_core.extraction import ExtractionSystemPrompt
from kaos_core.settings import SettingsGroup, setting

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


def _same_as(field: str, default: object) -> Callable[[dict[str, Any]], Any]:
    """The default of a role's setting: the shared setting ``field`` (validated before it)."""
    return lambda data: data.get(field, default)


class ModelSettings(SettingsGroup):
    """Each role's endpoint, key and model: summarisation (digest and extraction) and
    embedding (the index) may be served by different ModelAPIs."""

    title: ClassVar[str] = "Models"

    model_base_url: str = setting(
        "OpenAI-compatible base URL (ending in `/v1`) of both model roles unless a role has"
        " its own",
        default=DEFAULT_BASE_URL,
    )
    summarization_base_url: str = setting(
        "OpenAI-compatible base URL (ending in `/v1`) of the summarisation model (digest and"
        " Mem0 extraction) when it is served apart (e.g. a hosted LLM)",
        default_factory=_same_as("model_base_url", DEFAULT_BASE_URL),
        default_doc="= `MODEL_BASE_URL`",
    )
    embedding_base_url: str = setting(
        "OpenAI-compatible base URL (ending in `/v1`) of the embedding model when it is served"
        " apart (e.g. a local embedding server)",
        default_factory=_same_as("model_base_url", DEFAULT_BASE_URL),
        default_doc="= `MODEL_BASE_URL`",
    )
    api_key: str | None = setting(
        "bearer key for the model endpoint of both roles (optional)", default=None
    )
    summarization_api_key: str | None = setting(
        "bearer key for the summarisation endpoint",
        default_factory=_same_as("api_key", None),
        default_doc="= `API_KEY`",
    )
    embedding_api_key: str | None = setting(
        "bearer key for the embedding endpoint",
        default_factory=_same_as("api_key", None),
        default_doc="= `API_KEY`",
    )
    summarization_model: str = setting(
        "model for Mem0 extraction and the session digest", default="summarizer"
    )
    embedding_model: str = setting("model for the vector index", default="embedder")
    embedding_dims: int = setting(
        "embedding size (must match the model and, in external mode, an existing pgvector table)",
        default=1536,
        ge=1,
        le=16000,
    )
    timeout: float = setting(
        "seconds one summarisation/extraction call may take (background only)",
        env="MODEL_TIMEOUT",
        default=60.0,
        gt=0,
    )
    embed_timeout: float = setting("seconds one embedding call may take", default=10.0, gt=0)
    answer_retries: int = setting(
        "further calls to the summarisation model when its answer is unusable (an extraction"
        " answer Mem0 cannot read as its JSON; a supersession answer that is not the JSON"
        " asked for; a digest that is empty, cut off at the model's token limit or longer than"
        " `DIGEST_MAX_TOKENS`). Then an extraction is recorded as `unusable` and its turns stay"
        " in the digest; a supersession retires nothing; a digest keeps the previous version"
        " and its turns wait in the outbox, retried with back-off",
        default=2,
        ge=0,
        le=10,
    )
    digest_prompt: str | None = setting(
        "system prompt of the digest call (the built-in one asks for a concise narrative of"
        " the conversation so far)",
        default=None,
        default_doc="built in",
        min_length=1,
    )
    extraction_system_prompt: ExtractionSystemPrompt = setting(
        "the system prompt of Mem0's fact extraction: `mem0`, Mem0's own (about 8,400"
        " tokens, most of them examples), or `compact`, the same instructions and output"
        " format in about 500 tokens, for a summarisation model with a small context (one"
        " of 4,096 tokens, Ollama's default, would cut Mem0's from its head) or to spend"
        " fewer prompt tokens per fold",
        default="mem0",
    )
    extraction_prompt: str | None = setting(
        "instructions added to Mem0's fact-extraction prompt (its custom instructions), e.g."
        " what to keep or never keep",
        default=None,
        min_length=1,
    )
