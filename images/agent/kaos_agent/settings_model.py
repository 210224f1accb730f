"""The model concern of the agent's settings: where the model is, how it samples, whether
it takes tools.

``ModelFields`` holds the variables (``AgentSettings`` builds on it); ``.model`` is the typed
view the loop is built from. Sampling values left unset are not sent, so the model's own
defaults apply; set, they go with every model request of every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kaos_core import agent_env as env
from kaos_core.settings import EnvSettings
from pydantic import field_validator
from pydantic_ai.settings import ModelSettings as RequestSettings

from kaos_agent.settings_base import http_url, setting

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


@dataclass(frozen=True)
class ModelSettings:
    """The OpenAI-compatible model behind the reasoning loop."""

    base_url: str
    name: str
    api_key: str
    timeout_seconds: float
    max_steps: int
    tools: ModelTools = "auto"
    sampling: Sampling = field(default_factory=Sampling)


class ModelFields(EnvSettings):
    """The model's variables; see ``kaos_core.agent_env`` for the names."""

    model_api_url: str = setting(
        env.MODEL_API_URL,
        "model",
        "ModelAPI base URL as in its status; `/v1` is appended (unless already there)",
    )
    model_name: str = setting(env.MODEL_NAME, "model", "model name", min_length=1)
    model_api_key: str = setting(
        env.MODEL_API_KEY, "model", "bearer for the ModelAPI", default="not-needed"
    )
    model_timeout_seconds: float = setting(
        env.MODEL_TIMEOUT_SECONDS,
        "model",
        "per model request; also the MCP connect and read timeout",
        default=120.0,
        gt=0,
    )
    max_steps: int = setting(
        env.REASONING_LOOP_MAX_STEPS,
        "model",
        "model requests per run, 1 to 100",
        default=5,
        ge=1,
        le=100,
    )
    model_tools: ModelTools = setting(
        env.MODEL_TOOLS,
        "model",
        "`auto`: MCP, delegation and memory tools are offered to the model; a request the"
        " model refuses for carrying tools (HTTP 400 `... does not support tools`, as Ollama"
        " answers) is sent again without them, and no tools are offered from then on until"
        " the pod restarts. `off`: no tools at all (the operator sets it when the ModelAPI"
        " reports that the model cannot call tools)",
        default="auto",
    )
    model_temperature: float | None = setting(
        env.MODEL_TEMPERATURE,
        "model",
        "sampling temperature, 0 to 2, sent with every model request (0: reproducible"
        " answers from a small model)",
        default=None,
        default_doc="the model's",
        ge=0,
        le=2,
    )
    model_max_tokens: int | None = setting(
        env.MODEL_MAX_TOKENS,
        "model",
        "tokens one model answer may have, 1 to 1000000 (sent as `max_tokens`)",
        default=None,
        default_doc="the model's",
        ge=1,
        le=1_000_000,
    )
    model_top_p: float | None = setting(
        env.MODEL_TOP_P,
        "model",
        "nucleus sampling, 0 to 1, sent with every model request",
        default=None,
        default_doc="the model's",
        ge=0,
        le=1,
    )
    model_seed: int | None = setting(
        env.MODEL_SEED,
        "model",
        "sampling seed, 0 to 2147483647, sent with every model request (models that honour"
        " it answer the same prompt the same way)",
        default=None,
        default_doc="none",
        ge=0,
        le=2**31 - 1,
    )

    @field_validator("model_api_url")
    @classmethod
    def _model_url(cls, value: str) -> str:
        return str(http_url(value))

    @property
    def model(self) -> ModelSettings:
        url = self.model_api_url
        return ModelSettings(
            base_url=url if url.endswith("/v1") else url + "/v1",
            name=self.model_name,
            api_key=self.model_api_key,
            timeout_seconds=self.model_timeout_seconds,
            max_steps=self.max_steps,
            tools=self.model_tools,
            sampling=Sampling(
                temperature=self.model_temperature,
                max_tokens=self.model_max_tokens,
                top_p=self.model_top_p,
                seed=self.model_seed,
            ),
        )
