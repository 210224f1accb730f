"""Webhook triggers: named endpoints (``POST /v1/triggers/{name}``) that each start one A2A
task from a signed JSON payload (``kaos_agent.triggers``).

``AGENT_TRIGGERS`` is a JSON list the operator renders from the Agent; each trigger's HMAC
secret is the file named after it in ``AGENT_TRIGGER_SECRETS_DIR`` (a key of a projected
Secret). The secrets are read once, when the settings load: a trigger without a readable,
non-empty secret fails the settings with one line naming the trigger and the file, never
the file's content. A secret is kept as ``SecretBytes`` (no repr, no log).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar, Self

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretBytes,
    field_validator,
    model_validator,
)

NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME_CHARS = 63
MAX_TRIGGERS = 64
MAX_TEMPLATE_CHARS = 16_000
MAX_PER_MINUTE = 10_000
DEFAULT_SECRETS_DIR = Path("/var/run/kaos/triggers")


class Trigger(BaseModel):
    """One trigger as ``AGENT_TRIGGERS`` lists it."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    # The task's message: ``{{ path.to.field }}`` placeholders over the payload.
    message: str = Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)
    max_per_minute: int = Field(default=60, alias="maxPerMinute", ge=1, le=MAX_PER_MINUTE)

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError("a trigger name is a DNS label: a-z, 0-9 and '-', alphanumeric ends")
        return value

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a trigger's message is blank")
        return value


class TriggerSettings(SettingsGroup):
    """The webhook triggers of this agent and where their secrets are."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Webhook triggers"

    triggers: tuple[Trigger, ...] = setting(
        'JSON list of `{"name", "message", "maxPerMinute"}`: each is served at'
        " `POST /v1/triggers/<name>` (a DNS label), its message a template over the"
        " payload (`{{ path.to.field }}`), at most `maxPerMinute` (1 to 10000, default 60)"
        " deliveries a minute across replicas; at most 64 triggers",
        env=env.AGENT_TRIGGERS,
        default=(),
        default_doc="none",
    )
    secrets_dir: Path = setting(
        "where the HMAC secrets are: the file `<dir>/<name>` (a trailing newline removed) is"
        " trigger `<name>`'s; read at start, a trigger without a readable, non-empty secret"
        " fails the settings",
        env=env.AGENT_TRIGGER_SECRETS_DIR,
        default=DEFAULT_SECRETS_DIR,
    )

    _secrets: dict[str, SecretBytes] = PrivateAttr(default_factory=dict)
    _unreadable: list[str] = PrivateAttr(default_factory=list)

    @field_validator("triggers", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError("not JSON: a JSON list of triggers is expected") from None
        if not isinstance(parsed, list):
            raise ValueError("a JSON list of triggers is expected")
        return parsed

    @model_validator(mode="after")
    def _read_secrets(self) -> Self:
        for trigger in self.triggers:
            path = self.secrets_dir / trigger.name
            try:
                secret = path.read_bytes().removesuffix(b"\n").removesuffix(b"\r")
            except OSError:
                problem = f"trigger {trigger.name!r}: its secret {path} is unreadable"
                self._unreadable.append(problem)
                continue
            if not secret:
                self._unreadable.append(f"trigger {trigger.name!r}: its secret {path} is empty")
                continue
            self._secrets[trigger.name] = SecretBytes(secret)
        return self

    def problems(self, prefix: str) -> list[str]:
        variable = self.env_name("triggers", prefix)
        found: list[str] = []
        names = [t.name for t in self.triggers]
        doubles = sorted({n for n in names if names.count(n) > 1})
        if doubles:
            found.append(f"{variable} names {', '.join(doubles)} more than once")
        if len(names) > MAX_TRIGGERS:
            found.append(f"{variable} lists {len(names)} triggers: at most {MAX_TRIGGERS}")
        found += [
            f"{problem} ({self.env_name('secrets_dir', prefix)})" for problem in self._unreadable
        ]
        return found

    def get(self, name: str) -> Trigger | None:
        return next((t for t in self.triggers if t.name == name), None)

    def secret(self, name: str) -> bytes:
        """Trigger ``name``'s HMAC key (only after the settings loaded without problems)."""
        return self._secrets[name].get_secret_value()
