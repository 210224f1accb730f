"""``kaos_core.settings``' documentation generator: tables per group from the field docs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from kaos_core.settings import (
    ServiceSettings,
    SettingsGroup,
    group,
    main,
    region,
    replace_region,
    setting,
    settings_markdown,
)


class Http(SettingsGroup):
    port: int = setting("listen port", default=80)
    debug: bool = setting("more logs", default=False)


class Storage(SettingsGroup):
    dsn: str | None = setting("database | DSN", default=None)
    ratio: float = setting("a derived one", default=2.0, default_doc="= port / 40")
    mode: str = setting("see `{prefix}DSN`", env="STORAGE", default="")


class Identity(SettingsGroup):
    issuer: str | None = setting("who issues tokens", default=None)


class Example(ServiceSettings):
    env_prefix: ClassVar[str] = "EX_"
    notes: ClassVar[dict[str, str]] = {"EX_ISSUER": "Here: the example's."}

    http: Http = group("HTTP")
    storage: Storage = group("Storage")
    identity: Identity = group("Identity")


def test_tables_follow_the_group_order_and_field_docs() -> None:
    text = settings_markdown(Example, {"storage": "Storage", "http": "HTTP"}, heading="###")
    assert text.splitlines() == [
        "### Storage",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
        "| `EX_DSN` | — | database \\| DSN |",
        "| `EX_RATIO` | = port / 40 | a derived one |",
        "| `EX_STORAGE` | (empty) | see `EX_DSN` |",
        "",
        "### HTTP",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
        "| `EX_PORT` | `80` | listen port |",
        "| `EX_DEBUG` | `false` | more logs |",
    ]


def test_every_group_by_default_and_a_service_note_after_the_meaning() -> None:
    text = settings_markdown(Example)
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## HTTP",
        "## Storage",
        "## Identity",
    ]
    assert "| `EX_ISSUER` | — | who issues tokens. Here: the example's. |" in text


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
