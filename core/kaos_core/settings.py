"""Settings from the environment: typed, validated at load, errors that name the variable.

Each service declares a pydantic model whose fields map one-to-one onto environment
variables (``prefix + FIELD_NAME``). ``load_settings`` reads only those variables and
turns any validation error into ``SettingsError`` whose message names the offending
variable and value, so a bad deployment fails at start with one readable line instead
of a traceback.

The same fields document themselves: ``settings_markdown`` renders a model's variables as
tables per group from each field's ``description`` and ``group``, and ``python -m
kaos_core.settings`` writes them into a generated region of a Markdown file (or checks
that region, for drift tests).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, NoReturn, TypeVar

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


# --- documentation generated from the fields -------------------------------------------------

_BEGIN = "<!-- BEGIN GENERATED: {name} -->"
_END = "<!-- END GENERATED: {name} -->"


def _extra(info: Any) -> dict[str, Any]:
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def _default_text(info: Any) -> str:
    doc = _extra(info).get("default_doc")
    if isinstance(doc, str):
        return doc
    if info.is_required():
        return "(required)"
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


def settings_markdown(
    cls: type[EnvSettings], groups: Mapping[str, str] | None = None, *, heading: str = "##"
) -> str:
    """Tables of ``cls``'s variables, one per group: variable, default, meaning.

    A field's group is ``json_schema_extra["group"]`` and its meaning its ``description``;
    ``json_schema_extra["default_doc"]`` replaces a default that needs words (one derived
    from another setting). ``groups`` maps group names to titles, in table order; groups
    it does not name follow in the order their first field appears, titled by name.
    """
    by_group: dict[str, list[str]] = {}
    for field, info in cls.model_fields.items():
        group = str(_extra(info).get("group", ""))
        meaning = " ".join((info.description or "").split()).replace("|", "\\|")
        row = f"| `{cls.env_name(field)}` | {_default_text(info)} | {meaning} |"
        by_group.setdefault(group, []).append(row)
    titles = dict(groups or {})
    order = [g for g in titles if g in by_group] + [g for g in by_group if g not in titles]
    out: list[str] = []
    for group in order:
        title = titles.get(group) or group or "Other"
        out += [f"{heading} {title}", "", "| variable | default | meaning |", "| --- | --- | --- |"]
        out += by_group[group]
        out.append("")
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
    parser.add_argument("settings", help="MODULE:CLASS of an EnvSettings model")
    parser.add_argument("--groups", help="MODULE:NAME of a {group: title} mapping")
    parser.add_argument("--heading", default="##")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--region")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    groups = _load(args.groups) if args.groups else getattr(_load(args.settings), "groups", None)
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


if __name__ == "__main__":
    raise SystemExit(main())
