"""A trigger's message template: placeholders over the payload, nothing evaluated, every
size capped, a hostile payload harmless (deep, huge, or full of placeholder look-alikes)."""

from __future__ import annotations

import time

import pytest
from kaos_agent.triggers.template import MAX_MESSAGE_CHARS, MAX_VALUE_CHARS, TRUNCATED, render

PAYLOAD = {
    "number": 42,
    "ok": True,
    "none": None,
    "pull_request": {"title": "Fix it", "user": {"login": "ada"}},
    "commits": [{"message": "first"}, {"message": "second"}],
    "labels": ["bug", "p1"],
    "0": "zero key",
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("PR {{ pull_request.title }} by {{pull_request.user.login}}", "PR Fix it by ada"),
        ("{{ commits.1.message }}", "second"),
        ("{{ number }} {{ ok }} {{ none }}", "42 true null"),
        ("{{ labels }}", '["bug","p1"]'),
        ("{{ pull_request.user }}", '{"login":"ada"}'),
        ("{{ 0 }}", "zero key"),
        # Missing: a key, an index out of range, a path through a scalar, a signed or
        # zero-padded index.
        ("[{{ nope }}][{{ commits.9.message }}][{{ number.x }}]", "[][][]"),
        ("[{{ commits.-1.message }}][{{ commits.01.message }}]", "[][]"),
        # Not placeholders: copied as written.
        (
            "{% if x %}{{ a b }}{ number }{0}{{}}{{ .x }}",
            "{% if x %}{{ a b }}{ number }{0}{{}}{{ .x }}",
        ),
        ("{{ __class__ }}{{ number.__class__ }}", ""),
    ],
)
def test_placeholders_are_replaced_by_payload_values(template: str, expected: str) -> None:
    assert render(template, PAYLOAD) == expected


def test_values_that_look_like_placeholders_are_not_expanded_again() -> None:
    payload = {"a": "{{ b }}", "b": "secret-ish", "c": {"d": "{{ b }}"}}
    assert render("{{ a }} {{ c }}", payload) == '{{ b }} {"d":"{{ b }}"}'


def test_a_payload_that_is_not_an_object_is_addressed_by_index() -> None:
    assert render("{{ 1 }}|{{ x }}", ["a", "b"]) == "b|"
    assert render("{{ x }}", "just a string") == ""


def test_a_huge_string_is_cut_at_the_value_cap() -> None:
    out = render("<{{ s }}>", {"s": "x" * 1_000_000})
    assert out == "<" + "x" * MAX_VALUE_CHARS + TRUNCATED + ">"


def test_a_huge_list_is_cut_without_serialising_all_of_it() -> None:
    payload = {"big": list(range(5_000_000))}
    started = time.perf_counter()
    out = render("{{ big }}", payload)
    assert time.perf_counter() - started < 1.0
    assert out.startswith("[0,1,2,") and out.endswith(TRUNCATED)
    assert len(out) == MAX_VALUE_CHARS + len(TRUNCATED)


def test_deep_nesting_neither_recurses_without_end_nor_fails() -> None:
    deep: object = "bottom"
    for _ in range(100_000):
        deep = {"a": deep}
    out = render("{{ x }}", {"x": deep})
    assert out.startswith('{"a":{"a":') and len(out) <= MAX_VALUE_CHARS + len(TRUNCATED)
    # A path reaches 32 keys deep at most; a longer one is no placeholder.
    path = ".".join(["a"] * 33)
    assert render("{{ " + path + " }}", deep) == "{{ " + path + " }}"
    assert render("{{ " + ".".join(["a"] * 32) + " }}", deep).startswith('{"a":')


def test_the_whole_message_is_capped() -> None:
    template = "{{ s }}" * 20
    out = render(template, {"s": "y" * MAX_VALUE_CHARS})
    assert out == "y" * MAX_MESSAGE_CHARS + TRUNCATED


def test_placeholder_look_alikes_in_many_values_cost_one_pass() -> None:
    payload = {"v": "{{ v }}" * 500}
    assert render("{{ v }}{{ v }}", payload) == "{{ v }}" * 1000
