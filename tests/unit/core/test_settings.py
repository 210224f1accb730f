"""Settings load from the environment and fail with one line naming the variable."""

from __future__ import annotations

from typing import Literal

import pytest
from kaos_core.settings import EnvSettings, SettingsError
from pydantic import Field, model_validator


class DemoSettings(EnvSettings):
    env_prefix = "DEMO_"

    port: int = Field(default=8080, ge=1, le=65535)
    storage: Literal["local", "external"] = "local"
    dsn: str | None = None
    name: str = Field(default="x", json_schema_extra={"env": "OTHER_NAME"})

    @model_validator(mode="after")
    def _external_needs_dsn(self) -> DemoSettings:
        if self.storage == "external" and not self.dsn:
            raise ValueError("DEMO_STORAGE=external requires DEMO_DSN")
        return self


def test_defaults_and_values_from_the_environment() -> None:
    s = DemoSettings.from_env({"DEMO_PORT": "9000", "OTHER_NAME": "n", "UNRELATED": "1"})
    assert (s.port, s.storage, s.name) == (9000, "local", "n")


def test_empty_variable_counts_as_unset() -> None:
    assert DemoSettings.from_env({"DEMO_PORT": ""}).port == 8080


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"DEMO_PORT": "abc"}, "DEMO_PORT='abc'"),
        ({"DEMO_PORT": "70000"}, "DEMO_PORT='70000'"),
        ({"DEMO_STORAGE": "cloud"}, "DEMO_STORAGE='cloud'"),
        ({"DEMO_STORAGE": "external"}, "DEMO_STORAGE=external requires DEMO_DSN"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError) as info:
        DemoSettings.from_env(env)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message


def test_overrides_win_over_the_environment() -> None:
    assert DemoSettings.from_env({"DEMO_PORT": "1"}, port=2).port == 2
