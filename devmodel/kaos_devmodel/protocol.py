"""The OpenAI wire shapes the development model reads and writes.

Requests are read leniently, as OpenAI-compatible servers do: unknown parameters
(temperature, response_format, tool_choice, seed, ...) are accepted and ignored, so any
client configuration works. Only what the model needs is validated: a non-empty list of
messages with known roles, and string inputs to embeddings.
"""

from __future__ import annotations

from typing import Any, Literal

from kaos_core.errors import BadRequest
from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = ""
    arguments: str = ""


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = ""
    type: str = "function"
    function: FunctionCall = Field(default_factory=FunctionCall)


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The text of the message: a string, or its text parts joined by newlines."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


# Sampling parameters a client may send; the model answers the same whatever they say.
SAMPLING_PARAMETERS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed")


class ToolsNotSupported(BadRequest):
    """A request offered tools to a model that cannot call them (Ollama's HTTP 400)."""

    code = "tools_not_supported"

    def __init__(self, model: str) -> None:
        super().__init__(f"{model} does not support tools")


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = "devmodel"
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = None

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters the request sent (recorded, not applied)."""
        extra = self.model_extra or {}
        return {k: extra[k] for k in SAMPLING_PARAMETERS if extra.get(k) is not None}

    def offered_tools(self) -> set[str]:
        """Names of the function tools the request offers (malformed entries are skipped)."""
        names: set[str] = set()
        for tool in self.tools or []:
            fn = tool.get("function")
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names.add(fn["name"])
        return names


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = "devmodel-embed"
    # Token arrays are not accepted: the model embeds words, not a tokenizer's ids.
    input: str | list[str] = Field(union_mode="left_to_right")
    dimensions: int | None = Field(default=None, ge=1, le=65536)
    encoding_format: Literal["float", "base64"] = "float"

    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


def word_count(text: str) -> int:
    """Tokens as the development model counts them: whitespace-separated words."""
    return len(text.split())
