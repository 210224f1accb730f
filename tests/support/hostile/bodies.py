"""Mutations of a request's JSON body: nesting, numbers, keys, text, types and size."""

from __future__ import annotations

import json
from typing import Any

from tests.support.hostile.documents import (
    _SLOT,
    _SLOT_TOKEN,
    Path,
    _where,
    dump,
    get_at,
    json_type,
    matches,
    set_at,
    with_key_token,
    with_token,
)
from tests.support.hostile.request import (
    Endpoint,
    Expect,
    RawRequest,
    _refuse_or_any,
    request,
)


def valid(ep: Endpoint) -> RawRequest:
    return request(ep, "valid", Expect.ACCEPT)


def deep_nesting(ep: Endpoint, path: Path, depth: int, shape: str = "array") -> RawRequest:
    if shape == "array":
        token = b"[" * depth + b"]" * depth
    else:
        token = b'{"a":' * depth + b"1" + b"}" * depth
    body = with_token(ep.body, path, token)
    return request(ep, f"{shape} nested {depth} deep at {_where(path)}", Expect.REFUSE, body=body)


HUGE_NUMBERS: tuple[str, ...] = ("int", "negative", "fraction", "exponent", "overflow")


def huge_number(ep: Endpoint, path: Path, digits: int, kind: str = "int") -> RawRequest:
    many = b"1" + b"0" * max(digits - 1, 0)
    token = {
        "int": many,
        "negative": b"-" + many,
        "fraction": b"0." + many,
        "exponent": b"1e" + many,
        "overflow": b"1e" + str(400 + digits).encode(),  # short, but not a finite double
    }[kind]
    body = with_token(ep.body, path, token)
    return request(
        ep, f"{kind} number of {len(token)} chars at {_where(path)}", Expect.REFUSE, body=body
    )


def non_finite(ep: Endpoint, path: Path, literal: str) -> RawRequest:
    body = with_token(ep.body, path, literal.encode())
    return request(ep, f"{literal} at {_where(path)}", Expect.REFUSE, body=body)


def duplicate_key(ep: Endpoint, path: Path, key: str | None, value: Any) -> RawRequest:
    """The object at ``path`` with a key given twice: an existing one, or a new one."""
    obj = get_at(ep.body, path)
    assert isinstance(obj, dict)
    second = _SLOT + "-2"
    if key is None or key not in obj:
        key = "dup"
        new = {**obj, _SLOT: value, second: value}
    else:
        new = {**obj, _SLOT: value}
    rendered = dump(set_at(ep.body, path, new))
    name = json.dumps(key).encode()
    rendered = rendered.replace(_SLOT_TOKEN, name).replace(json.dumps(second).encode(), name)
    return request(ep, f"key {key!r} twice in {_where(path)}", Expect.REFUSE, body=rendered)


CONTROL_CHARS = tuple(chr(c) for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])


def control_text(ep: Endpoint, path: Path, char: str, raw: bool = False) -> RawRequest:
    """A string with a C0 control character: escaped (``\\u0000``, valid JSON that cannot be
    stored) or raw (not JSON)."""
    text = "before" + char + "after"
    token = b'"' + text.encode() + b'"' if raw else json.dumps(text).encode()
    body = with_token(ep.body, path, token)
    how = "raw" if raw else "escaped"
    return request(ep, f"{how} U+{ord(char):04X} in {_where(path)}", Expect.REFUSE, body=body)


def control_key(ep: Endpoint, path: Path, char: str) -> RawRequest:
    body = with_key_token(ep.body, path, None, json.dumps("k" + char).encode())
    return request(ep, f"key with U+{ord(char):04X} in {_where(path)}", Expect.REFUSE, body=body)


SURROGATES: tuple[tuple[str, bool], ...] = (
    ("\\ud800", True),
    ("x\\udfffy", True),
    ("\\udc80\\ud800", True),
    ("\\ud83d", True),
    ("\\ud83d\\ude00", False),  # a proper pair: an emoji, storable
)


def surrogate(ep: Endpoint, path: Path, escape: str, lone: bool, key: bool = False) -> RawRequest:
    token = b'"' + escape.encode() + b'"'
    if key:
        body = with_key_token(ep.body, path, None, token)
        expect = Expect.REFUSE if lone else _refuse_or_any(ep.forbids_unknown_fields)
    else:
        body = with_token(ep.body, path, token)
        # A valid pair is ordinary text, accepted where text is.
        expect = Expect.REFUSE if lone else Expect.ANY
    where = ("key in " if key else "") + _where(path)
    return request(ep, f"{escape} at {where}", expect, body=body)


INVALID_UTF8: tuple[bytes, ...] = (
    b"\xff",
    b"\x80",
    b"\xc3\x28",
    b"\xc0\xaf",  # overlong "/"
    b"\xed\xa0\x80",  # a surrogate, UTF-8 encoded
    b"\xe2\x82",  # truncated sequence
    b"\xf8\x88\x80\x80\x80",
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
)


def invalid_utf8(ep: Endpoint, path: Path, junk: bytes) -> RawRequest:
    body = with_token(ep.body, path, b'"a' + junk + b'z"')
    return request(ep, f"bytes {junk!r} in {_where(path)}", Expect.REFUSE, body=body)


def other_encoding(ep: Endpoint, codec: str) -> RawRequest:
    """The whole body in UTF-16/32, or UTF-8 behind a byte-order mark."""
    text = json.dumps(ep.body, ensure_ascii=False)
    body = text.encode(codec)
    return request(ep, f"body encoded {codec}", Expect.REFUSE, body=body)


def truncated(ep: Endpoint, keep: int) -> RawRequest:
    full = dump(ep.body)
    keep = min(keep, len(full) - 1)
    return request(ep, f"body cut to {keep} of {len(full)} bytes", Expect.REFUSE, body=full[:keep])


WRONG_VALUES: tuple[Any, ...] = (0, -1, 1.5, True, False, None, "", "x", [], [1], {}, {"x": 1})


def wrong_type(ep: Endpoint, path: Path, value: Any) -> RawRequest:
    original = get_at(ep.body, path)
    assert json_type(value) != json_type(original)
    lenient = any(matches(path, p) for p in ep.lenient) or (
        value is None and any(matches(path, p) for p in ep.nullable)
    )
    body = dump(set_at(ep.body, path, value))
    label = f"{json_type(value)} {value!r} for {json_type(original)} at {_where(path)}"
    return request(ep, label, Expect.ANY if lenient else Expect.REFUSE, body=body)


NOT_OBJECTS: tuple[bytes, ...] = (
    b"",
    b" ",
    b"null",
    b"[]",
    b"[{}]",
    b'"text"',
    b"1",
    b"true",
    b"{",
    b"}",
    b"{}{}",
    b"<xml/>",
    b"a=1&b=2",
    b"\x00\x00\x00",
)


def not_an_object(ep: Endpoint, body: bytes) -> RawRequest:
    # ``{}`` is an object, but lacks what every endpoint requires.
    return request(ep, f"body {body!r}", Expect.REFUSE, body=body)


UNKNOWN_FIELDS: tuple[str, ...] = ("zz_extra", "principal", "user_id", "session_id", "__proto__")


def unknown_field(ep: Endpoint, path: Path, name: str) -> RawRequest:
    obj = get_at(ep.body, path)
    assert isinstance(obj, dict)
    body = dump(set_at(ep.body, path, {**obj, name: "x"}))
    return request(
        ep,
        f"unknown field {name!r} in {_where(path)}",
        _refuse_or_any(ep.forbids_unknown_fields),
        body=body,
    )


def oversize(ep: Endpoint, path: Path, extra: int) -> RawRequest:
    """A valid document over the endpoint's body limit (a long string at ``path``)."""
    base = len(dump(set_at(ep.body, path, "")))
    filler = "x" * (ep.max_body - base + 1 + extra)
    body = dump(set_at(ep.body, path, filler))
    return request(ep, f"{len(body)}-byte body (limit {ep.max_body})", Expect.REFUSE, body=body)
