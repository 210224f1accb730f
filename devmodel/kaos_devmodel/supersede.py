"""The deterministic answer to the memory service's supersession prompt.

Recognised by a system message that begins with exactly "You retire KAOS facts that newer
facts replace." The last user message lists new facts, each followed by the existing
facts shown beside it::

    ## New facts
    N1: We moved to Porto last month.
      near E1: I live in Lisbon, close to the river.

The answer is ``{"retire": [{"existing": "E1", "by": "N1"}, ...]}``. A development model
cannot tell what a fact is about, so it works from a fixed list of personal attributes,
each named by a few words (where one lives, works, what car one drives, a pet, a doctor,
...): a new fact retires an existing fact shown beside it when both are about the same
attribute (each fact's attribute is the one most of its words name; a tie names none),
their texts differ, and either one of them marks a change ("moved", "new", "now",
"switched", ...) or both begin with the same three words ("My car is a ..."). Which of the
two is older is the memory service's business (it orders them by world time). Anything
else is kept; an unrecognisable prompt gets ``{"retire": []}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

SUPERSEDE_MARKER = "You retire KAOS facts that newer facts replace."

_WORD = re.compile(r"[^\W_]+")
_NEW = re.compile(r"^(N\d+): ?(.*)$")
_NEAR = re.compile(r"^\s+near (E\d+): ?(.*)$")

ATTRIBUTES: dict[str, frozenset[str]] = {
    "home": frozenset(
        [
            "live",
            "lives",
            "living",
            "moved",
            "move",
            "relocated",
            "home",
            "address",
            "flat",
            "apartment",
            "house",
            "cottage",
            "based",
            "reside",
            "resides",
            "rent",
        ]
    ),
    "work": frozenset(
        ["work", "works", "working", "job", "employer", "employed", "company", "hired", "offer"]
    ),
    "car": frozenset(["car", "drive", "drives", "driving", "vehicle"]),
    "gym": frozenset(["gym", "membership", "train", "training"]),
    "pet": frozenset(["dog", "cat", "puppy", "kitten", "pet", "named", "renamed"]),
    "doctor": frozenset(["dentist", "doctor", "dr", "physician", "gp", "clinic"]),
    "phone": frozenset(["phone", "mobile", "number"]),
    "partner": frozenset(
        ["partner", "wife", "husband", "girlfriend", "boyfriend", "married", "engaged"]
    ),
    "study": frozenset(["school", "university", "college", "studying", "degree", "course"]),
    "diet": frozenset(["vegetarian", "vegan", "diet", "meat"]),
    "team": frozenset(["team", "supporter", "supports", "club"]),
}
CHANGE_WORDS = frozenset(
    [
        "moved",
        "relocated",
        "now",
        "new",
        "switched",
        "changed",
        "longer",
        "anymore",
        "instead",
        "sold",
        "bought",
        "renamed",
        "started",
        "joined",
        "accepted",
        "quit",
        "left",
        "became",
        "since",
    ]
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def attribute(text: str) -> str | None:
    """The attribute most of the text's words name; None for none or a tie."""
    words = set(_words(text))
    counts = sorted(((len(words & cues), name) for name, cues in ATTRIBUTES.items()), reverse=True)
    best, name = counts[0]
    if best == 0 or counts[1][0] == best:
        return None
    return name


def replaces(new: str, old: str) -> bool:
    """Whether ``new`` replaces ``old`` by the rules in the module docstring."""
    kind = attribute(new)
    if kind is None or attribute(old) != kind:
        return False
    new_words, old_words = _words(new), _words(old)
    if new_words == old_words:
        return False
    changed = CHANGE_WORDS & (set(new_words) | set(old_words))
    return bool(changed) or new_words[:3] == old_words[:3]


def shown(prompt: str) -> Iterator[tuple[str, str, str, str]]:
    """Each (new label, new text, existing label, existing text) pair the supersession
    prompt ``prompt`` (its last user message) shows side by side."""
    new_label, new_text = "", ""
    for line in prompt.splitlines():
        found = _NEW.match(line)
        if found is not None:
            new_label, new_text = found.group(1), found.group(2)
            continue
        near = _NEAR.match(line)
        if near is not None and new_label:
            yield new_label, new_text, near.group(1), near.group(2)


def supersede_answer(prompt: str) -> str:
    """The JSON answer to the supersession prompt in ``prompt`` (the last user message)."""
    retire = [
        {"existing": existing, "by": label}
        for label, text, existing, old in shown(prompt)
        if replaces(text, old)
    ]
    return json.dumps({"retire": retire})
