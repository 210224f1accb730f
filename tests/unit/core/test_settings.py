"""Settings load from the environment group by group, and fail with one line naming the
variables."""

from __future__ import annotations

from typing import ClassVar, Literal

import pytest
from kaos_core.settings import (
    ServiceSettings,
    SettingsError,
    SettingsGroup,
    group,
    load_settings,
    setting,
)


class DemoSettings(SettingsGroup):
    env_prefix: ClassVar[str | None] = "DEMO_"

    port: int = setting("listen port", default=8080, ge=1, le=65535)
    storage: Literal["local", "external"] = setting("where", default="local")
    dsn: str | None = setting("database", default=None)
    name: str = setting("a name", env="OTHER_NAME", default="x")

    def problems(self, prefix: str) -> list[str]:
        if self.storage == "external" and not self.dsn:
            return [f"{self.env_name('storage', prefix)}=external requires DEMO_DSN"]
        return []


class Shared(SettingsGroup):
    """A group without a prefix of its own: read under each service's."""

    mode: Literal["off", "on"] = setting("on or off", env="FEATURE_MODE", default="off")
    url: str | None = setting("where", env="FEATURE_URL", default=None)

    def problems(self, prefix: str) -> list[str]:
        if self.mode == "on" and not self.url:
            return [f"{self.env_name('mode', prefix)}=on needs {self.env_name('url', prefix)}"]
        return []


class Fixed(SettingsGroup):
    env_prefix: ClassVar[str | None] = "FIXED_"

    level: int = setting("a level", default=1, ge=0)


class Service(ServiceSettings):
    env_prefix: ClassVar[str] = "SVC_"

    shared: Shared = group("Shared")
    fixed: Fixed = group("Fixed")

    def problems(self) -> list[str]:
        if self.shared.mode == "on" and self.fixed.level == 0:
            return ["SVC_FEATURE_MODE=on needs FIXED_LEVEL > 0"]
        return []


def test_defaults_and_values_from_the_environment() -> None:
    s = DemoSettings.from_env({"DEMO_PORT": "9000", "DEMO_OTHER_NAME": "n", "UNRELATED": "1"})
    assert (s.port, s.storage, s.name) == (9000, "local", "n")
    assert DemoSettings.env_names() == ["DEMO_PORT", "DEMO_STORAGE", "DEMO_DSN", "DEMO_OTHER_NAME"]


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


def test_constructing_a_group_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_PORT", "9000")
    assert DemoSettings().port == 8080
    assert load_settings(DemoSettings).port == 9000


def test_a_service_reads_each_group_under_its_prefix() -> None:
    s = Service.from_env({"SVC_FEATURE_MODE": "on", "SVC_FEATURE_URL": "u", "FIXED_LEVEL": "3"})
    assert (s.shared.mode, s.shared.url, s.fixed.level) == ("on", "u", 3)
    assert Service.env_names() == ["SVC_FEATURE_MODE", "SVC_FEATURE_URL", "FIXED_LEVEL"]
    assert Service.env_name("feature_mode") == "SVC_FEATURE_MODE"


def test_every_problem_is_reported_in_one_line() -> None:
    with pytest.raises(SettingsError) as info:
        Service.from_env({"SVC_FEATURE_MODE": "on", "FIXED_LEVEL": "-1"})
    assert (
        str(info.value)
        == "invalid settings: FIXED_LEVEL='-1': Input should be greater than or equal to 0"
    )
    with pytest.raises(SettingsError) as info:
        Service.from_env({"SVC_FEATURE_MODE": "on"})
    assert str(info.value) == "invalid settings: SVC_FEATURE_MODE=on needs SVC_FEATURE_URL"
    with pytest.raises(SettingsError) as info:
        Service.from_env({"SVC_FEATURE_MODE": "on", "SVC_FEATURE_URL": "u", "FIXED_LEVEL": "0"})
    assert str(info.value) == "invalid settings: SVC_FEATURE_MODE=on needs FIXED_LEVEL > 0"


def test_a_service_is_built_by_its_variables_names() -> None:
    s = Service(feature_mode="on", feature_url="u", fixed_level=2)
    assert (s.shared.mode, s.shared.url, s.fixed.level) == ("on", "u", 2)
    assert Service.from_env({"SVC_FEATURE_URL": "env"}, feature_url="kw").shared.url == "kw"
    assert Service(fixed=Fixed(level=5)).fixed.level == 5
    with pytest.raises(ValueError, match="unknown"):
        Service(unknown=1)
