"""The rule engine, prompt recognisers, digest and embeddings as pure functions."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from kaos_devmodel.chat import Answer, PlannedCall, Script, answer
from kaos_devmodel.completions import content_pieces
from kaos_devmodel.digest import EMPTY_DIGEST, write_digest
from kaos_devmodel.embeddings import embed, tokens
from kaos_devmodel.prompts import new_message_user_lines, recognise
from kaos_devmodel.protocol import Message
from kaos_devmodel.script import ScriptError, parse_rules, parse_script_text


def msgs(*items: dict[str, Any]) -> list[Message]:
    return [Message.model_validate(m) for m in items]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(call_id: str, name: str, args: str = "{}") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def run(
    messages: list[Message], script: Script | None = None, tools: set[str] | None = None
) -> Answer:
    return answer(messages, tools or set(), script or Script(), digest_words=300)


def scripted(rules: list[dict[str, Any]]) -> Script:
    script = Script()
    script.replace(parse_rules(rules))
    return script


# -- fallbacks ------------------------------------------------------------------------------


def test_echo_of_the_last_user_message() -> None:
    ans = run(msgs({"role": "system", "content": "hi"}, user("one"), user("two")))
    assert ans == Answer(kind="echo", content="Echo: two")


def test_tool_result_fallback_names_the_result() -> None:
    ans = run(msgs(user("q"), call("c1", "lookup"), result("c1", "42")))
    assert ans == Answer(kind="tool_result", content="Tool result: 42")


# -- scripted rules ---------------------------------------------------------------------------


def test_rules_match_regex_and_fire_at_most_times() -> None:
    script = scripted(
        [
            {"match": "^hello", "reply": "first {last_user}", "times": 1},
            {"match": "hello", "reply": "again"},
        ]
    )
    assert run(msgs(user("hello you")), script).content == "first hello you"
    assert run(msgs(user("hello you")), script).content == "again"
    assert run(msgs(user("bye")), script).kind == "echo"
    assert script.fired == [1, 1]


def test_a_rule_without_after_tool_does_not_answer_a_tool_result() -> None:
    script = scripted([{"match": "weather", "tool_call": {"name": "w", "arguments": {"c": 1}}}])
    first = run(msgs(user("weather?")), script)
    assert first.tool_calls == (PlannedCall("w", '{"c":1}'),)
    follow = run(msgs(user("weather?"), call("c1", "w"), result("c1", "sun")), script)
    assert follow == Answer(kind="tool_result", content="Tool result: sun")


def test_after_tool_resolves_the_tool_name_from_the_call_id() -> None:
    script = scripted(
        [
            {"after_tool": "other", "reply": "wrong"},
            {"after_tool": "w", "reply": "{tool} said {result} to {last_user}"},
        ]
    )
    conversation = msgs(user("q"), call("c7", "w"), result("c7", "sun"))
    assert run(conversation, script).content == "w said sun to q"
    star = scripted([{"after_tool": "*", "reply": "any {result}"}])
    assert run(conversation, star).content == "any sun"


def test_parallel_and_raw_argument_tool_calls() -> None:
    script = scripted(
        [
            {
                "tool_call": [
                    {"name": "a", "arguments": {"x": 1}},
                    {"name": "b", "arguments": "{not json"},
                ]
            }
        ]
    )
    ans = run(msgs(user("go")), script)
    assert ans.tool_calls == (PlannedCall("a", '{"x":1}'), PlannedCall("b", "{not json"))


def test_library_prompts_win_over_scripts() -> None:
    script = scripted([{"reply": "scripted"}])
    digest = msgs(
        {"role": "system", "content": "You write the KAOS session digest. Be brief."},
        user("## Previous digest\n(none)\n\n## New turns\nuser: hi"),
    )
    assert run(digest, script) == Answer(kind="digest", content="User said: hi.")
    assert script.fired == [0]


# -- inline directives -----------------------------------------------------------------------


def test_directives_call_offered_tools_in_order_then_report() -> None:
    text = 'do [[call a {"n": 1}]] and [[call b]] and [[call nope {}]]'
    tools = {"a", "b"}
    first = run(msgs(user(text)), tools=tools)
    assert first.tool_calls == (PlannedCall("a", '{"n":1}'),)
    second = run(msgs(user(text), call("c1", "a"), result("c1", "one")), tools=tools)
    assert second.tool_calls == (PlannedCall("b", "{}"),)
    done = run(
        msgs(
            user(text), call("c1", "a"), result("c1", "one"), call("c2", "b"), result("c2", "two")
        ),
        tools=tools,
    )
    assert done == Answer(kind="directive", content="Tool a returned: one\nTool b returned: two")


def test_directive_with_malformed_arguments_sends_them_as_written() -> None:
    ans = run(msgs(user("[[call a {oops}]]")), tools={"a"})
    assert ans.tool_calls == (PlannedCall("a", "{oops}"),)


# -- Mem0 prompts (see test_mem0 for Mem0's own prompt text) ----------------------------------


PROMPT = """## Summary


## Last k Messages


## Existing Memories
[]

## New Messages
user: I live in Lisbon
assistant: Nice.
user:   I like   tea
and long walks

user:
system: ignore me

## Observation Date
2026-01-01

## Current Date
2026-01-01

# Output:"""


def test_new_message_user_lines() -> None:
    assert new_message_user_lines(PROMPT) == ["I live in Lisbon", "I like   tea", "and long walks"]


def test_extraction_is_recognised_after_mem0s_heading() -> None:
    system = {"role": "system", "content": "\n\n# ROLE\n\nYou are a Memory Extractor — precise."}
    ans = run(msgs(system, user(PROMPT)))
    assert ans.kind == "extraction"
    assert json.loads(ans.content or "") == {
        "memory": [
            {"id": "0", "text": "I live in Lisbon", "attributed_to": "user"},
            {"id": "1", "text": "I like   tea", "attributed_to": "user"},
            {"id": "2", "text": "and long walks", "attributed_to": "user"},
        ]
    }


def test_recognise_needs_the_marker_at_the_start() -> None:
    assert (
        recognise(msgs({"role": "system", "content": "Note: You are a Memory Extractor"})) is None
    )
    assert recognise(msgs(user("You write the KAOS session digest."))) is None
    assert recognise(
        msgs({"role": "system", "content": "You are a memory summarization system"})
    ) == ("procedural")


def test_procedural_answer_lists_the_conversation() -> None:
    conversation = msgs(
        {"role": "system", "content": "\nYou are a memory summarization system that records"},
        user("book a table"),
        {"role": "assistant", "content": "Booked   for two."},
        user("Create procedural memory of the above conversation."),
    )
    ans = run(conversation)
    assert ans == Answer(
        kind="procedural",
        content="Procedural summary:\n1. user: book a table\n2. assistant: Booked for two.",
    )


# -- digest -----------------------------------------------------------------------------------


def digest_prompt(previous: str, turns: str) -> str:
    return f"Summarise.\n\n## Previous digest\n{previous}\n\n## New turns\n{turns}\n"


def test_digest_appends_one_sentence_per_turn() -> None:
    turns = (
        "user: I moved to Lisbon last year\n"
        'tool: {"x": 1}\n'
        "assistant: one two three four five six seven eight nine ten eleven twelve thirteen\n"
        "user: Really?\n"
        "  And Porto"
    )
    assert write_digest(digest_prompt("(none)", turns), 300) == (
        "User said: I moved to Lisbon last year.\n"
        "Assistant said: one two three four five six seven eight nine ten eleven twelve...\n"
        "User said: Really? And Porto."
    )


def test_digest_keeps_the_previous_digest_and_drops_the_oldest_over_the_cap() -> None:
    previous = "User said: a b c.\nUser said: d e f."
    text = write_digest(digest_prompt(previous, "assistant: g h i"), 300)
    assert text.splitlines() == ["User said: a b c.", "User said: d e f.", "Assistant said: g h i."]
    capped = write_digest(digest_prompt(previous, "assistant: g h i"), 10)
    assert capped.splitlines() == ["User said: d e f.", "Assistant said: g h i."]


def test_empty_digest() -> None:
    assert write_digest(digest_prompt("(none)", ""), 300) == EMPTY_DIGEST
    assert write_digest(digest_prompt(EMPTY_DIGEST, "tool: x"), 300) == EMPTY_DIGEST


# -- embeddings and streaming pieces ----------------------------------------------------------


def test_tokens_are_lowercase_letters_and_digits() -> None:
    assert tokens("Café au-lait, x_1 2024!") == ["café", "au", "lait", "x", "1", "2024"]


@pytest.mark.parametrize("text", ["", "  ", "!!!", "hello", "a b c d e f g"])
def test_embeddings_are_unit_vectors(text: str) -> None:
    vec = embed(text, 32)
    assert len(vec) == 32
    assert math.isclose(math.fsum(x * x for x in vec), 1.0)
    assert vec == embed(text, 32)


def test_shared_words_are_nearer() -> None:
    def cos(a: str, b: str) -> float:
        return math.fsum(x * y for x, y in zip(embed(a, 256), embed(b, 256), strict=True))

    assert cos("I live in Lisbon", "where do I live") > cos("I live in Lisbon", "quantum physics")
    assert cos("same words here", "here same words") == pytest.approx(1.0)


@pytest.mark.parametrize("text", ["", "x", " lead and trail ", "a\nb\tc  d e f g h"])
def test_content_pieces_concatenate_back(text: str) -> None:
    assert "".join(content_pieces(text)) == text


# -- scripts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ('[{"match": "x"}]', "rule 0: a rule needs exactly one of 'reply' and 'tool_call'"),
        ('[{"reply": "a", "tool_call": {"name": "t"}}]', "exactly one"),
        ('[{"match": "(", "reply": "a"}]', "invalid regular expression"),
        ('[{"reply": "a", "colour": "red"}]', "colour"),
        ('{"rule": []}', "a list of rules"),
        ("not json", "not valid JSON"),
    ],
)
def test_bad_scripts_are_refused_with_the_reason(doc: str, message: str) -> None:
    with pytest.raises(ScriptError, match=message.replace("(", r"\(")):
        parse_script_text(doc)


def test_script_object_form() -> None:
    assert len(parse_script_text('{"rules": [{"reply": "a"}, {"reply": "b"}]}')) == 2
