"""Recognisers of the prompts that libraries send, and deterministic answers to them.

Mem0 2.2.1 makes these chat calls:

- Extraction, once per ``Memory.add(..., infer=True)``: the system prompt is
  ``ADDITIVE_EXTRACTION_PROMPT``, which begins with a ``# ROLE`` heading and then
  "You are a Memory Extractor"; the user prompt has the sections ``## Summary``,
  ``## Last k Messages``, ``## Recently Extracted Memories``, ``## Existing Memories``,
  ``## New Messages`` (lines ``user: ...``, ``assistant: ...``), ``## Observation Date``,
  ``## Current Date`` and optionally ``## Custom Instructions``, ``# Output:``. Mem0 asks
  for ``response_format: json_object`` and reads ``{"memory": [{"id", "text",
  "attributed_to"}]}``; the answer here holds one fact per non-empty line of a user
  message in ``## New Messages``, the line's text trimmed, attributed to the user.
- Procedural memory, once per ``Memory.add(..., agent_id=..., memory_type=
  "procedural_memory")``: the system prompt begins "You are a memory summarization
  system"; the answer lists the conversation's messages, one per line, as
  ``<n>. <role>: <text>``, under the heading ``Procedural summary:``.
- Image descriptions only with ``enable_vision``: these get the ordinary answers.

The KAOS session digest and the memory service's supersession call are recognised by
their system messages (see ``digest`` and ``supersede``).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from kaos_devmodel.protocol import Message
from kaos_devmodel.supersede import SUPERSEDE_MARKER

PromptKind = Literal["extraction", "procedural", "digest", "supersede"]

EXTRACTION_MARKER = "You are a Memory Extractor"
PROCEDURAL_MARKER = "You are a memory summarization system"
DIGEST_MARKER = "You write the KAOS session digest."
_PROCEDURAL_REQUEST = "Create procedural memory of the above conversation."

_NEW_MESSAGES = "## New Messages\n"
_OBSERVATION_DATE = "\n## Observation Date\n"
_ROLE_LINE = re.compile(r"^(user|assistant|system): ?(.*)$")
_HEADING_LINE = re.compile(r"^#{1,6} [^\n]*\n")


def _system_text(messages: list[Message]) -> str:
    for msg in messages:
        if msg.role in ("system", "developer"):
            return msg.text()
    return ""


def _without_headings(text: str) -> str:
    """The text without leading blank lines and markdown headings (Mem0's ``# ROLE``)."""
    rest = text.lstrip()
    while True:
        m = _HEADING_LINE.match(rest)
        if m is None:
            return rest
        rest = rest[m.end() :].lstrip()


def recognise(messages: list[Message]) -> PromptKind | None:
    """Which library prompt this conversation is, from its first system message."""
    system = _system_text(messages)
    if not system:
        return None
    if system.lstrip().startswith(DIGEST_MARKER):
        return "digest"
    if system.lstrip().startswith(SUPERSEDE_MARKER):
        return "supersede"
    body = _without_headings(system)
    if body.startswith(EXTRACTION_MARKER):
        return "extraction"
    if body.startswith(PROCEDURAL_MARKER):
        return "procedural"
    return None


def _last_user_text(messages: list[Message]) -> str:
    for msg in reversed(messages):
        if msg.role == "user":
            return msg.text()
    return ""


def new_message_user_lines(user_prompt: str) -> list[str]:
    """The non-empty lines of user messages in the ``## New Messages`` section."""
    start = user_prompt.find(_NEW_MESSAGES)
    if start < 0:
        return []
    start += len(_NEW_MESSAGES)
    # The section ends at the last "## Observation Date": a message may contain headings.
    end = user_prompt.rfind(_OBSERVATION_DATE)
    section = user_prompt[start : end if end >= start else len(user_prompt)]
    lines: list[str] = []
    role = ""
    for raw in section.splitlines():
        m = _ROLE_LINE.match(raw)
        if m is not None:
            role, text = m.group(1), m.group(2)
        else:
            text = raw  # a further line of a multi-line message
        text = text.strip()
        if role == "user" and text:
            lines.append(text)
    return lines


def extraction_answer(messages: list[Message]) -> str:
    """Mem0's expected JSON: one fact per user line of the new messages."""
    facts = new_message_user_lines(_last_user_text(messages))
    memory = [{"id": str(i), "text": text, "attributed_to": "user"} for i, text in enumerate(facts)]
    return json.dumps({"memory": memory}, ensure_ascii=False)


def procedural_answer(messages: list[Message]) -> str:
    lines = ["Procedural summary:"]
    n = 0
    body = messages
    if body and body[-1].role == "user" and body[-1].text().startswith(_PROCEDURAL_REQUEST):
        body = body[:-1]  # Mem0's instruction, not part of the conversation
    for msg in body:
        text = " ".join(msg.text().split())
        if msg.role in ("system", "developer") or not text:
            continue
        n += 1
        lines.append(f"{n}. {msg.role}: {text}")
    return "\n".join(lines)
