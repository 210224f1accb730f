"""The settings tables, generated from the groups' fields.

``settings_markdown`` renders a service's variables (or one group's) as one table per group
from each field's description; ``python -m kaos_core.settings`` writes them into a generated
region of a Markdown file, or checks that region for drift tests.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from kaos_core.settings.model import ServiceSettings, SettingsGroup

_BEGIN = "<!-- BEGIN GENERATED: {name} -->"
_END = "<!-- END GENERATED: {name} -->"


def _default_doc(info: FieldInfo) -> str | None:
    extra = info.json_schema_extra
    doc = extra.get("default_doc") if isinstance(extra, dict) else None
    return doc if isinstance(doc, str) else None


def _default_text(info: FieldInfo) -> str:
    doc = _default_doc(info)
    if doc is not None:
        return doc
    if info.is_required():
        return "(required)"
    if info.default_factory_takes_validated_data:
        raise ValueError(f"{info.description!r}: a derived default needs default_doc")
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "—"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    elif isinstance(value, (list, tuple)):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    return f"`{text}`" if text else "(empty)"


def group_table(
    group_cls: type[SettingsGroup], prefix: str, notes: Mapping[str, str] | None = None
) -> list[str]:
    """The rows of one group's table: variable, default, meaning."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for field, info in group_cls.model_fields.items():
        variable = prefix + group_cls.suffix(field)
        meaning = " ".join((info.description or "").split()).replace("{prefix}", prefix)
        note = (notes or {}).get(variable)
        if note:
            meaning = f"{meaning.rstrip('.')}. {' '.join(note.split())}"
        meaning = meaning.replace("|", "\\|")
        rows.append(f"| `{variable}` | {_default_text(info)} | {meaning} |")
    return rows


def settings_markdown(
    cls: type[ServiceSettings] | type[SettingsGroup],
    groups: Mapping[str, str] | None = None,
    *,
    heading: str = "##",
) -> str:
    """Tables of ``cls``'s variables, one per group, each under its title.

    For a service, ``groups`` maps the group fields to document to their titles, in table
    order (default: every group, titled at its declaration); for one group, its title is the
    first of ``groups`` or the group's own.
    """
    tables: list[tuple[str, list[str]]] = []
    if issubclass(cls, ServiceSettings):
        order = dict(groups) if groups is not None else {name: "" for name in cls.groups()}
        for name, title in order.items():
            group_cls = cls.groups()[name]
            title = title or cls.model_fields[name].title or group_cls.title or name
            tables.append((title, group_table(group_cls, cls.prefix_of(name), cls.notes)))
    else:
        title = next(iter((groups or {}).values()), "") or cls.title or cls.__name__
        tables.append((title, group_table(cls, cls.env_prefix or "")))
    out: list[str] = []
    for title, rows in tables:
        out += [f"{heading} {title}", "", *rows, ""]
    return "\n".join(out)


def replace_region(text: str, name: str, body: str) -> str:
    """``text`` with the lines between the ``BEGIN``/``END GENERATED: name`` comments
    replaced by ``body``; ``ValueError`` when the markers are missing."""
    begin, end = _BEGIN.format(name=name), _END.format(name=name)
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if start < 0 or stop < 0:
        raise ValueError(f"no {begin!r} ... {end!r} region")
    return text[: start + len(begin)] + "\n\n" + body.strip("\n") + "\n\n" + text[stop:]


def region(text: str, name: str) -> str:
    """The text between the markers of region ``name`` (stripped)."""
    begin, end = _BEGIN.format(name=name), _END.format(name=name)
    start = text.index(begin) + len(begin)
    return text[start : text.index(end, start)].strip("\n")


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def main(argv: list[str] | None = None) -> int:
    """``python -m kaos_core.settings MODULE:CLASS [--groups MODULE:NAME] [--heading ###]
    [--file PATH --region NAME [--check]]``: print the tables, or write them into (or, with
    ``--check``, compare them with) a file's generated region. Exit 1 when a check differs.
    """
    parser = argparse.ArgumentParser(prog="python -m kaos_core.settings")
    parser.add_argument("settings", help="MODULE:CLASS of a service's settings or a group")
    parser.add_argument("--groups", help="MODULE:NAME of a {group: title} mapping")
    parser.add_argument("--heading", default="##")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--region")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    groups = _load(args.groups) if args.groups else None
    body = settings_markdown(_load(args.settings), groups, heading=args.heading)
    if args.file is None:
        print(body)
        return 0
    text = args.file.read_text(encoding="utf-8")
    updated = replace_region(text, args.region or "settings", body)
    if args.check:
        if updated != text:
            print(f"{args.file}: generated settings are out of date (run hack/gen-docs)")
            return 1
        return 0
    if updated != text:
        args.file.write_text(updated, encoding="utf-8")
    return 0
