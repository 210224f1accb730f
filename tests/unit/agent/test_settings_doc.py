"""The README's settings tables are the settings models' own documentation."""

from __future__ import annotations

from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_agent.settings import AgentSettings
from kaos_agent.settings_doc import README, render


def test_readme_tables_match_the_models() -> None:
    text = README.read_text()
    assert render(text) == text, "run: .venv/bin/python -m kaos_agent.settings_doc"


def test_every_setting_is_documented_in_a_group() -> None:
    for cls in (AgentSettings, McpSettings):
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra
            assert info.description, f"{cls.__name__}.{name}"
            assert isinstance(extra, dict) and extra.get("group"), f"{cls.__name__}.{name}"
            assert cls.env_name(name) in README.read_text()
