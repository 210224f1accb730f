"""Why the API server refused an object, in the user's field names (pure).

kubectl prints an ``Invalid`` refusal from the Status's ``details.causes``: one
``* <field>: <message>`` line per cause, or the one cause after ``is invalid:``. Server-side
apply refuses a value of the wrong type before any validation, in structured-merge-diff's
words (``.spec.x: expected string, got &value.valueUnstructured{Value:true}``), and strict
field validation refuses a field the schema does not declare. ``problems`` turns each into
``<field>: <what is wrong>``, sorted by field; the type a wrong value has is read from the
document the user sent, not from Go's print of it.
"""

from __future__ import annotations

import re
from typing import Any

# Server-side apply's refusal of a value of the wrong type or an unknown field.
TYPED_PATCH = "failed to create typed patch object"
_CAUSE = re.compile(r"^\* (?P<field>[^:]*): (?P<message>.+)$")
_INVALID = re.compile(r"is invalid: ?(?P<rest>.*)$")
# structured-merge-diff: ".spec.config.instructions: expected string, got ..."
_TYPED = re.compile(
    r"(?P<path>(?:\.[A-Za-z0-9_\-]+(?:\[[^\]]*\])*)+): expected "
    r"(?P<want>numeric \(int or float\)|[a-z]+), got (?P<got>.*)$"
)
_UNDECLARED = re.compile(
    r"(?P<path>(?:\.[A-Za-z0-9_\-]+(?:\[[^\]]*\])*)+): field not declared in schema"
)
_UNKNOWN = re.compile(r'unknown field "(?P<field>[^"]+)"')
# structured-merge-diff: ".spec.mcpServers: duplicate entries for key [="a"]"
_DUPLICATES = re.compile(
    r"(?P<path>(?:\.[A-Za-z0-9_\-]+(?:\[[^\]]*\])*)+): duplicate entries for key "
    r'\[=?"?(?P<key>[^"\]]*)"?\]'
)
# The API server's field.Error kinds, which start each cause's message.
_ERROR_KINDS = (
    "Invalid value",
    "Unsupported value",
    "Required value",
    "Duplicate value",
    "Forbidden",
    "Too many",
    "Too long",
    "Not found",
    "Internal error",
)
# Causes joined on one line ("is invalid: [a: Invalid value: ..., b: Required value]").
_NEXT_CAUSE = re.compile(
    r", (?=(?:<nil>|[A-Za-z][\w.\[\]\-]*): (?:" + "|".join(_ERROR_KINDS) + "))"
)
# A value as the API server prints it before ": <detail>": quoted, a number, a literal.
_PRINTED_VALUE = re.compile(r'^(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null|<nil>): ')
# The note the API server adds when it skipped rules because of the errors above.
NOT_CHECKED = "(more rules are checked once these are fixed)"
_DUPLICATE = re.compile(r'duplicate field "(?P<field>[^"]+)"')
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\[[^\]]*\]")

# A schema's or structured-merge-diff's type, as a reader says it.
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "numeric (int or float)": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "map": "an object",
    "array": "a list",
    "list": "a list",
    "null": "null",
}


def type_word(value: Any) -> str:
    """What a YAML value is, in words: a boolean, a string, a number, an object, a list."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


_MISSING = object()


def value_at(document: dict[str, Any], path: str) -> Any:
    """The value at ``spec.a.b[0]`` in the document, else ``_MISSING``."""
    node: Any = document
    for name, index in (m.groups() for m in _SEGMENT.finditer(path)):
        if name is not None and isinstance(node, dict) and name in node:
            node = node[name]
        elif index is not None and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return _MISSING
    return node


def _go_type(printed: str) -> str:
    """The type of a value as Go printed it (``&value.valueUnstructured{Value:true}``,
    ``bool``, ``map[string]interface {}``), when the document cannot tell."""
    text = printed.split("Value:", 1)[-1]
    if text.startswith(("true", "false", "bool")):
        return "a boolean"
    if text.startswith(('"', "string")):
        return "a string"
    if text.startswith(("map[", "&{map[")):
        return "an object"
    if text.startswith(("[]", "&{[")):
        return "a list"
    if text.startswith("<nil>"):
        return "null"
    if re.match(r"-?\d|int|float", text):
        return "a number"
    return "another type"


def _split_value(text: str) -> tuple[str, str]:
    """``<value>: <detail>`` of an ``Invalid value`` message (a quoted value may hold
    colons); ``("", text)`` when the API server left the value out."""
    printed = _PRINTED_VALUE.match(text)
    if printed is None:
        return "", text.strip()
    return printed.group(0)[:-2], text[printed.end() :].strip()


def _cause(field: str, message: str, document: dict[str, Any]) -> str:
    """One ``details.causes`` entry as ``field: what is wrong``."""
    field = field.strip()
    message = message.strip()
    if "validation rules were not checked" in message:
        return NOT_CHECKED
    if field in ("", "<nil>"):
        field = "(the object)"
    kind, _, rest = message.partition(": ")
    if message == "Required value" or kind == "Required value":
        return f"{field}: required" + (f" ({rest})" if rest else "")
    if kind == "Unsupported value":
        value, supported = _split_value(rest)
        supported = supported.removeprefix("supported values: ")
        return f"{field}: unsupported value {value} (supported: {supported})"
    if kind == "Duplicate value":
        return f"{field}: duplicate value {rest}"
    if kind in ("Too many", "Too long"):
        count, detail = _split_value(rest)
        return f"{field}: {detail or kind.lower()}" + (f" (got {count})" if count else "")
    if kind in ("Forbidden", "Internal error"):
        return f"{field}: {rest or kind.lower()}"
    if kind == "Invalid value":
        value, detail = _split_value(rest)
        typed = re.search(r"must be of type (?P<want>[a-z]+)", detail)
        if typed:
            got = value_at(document, field)
            actual = type_word(got) if got is not _MISSING else _TYPE_WORDS.get(value.strip('"'))
            want = _TYPE_WORDS.get(typed.group("want"), typed.group("want"))
            return f"{field}: expected {want}, got {actual or 'another type'}"
        own = re.match(rf"{re.escape(field)} in body (?P<rule>.+)$", detail)
        if own:  # an OpenAPI bound: the detail repeats the field
            return f"{field}: {own.group('rule')} (got {value})"
        shown = "" if value.strip('"') in ("", "object", "array", "null") else f" (got {value})"
        return f"{field}: {detail or 'invalid value'}{shown}"
    return f"{field}: {message}"


def problems(stderr: str, document: dict[str, Any]) -> list[str]:
    """Each reason the API server gave for refusing ``document`` (kubectl's ``stderr``),
    as ``field: what is wrong``; empty when the failure was not about the object's
    content (no cluster, no permission, ...)."""
    found: list[str] = []
    lines = [ln.rstrip() for ln in stderr.splitlines()]
    for at, line in enumerate(lines):
        invalid = _INVALID.search(line)
        if not invalid:
            continue
        rest = invalid.group("rest").strip()
        joined = rest[1:-1] if rest.startswith("[") and rest.endswith("]") else rest
        for one in _NEXT_CAUSE.split(joined) if joined else []:
            field, _, message = one.partition(": ")
            found.append(_cause(field, message, document))
        for follow in lines[at + 1 :]:
            cause = _CAUSE.match(follow.strip())
            if cause is None:
                break
            found.append(_cause(cause.group("field"), cause.group("message"), document))
        break
    for line in lines:
        typed = _TYPED.search(line)
        if typed:
            field = typed.group("path").lstrip(".")
            want = _TYPE_WORDS.get(typed.group("want"), typed.group("want"))
            got = value_at(document, field)
            actual = type_word(got) if got is not _MISSING else _go_type(typed.group("got"))
            found.append(f"{field}: expected {want}, got {actual}")
        for undeclared in _UNDECLARED.finditer(line):
            found.append(f"{undeclared.group('path').lstrip('.')}: unknown field")
        for unknown in _UNKNOWN.finditer(line):
            found.append(f"{unknown.group('field')}: unknown field")
        for duplicate in _DUPLICATE.finditer(line):
            found.append(f"{duplicate.group('field')}: given twice")
        for twice in _DUPLICATES.finditer(line):
            found.append(
                f'{twice.group("path").lstrip(".")}: "{twice.group("key")}" is listed twice'
            )
    # By field (the API server's order varies from call to call); the note on rules it
    # skipped reads last, after the reasons it speaks of.
    reasons = sorted(set(found) - {NOT_CHECKED})
    return reasons + ([NOT_CHECKED] if NOT_CHECKED in found else [])
