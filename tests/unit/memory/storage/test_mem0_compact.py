"""The compact extraction prompt: under ``compact`` Mem0's 8,400-token system message is
replaced by KAOS's, with what Mem0 appended to it kept and Mem0's user message untouched;
under ``mem0``, and for any other request, the messages go as Mem0 built them. The
development model still reads the compact prompt as an extraction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kaos_devmodel.prompts import recognise
from kaos_devmodel.protocol import Message
from kaos_memory.storage.mem0.compact import COMPACT_EXTRACTION_PROMPT
from kaos_memory.storage.mem0.llm import CheckedLlm

FACT = '{"memory": [{"id": "0", "text": "User keeps bees", "attributed_to": "user"}]}'
USER = "## New Messages\nuser: I keep bees\n\n## Observation Date\n2026-12-06"


class Recording:
    """Mem0's LLM object, as far as ``CheckedLlm`` uses it: the messages it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, Any]]] = []

    def generate_response(self, messages: list[dict[str, Any]], **_: Any) -> str:
        self.sent.append(messages)
        return FACT


@pytest.fixture(autouse=True)
def _mem0_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mem0 reads both at import (the prompt is Mem0's own, imported on first use).
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))


def mem0_prompt() -> str:
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    return str(ADDITIVE_EXTRACTION_PROMPT)


def extract(style: str, system: str) -> list[dict[str, Any]]:
    inner = Recording()
    llm = CheckedLlm(inner, model="m", retries=0, system_prompt=style)  # type: ignore[arg-type]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": USER}]
    llm.generate_response(messages=messages, response_format={"type": "json_object"})
    [sent] = inner.sent
    return sent


def test_compact_replaces_mem0s_system_message_and_keeps_its_suffix() -> None:
    suffix = "\n\n# AGENT CONTEXT\nThe memories are the agent's."
    sent = extract("compact", mem0_prompt() + suffix)
    assert sent[0] == {"role": "system", "content": COMPACT_EXTRACTION_PROMPT + suffix}
    assert sent[1] == {"role": "user", "content": USER}
    # About a tenth of the tokens (4 characters a token, roughly).
    assert len(COMPACT_EXTRACTION_PROMPT) * 8 < len(mem0_prompt())


@pytest.mark.parametrize("style", ["mem0", "compact"])
def test_anything_else_goes_as_mem0_built_it(style: str) -> None:
    other = "You write something else entirely."
    assert extract(style, other)[0]["content"] == other
    if style == "mem0":
        assert extract(style, mem0_prompt())[0]["content"] == mem0_prompt()


def test_the_development_model_reads_both_as_an_extraction() -> None:
    for system in (mem0_prompt(), COMPACT_EXTRACTION_PROMPT):
        messages = [Message(role="system", content=system), Message(role="user", content=USER)]
        assert recognise(messages) == "extraction"
