"""Hypothesis strategies over every mutation of an endpoint, and the explicit cases."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from tests.support.hostile.bodies import (
    CONTROL_CHARS,
    HUGE_NUMBERS,
    INVALID_UTF8,
    NOT_OBJECTS,
    SURROGATES,
    UNKNOWN_FIELDS,
    WRONG_VALUES,
    control_key,
    control_text,
    deep_nesting,
    duplicate_key,
    huge_number,
    invalid_utf8,
    non_finite,
    not_an_object,
    other_encoding,
    oversize,
    surrogate,
    truncated,
    unknown_field,
    valid,
    wrong_type,
)
from tests.support.hostile.documents import (
    dump,
    get_at,
    json_type,
    object_paths,
    string_paths,
    value_paths,
)
from tests.support.hostile.framing import (
    BAD_LENGTHS,
    CONTENT_TYPES,
    ENCODINGS,
    WRONG_METHODS,
    bad_content_length,
    chunked,
    content_encoding,
    content_encoding_identity,
    content_encoding_twice,
    content_type,
    double_content_length,
    huge_content_length,
    long_body,
    short_body,
    wrong_method,
)
from tests.support.hostile.headers import (
    CONTROL_BYTE,
    IDENTITY_HEADERS,
    IDENTITY_VALUES,
    NOT_UTF8,
    PRINCIPAL_HEADER,
    header_case,
    identity_header,
    junk_header,
    repeated_header,
)
from tests.support.hostile.request import Endpoint, RawRequest


def _strategies(ep: Endpoint) -> list[st.SearchStrategy[RawRequest]]:
    values = value_paths(ep.body)
    strings = string_paths(ep.body) or values
    objects = object_paths(ep.body)
    depths = st.sampled_from([33, 64, 100, 1000, 1100, 5000, 100_000])
    wrong = [
        (p, v)
        for p in values
        for v in WRONG_VALUES
        if json_type(v) != json_type(get_at(ep.body, p))
    ]
    with_keys = [(p, k) for p in objects for k in [None, *get_at(ep.body, p)]]
    out: list[st.SearchStrategy[RawRequest]] = [
        st.just(valid(ep)),
        st.builds(
            deep_nesting,
            st.just(ep),
            st.sampled_from(values),
            depths,
            st.sampled_from(["array", "object"]),
        ),
        st.builds(
            huge_number,
            st.just(ep),
            st.sampled_from(values),
            st.integers(41, 5000),
            st.sampled_from(HUGE_NUMBERS),
        ),
        st.builds(
            non_finite,
            st.just(ep),
            st.sampled_from(values),
            st.sampled_from(["NaN", "Infinity", "-Infinity"]),
        ),
        st.sampled_from(with_keys).flatmap(
            lambda pk: st.builds(
                duplicate_key,
                st.just(ep),
                st.just(pk[0]),
                st.just(pk[1]),
                st.sampled_from(["x", 1, None]),
            )
        ),
        st.builds(
            control_text,
            st.just(ep),
            st.sampled_from(strings),
            st.sampled_from(CONTROL_CHARS),
            st.booleans(),
        ),
        st.builds(
            control_key, st.just(ep), st.sampled_from(objects), st.sampled_from(CONTROL_CHARS)
        ),
        st.sampled_from(SURROGATES).flatmap(
            lambda s: st.one_of(
                st.builds(
                    surrogate, st.just(ep), st.sampled_from(strings), st.just(s[0]), st.just(s[1])
                ),
                st.builds(
                    surrogate,
                    st.just(ep),
                    st.sampled_from(objects),
                    st.just(s[0]),
                    st.just(s[1]),
                    st.just(True),
                ),
            )
        ),
        st.builds(
            invalid_utf8, st.just(ep), st.sampled_from(strings), st.sampled_from(INVALID_UTF8)
        ),
        st.builds(
            other_encoding,
            st.just(ep),
            st.sampled_from(["utf-16", "utf-16-le", "utf-32", "utf-8-sig"]),
        ),
        st.builds(truncated, st.just(ep), st.integers(0, len(dump(ep.body)) - 1)),
        st.sampled_from(wrong).map(lambda pv: wrong_type(ep, *pv)),
        st.builds(not_an_object, st.just(ep), st.sampled_from(NOT_OBJECTS)),
        st.builds(
            unknown_field, st.just(ep), st.sampled_from(objects), st.sampled_from(UNKNOWN_FIELDS)
        ),
        st.builds(oversize, st.just(ep), st.sampled_from(strings), st.integers(0, 4096)),
        st.builds(
            content_encoding,
            st.just(ep),
            st.sampled_from(ENCODINGS),
            st.sampled_from(["plain", "junk", "gzip"]),
        ),
        st.sampled_from([content_encoding_twice(ep), content_encoding_identity(ep)]),
        st.sampled_from(CONTENT_TYPES).map(lambda ct: content_type(ep, *ct)),
        st.builds(short_body, st.just(ep), st.integers(1, 100)),
        st.builds(long_body, st.just(ep), st.integers(1, 50)),
        st.builds(bad_content_length, st.just(ep), st.sampled_from(BAD_LENGTHS)),
        st.sampled_from(
            [
                huge_content_length(ep),
                double_content_length(ep, True),
                double_content_length(ep, False),
            ]
        ),
        st.builds(
            chunked,
            st.just(ep),
            st.sampled_from(["valid", "with-length", "bad-size", "unterminated"]),
        ),
        st.builds(wrong_method, st.just(ep), st.sampled_from(WRONG_METHODS)),
        st.builds(
            identity_header,
            st.just(ep),
            st.sampled_from(IDENTITY_HEADERS),
            st.sampled_from(IDENTITY_VALUES),
        ),
        st.tuples(
            st.sampled_from(IDENTITY_HEADERS).flatmap(
                lambda n: st.tuples(st.just(n), st.sampled_from([n, n.lower(), n.upper()]))
            ),
            st.sampled_from([b"other", b"kaos://agent/ns/other", b"\xff"]),
        ).map(lambda t: repeated_header(ep, t[0][0], t[0][1], t[1])),
        st.builds(
            junk_header,
            st.just(ep),
            st.sampled_from([b"X-Request-Id", b"X-Kaos-Junk", b"Accept-Language", b"User-Agent"]),
            st.sampled_from(
                [b"\xff\xfe\xfd", "é".encode(), b"a\x01", b"x" * 4000, b"\xed\xa0\x80"]
            ),
        ),
    ]
    if ep.header_cases:
        out.append(st.sampled_from(ep.header_cases).map(lambda c: header_case(ep, c)))
    return out


def hostile_requests(endpoints: Sequence[Endpoint]) -> st.SearchStrategy[RawRequest]:
    """One mutation of one endpoint's valid request, every kind equally likely."""
    per_endpoint = [st.one_of(*_strategies(ep)) for ep in endpoints]
    return st.sampled_from(per_endpoint).flatmap(lambda strategy: strategy)


def issue_cases(endpoints: Sequence[Endpoint]) -> list[RawRequest]:
    """The inputs a probe of the edges found, as explicit examples run before the generated
    ones (one stalled body for all: each costs the body timeout)."""
    cases: list[RawRequest] = []
    for ep in endpoints:
        strings = string_paths(ep.body)
        text = strings[-1] if strings else ()
        cases += [
            valid(ep),
            deep_nesting(ep, (), 1000),
            *(deep_nesting(ep, p, 1000, "object") for p in ep.deep_paths),
            *(deep_nesting(ep, p, 100, "object") for p in ep.deep_paths),
            huge_number(ep, text, 4301),
            content_encoding(ep, "gzip", "plain"),
            identity_header(ep, PRINCIPAL_HEADER, NOT_UTF8),
            identity_header(ep, PRINCIPAL_HEADER, CONTROL_BYTE),
            repeated_header(ep, PRINCIPAL_HEADER, PRINCIPAL_HEADER, b"other"),
            control_text(ep, text, "\x00"),
            oversize(ep, text, 0),
            wrong_type(ep, text, 5),
            truncated(ep, len(dump(ep.body)) // 2),
        ]
    if endpoints:
        cases.append(short_body(endpoints[0], 10))
    return cases
