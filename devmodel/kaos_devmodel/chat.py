"""The rule engine that decides every chat answer.

First match wins: a library prompt (Mem0 extraction or procedural memory, the KAOS
digest: ``prompts``, ``digest``), a scripted rule (``script``), an inline directive
``[[call TOOL {json args}]]`` in the last user message, then the fallbacks
``Tool result: <result>`` after tool results and ``Echo: <last user message>``.

Directives name offered tools only (others are left as text). The directives of the last
user message are called one after the other, each once; when all have been called, the
answer has one line ``Tool TOOL returned: <result>`` per tool result since that message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from kaos_devmodel.digest import write_digest
from kaos_devmodel.prompts import (
    PromptKind,
    extraction_answer,
    procedural_answer,
    recognise,
)
from kaos_devmodel.protocol import Message
from kaos_devmodel.script import Rule
from kaos_devmodel.supersede import supersede_answer

_DIRECTIVE = re.compile(r"\[\[call\s+([A-Za-z0-9_.:\-]+)\s*(\{.*?\})?\s*\]\]", re.DOTALL)
_TOOL_ROLES = ("tool", "function")


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: str  # a JSON string, as OpenAI sends it (or anything a script put there)


@dataclass(frozen=True)
class Answer:
    kind: str
    content: str | None = None
    tool_calls: tuple[PlannedCall, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    tool: str
    content: str


@dataclass(frozen=True)
class Conversation:
    """What the rules look at: the last user message and what followed it."""

    last_user: str
    # Tool results at the very end of the conversation, oldest first.
    trailing_results: tuple[ToolResult, ...]
    # Every tool result and call made since the last user message, oldest first.
    results_since_user: tuple[ToolResult, ...]
    calls_since_user: int

    @property
    def ends_with_tool_result(self) -> bool:
        return bool(self.trailing_results)

    @classmethod
    def of(cls, messages: list[Message]) -> Conversation:
        names: dict[str, str] = {}
        for msg in messages:
            for call in msg.tool_calls or []:
                names[call.id] = call.function.name
        last_user_at = -1
        for i, msg in enumerate(messages):
            if msg.role == "user":
                last_user_at = i
        tail = messages[last_user_at + 1 :]

        def result(msg: Message) -> ToolResult:
            tool = names.get(msg.tool_call_id or "", "") or (msg.name or "")
            return ToolResult(tool=tool, content=msg.text())

        trailing: list[ToolResult] = []
        for msg in reversed(tail):
            if msg.role not in _TOOL_ROLES:
                break
            trailing.insert(0, result(msg))
        return cls(
            last_user=messages[last_user_at].text() if last_user_at >= 0 else "",
            trailing_results=tuple(trailing),
            results_since_user=tuple(result(m) for m in tail if m.role in _TOOL_ROLES),
            calls_since_user=sum(len(m.tool_calls or []) for m in tail if m.role == "assistant"),
        )


@dataclass
class Script:
    """The scripted rules in force and how often each has fired."""

    rules: list[Rule] = field(default_factory=list)
    fired: list[int] = field(default_factory=list)

    def replace(self, rules: list[Rule]) -> None:
        self.rules = list(rules)
        self.fired = [0] * len(rules)

    def first_match(self, conv: Conversation) -> tuple[int, ToolResult | None] | None:
        for i, rule in enumerate(self.rules):
            if rule.times is not None and self.fired[i] >= rule.times:
                continue
            matched = _tool_match(rule, conv)
            if matched is False:
                continue
            if rule.match is not None and re.search(rule.match, conv.last_user) is None:
                continue
            return i, (matched if isinstance(matched, ToolResult) else None)
        return None


def _tool_match(rule: Rule, conv: Conversation) -> ToolResult | bool:
    """False when ``after_tool`` rules the rule out, else the tool result it refers to."""
    if rule.after_tool is None:
        return not conv.ends_with_tool_result
    for res in reversed(conv.trailing_results):
        if rule.after_tool in ("*", res.tool):
            return res
    return False


def _fill(template: str, conv: Conversation, res: ToolResult | None) -> str:
    if res is None and conv.trailing_results:
        res = conv.trailing_results[-1]
    # Plain replacement, not str.format: replies may contain JSON braces.
    return (
        template.replace("{result}", res.content if res else "")
        .replace("{tool}", res.tool if res else "")
        .replace("{last_user}", conv.last_user)
    )


def _directive_answer(conv: Conversation, offered: set[str]) -> Answer | None:
    directives = [
        (m.group(1), m.group(2) or "{}")
        for m in _DIRECTIVE.finditer(conv.last_user)
        if m.group(1) in offered
    ]
    if not directives:
        return None
    if conv.calls_since_user < len(directives):
        name, raw_args = directives[conv.calls_since_user]
        try:
            args = json.dumps(json.loads(raw_args), separators=(",", ":"), sort_keys=True)
        except json.JSONDecodeError:
            args = raw_args  # sent as written: lets a test exercise malformed arguments
        return Answer(kind="directive", tool_calls=(PlannedCall(name, args),))
    lines = [f"Tool {r.tool} returned: {r.content}" for r in conv.results_since_user]
    return Answer(kind="directive", content="\n".join(lines))


def _library_answer(kind: PromptKind, messages: list[Message], digest_words: int) -> Answer:
    if kind == "extraction":
        return Answer(kind=kind, content=extraction_answer(messages))
    if kind == "procedural":
        return Answer(kind=kind, content=procedural_answer(messages))
    if kind == "supersede":
        return Answer(kind=kind, content=supersede_answer(Conversation.of(messages).last_user))
    prompt = Conversation.of(messages).last_user
    return Answer(kind=kind, content=write_digest(prompt, digest_words))


def answer(
    messages: list[Message], offered: set[str], script: Script, *, digest_words: int
) -> Answer:
    """The answer to a conversation; fires (counts) the scripted rule that gave it."""
    kind = recognise(messages)
    if kind is not None:
        return _library_answer(kind, messages, digest_words)
    conv = Conversation.of(messages)
    found = script.first_match(conv)
    if found is not None:
        index, res = found
        rule = script.rules[index]
        script.fired[index] += 1
        if rule.reply is not None:
            return Answer(kind="scripted", content=_fill(rule.reply, conv, res))
        calls = tuple(PlannedCall(c.name, c.arguments_json()) for c in rule.tool_calls())
        return Answer(kind="scripted", tool_calls=calls)
    directed = _directive_answer(conv, offered)
    if directed is not None:
        return directed
    if conv.ends_with_tool_result:
        text = "\n".join(f"Tool result: {r.content}" for r in conv.trailing_results)
        return Answer(kind="tool_result", content=text)
    return Answer(kind="echo", content=f"Echo: {conv.last_user}")
