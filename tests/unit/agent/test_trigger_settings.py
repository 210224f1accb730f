"""``AGENT_TRIGGERS`` and the secrets beside it: read once at load, refused in one line
that names the trigger and the file, never the secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.settings import SettingsError

BASE = {"AGENT_NAME": "a", "MODEL_API_URL": "http://127.0.0.1:9", "MODEL_NAME": "m"}


def load(tmp_path: Path, triggers: object) -> AgentSettings:
    raw = triggers if isinstance(triggers, str) else json.dumps(triggers)
    env = {**BASE, "AGENT_TRIGGERS": raw, "AGENT_TRIGGER_SECRETS_DIR": str(tmp_path)}
    return AgentSettings.from_env(env)


def test_triggers_and_their_secrets_load(tmp_path: Path) -> None:
    (tmp_path / "push").write_bytes(b"the-secret\n")
    settings = load(tmp_path, [{"name": "push", "message": "{{ a }}", "maxPerMinute": 3}])
    trigger = settings.webhooks.get("push")
    assert trigger is not None and trigger.max_per_minute == 3
    assert settings.webhooks.secret("push") == b"the-secret"
    assert "the-secret" not in repr(settings) + str(settings.webhooks)


def test_no_triggers_by_default_and_no_secret_read() -> None:
    settings = AgentSettings.from_env(BASE)
    assert settings.webhooks.triggers == ()


@pytest.mark.parametrize(
    ("triggers", "problem"),
    [
        ("not json", "AGENT_TRIGGERS"),
        ({"name": "x"}, "a JSON list of triggers is expected"),
        ([{"name": "Bad_Name", "message": "m"}], "DNS label"),
        ([{"name": "a" * 64, "message": "m"}], "AGENT_TRIGGERS"),
        ([{"name": "ok", "message": "  "}], "blank"),
        ([{"name": "ok", "message": "m", "maxPerMinute": 0}], "AGENT_TRIGGERS"),
        ([{"name": "ok", "message": "m", "extra": 1}], "AGENT_TRIGGERS"),
        ([{"name": "ok", "message": "m"}, {"name": "ok", "message": "n"}], "more than once"),
        ([{"name": "missing", "message": "m"}], "trigger 'missing': its secret"),
        ([{"name": "empty", "message": "m"}], "trigger 'empty': its secret"),
    ],
)
def test_bad_triggers_fail_the_settings_clearly(
    tmp_path: Path, triggers: object, problem: str
) -> None:
    (tmp_path / "ok").write_bytes(b"never-shown")
    (tmp_path / "empty").write_bytes(b"\n")
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, triggers)
    assert problem in str(caught.value)
    assert "never-shown" not in str(caught.value)
