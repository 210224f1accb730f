"""A judge that knows the answers: the knowledge-update bench's ceiling for KAOS's machinery.

The memory service retires a fact when its summarisation model, shown a new fact beside
the owner's nearest current facts, says the new one replaces it. How often the current
value then comes first depends on two things: that judgement, and everything around it
(which facts the model is shown, how a retirement is applied, what recall returns). The
development model's judgement is a fixed script and SmolLM2-135M's is weak, so neither
says what the machinery gives a capable model. This judge answers the supersession prompt
from the bench's own cases: a new fact holding a case's new value retires an existing
fact shown beside it that holds the old value and not the new. Every other request goes
to the chat model unchanged. What it cannot fix is what the machinery loses: an
old fact that is not among the new one's nearest is never shown to any judge.

It is the real-model stack's recording pass-through (``tests.support.passthrough``) with
the decision answered in it, on a loopback port in a thread of the bench's process.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from kaos_devmodel.supersede import SUPERSEDE_MARKER, shown

from tests.support.passthrough import recording


def word(value: str) -> re.Pattern[str]:
    """``value`` as a whole word, ignoring case: how the bench matches values in facts."""
    return re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE)


def answer(prompt: str, changes: Sequence[tuple[str, str]]) -> str:
    """The supersession answer for ``prompt`` given the (old, new) values that changed."""
    pairs = [(word(old), word(new)) for old, new in changes]
    retire = [
        {"existing": existing, "by": label}
        for label, text, existing, shown_text in shown(prompt)
        if any(
            new.search(text) and old.search(shown_text) and not new.search(shown_text)
            for old, new in pairs
        )
    ]
    return json.dumps({"retire": retire})


def _completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-oracle",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


@contextlib.contextmanager
def oracle(upstream: str, changes: Sequence[tuple[str, str]]) -> Iterator[str]:
    """The judge's ``/v1`` base URL, in front of the chat model at ``upstream`` (a ``/v1``
    base URL), for as long as the block runs."""

    def decide(doc: dict[str, Any]) -> dict[str, Any] | None:
        messages = doc.get("messages") or []
        first = messages[0].get("content") if messages else None
        if not (isinstance(first, str) and first.startswith(SUPERSEDE_MARKER)):
            return None
        content = answer(str(messages[-1].get("content") or ""), changes)
        return _completion(content, str(doc.get("model") or "oracle"))

    with recording(upstream.removesuffix("/v1"), answer=decide) as judge:
        yield f"{judge.url}/v1"
