"""Settings from the environment: typed, validated at load, errors that name the variable.

Each service declares a pydantic model whose fields map one-to-one onto environment
variables (``prefix + FIELD_NAME``). ``load_settings`` reads only those variables and
turns any validation error into ``SettingsError`` whose message names the offending
variable and value, so a bad deployment fails at start with one readable line instead
of a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import ClassVar, NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T", bound="EnvSettings")


class SettingsError(Exception):
    """A setting is missing, malformed or contradicts another one."""


class EnvSettings(BaseModel):
    """Base class for settings read from the environment.

    Subclasses set ``env_prefix`` (for example ``"KAOS_MEMORY_"``); a field ``port`` is
    then read from ``KAOS_MEMORY_PORT``. A field may override its variable name with
    ``json_schema_extra={"env": "NAME"}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    env_prefix: ClassVar[str] = ""

    @classmethod
    def env_name(cls, field: str) -> str:
        info = cls.model_fields[field]
        extra = info.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("env"), str):
            return str(extra["env"])
        return f"{cls.env_prefix}{field.upper()}"

    @classmethod
    def from_env(cls: type[T], environ: Mapping[str, str] | None = None, **overrides: object) -> T:
        return load_settings(cls, environ, **overrides)


def load_settings(cls: type[T], environ: Mapping[str, str] | None = None, **overrides: object) -> T:
    """Build ``cls`` from ``environ`` (default ``os.environ``) plus explicit overrides.

    Empty variables count as unset, as Kubernetes renders optional values as "".
    """
    env = os.environ if environ is None else environ
    raw: dict[str, object] = {}
    for field in cls.model_fields:
        value = env.get(cls.env_name(field))
        if value is not None and value != "":
            raw[field] = value
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(_describe(cls, exc, raw)) from None


def _describe(cls: type[EnvSettings], exc: ValidationError, raw: Mapping[str, object]) -> str:
    parts: list[str] = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        field = str(loc[0]) if loc else ""
        msg = err.get("msg", "invalid")
        if field in cls.model_fields:
            name = cls.env_name(field)
            if field in raw:
                parts.append(f"{name}={raw[field]!r}: {msg}")
            else:
                parts.append(f"{name}: {msg}")
        else:
            # Model-level validators (invariants between settings) name their variables
            # in the message themselves.
            parts.append(msg.removeprefix("Value error, "))
    return "invalid settings: " + "; ".join(parts)


def exit_on_settings_error(exc: SettingsError) -> NoReturn:
    """Print the one-line message and exit 2, the usual status for a usage error."""
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2)
