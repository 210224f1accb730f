"""Mutations of the identity headers, and of headers no service reads."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.hostile.request import (
    Endpoint,
    Expect,
    HeaderCase,
    RawRequest,
    _headers,
    _refuse_or_any,
    request,
)

AGENT_HEADER = "X-Agent-Identity"
PRINCIPAL_HEADER = "X-Principal"
SESSION_HEADER = "X-Session-Id"
IDENTITY_HEADERS = (AGENT_HEADER, PRINCIPAL_HEADER, SESSION_HEADER)


@dataclass(frozen=True)
class IdentityValue:
    """A header value and whether a principal or session id / an agent identity is refused;
    ``control``: a control byte, which an HTTP parser may refuse before the application."""

    value: bytes
    subject_refused: bool
    agent_refused: bool
    note: str = ""
    control: bool = False


NOT_UTF8 = IdentityValue(b"\xff\xfe", True, True, "not UTF-8")
CONTROL_BYTE = IdentityValue(b"\x01a", True, True, "control 0x01", control=True)
IDENTITY_VALUES: tuple[IdentityValue, ...] = (
    NOT_UTF8,
    CONTROL_BYTE,
    IdentityValue(b"*", True, True, "wildcard"),
    IdentityValue(b"", True, True, "empty"),
    IdentityValue(b"   ", True, True, "blank"),
    IdentityValue(b"ab\xc3", True, True, "truncated UTF-8"),
    IdentityValue(b"\xed\xa0\x80", True, True, "UTF-8 surrogate"),
    IdentityValue(b"jos\xc3\xa9", False, True, "printable non-ASCII"),
    IdentityValue("用户".encode(), False, True, "printable CJK"),
    IdentityValue(b"a\xe2\x80\x8bb", True, True, "zero-width space"),
    IdentityValue(b"a\xc2\xa0b", True, True, "no-break space"),
    IdentityValue(b"a\xe2\x80\xaeb", True, True, "right-to-left override"),
    IdentityValue(b"\xef\xbb\xbfa", True, True, "byte-order mark"),
    IdentityValue(b"a\tb", True, True, "tab"),
    IdentityValue(b"x" * 257, True, True, "257 characters"),
    IdentityValue(b"kaos://agent/ns/" + b"n" * 300, True, True, "long agent identity"),
    IdentityValue(b"kaos://agent/Ns/x", False, True, "upper-case namespace"),
    IdentityValue(b"kaos://agent/ns/other", False, False, "another agent"),
    IdentityValue(b"p*", False, True, "star inside"),
    *(
        IdentityValue(bytes([c]) + b"a", True, True, f"control {c:#04x}", control=True)
        for c in [0, 8, 11, 27, 31, 127]
    ),
)


def identity_header(ep: Endpoint, name: str, iv: IdentityValue) -> RawRequest:
    headers = [*_headers(ep, drop=[name]), (name.encode(), iv.value)]
    refused = iv.agent_refused if name == AGENT_HEADER else iv.subject_refused
    expect = _refuse_or_any(refused and name in ep.identity_headers)
    label = f"{name}: {iv.note} {iv.value[:40]!r}"
    return request(ep, label, expect, headers=headers, malformed_http=iv.control)


def repeated_header(ep: Endpoint, name: str, spelled: str, second: bytes) -> RawRequest:
    """An identity header given twice (the second spelling may differ in case)."""
    first = dict(ep.headers).get(name) or "first"
    headers = [
        *_headers(ep, drop=[name]),
        (name.encode(), first.encode()),
        (spelled.encode(), second),
    ]
    expect = _refuse_or_any(name in ep.identity_headers)
    return request(ep, f"{name} twice ({first!r}, {second!r})", expect, headers=headers)


def junk_header(ep: Endpoint, name: bytes, value: bytes) -> RawRequest:
    """A header no service reads, with bytes that are not UTF-8 or not printable."""
    headers = [*_headers(ep), (name, value)]
    control = any((b < 0x20 and b != 0x09) or b == 0x7F for b in value)
    label = f"header {name!r}: {value[:40]!r}"
    return request(ep, label, Expect.ANY, headers=headers, malformed_http=control)


def header_case(ep: Endpoint, case: HeaderCase) -> RawRequest:
    headers = [*_headers(ep, drop=[case.name]), (case.name.encode(), case.value)]
    return request(ep, f"{case.name}: {case.value!r}", case.expect, headers=headers)
