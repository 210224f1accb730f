"""The settings tables of ``images/agent/README.md``, generated from the settings models.

Each variable, default and description come from the settings groups (declared with
``kaos_core.settings.setting``), rendered by ``kaos_core.settings.settings_markdown`` one
table per group, so the README cannot drift from the code (a unit test compares them).
``python -m kaos_agent.settings_doc`` rewrites the generated regions of the README in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kaos_core.settings import ServiceSettings, replace_region, settings_markdown

from kaos_agent.mcp_runtime.settings import MCP_GROUPS, McpSettings
from kaos_agent.settings import GROUPS, AgentSettings

README = Path(__file__).resolve().parents[1] / "README.md"
# Generated region of the README → the model and its group titles.
REGIONS: dict[str, tuple[type[ServiceSettings], dict[str, str]]] = {
    "kaos-agent settings": (AgentSettings, GROUPS),
    "kaos-mcp settings": (McpSettings, MCP_GROUPS),
}


def render(text: str) -> str:
    """``text`` (the README) with every generated region rewritten from the models."""
    for region, (cls, groups) in REGIONS.items():
        text = replace_region(text, region, settings_markdown(cls, groups, heading="###"))
    return text


def main() -> None:
    current = README.read_text(encoding="utf-8")
    updated = render(current)
    if updated != current:
        README.write_text(updated, encoding="utf-8")
        print(f"updated {README}", file=sys.stderr)


if __name__ == "__main__":
    main()
