"""The README's settings tables are the settings models' own documentation."""

from __future__ import annotations

from kaos_agent.mcp_runtime.settings import MCP_GROUPS, McpSettings
from kaos_agent.settings import GROUPS, AgentSettings
from kaos_agent.settings_doc import README, render


def test_readme_tables_match_the_models() -> None:
    text = README.read_text()
    assert render(text) == text, "run: .venv/bin/python -m kaos_agent.settings_doc"


def test_every_setting_is_documented_in_a_group() -> None:
    readme = README.read_text()
    for cls, groups in ((AgentSettings, GROUPS), (McpSettings, MCP_GROUPS)):
        # The limits and tracing every server reads are documented on their own pages.
        assert set(cls.groups()) - set(groups) == {"limits", "telemetry"}, cls.__name__
        for name in groups:
            group_cls = cls.groups()[name]
            for field, info in group_cls.model_fields.items():
                assert info.description, f"{cls.__name__}.{name}.{field}"
                assert group_cls.env_name(field, cls.prefix_of(name)) in readme
