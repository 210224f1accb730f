"""Scripted rules: what the model answers, decided by the test or demo that runs it.

A script is a list of rules (or ``{"rules": [...]}``), from ``KAOS_DEVMODEL_SCRIPT``
(JSON), ``KAOS_DEVMODEL_SCRIPT_FILE`` (JSON or YAML) or ``POST /control/script``. The
first rule that matches the conversation and has fires left answers it:

- ``match``: a regular expression searched in the last user message;
- ``after_tool``: the conversation ends with the result of this tool (``"*"``: any tool).
  A rule without ``after_tool`` only answers a conversation that ends with a user
  message, so a rule that calls a tool does not call it again on the tool's result;
- ``reply``: text, where ``{result}`` is the last tool result, ``{tool}`` its tool's name
  and ``{last_user}`` the last user message; or ``tool_call``: ``{"name", "arguments"}``
  (arguments an object, or a string sent as it is, even if it is not valid JSON), or a
  list of them for parallel calls. Tools need not be among the offered ones;
- ``times``: how often the rule may fire (unlimited when absent).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ScriptError(ValueError):
    """A script that cannot be used: its message says which rule and why."""


class ToolCallSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"), sort_keys=True)


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str | None = None
    after_tool: str | None = None
    reply: str | None = None
    tool_call: ToolCallSpec | list[ToolCallSpec] | None = None
    times: int | None = Field(default=None, ge=1)

    @field_validator("match")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_answer(self) -> Rule:
        if (self.reply is None) == (self.tool_call is None):
            raise ValueError("a rule needs exactly one of 'reply' and 'tool_call'")
        if isinstance(self.tool_call, list) and not self.tool_call:
            raise ValueError("'tool_call' must not be an empty list")
        return self

    def tool_calls(self) -> list[ToolCallSpec]:
        if self.tool_call is None:
            return []
        return self.tool_call if isinstance(self.tool_call, list) else [self.tool_call]


class ScriptBody(BaseModel):
    """Body of ``POST /control/script``: the rules that replace the current script."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]


def parse_rules(doc: object) -> list[Rule]:
    if isinstance(doc, dict) and set(doc) == {"rules"}:
        doc = doc["rules"]
    if not isinstance(doc, list):
        raise ScriptError("a script is a list of rules or an object {'rules': [...]}")
    rules = []
    for i, item in enumerate(doc):
        try:
            rules.append(Rule.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            where = f"rule {i}" + (f" field {loc}" if loc else "")
            msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
            raise ScriptError(f"{where}: {msg}") from None
    return rules


def parse_script_text(text: str) -> list[Rule]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"not valid JSON: {exc}") from None
    return parse_rules(doc)


def load_script_file(path: Path) -> list[Rule]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)  # JSON is YAML, so one loader reads both
    except yaml.YAMLError as exc:
        raise ScriptError(f"{path} is neither JSON nor YAML: {exc}") from None
    return parse_rules(doc)
