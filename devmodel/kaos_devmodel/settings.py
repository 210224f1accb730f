"""Settings of the development model server, read from ``KAOS_DEVMODEL_*``.

The fault settings give the faults in force at start (and after ``POST /control/reset``);
the script settings give the scripted rules in force at start (and after a reset).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kaos_core.http.body import validation_message
from kaos_core.settings import SettingsGroup
from pydantic import Field, ValidationError, field_validator, model_validator

from kaos_devmodel.faults import AnswerFault, FaultConfig
from kaos_devmodel.script import Rule, ScriptError, load_script_file, parse_script_text


class DevModelSettings(SettingsGroup):
    """``KAOS_DEVMODEL_<FIELD>`` for every field."""

    env_prefix: ClassVar[str] = "KAOS_DEVMODEL_"

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # Dimension of embeddings when a request does not name one (OpenAI's ``dimensions``).
    embedding_dims: int = Field(default=1536, ge=1, le=65536)
    # Comma-separated names listed by ``GET /v1/models``; requests may name any model.
    models: str = "devmodel,devmodel-embed"
    # Comma-separated model names that cannot call tools: a request to one of them that
    # offers tools is refused with HTTP 400 "<model> does not support tools", as Ollama does.
    no_tools_models: str = "devmodel-notools"
    # Scripted rules as JSON (a list of rules or {"rules": [...]}), or a JSON/YAML file.
    script: str | None = None
    script_file: Path | None = None
    # Seed of the random number generator that decides which requests get an injected error.
    seed: int = 0
    # Faults in force at start: see ``kaos_devmodel.faults.FaultConfig``.
    delay: float = Field(default=0.0, ge=0.0)
    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    error_status: int = Field(default=500, ge=400, le=599)
    hang: bool = False
    # Spoiled chat answers (``not_json``, ``empty``, ``cut_off``, ``verbose``): see ``faults``.
    answer_fault: AnswerFault = "none"
    fault_routes: str = "chat,embeddings"
    # Word cap of the deterministic session digest (the oldest sentences go first).
    digest_max_words: int = Field(default=300, ge=10)
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    log_level: str = "INFO"
    log_json: bool = True

    @field_validator("models")
    @classmethod
    def _models_not_empty(cls, value: str) -> str:
        if not [m for m in value.split(",") if m.strip()]:
            raise ValueError("at least one model name is required")
        return value

    @model_validator(mode="after")
    def _one_script_source(self) -> DevModelSettings:
        if self.script is not None and self.script_file is not None:
            raise ValueError(
                "KAOS_DEVMODEL_SCRIPT and KAOS_DEVMODEL_SCRIPT_FILE are mutually exclusive"
            )
        try:
            self.initial_rules()
        except ScriptError as exc:
            var = "SCRIPT" if self.script is not None else "SCRIPT_FILE"
            raise ValueError(f"KAOS_DEVMODEL_{var}: {exc}") from None
        try:
            self.initial_faults()
        except ValidationError as exc:
            raise ValueError(f"KAOS_DEVMODEL_FAULT_ROUTES: {validation_message(exc)}") from None
        return self

    def model_names(self) -> list[str]:
        return [m.strip() for m in self.models.split(",") if m.strip()]

    def initial_rules(self) -> list[Rule]:
        if self.script is not None:
            return parse_script_text(self.script)
        if self.script_file is not None:
            return load_script_file(self.script_file)
        return []

    def initial_faults(self) -> FaultConfig:
        routes = [r.strip() for r in self.fault_routes.split(",") if r.strip()]
        return FaultConfig.model_validate(
            {
                "delay": self.delay,
                "error_rate": self.error_rate,
                "status": self.error_status,
                "hang": self.hang,
                "answer": self.answer_fault,
                "routes": routes,
            }
        )
