"""The model concern of the agent's settings: where the model is, how it samples, whether
it takes tools.

Sampling values left unset are not sent, so the model's own defaults apply; set, they go
with every model request of every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator
from pydantic_ai.settings import ModelSettings as RequestSettings

from kaos_agent.settings.base import http_url

# auto: tools are offered, and no longer once the model refuses a request for carrying
# them; off: never offered (a model known not to call tools).
ModelTools = Literal["auto", "off"]


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every model request (``None``: not sent)."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def request_settings(self) -> RequestSettings:
        """The set values, as pydantic-ai's model settings."""
        out = RequestSettings()
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.seed is not None:
            out["seed"] = self.seed
        return out


class ModelSettings(SettingsGroup):
    """The OpenAI-compatible model behind the reasoning loop."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Model"

    base_url: str = setting(
        "ModelAPI base URL as in its status; `/v1` is appended (unless already there)",
        env=env.MODEL_API_URL,
    )
    name: str = setting("model name", env=env.MODEL_NAME, min_length=1)
    api_key: str = setting("bearer for the ModelAPI", env=env.MODEL_API_KEY, default="not-needed")
    timeout_seconds: float = setting(
        "per model request (a connection that has not opened in 10 s is retried on a new"
        " one); also the MCP connect and read timeout",
        env=env.MODEL_TIMEOUT_SECONDS,
        default=120.0,
        gt=0,
    )
    max_steps: int = setting(
        "model requests per run, 1 to 100",
        env=env.REASONING_LOOP_MAX_STEPS,
        default=5,
        ge=1,
        le=100,
    )
    tools: ModelTools = setting(
        "`auto`: MCP, delegation and memory tools are offered to the model; a request the"
        " model refuses for carrying tools (HTTP 400 `... does not support tools`, as Ollama"
        " answers) is sent again without them, and no tools are offered from then on until"
        " the pod restarts. `off`: no tools at all (the operator sets it when the ModelAPI"
        " reports that the model cannot call tools)",
        env=env.MODEL_TOOLS,
        default="auto",
    )
    temperature: float | None = setting(
        "sampling temperature, 0 to 2, sent with every model request (0: reproducible"
        " answers from a small model)",
        env=env.MODEL_TEMPERATURE,
        default=None,
        default_doc="the model's",
        ge=0,
        le=2,
    )
    max_tokens: int | None = setting(
        "tokens one model answer may have, 1 to 1000000 (sent as `max_tokens`)",
        env=env.MODEL_MAX_TOKENS,
        default=None,
        default_doc="the model's",
        ge=1,
        le=1_000_000,
    )
    top_p: float | None = setting(
        "nucleus sampling, 0 to 1, sent with every model request",
        env=env.MODEL_TOP_P,
        default=None,
        default_doc="the model's",
        ge=0,
        le=1,
    )
    seed: int | None = setting(
        "sampling seed, 0 to 2147483647, sent with every model request (models that honour"
        " it answer the same prompt the same way)",
        env=env.MODEL_SEED,
        default=None,
        default_doc="none",
        ge=0,
        le=2**31 - 1,
    )

    @field_validator("base_url")
    @classmethod
    def _v1_url(cls, value: str) -> str:
        url = str(http_url(value))
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def sampling(self) -> Sampling:
        return Sampling(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_p=self.top_p,
            seed=self.seed,
        )
