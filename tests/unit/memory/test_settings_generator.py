"""``kaos_core.settings``' documentation generator: tables per group from the field docs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from kaos_core.settings import EnvSettings, main, region, replace_region, settings_markdown
from pydantic import Field


class Example(EnvSettings):
    env_prefix: ClassVar[str] = "EX_"

    port: int = Field(default=80, description="listen port", json_schema_extra={"group": "http"})
    dsn: str | None = Field(
        default=None, description="database | DSN", json_schema_extra={"group": "storage"}
    )
    ratio: float = Field(
        default=2.0,
        description="a derived one",
        json_schema_extra={"group": "storage", "default_doc": "= port / 40"},
    )
    debug: bool = Field(default=False, description="more logs", json_schema_extra={"group": "http"})


def test_tables_follow_the_group_order_and_field_docs() -> None:
    text = settings_markdown(Example, {"storage": "Storage", "http": "HTTP"}, heading="###")
    assert text.splitlines() == [
        "### Storage",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
        "| `EX_DSN` | — | database \\| DSN |",
        "| `EX_RATIO` | = port / 40 | a derived one |",
        "",
        "### HTTP",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
        "| `EX_PORT` | `80` | listen port |",
        "| `EX_DEBUG` | `false` | more logs |",
    ]


def test_regions_are_replaced_and_checked(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- BEGIN GENERATED: s -->\nstale\n<!-- END GENERATED: s -->\noutro\n")
    argv = [f"{__name__}:Example", "--file", str(doc), "--region", "s"]
    assert main([*argv, "--check"]) == 1
    assert main(argv) == 0
    assert main([*argv, "--check"]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n")
    assert region(text, "s") == settings_markdown(Example).strip("\n")
    with pytest.raises(ValueError):
        replace_region("no markers", "s", "body")
