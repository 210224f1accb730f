"""Mem0's extraction answers, judged by KAOS before Mem0 reads them.

Mem0 2.2.1 asks the model for ``{"memory": [{"text": ...}, ...]}`` once per ``add`` and
parses the answer itself (``Memory._add_to_vector_store``): an answer it cannot parse
becomes "no facts", with one line in its log. A small model answers prose, nothing, or
JSON cut off at its token limit often enough that long-term memory would stay empty
without anyone knowing. ``CheckedLlm`` stands in for Mem0's LLM object: it reads each
extraction answer with Mem0's own parsing steps (``remove_code_blocks``, then
``json.loads``, then ``extract_json``), asks again a bounded number of times when the
answer is unusable, and raises ``UnusableAnswer`` into Mem0 once the retries are spent, so
Mem0 stores nothing for it and the caller learns why. A valid answer with no facts is
usable: the model found nothing worth keeping.

Each call is a GenAI ``chat`` client span (model, token usage, finish reason, verdict),
parented to the extraction's span (the long-term store runs Mem0 in the caller's context),
and one observation of the GenAI token and duration histograms. Mem0's OpenAI LLM returns
the message text only; its ``response_callback`` hands over the whole response, from which
the usage and the finish reason are read. Every answer's verdict is also added to the
``ExtractionAnswers`` of the extraction in progress (``observe_answers``), which the
consolidation counts and records on its span. Answer text never leaves this module.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, cast

from kaos_core.extraction import ExtractionSystemPrompt
from kaos_core.telemetry import tracer
from kaos_core.telemetry.genai_metrics import GenAiMetrics, TokenCounts

from kaos_memory.storage.errors import UnusableAnswer
from kaos_memory.storage.mem0.compact import compact_messages
from kaos_memory.storage.mem0.provenance import verified_answer
from kaos_memory.storage.model_call import ANSWER_REASON, ANSWER_VERDICT, model_call

_TRACER = tracer(__name__)


Verdict = Literal["facts", "no_facts", "unusable"]
# Why an answer was unusable: nothing in it, no JSON in it, JSON that is not Mem0's
# ``{"memory": [...]}`` (or, for a supersession, not the ``{"retire": [...]}`` asked for:
# ``not_retire_json``), or cut off at the model's token limit.
Reason = Literal["empty", "not_json", "not_memory_json", "not_retire_json", "cut_off"]


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    reason: Reason | None = None
    # A usable extraction answer as parsed (attributed from it, not parsed again).
    doc: Any = field(default=None, compare=False, repr=False)


@dataclass
class ExtractionAnswers:
    """The verdicts of the model's answers during one extraction, in order."""

    answers: list[Judged] = field(default_factory=list)
    # The supersession calls' answers (``temporal``), and the facts they retired.
    supersessions: list[Judged] = field(default_factory=list)
    retired: int = 0

    @property
    def unusable(self) -> list[Reason]:
        return [a.reason for a in self.answers if a.reason is not None]

    @property
    def unusable_supersessions(self) -> list[Reason]:
        return [a.reason for a in self.supersessions if a.reason is not None]


def note_supersession(verdict: Judged, retired: int = 0) -> None:
    """Add a supersession answer's verdict (and the facts it retired) to the extraction in
    progress, if one is observed."""
    answers = _CURRENT.get()
    if answers is not None:
        answers.supersessions.append(verdict)
        answers.retired += retired


_CURRENT: ContextVar[ExtractionAnswers | None] = ContextVar("kaos_extraction", default=None)


@contextlib.contextmanager
def observe_answers() -> Iterator[ExtractionAnswers]:
    """Collect the verdicts of the extraction calls made in this context (and in the
    threads the long-term store runs them on, which copy it)."""
    answers = ExtractionAnswers()
    token = _CURRENT.set(answers)
    try:
        yield answers
    finally:
        _CURRENT.reset(token)


def judge(answer: object, finish_reason: str | None) -> Judged:
    """An extraction answer read as Mem0 2.2.1 reads it, plus the checks Mem0 leaves to
    chance (an item that is not an object makes its later steps raise ``AttributeError``)."""
    if finish_reason == "length":
        # Even when the part that came parses, the facts after the cut are lost.
        return Judged("unusable", "cut_off")
    text = _mem0_utils().remove_code_blocks(answer)
    if not text:
        return Judged("unusable", "empty")
    try:
        doc = _parse(text)
    except (ValueError, RecursionError):
        return Judged("unusable", "not_json")
    memory = doc.get("memory") if isinstance(doc, dict) else None
    if not isinstance(memory, list) or not all(
        isinstance(m, dict) and isinstance(m.get("text", ""), str) for m in memory
    ):
        return Judged("unusable", "not_memory_json")
    # A fact with no letter or digit is no fact: an empty text, or the format's "..."
    # placeholder copied by a small model. It is dropped, the answer's other facts kept.
    kept = [m for m in memory if any(ch.isalnum() for ch in m.get("text", ""))]
    return Judged("facts" if kept else "no_facts", doc={**doc, "memory": kept})


def _mem0_utils() -> ModuleType:
    # Not at the top: Mem0 reads its environment (telemetry, ``MEM0_DIR``) when first
    # imported, which the long-term store sets at its start.
    import mem0.memory.utils

    return cast(ModuleType, mem0.memory.utils)


def _mem0_extraction_prompt() -> str:
    # Not at the top, as ``_mem0_utils``.
    import mem0.configs.prompts

    return str(mem0.configs.prompts.ADDITIVE_EXTRACTION_PROMPT)


def _parse(text: str) -> Any:
    """Mem0 2.2.1's reading of an answer whose code fences are removed."""
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:
        return json.loads(_mem0_utils().extract_json(text), strict=False)


def attributed(verdict: Judged) -> str:
    """A usable answer as ``judge`` kept it, with each fact attributed by KAOS
    (``provenance``), not the model, in an attributed extraction; as JSON, which Mem0 reads
    as it reads the model's own text."""
    rewritten = verified_answer(verdict.doc)
    return json.dumps(verdict.doc) if rewritten is None else rewritten


def _wants_json(response_format: object) -> bool:
    # Mem0's extraction is its only call that asks for a JSON object.
    return isinstance(response_format, dict) and response_format.get("type") == "json_object"


class CheckedLlm:
    """Mem0's LLM object with its extraction answers judged (see the module docstring);
    anything else is delegated to the wrapped object unchanged."""

    def __init__(
        self,
        inner: Any,
        *,
        model: str,
        retries: int,
        metrics: GenAiMetrics | None = None,
        system_prompt: ExtractionSystemPrompt = "mem0",
    ) -> None:
        self._inner = inner
        self._model = model
        # Mem0's extraction system prompt, which ``compact`` replaces (None: sent as is).
        self._replaced = _mem0_extraction_prompt() if system_prompt == "compact" else None
        self._retries = retries
        self._metrics = metrics
        # The response the callback saw, per thread: Mem0 calls from several threads.
        self._seen = threading.local()
        config = getattr(inner, "config", None)
        if config is not None and hasattr(config, "response_callback"):
            config.response_callback = self._on_response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _on_response(self, _llm: Any, response: Any, _params: Any) -> None:
        self._seen.response = response

    def generate_response(
        self, messages: list[dict[str, Any]], response_format: Any = None, **kwargs: Any
    ) -> Any:
        if not _wants_json(response_format):
            return self._call(messages, response_format, kwargs, judged=False)[0]
        messages = compact_messages(messages, self._replaced)
        answers = _CURRENT.get()
        for _ in range(self._retries + 1):
            _, verdict = self._call(messages, response_format, kwargs, judged=True)
            assert verdict is not None
            if answers is not None:
                answers.answers.append(verdict)
            if verdict.verdict != "unusable":
                return attributed(verdict)
        # Mem0 wraps this in its LLMError and stores nothing; the store's error edge
        # turns it back into ``UnusableAnswer`` for the caller.
        raise UnusableAnswer("the extraction model gave no usable answer")

    def decide(self, messages: list[dict[str, Any]]) -> str | None:
        """One structured call that is not an extraction (``temporal``'s supersession):
        the answer's text, which the caller checks; None when the model gave no text."""
        text, _ = self._call(messages, {"type": "json_object"}, {}, judged=False)
        if not isinstance(text, str):
            return None
        return str(_mem0_utils().remove_code_blocks(text))

    def _call(
        self,
        messages: list[dict[str, Any]],
        response_format: Any,
        kwargs: dict[str, Any],
        *,
        judged: bool,
    ) -> tuple[Any, Judged | None]:
        self._seen.response = None
        with model_call(_TRACER, self._model, self._metrics) as call:
            try:
                text = self._inner.generate_response(
                    messages=messages, response_format=response_format, **kwargs
                )
                call.usage, call.finish = _read_response(self._seen.response)
            finally:
                self._seen.response = None
            if not judged:
                return text, None
            verdict = judge(text, call.finish)
            call.span.set_attribute(ANSWER_VERDICT, verdict.verdict)
            if verdict.reason is not None:
                call.span.set_attribute(ANSWER_REASON, verdict.reason)
            return text, verdict


def _read_response(response: Any) -> tuple[TokenCounts | None, str | None]:
    """Usage and finish reason of an OpenAI chat completion, where it reported them."""
    if response is None:
        return None, None
    usage = getattr(response, "usage", None)
    counts = None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if isinstance(prompt, int) and isinstance(completion, int):
        counts = TokenCounts(input_tokens=prompt, output_tokens=completion)
    choices = getattr(response, "choices", None) or []
    finish = getattr(choices[0], "finish_reason", None) if choices else None
    return counts, finish if isinstance(finish, str) else None
