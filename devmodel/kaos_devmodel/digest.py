"""The deterministic KAOS session digest, as the development model writes it.

Recognised by a system message that begins with exactly "You write the KAOS session
digest." (the memory service owns the rest of the prompt). The last user message holds
two sections, each a ``## `` heading line followed by its text up to the next ``## ``
heading:

- ``## Previous digest``: the digest so far, or ``(none)`` (or the empty answer below);
- ``## New turns``: lines ``role: content``; a line without a role prefix continues the
  turn above it.

The answer is plain text, one sentence per line: the non-empty lines of the previous
digest in their order, then one line per new ``user`` or ``assistant`` turn (other roles
are left out), ``User said: <text>`` or ``Assistant said: <text>``, where ``<text>`` is the
turn's first 12 words with whitespace collapsed, followed by ``...`` when it had more, and
a final ``.`` unless it already ends in ``.``, ``!``, ``?`` or ``...``. While the answer has
more words than the cap (``KAOS_DEVMODEL_DIGEST_MAX_WORDS``, default 300), its oldest line
is dropped (the newest line is always kept). With no line at all the answer is
``Nothing to summarise yet.``
"""

from __future__ import annotations

import re

from kaos_devmodel.protocol import word_count

TURN_WORDS = 12
EMPTY_DIGEST = "Nothing to summarise yet."

_HEADING = re.compile(r"^## +(.+?)\s*$")
_TURN = re.compile(r"^(user|assistant|system|tool|developer)\s*:\s?(.*)$", re.IGNORECASE)
_SPEAKERS = {"user": "User", "assistant": "Assistant"}


def sections(text: str) -> dict[str, list[str]]:
    """The lines under each ``## `` heading, by lowercased heading text."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m is not None:
            current = found.setdefault(m.group(1).lower(), [])
        elif current is not None:
            current.append(line)
    return found


def _turns(lines: list[str]) -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = []
    for line in lines:
        m = _TURN.match(line.strip())
        if m is not None:
            turns.append((m.group(1).lower(), m.group(2)))
        elif turns and line.strip():
            role, text = turns[-1]
            turns[-1] = (role, f"{text} {line.strip()}")
    return turns


def turn_sentence(role: str, text: str) -> str | None:
    speaker = _SPEAKERS.get(role)
    words = text.split()
    if speaker is None or not words:
        return None
    said = " ".join(words[:TURN_WORDS])
    if len(words) > TURN_WORDS:
        said += "..."
    if not said.endswith((".", "!", "?")):
        said += "."
    return f"{speaker} said: {said}"


def write_digest(prompt: str, max_words: int) -> str:
    found = sections(prompt)
    previous = [line.strip() for line in found.get("previous digest", []) if line.strip()]
    if previous in (["(none)"], [EMPTY_DIGEST]):
        previous = []
    lines = list(previous)
    for role, text in _turns(found.get("new turns", [])):
        sentence = turn_sentence(role, text)
        if sentence is not None:
            lines.append(sentence)
    while len(lines) > 1 and sum(word_count(line) for line in lines) > max_words:
        lines.pop(0)
    return "\n".join(lines) if lines else EMPTY_DIGEST
